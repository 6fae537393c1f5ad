"""A chain of worker deaths on a real broker (Tansu), driven step by step in one process (issue #31).

Each "worker" is a :class:`Shell` over the broker with its own state store (another machine's), driven
through its own restore, batch handling and snapshot writing, and "killed" by being dropped between two
of them: no subprocess, no timing, the same interleaving every run.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
from aiokafka import AIOKafkaProducer, TopicPartition  # type: ignore[import-untyped]

from services.core import topics
from services.runtime import intake
from services.runtime.kafka import state as state_store
from services.runtime.kafka.topic_io import aconsume_raw, aproduce, read_range
from services.runtime.kafka.worker import Shell, ensure_topics, service_topics
from services.runtime.settings import Settings
from tests.kafka.test_kafka_runtime import deposits, settings_for
from tests.kafka.toy import Toy

pytestmark = pytest.mark.kafka


async def toy_worker(settings: Settings, path: Path) -> Shell:
    """A worker of the toy processor over the broker with its own store at ``path`` and a started
    producer, no group consumer: each step says what it is assigned."""
    shell = Shell(
        SimpleNamespace(conf=SimpleNamespace(id="g")),  # type: ignore[arg-type]
        settings,
        [Toy()],
        service="toy",
        store=state_store.LocalStore(path),
    )
    shell.producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap_list, acks="all")
    await shell.producer.start()
    return shell


async def _kill(shell: Shell) -> None:
    """Drop the worker as a SIGKILL would leave it: nothing committed, no snapshot written on the way."""
    assert shell.producer is not None and shell.store is not None
    await shell.producer.stop()
    await shell.close()
    shell.store.close()


async def _handle(shell: Shell, tp: TopicPartition, start: int, end: int, *, snapshot: bool) -> int:
    """Apply the records [start, end) of ``tp`` as one batch and wait for their outputs (what
    :meth:`Shell._land` does before its commit), then, if ``snapshot``, write the scope's snapshot (what
    it does after); returns the outputs sent."""
    reader = await shell.reader()
    read, _ = await read_range(reader, {tp: start}, {tp: end})
    [pipe] = shell.routes[tp.topic]
    records = [(m.topic, m.partition, m.offset, m.value) for m in read[tp]]
    sent = await shell.confirmed(await shell.process([(pipe, records)]), note=True)
    if snapshot:
        due = shell.take_snapshot(pipe, tp.partition, time.monotonic())
        assert due is not None
        await shell.write_snapshots([due])
    return sent


@pytest.mark.parametrize("snapshotted", [True, False], ids=["from-a-snapshot", "from-scratch"])
async def test_a_snapshot_taken_before_the_causes_of_outputs_already_written_does_not_pass_them(
    kafka_broker: str, tmp_path: Path, snapshotted: bool
) -> None:
    """Worker 1 sends the outputs of a partition's records and dies before committing or snapshotting
    them. Worker 2 restores from the snapshot before them, finds them in its output index (sends
    nothing), applies only the first few records and snapshots there, then dies. Worker 3 restores from
    worker 2's snapshot and applies the rest: their outputs are on the log already, and its snapshot's
    output positions must make it read them back, so that nothing is written twice. Worker 2 restores
    from worker 1's first snapshot (taken on empty partitions), or from scratch when there is none."""
    settings = settings_for(kafka_broker)
    await ensure_topics(settings, service_topics([Toy()]))
    inputs = settings.topic(topics.WALLET_REQUESTS)
    every = [TopicPartition(inputs, p) for p in range(settings.partitions)]

    records = deposits(0, 48)
    if not snapshotted:
        await aproduce(settings, records)
    first = await toy_worker(settings, tmp_path / "w1")
    await first.restore(every)  # on empty partitions: a first snapshot of each scope, at offset 0
    if snapshotted:
        await aproduce(settings, records)
    ends = Counter(r.partition for r in await aconsume_raw(settings, [topics.WALLET_REQUESTS]))
    tp = max(every, key=lambda t: ends[t.partition])
    end = ends[tp.partition]
    assert end >= 8
    written = await _handle(first, tp, 0, end, snapshot=False)
    assert written > 0
    await _kill(first)

    second = await toy_worker(settings, tmp_path / "w2")
    await second.restore([tp])
    assert await _handle(second, tp, 0, 3, snapshot=True) == 0  # in the index: none sent again
    await _kill(second)

    third = await toy_worker(settings, tmp_path / "w3")
    await third.restore([tp])
    resent = await _handle(third, tp, 3, end, snapshot=False)
    await _kill(third)

    out = await aconsume_raw(settings, [topics.WALLET_EVENTS])
    ids = Counter(intake.identity_of(r.value)[0] for r in out)
    twice = {i: n for i, n in ids.items() if n > 1}
    assert resent == 0 and not twice, f"{len(twice)} outputs written twice"
    assert len(out) == written  # every output on the log is worker 1's, written once


async def test_a_death_between_kept_entries_and_their_snapshot_restores_from_the_snapshot_before(
    kafka_broker: str, tmp_path: Path
) -> None:
    """A worker writes a scope's kept entries to its changelog, each a record of its own, then the
    snapshot that covers them (ADR 0010); killed between the two, it leaves entries after the last
    snapshot. The next worker restores from that snapshot (its inputs from the snapshot's offsets, not
    from the partition's beginning) and takes none of the orphaned entries in."""
    settings = settings_for(kafka_broker)
    await ensure_topics(settings, service_topics([Toy()]))
    inputs = settings.topic(topics.WALLET_REQUESTS)
    every = [TopicPartition(inputs, p) for p in range(settings.partitions)]
    await aproduce(settings, deposits(0, 24))
    ends = Counter(r.partition for r in await aconsume_raw(settings, [topics.WALLET_REQUESTS]))
    tp = max(every, key=lambda t: ends[t.partition])
    end = ends[tp.partition]
    first = await toy_worker(settings, tmp_path / "w1")
    await first.restore([tp])
    await _handle(first, tp, 0, end, snapshot=True)
    [pipe] = first.routes[inputs]
    await _kill(first)
    orphans = [(state_store.kept_key(pipe.stage, tp.partition, "transfers", f"t{i}"), b"v") for i in range(3)]
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap_list, acks="all")
    await producer.start()
    changelog = settings.topic(state_store.changelog_topic(pipe.stage))
    for key, value in orphans:
        await producer.send_and_wait(changelog, value, key=key, partition=tp.partition)
    await producer.stop()

    second = await toy_worker(settings, tmp_path / "w2")
    await second.restore([tp])
    [again] = second.routes[inputs]
    assert second.store is not None
    assert again.next_offset[(topics.WALLET_REQUESTS, tp.partition)] == end  # not 0: not rebuilt
    assert second.store.kept_value(again.stored_as, tp.partition, "transfers", "t0") is None
    await _kill(second)
