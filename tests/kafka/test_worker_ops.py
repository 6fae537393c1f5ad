"""Operating a worker on a real broker (Tansu): /metrics, /healthz and /readyz over HTTP, JSON-only logs,
and ``casino-ledger topics create``.

One worker run (module fixture) feeds both the HTTP and the log tests: starting a worker and joining
its group is the slow part.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient  # type: ignore[import-untyped]

from services.cli import main as cli_main
from services.core import topics
from services.runtime.kafka.metrics import METRICS, family_names, probe, samples
from services.runtime.kafka.topic_io import aconsume_raw, aproduce_raw, consume_all
from services.runtime.kafka.worker import ensure_topics, load_topic_specs
from services.runtime.settings import Settings
from tests.helpers.broker import free_port
from tests.kafka.test_kafka_runtime import REPO, deposits, reference, settings_for, start_worker, stop
from tests.kafka.toy import add

pytestmark = pytest.mark.kafka

WAIT_S = 90.0
"""Upper bound on any wait for the worker (a safety net against a hang, not a timing assertion)."""

GOOD = 40
MALFORMED = [
    (b"\xff not json", "undecodable"),
    (add("acct-1", 9002, 3, type_="Teleport").to_json(), "unknown_type"),
]


@dataclass
class Run:
    """What one worker run left behind: the scrapes, the outputs expected, and its two output streams."""

    settings: Settings
    health_before_ready: list[int]
    ready_body: dict[str, object]
    metrics_text: str
    health_body: dict[str, object]
    expected_outputs: int
    stdout: bytes
    stderr: bytes
    exit_status: int


def _wait(what: str, check: object, interval_s: float = 0.2) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(interval_s)


@pytest.fixture(scope="module")
def run(kafka_broker: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """Start the toy worker with its web server on a free loopback port, feed it deposits and malformed
    records, wait until /readyz says ready and every output is written, scrape, stop with SIGTERM."""
    tmp = tmp_path_factory.mktemp("ops")
    settings = settings_for(kafka_broker)
    asyncio.run(ensure_topics(settings, list(topics.ALL_TOPICS)))
    good = deposits(0, GOOD)
    records = [(topics.WALLET_REQUESTS, e.key.encode(), e.to_json()) for e in good]
    records += [(topics.WALLET_REQUESTS, b"acct-0", raw) for raw, _ in MALFORMED]
    asyncio.run(aproduce_raw(settings, records))
    expected = sum(len(v) for v in reference(good).values())
    port = free_port()
    web = {"CASINO_WEB_ENABLED": "1", "CASINO_WEB_PORT": str(port), "CASINO_READY_MAX_LAG": "0"}
    out_path, err_path = tmp / "stdout", tmp / "stderr"
    worker = start_worker(settings, out_path, err=err_path, extra_env=web)
    base = f"http://127.0.0.1:{port}"
    try:
        health_before_ready: list[int] = []

        def ready() -> bool:
            health_before_ready.append(probe(f"{base}/healthz")[0])
            return probe(f"{base}/readyz")[0] == 200

        _wait("/readyz to answer 200", ready)
        _wait(
            "every output and dead letter",
            lambda: (
                len(consume_all(kafka_broker, [topics.WALLET_EVENTS], settings)) >= expected
                and len(asyncio.run(aconsume_raw(settings, [topics.DEADLETTER]))) >= len(MALFORMED)
            ),
        )
        # the counters are flushed once a batch's outputs are acknowledged: poll until they show it all
        handled = 'casino_records_handled_total{processor="toy",service="toy",topic="casino.wallet.requests",'

        def counted() -> bool:
            text = probe(f"{base}/metrics")[1]
            return samples(text).get(handled + 'type="Deposit"}', 0) >= GOOD

        _wait("the metrics to count every deposit", counted)
        code, body = probe(f"{base}/readyz")
        assert code == 200
        metrics_text = probe(f"{base}/metrics")[1]
        health_code, health = probe(f"{base}/healthz")
        assert health_code == 200
    finally:
        status = stop(worker)
    yield Run(
        settings=settings,
        health_before_ready=health_before_ready,
        ready_body=json.loads(body),
        metrics_text=metrics_text,
        health_body=json.loads(health),
        expected_outputs=expected,
        stdout=out_path.read_bytes(),
        stderr=err_path.read_bytes(),
        exit_status=status,
    )


def test_metrics_count_the_records_the_worker_handled_and_wrote(run: Run) -> None:
    """/metrics counts every deposit handled, every output written, each dead letter by reason, and shows
    the worker's partitions assigned with no lag and the worker ready."""
    s = samples(run.metrics_text)
    labels = 'processor="toy",service="toy",topic="casino.wallet.requests"'
    assert s[f'casino_records_handled_total{{{labels},type="Deposit"}}'] == GOOD
    assert s[f'casino_records_handled_total{{{labels},type="undecodable"}}'] == 1
    assert s[f'casino_records_handled_total{{{labels},type="unknown"}}'] == 1  # "Teleport" is no known type
    written = 'casino_records_written_total{service="toy",topic="casino.wallet.events",type="unknown"}'
    assert s[written] == run.expected_outputs
    for _, reason in MALFORMED:
        assert s[f'casino_dead_letters_total{{processor="toy",reason="{reason}",service="toy"}}'] == 1
    partitions = run.settings.partitions
    assert s['casino_assigned_partitions{service="toy"}'] == partitions
    for p in range(partitions):
        lag = f'casino_consumer_lag_records{{partition="{p}",service="toy",topic="casino.wallet.requests"}}'
        assert s[lag] == 0
    assert s['casino_ready{service="toy"}'] == 1
    assert s['casino_batch_records_sum{processor="toy",service="toy"}'] == GOOD + len(MALFORMED)
    assert s['casino_batch_duration_seconds_count{processor="toy",service="toy"}'] >= 1
    assert set(METRICS) <= family_names(run.metrics_text)


