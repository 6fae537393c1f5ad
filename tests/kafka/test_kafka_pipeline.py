"""The real pipeline on a real broker: dealer, settlement, audit and monitor as four worker processes.

The reference is the same seeded session on the in-memory pipeline (:class:`MemBus`, the pure core in
log order): its replay digest covers every game round and every final balance, and does not depend on
how the processors interleave, so the Kafka run must reach exactly that digest.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.audit.replay import Report
from services.core import topics
from services.core.envelope import Envelope, request
from services.core.trust import authenticate
from services.runtime.kafka.bus import KafkaBus, Workers, quick_settings
from services.runtime.kafka.topic_io import aconsume_raw
from services.runtime.kafka.worker import ensure_topics
from services.runtime.keyring import demo_keyring, new_keyring, save_keyring
from services.runtime.replay import replay
from services.runtime.settings import Settings
from services.simulation.simulator import DEFAULT_TABLES, Session
from tests.helpers.membus import MemBus

pytestmark = pytest.mark.kafka

SEED = 7
COUPS = 4
TABLES = [t for t in DEFAULT_TABLES if t.variant in ("punto_banco", "chemin_de_fer", "french_club")]
"""A house-banked game, a game with decisions and a player-banked game whose bank must cover."""


def _settings(broker: str) -> Settings:
    return quick_settings(
        Settings(
            bootstrap_servers=broker, topic_prefix=f"p{uuid.uuid4().hex[:10]}.", partitions=3, demo_mode=True
        ),
        env={},
    )


@pytest.fixture(scope="module")
def reference() -> Report:
    """The in-memory run's replay of the same session."""
    bus = MemBus()
    Session(bus, seed=SEED).run(list(TABLES), COUPS)
    report = replay(bus.log)
    assert report.clean, report.to_dict()["findings"]
    return report


@pytest.fixture
def workers(kafka_broker: str, tmp_path: Path) -> Iterator[Workers]:
    """The four services as separate processes on fresh topics (created once, before they start)."""
    settings = _settings(kafka_broker).model_copy(update={"log_level": "INFO"})
    asyncio.run(ensure_topics(settings, list(topics.ALL_TOPICS)))
    procs = Workers(settings, tmp_path / "workers")
    procs.start()
    try:
        yield procs
    finally:
        status = procs.stop()
        bad = {name: code for name, code in status.items() if code != 0}
        assert not bad, "\n".join(f"{n} exited {c}:\n{procs.log(n)[-3000:]}" for n, c in bad.items())


def _payouts_per_bet(records: list[Envelope]) -> Counter[str]:
    return Counter(str(e.payload["bet_id"]) for e in records if e.type == "PayoutIssued")


def test_four_worker_processes_reach_the_in_memory_digest_through_sigkills(
    workers: Workers, reference: Report, tmp_path: Path
) -> None:
    """Bets go to payouts across the worker processes on three partitions; settlement and then the
    dealer are SIGKILLed mid-shoe and restarted, and still every accepted bet is paid exactly once and
    the replay of the topics is clean with the in-memory run's digest."""
    kills = {2: "settlement", 7: "dealer"}  # after the n-th coup played (of len(TABLES) * COUPS)
    played = 0

    def after_coup() -> None:
        nonlocal played
        played += 1
        if played in kills:
            name = kills[played]
            assert workers.kill(name, signal.SIGKILL) == -signal.SIGKILL
            workers.start([name])

    with KafkaBus(workers.settings, workers=workers) as bus:
        Session(bus, seed=SEED).run(list(TABLES), COUPS, progress=after_coup)
        records = bus.consume_all()
    assert played == len(TABLES) * COUPS
    report = replay(records)
    assert report.clean, report.to_dict()["findings"][:5]
    assert report.coups == len(TABLES) * COUPS
    assert report.digest == reference.digest
    accepted = {str(e.payload["bet_id"]) for e in records if e.type == "BetAccepted"}
    per_bet = _payouts_per_bet([e for e in records if e.topic == topics.WALLET_REQUESTS])
    assert set(per_bet) == accepted and set(per_bet.values()) == {1}
    assert len({e.event_id for e in records}) == len(records)  # no output written twice
    assert not [e for e in records if e.topic == topics.DEADLETTER]
    # the regulator's command reads the topics itself (streamed) and reaches the same verdict and digest
    settings = workers.settings
    public = tmp_path / "public-keyring.json"  # the workers sign with the demo key; the regulator supplies it
    public.write_text(json.dumps(demo_keyring().public_document()), encoding="utf-8")
    env = {**os.environ, "CASINO_TOPIC_PREFIX": settings.topic_prefix, "LOG_LEVEL": "WARNING",
           "CASINO_PUBLIC_KEYRING": str(public)}  # fmt: skip
    command = [sys.executable, "-m", "services.cli", "replay", "--json", "--kafka"]
    command.append(settings.bootstrap_servers)
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert json.loads(done.stdout)["digest"] == reference.digest


