"""The Kafka runtime on a real broker (Tansu): a toy processor's worker run as a subprocess.

The reference for every comparison is the pure core: :func:`services.core.processor.step` applied to
the same inputs in order, which is what an uninterrupted run must write, byte for byte, per key.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest
from aiokafka import TopicPartition  # type: ignore[import-untyped]

from services.core import topics
from services.core.envelope import Envelope, request
from services.core.processor import initial_state, step
from services.runtime.kafka.bus import real_ends
from services.runtime.kafka.topic_io import (
    RANGE_FETCH_MS,
    READ_FETCH_MS,
    RawRecord,
    aconsume_raw,
    aproduce,
    aproduce_raw,
    consume_all,
    known,
    new_consumer,
    partitions_of,
    produce,
    read_range,
)
from services.runtime.kafka.worker import EXIT_LOST, ensure_topics
from services.runtime.settings import Settings
from tests.helpers.broker import free_port, tansu
from tests.kafka.toy import Toy, add

pytestmark = pytest.mark.kafka

REPO = Path(__file__).resolve().parents[2]
WAIT_S = 90.0
"""Upper bound on any wait for the worker (a safety net against a hang, not a timing assertion)."""

KEYS = [f"acct-{k}" for k in range(8)]


def settings_for(broker: str) -> Settings:
    """Settings of one test: its own topic prefix (so its own topics and group), short group timeouts."""
    return Settings(
        bootstrap_servers=broker,
        topic_prefix=f"t{uuid.uuid4().hex[:10]}.",
        partitions=3,
        rebalance_timeout_s=3.0,
        session_timeout_s=6.0,
        heartbeat_interval_s=1.0,
    )


def start_worker(
    settings: Settings, log: Path, *, err: Path | None = None, extra_env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """``python -m services.cli.worker toy --factory tests.kafka.toy:make_toy`` configured by env,
    its output appended to ``log`` (its standard error to ``err`` when given), ``extra_env`` on top."""
    env = {
        **os.environ,
        "CASINO_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
        "CASINO_TOPIC_PREFIX": settings.topic_prefix,
        "CASINO_PARTITIONS": str(settings.partitions),
        "CASINO_REBALANCE_TIMEOUT_S": str(settings.rebalance_timeout_s),
        "CASINO_SESSION_TIMEOUT_S": str(settings.session_timeout_s),
        "CASINO_HEARTBEAT_INTERVAL_S": str(settings.heartbeat_interval_s),
        "CASINO_LOG_FORMAT": "json",
        "CASINO_LOG_LEVEL": "INFO",
        "CASINO_DATA_DIR": str(log.parent / "faust-data"),
        **(extra_env or {}),
    }
    env.pop("CASINO_WEB_BIND", None)  # the default: loopback only
    with log.open("ab") as out, (err or log).open("ab") as errors:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "services.cli.worker",
                "toy",
                "--factory",
                "tests.kafka.toy:make_toy",
            ],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=errors if err is not None else subprocess.STDOUT,
        )


def stop(proc: subprocess.Popen[bytes], sig: signal.Signals = signal.SIGTERM) -> int:
    """Send ``sig`` and wait for the worker to exit; returns its exit status."""
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        return proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(30)


def reference(inputs: Sequence[Envelope]) -> dict[str, list[bytes]]:
    """What an uninterrupted run writes to wallet events, per key: the pure core over the inputs."""
    toy = Toy()
    state = initial_state(toy)
    out: dict[str, list[bytes]] = defaultdict(list)
    for record in inputs:
        for env in step(toy, state, record):
            out[env.key].append(env.to_json())
    return dict(out)


async def outputs(settings: Settings, topic: str = topics.WALLET_EVENTS) -> list[RawRecord]:
    """Every record on a topic of this test, by partition and offset."""
    return await aconsume_raw(settings, [topic])


async def wait_until(
    settings: Settings, done: Callable[[list[RawRecord]], bool], what: str
) -> list[RawRecord]:
    """Poll the output topic until ``done`` holds (or fail after :data:`WAIT_S`)."""
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while True:
        records = await outputs(settings)
        if done(records):
            return records
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"timed out waiting for {what}: {len(records)} outputs")
        await asyncio.sleep(0.2)


def by_key(records: Sequence[RawRecord]) -> dict[str, list[bytes]]:
    """Output values grouped by record key, in offset order."""
    out: dict[str, list[bytes]] = defaultdict(list)
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        out[(r.key or b"").decode()].append(r.value or b"")
    return dict(out)


def deposits(start: int, stop_: int) -> list[Envelope]:
    """Deposits ``start..stop_-1`` spread round-robin over :data:`KEYS`, amounts 1..7."""
    return [add(KEYS[i % len(KEYS)], i, 1 + (i * 5) % 7) for i in range(start, stop_)]


async def test_worker_processes_every_record_keyed_and_dead_letters_malformed_ones(
    kafka_broker: str, tmp_path: Path
) -> None:
    """A worker writes exactly the pure core's outputs per key, each key on one partition, and turns every
    malformed record into a dead letter with its reason and original bytes while the rest goes on."""
    settings = settings_for(kafka_broker)
    await ensure_topics(settings, list(topics.ALL_TOPICS))
    good = deposits(0, 120)
    wrong_topic = request(
        "Deposit", topics.TABLE_INBOX, KEYS[0], {"account_id": KEYS[0], "amount_minor": 5, "currency": "EUR"},
        event_id="wrong-topic", occurred_at="2026-01-01T00:00:00.000Z", producer="test",
    )  # fmt: skip
    bad_amount = add(KEYS[1], 9001, -5)
    unknown = add(KEYS[2], 9002, 3, type_="Teleport")
    malformed: list[tuple[bytes, str]] = [
        (b"\xff\xfe not json", "undecodable"),
        (b'{"event_id": "half an envelope"}', "undecodable"),
        (wrong_topic.to_json(), "invalid_payload"),
        (bad_amount.to_json(), "invalid_payload"),
        (unknown.to_json(), "unknown_type"),
    ]
    records: list[tuple[str, bytes | None, bytes | None]] = [
        (topics.WALLET_REQUESTS, e.key.encode(), e.to_json()) for e in good[:60]
    ]
    records += [(topics.WALLET_REQUESTS, KEYS[i % 3].encode(), raw) for i, (raw, _) in enumerate(malformed)]
    records += [(topics.WALLET_REQUESTS, e.key.encode(), e.to_json()) for e in good[60:]]
    records.append((topics.WALLET_REQUESTS, good[7].key.encode(), good[7].to_json()))  # a re-delivery
    await aproduce_raw(settings, records)
    expected = reference(good)
    total = sum(len(v) for v in expected.values())

    worker = start_worker(settings, tmp_path / "worker.log")
    try:
        await wait_until(settings, lambda rs: len(rs) >= total, "all outputs")
        dead = await wait_until_dead(settings, len(malformed))
    finally:
        assert stop(worker) == 0, (tmp_path / "worker.log").read_text()[-3000:]
    written = await outputs(settings)

    assert by_key(written) == expected
    partitions_of = defaultdict(set)
    for r in written:
        partitions_of[r.key].add(r.partition)
    assert all(len(p) == 1 for p in partitions_of.values())
    assert len({p for ps in partitions_of.values() for p in ps}) > 1
    letters = [json.loads(r.value or b"") for r in dead]
    assert sorted((d["payload"]["original"], d["payload"]["reason"]) for d in letters) == sorted(
        (raw.decode("utf-8", "replace"), reason) for raw, reason in malformed
    )
    assert {d["payload"]["source_topic"] for d in letters} == {topics.WALLET_REQUESTS}
    assert {(r.key or b"").decode() for r in dead} == {topics.WALLET_REQUESTS}


async def wait_until_dead(settings: Settings, count: int) -> list[RawRecord]:
    """Poll the dead-letter topic until it holds ``count`` records."""
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while True:
        dead = await outputs(settings, topics.DEADLETTER)
        if len(dead) >= count:
            return dead
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"timed out waiting for {count} dead letters: {len(dead)}")
        await asyncio.sleep(0.2)


async def test_sigkilled_worker_restarts_without_missing_or_duplicate_outputs(
    kafka_broker: str, tmp_path: Path
) -> None:
    """A worker SIGKILLed mid-stream, twice, then restarted, leaves exactly the uninterrupted run's outputs:
    no missing and no duplicate event id, byte-identical per key.

    Input arrives in three parts, the next one only once a worker is down, so each kill leaves work to
    do and the last worker has records to handle before the outputs are complete. Regression: with all
    the input there from the second start, a worker could write every output between the test's poll
    and its kill; the third worker then met the test's SIGTERM while still starting, before faust
    installs its signal handlers, and died of it (exit -15 instead of 0)."""
    settings = settings_for(kafka_broker)
    await ensure_topics(settings, list(topics.ALL_TOPICS))
    inputs = deposits(0, 3000)
    expected = reference(inputs)
    total = sum(len(v) for v in expected.values())
    parts = [inputs[:2000], inputs[2000:2600], inputs[2600:]]
    await aproduce(settings, parts[0])
    log = tmp_path / "worker.log"
    seen_at_kill: list[int] = []
    for threshold, more in ((total // 6, parts[1]), (total // 2, parts[2])):
        worker = start_worker(settings, log)
        await wait_until(settings, lambda rs, n=threshold: len(rs) >= n, f"{threshold} outputs")
        assert stop(worker, signal.SIGKILL) == -signal.SIGKILL
        seen_at_kill.append(len(await outputs(settings)))
        await aproduce(settings, more)  # more input arrives while the worker is down
    worker = start_worker(settings, log)
    try:
        await wait_until(settings, lambda rs: len(rs) >= total, "all outputs")
    finally:
        assert stop(worker) == 0, log.read_text()[-3000:]
    written = await outputs(settings)

    assert all(n < total for n in seen_at_kill)  # each kill left outputs to write
    ids = [json.loads(r.value or b"")["event_id"] for r in written]
    assert len(ids) == len(set(ids))
    assert by_key(written) == expected
    assert '"event": "state_restored"' in log.read_text()  # a restart starts from a snapshot


async def test_two_workers_share_partitions_and_one_takes_over_when_the_other_is_killed(
    kafka_broker: str, tmp_path: Path
) -> None:
    """Two workers of one group split the partitions; when one is SIGKILLed the survivor takes its
    partitions over, and the output is still exactly the uninterrupted run's.

    The last part of the input (every key, so every partition) arrives after the kill: the survivor
    must handle records of the victim's partitions, however fast the two were before it."""
    settings = settings_for(kafka_broker)
    await ensure_topics(settings, list(topics.ALL_TOPICS))
    inputs = deposits(0, 2400)
    expected = reference(inputs)
    total = sum(len(v) for v in expected.values())
    await aproduce(settings, inputs[:1600])
    first, second = tmp_path / "first.log", tmp_path / "second.log"
    survivor = start_worker(settings, second)
    victim = start_worker(settings, first)
    try:
        await wait_until(settings, lambda rs: len(rs) >= total // 3, "a third of the outputs")
        assert stop(victim, signal.SIGKILL) == -signal.SIGKILL
        seen_at_kill = len(await outputs(settings))
        await aproduce(settings, inputs[1600:])
        await wait_until(settings, lambda rs: len(rs) >= total, "all outputs")
    finally:
        stop(victim, signal.SIGKILL)
        assert stop(survivor) == 0, second.read_text()[-3000:]
    written = await outputs(settings)

    assert seen_at_kill < total
    ids = [json.loads(r.value or b"")["event_id"] for r in written]
    assert len(ids) == len(set(ids))
    assert by_key(written) == expected


def test_produce_and_consume_all_round_trip_every_record_of_a_pipelined_batch(kafka_broker: str) -> None:
    """consume_all returns every envelope produce sent, in per-key order, even the tail of a multi-record
    batch that Tansu's ListOffsets leaves out of its end offset."""
    settings = settings_for(kafka_broker)
    asyncio.run(ensure_topics(settings, list(topics.ALL_TOPICS)))
    sent = deposits(0, 2000)
    assert produce(kafka_broker, sent, settings) == len(sent)
    got = consume_all(kafka_broker, [topics.WALLET_REQUESTS], settings)
    assert sorted(e.event_id for e in got) == sorted(e.event_id for e in sent)
    for key in KEYS:
        assert [e for e in got if e.key == key] == [e for e in sent if e.key == key]


def test_a_reader_stops_fetching_once_a_read_is_done(kafka_broker: str) -> None:
    """After read_range and real_ends the plain reader's partitions are paused (aiokafka would otherwise
    fetch them in the background, every fetch wait, until the next read), and the next read_range on
    the same partitions still reads them (its assign starts them unpaused)."""
    settings = settings_for(kafka_broker)
    asyncio.run(ensure_topics(settings, list(topics.ALL_TOPICS)))
    sent = deposits(0, 30)
    produce(kafka_broker, sent, settings)

    async def reads() -> tuple[set[TopicPartition], set[TopicPartition], int, set[TopicPartition], int]:
        consumer = new_consumer(settings)
        await consumer.start()
        try:
            tps = await partitions_of(consumer, [settings.topic(topics.WALLET_REQUESTS)])
            ends = await real_ends(consumer, tps)
            after_ends = set(consumer.paused())
            first, _ = await read_range(consumer, {}, ends)
            after_read = set(consumer.paused())
            again, _ = await read_range(consumer, {}, ends)
            counts = sum(map(len, first.values())), sum(map(len, again.values()))
            return set(tps), after_ends, counts[0], after_read, counts[1]
        finally:
            await consumer.stop()

    tps, after_ends, first, after_read, again = asyncio.run(reads())
    assert after_ends and after_ends <= tps  # real_ends assigns the partitions that have records
    assert after_read == tps
    assert first == again == len(sent)


def test_a_range_read_with_a_longer_wait_ahead_reads_the_same_and_gives_the_wait_back(
    kafka_broker: str,
) -> None:
    """``read_range(..., ahead_ms=RANGE_FETCH_MS)`` (the restore's readers) reads the same records as
    a plain read, a topic with nothing in it reads nothing, and the reader keeps its own fetch wait
    after each read."""
    settings = settings_for(kafka_broker)
    asyncio.run(ensure_topics(settings, list(topics.ALL_TOPICS)))
    sent = deposits(0, 2000)
    produce(kafka_broker, sent, settings)

    async def reads() -> tuple[int, int, int, list[int]]:
        consumer = new_consumer(settings)
        await consumer.start()
        try:
            tps = await partitions_of(consumer, [settings.topic(topics.WALLET_REQUESTS)])
            empty = await partitions_of(consumer, [settings.topic(topics.TABLE_INBOX)])
            ends = await consumer.end_offsets(tps + empty)
            plain, _ = await read_range(consumer, {}, {tp: ends[tp] for tp in tps}, to_end=True)
            waits = [consumer._fetcher._fetch_max_wait_ms]
            ahead, _ = await read_range(
                consumer, {}, {tp: ends[tp] for tp in tps}, to_end=True, ahead_ms=RANGE_FETCH_MS
            )
            waits.append(consumer._fetcher._fetch_max_wait_ms)
            nothing, _ = await read_range(
                consumer, {}, {tp: ends[tp] for tp in empty}, to_end=True, ahead_ms=RANGE_FETCH_MS
            )
            waits.append(consumer._fetcher._fetch_max_wait_ms)
            return (
                sum(map(len, plain.values())),
                sum(map(len, ahead.values())),
                sum(map(len, nothing.values())),
                waits,
            )
        finally:
            await consumer.stop()

    plain, ahead, nothing, waits = asyncio.run(reads())
    assert plain == ahead == len(sent)
    assert nothing == 0
    assert waits == [READ_FETCH_MS] * 3


def test_a_reader_made_to_know_partitions_lists_their_offsets_and_fetches_nothing(kafka_broker: str) -> None:
    """``known`` (before a restore's ListOffsets of topics the reader has not read yet): the partitions
    are assigned and paused, their offsets are listed as without it, and the next read reads them."""
    settings = settings_for(kafka_broker)
    asyncio.run(ensure_topics(settings, list(topics.ALL_TOPICS)))
    sent = deposits(0, 30)
    produce(kafka_broker, sent, settings)

    async def reads() -> tuple[set[TopicPartition], set[TopicPartition], dict[TopicPartition, int], int]:
        consumer = new_consumer(settings)
        await consumer.start()
        try:
            tps = await partitions_of(consumer, [settings.topic(topics.WALLET_REQUESTS)])
            inbox = await partitions_of(consumer, [settings.topic(topics.TABLE_INBOX)])
            await read_range(consumer, {}, await consumer.end_offsets(inbox), to_end=True)
            known(consumer, tps)
            paused = set(consumer.paused())
            ends = await consumer.end_offsets(tps)
            read, _ = await read_range(consumer, {}, ends, to_end=True)
            return set(tps), paused, ends, sum(map(len, read.values()))
        finally:
            await consumer.stop()

    tps, paused, ends, read = asyncio.run(reads())
    assert paused == tps
    assert set(ends) == tps and sum(ends.values()) > 0
    assert read == len(sent)


async def test_a_broker_that_comes_back_empty_stops_the_worker_with_a_clear_line(tmp_path: Path) -> None:
    """The broker (memory-only) restarted empty on the same port while a worker runs: the worker does
    not carry on below the offsets its state holds (deposits would be skipped without a word); it
    writes one ``log_lost`` line and exits non-zero (74)."""
    port = free_port()
    log = tmp_path / "worker.log"
    inputs = deposits(0, 400)
    with tansu(tmp_path / "first-broker.log", port=port) as bootstrap:
        settings = settings_for(bootstrap)
        await ensure_topics(settings, list(topics.ALL_TOPICS))
        await aproduce(settings, inputs[:300])
        total = sum(len(v) for v in reference(inputs[:300]).values())
        worker = start_worker(settings, log, extra_env={"CASINO_STATE_SNAPSHOT_RECORDS": "20"})
        try:
            await wait_until(settings, lambda rs: len(rs) >= total, "all outputs")
        except BaseException:
            stop(worker, signal.SIGKILL)
            raise
    try:
        with tansu(tmp_path / "second-broker.log", port=port):
            await ensure_topics(settings, list(topics.ALL_TOPICS))
            await aproduce(settings, inputs[300:])
            status = await asyncio.get_running_loop().run_in_executor(None, worker.wait, 120)
    finally:
        if worker.poll() is None:
            stop(worker, signal.SIGKILL)
    text = log.read_text()
    assert status == EXIT_LOST, text[-3000:]
    lost = [json.loads(line) for line in text.splitlines() if '"log_lost"' in line]
    assert len(lost) == 1 and lost[0]["level"] == "critical", text[-3000:]