def test_readyz_reports_every_assigned_partition_caught_up_and_healthz_answered_throughout(run: Run) -> None:
    """/readyz turned 200 with every assigned partition at lag 0; /healthz answered 200 whenever the
    server was up (0: not listening yet), before and after readiness."""
    assert run.ready_body["ready"] is True
    assert run.ready_body["assigned"] is True
    lag = run.ready_body["lag"]
    assert isinstance(lag, dict)
    assert lag == {f"casino.wallet.requests[{p}]": 0 for p in range(run.settings.partitions)}
    assert set(run.health_before_ready) <= {0, 200}
    assert 200 in run.health_before_ready
    assert run.health_body["status"] == "ok"


def test_every_line_the_worker_writes_is_json(run: Run) -> None:
    """In JSON mode every line the worker wrote to stdout and stderr parses as a JSON object (no terminal
    escape sequence from faust's spinner, no plain-text warning from a library), and it stopped cleanly."""
    assert run.exit_status == 0, run.stderr.decode(errors="replace")[-3000:]
    assert b"\x1b" not in run.stdout + run.stderr
    lines = [line for stream in (run.stdout, run.stderr) for line in stream.decode().splitlines()]
    for line in lines:
        assert isinstance(json.loads(line), dict), line
    events = [json.loads(line) for line in lines]
    assert sum(e["records"] for e in events if e["event"] == "batch") == GOOD + len(MALFORMED)


def test_the_worker_logs_one_line_per_batch_and_a_warning_per_dead_letter(run: Run) -> None:
    """At INFO the worker writes one ``batch`` line per batch (offsets, records, outputs sent, dead
    letters, types) and no line per record; each dead letter gets a WARNING line naming its reason and
    the input record's offset, inside its batch line's range."""
    events = [json.loads(line) for s in (run.stdout, run.stderr) for line in s.decode().splitlines()]
    batches = [e for e in events if e["event"] == "batch"]
    assert batches and all(e["level"] == "info" and e["processor"] == "toy" for e in batches)
    types: dict[str, int] = {}
    for b in batches:
        for name, n in b["types"].items():
            types[name] = types.get(name, 0) + n
    assert types == {"Deposit": GOOD, "undecodable": 1, "Teleport": 1}
    assert sum(b["sent"] for b in batches) == run.expected_outputs + len(MALFORMED)
    assert sum(b["dead_letters"] for b in batches) == len(MALFORMED)
    assert not [e for e in events if e["event"] == "record"]
    dead = [e for e in events if e["event"] == "dead_letter"]
    assert sorted(e["reason"] for e in dead) == sorted(reason for _, reason in MALFORMED)
    for e in dead:
        assert (e["level"], e["topic"], e["output"]) == ("warning", topics.WALLET_REQUESTS, "DeadLetter")
        assert any(
            b["partition"] == e["partition"] and b["first"] <= e["offset"] <= b["last"] for b in batches
        )


def test_topics_create_creates_the_contract_topics_once(
    kafka_broker: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``casino-ledger topics create`` creates every topic of schemas/topics.yaml under the prefix, and a
    second run creates none and still succeeds."""
    settings = settings_for(kafka_broker)
    monkeypatch.setenv("CASINO_TOPIC_PREFIX", settings.topic_prefix)
    spec = str(REPO / "schemas" / "topics.yaml")
    assert cli_main(["topics", "create", "--broker", kafka_broker, "--spec", spec]) == 0
    first = capsys.readouterr().out
    assert cli_main(["topics", "create", "--broker", kafka_broker, "--spec", spec]) == 0
    second = capsys.readouterr().out

    async def listed() -> set[str]:
        admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap_list)
        await admin.start()
        try:
            return {t for t in await admin.list_topics() if t.startswith(settings.topic_prefix)}
        finally:
            await admin.close()

    names = asyncio.run(listed())
    assert names == {settings.topic(name) for name in _spec_names()}
    assert set(topics.ALL_TOPICS) <= _spec_names()
    assert first.startswith(f"created {len(names)} of {len(names)} topics")
    assert second.startswith(f"created 0 of {len(names)} topics")


def _spec_names() -> set[str]:
    return {s.name for s in load_topic_specs(Path(REPO) / "schemas" / "topics.yaml")}


def test_topics_create_says_one_line_and_exits_2_when_no_broker_answers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """With no broker at the address, ``topics create`` prints one error line on stderr naming it and
    exits 2, like every command facing an unreachable broker."""
    spec = str(REPO / "schemas" / "topics.yaml")
    port = free_port()
    assert cli_main(["topics", "create", "--broker", f"127.0.0.1:{port}", "--spec", spec]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"casino-ledger: error: no Kafka broker answers at 127.0.0.1:{port}")