def test_malformed_records_on_every_input_topic_are_dead_lettered_and_play_goes_on(
    workers: Workers, reference: Report
) -> None:
    """Garbage and contract-breaking records on every topic a service reads become dead letters naming
    their source topic and a reason; the session played after them is paid in full.

    Regression: records reaching both settlement stages at once made the two agents race to start the
    worker's shared reader, and the worker crashed (``Unable to get cluster metadata``)."""
    settings = workers.settings
    forged = request(
        "PlaceBet", topics.WALLET_REQUESTS, "player:001", {"account_id": "player:001"},
        event_id="forged-bet", occurred_at="2026-11-22T20:00:00.000Z", producer="test",
    )  # fmt: skip
    forged = authenticate(forged, demo_keyring().key("terminal"))  # a terminal's, so the payload is judged
    garbage: list[tuple[str, bytes, bytes]] = [
        (topics.TABLE_INBOX, b"T01-punto-banco", b"\xff not json"),
        (topics.WALLET_REQUESTS, b"player:001", b'{"event_id": "half an envelope"}'),
        (topics.WALLET_REQUESTS, b"player:001", forged.to_json()),
        (topics.TABLE_EVENTS, b"T01-punto-banco", b"[]"),
        (topics.WALLET_EVENTS, b"player:001", b"{}"),
    ]
    with KafkaBus(settings, workers=workers) as bus:
        bus.publish_raw(garbage)
        bus.drain()
        Session(bus, seed=SEED).run(list(TABLES[:1]), 2)
        records = bus.consume_all()
        raw_dead = [r.value for r in asyncio.run(aconsume_raw(settings, [topics.DEADLETTER]))]
    letters = [json.loads(v or b"{}")["payload"] for v in raw_dead]
    sources = {(d["source_topic"], d["reason"]) for d in letters}
    for topic, _, _ in garbage:
        assert any(src == topic for src, _ in sources), (topic, sources)
    assert ("casino.wallet.requests", "invalid_payload") in sources
    assert {d["original"] for d in letters} >= {raw.decode("utf-8", "replace") for _, _, raw in garbage}
    accepted = {str(e.payload["bet_id"]) for e in records if e.type == "BetAccepted"}
    per_bet = _payouts_per_bet([e for e in records if e.topic == topics.WALLET_REQUESTS])
    assert accepted and set(per_bet) == accepted and set(per_bet.values()) == {1}
    assert sum(1 for e in records if e.type == "CoupResolved") == 2
    # every dead letter is named by its writer's signed heads (issue 28), the worker's as the embedded's
    named = {h for e in records if e.topic == topics.ATTEST for h in e.payload.get("dead_letters", [])}
    dead_hashes = {json.loads(v or b"{}")["hash"] for v in raw_dead}
    assert dead_hashes and dead_hashes <= named
    # one INFO summary line per batch, whose offset ranges and type counts cover every record handled,
    # and one WARNING line naming the record each dead letter was written for
    lines = [json.loads(line) for line in workers.log("dealer").splitlines() if line.startswith("{")]
    batches = [x for x in lines if x.get("event") == "batch" and x.get("topic") == topics.TABLE_INBOX]
    inbox = [e for e in records if e.topic == topics.TABLE_INBOX]
    assert sum(b["records"] for b in batches) == len(inbox) + 1  # the garbage record too
    assert all(b["last"] - b["first"] + 1 == b["records"] and b["level"] == "info" for b in batches)
    types: Counter[str] = Counter()
    for b in batches:
        types.update(b["types"])
    assert types == Counter({"undecodable": 1, **Counter(e.type for e in inbox)})
    assert sum(b["dead_letters"] for b in batches) == 1
    assert not [x for x in lines if x.get("event") == "record"]  # per record: DEBUG only
    (dead,) = [x for x in lines if x.get("event") == "dead_letter"]
    assert {"level": "warning", "reason": "undecodable", "topic": topics.TABLE_INBOX}.items() <= dead.items()
    at = [
        b
        for b in batches
        if b["partition"] == dead["partition"] and b["first"] <= dead["offset"] <= b["last"]
    ]
    assert len(at) == 1 and at[0]["dead_letters"] == 1  # an operator finds the record by its batch's range


def test_demo_command_through_kafka_prints_the_embedded_digest(kafka_broker: str, tmp_path: Path) -> None:
    """`casino-ledger demo --kafka` plays the seeded session through worker processes and prints the
    same digest as the embedded demo of the same seed, tables and coups."""
    args = ["--seed", "3", "--tables", "2", "--coups", "2"]
    ring = save_keyring(new_keyring(), tmp_path / "keyring.json")  # one keyring: the same shoes in both
    env = {**os.environ, "LOG_LEVEL": "WARNING", "CASINO_TOPIC_PREFIX": f"d{uuid.uuid4().hex[:8]}.",
           "CASINO_KEYRING": str(ring)}  # fmt: skip
    cli = [sys.executable, "-m", "services.cli", "demo", *args]
    runs = [
        subprocess.run([*cli, "--kafka", kafka_broker], capture_output=True, text=True, env=env, cwd=tmp_path,
                       timeout=300, check=False),
        subprocess.run([*cli, "--db", str(tmp_path / "e.db")], capture_output=True, text=True, env=env,
                       timeout=300, check=False),
    ]  # fmt: skip
    digests = []
    for done in runs:
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert "audit verdict: clean" in done.stdout
        digests.append(next(line for line in done.stdout.splitlines() if line.startswith("digest: ")))
    assert digests[0] == digests[1]
    assert (tmp_path / "var" / "kafka").is_dir()  # the workers' logs
