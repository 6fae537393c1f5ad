"""Audit's tree stage as two replicas (issue #31): it is the one writer of audit's records (the
findings and the signed checkpoints over every partition's chain heads: docs/adr/0013-audit-per-partition.md),
so one member at a time holds the service's lease (docs/adr/0007-kafka-lease.md) and the other waits;
SIGKILLing the holder mid-session hands the lease over. (Audit's stages and the monitor run per
partition with working replicas: ``test_kafka_audit_partitioned``, ``test_kafka_partitioned``.)

Before the lease, two audit replicas split the partitions: neither held them all, so neither wrote a
checkpoint, and the replay reported every one the cadence called for as ``checkpoint_missing``.
"""

from __future__ import annotations

import asyncio
import random
import signal
import time
import uuid
from pathlib import Path

import pytest

from services.core import topics
from services.runtime.kafka.bus import KafkaBus, Workers, quick_settings
from services.runtime.kafka.worker import ensure_topics
from services.runtime.replay import replay
from services.runtime.settings import Settings
from services.simulation.simulator import Session, demo_tables
from tests.helpers.membus import MemBus
from tests.kafka.test_kafka_crash_soak import check

pytestmark = pytest.mark.kafka

SINGLE = ("audit-tree",)
WAIT_S = 120.0
"""Upper bound on any wait (a safety net against a hang, not a timing assertion)."""


def _wait_for(workers: Workers, line: str, names: tuple[str, ...]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not all(line in workers.log(n) for n in names):
        workers.check()
        if time.monotonic() > deadline:
            pytest.fail(f"no {line} in {names}: {[workers.log(n)[-1500:] for n in names]}")
        time.sleep(0.2)


def run(
    broker: str, logs: Path, *, seed: int, tables: int, coups: int, kill_after: int, standby: bool = False
) -> dict[str, object]:
    """A session with the first replica of audit's tree stage holding the lease and SIGKILLed after
    ``kill_after`` coups (0: never); the second replica, started after it, waits and takes over (with
    ``standby``: keeping the holder's state warm meanwhile, docs/adr/0014)."""
    settings = quick_settings(
        Settings(
            bootstrap_servers=broker, topic_prefix=f"m{uuid.uuid4().hex[:10]}.", partitions=6,
            demo_mode=True, log_level="INFO", state_snapshot_records=50, standby_stores=standby,
            state_snapshot_interval_s=1.0 if standby else 5.0,
        ),
        env={},
    )  # fmt: skip
    specs = demo_tables(tables)
    asyncio.run(ensure_topics(settings, list(topics.ALL_TOPICS)))
    first = Workers(settings, logs / "first", services=SINGLE)
    main = Workers(settings, logs / "main")
    first.start()
    played = 0

    def after_coup() -> None:
        nonlocal played
        played += 1
        if played == kill_after:
            for name in SINGLE:
                assert first.kill(name, signal.SIGKILL) == -signal.SIGKILL

    try:
        _wait_for(first, '"lease_held"', SINGLE)
        main.start()
        # the second replicas asked for the leases before the session (a loaded machine started them
        # after the holders were killed, and they took the leases without waiting)
        _wait_for(main, '"lease_wait"', SINGLE)
        with KafkaBus(settings, workers=main) as bus:
            Session(bus, seed=seed).run(specs, coups, progress=after_coup)
            bus.drain()
            records = bus.consume_all()
    finally:
        status = {**main.stop(), **{f"{n}#1": c for n, c in first.stop().items()}}
    memory = MemBus()
    Session(memory, seed=seed).run(specs, coups)
    logs_of = {"first": {n: first.log(n) for n in SINGLE}, "second": {n: main.log(n) for n in SINGLE}}
    return {"records": records, "reference": replay(memory.log), "status": status, **logs_of}


@pytest.mark.parametrize("standby", [False, True])
def test_a_second_audit_waits_then_takes_over_from_a_killed_holder(
    kafka_broker: str, tmp_path: Path, standby: bool
) -> None:
    """Two replicas of audit's tree stage: the second says once that it waits; the holder is SIGKILLed
    mid-session and the second one takes over: every event id once, the replay clean with the
    in-memory digest (every checkpoint the cadence calls for is there). With standby stores the
    waiting member keeps the holder's state warm in its own store meanwhile (it owns nothing)."""
    result = run(kafka_broker, tmp_path, seed=31, tables=3, coups=4, kill_after=6, standby=standby)
    second = result["second"]
    assert isinstance(second, dict)
    assert ('"standby_taken"' in second["audit-tree"]) is standby
    check(result)
    records = result["records"]
    assert isinstance(records, list)
    checkpoints = [e for e in records if e.type == "AuditCheckpoint"]
    assert checkpoints, "no checkpoint written"
    second, first = result["second"], result["first"]
    assert isinstance(second, dict) and isinstance(first, dict)
    for name in SINGLE:
        assert second[name].count('"lease_wait"') == 1, second[name][-2000:]
        assert '"waited": true' in second[name] and '"event": "restored"' in second[name]
        assert '"lease_wait"' not in first[name]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_single_members_soak(kafka_broker: str, tmp_path: Path, seed: int) -> None:
    """Seven tables, six coups each, the holders SIGKILLed after a coup chosen by the seed: nothing
    written twice, clean with the in-memory digest, checkpoints written."""
    kill_after = random.Random(seed).randrange(1, 7 * 6)
    result = run(kafka_broker, tmp_path, seed=seed, tables=7, coups=6, kill_after=kill_after)
    check(result)
    records = result["records"]
    assert isinstance(records, list)
    assert [e for e in records if e.type == "AuditCheckpoint"]
