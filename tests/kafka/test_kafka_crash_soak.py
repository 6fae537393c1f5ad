"""Crash soak (issue #31): two replicas of the dealer and of settlement on six partitions, the extra
replicas SIGKILLed (and started again) at seeded moments of a session.

Before the state store, a survivor's catch-up re-sent hundreds of settlement's records after such a
kill and the replay reported each as a ``duplicate_event``. Now every worker restores its partitions
from their snapshots and reads back only the outputs written since, so: no event id written twice,
the replay clean, the digest the in-memory run's.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from services.core import topics
from services.runtime.kafka.bus import KafkaBus, Workers, quick_settings
from services.runtime.kafka.worker import ensure_topics
from services.runtime.replay import replay
from services.runtime.settings import Settings
from services.simulation.simulator import Session, demo_tables
from tests.helpers.membus import MemBus

pytestmark = pytest.mark.kafka

REPLICATED = ("dealer", "settlement")


def soak(
    broker: str, logs: Path, *, seed: int, tables: int, coups: int, kills: int,
    replicated: tuple[str, ...] = REPLICATED, copies: int = 1, standby: bool = False,
) -> dict[str, object]:  # fmt: skip
    """One session with ``copies`` extra replicas of each of ``replicated`` SIGKILLed ``kills`` times
    after coups chosen by ``seed`` (each started again one coup later), every worker with standby
    stores when ``standby`` (docs/adr/0014); what a test asserts on."""
    settings = quick_settings(
        Settings(
            bootstrap_servers=broker, topic_prefix=f"s{uuid.uuid4().hex[:10]}.", partitions=6,
            demo_mode=True, log_level="INFO", state_snapshot_records=50, standby_stores=standby,
            state_snapshot_interval_s=1.0 if standby else 5.0,
        ),
        env={},
    )  # fmt: skip
    specs = demo_tables(tables)
    rng = random.Random(seed)
    total = tables * coups
    moments = sorted(rng.sample(range(1, total), min(kills, total - 1)))
    victims = {m: (rng.randrange(copies), rng.choice(replicated)) for m in moments}
    asyncio.run(ensure_topics(settings, list(topics.ALL_TOPICS)))
    main = Workers(settings, logs / "main")
    extras = [Workers(settings, logs / f"extra{i}", services=replicated) for i in range(copies)]
    main.start()
    for extra in extras:
        extra.start()
    played, killed, down = 0, 0, {}

    def after_coup() -> None:
        nonlocal played, killed
        played += 1
        for (copy, name), since in list(down.items()):
            if played > since:  # back one coup later: another rebalance, the partitions move again
                extras[copy].start([name])
                del down[(copy, name)]
        victim = victims.get(played)
        if victim is not None and victim not in down:
            copy, name = victim
            assert extras[copy].kill(name, signal.SIGKILL) == -signal.SIGKILL
            down[victim] = played
            killed += 1

    try:
        with KafkaBus(settings, workers=main) as bus:
            session = Session(bus, seed=seed)
            started = time.monotonic()
            session.run(specs, coups, progress=after_coup)
            bus.drain()
            records = bus.consume_all()
            took = time.monotonic() - started
    finally:
        status = dict(main.stop())
        for i, extra in enumerate(extras):
            status.update({f"{n}#{i + 2}": c for n, c in extra.stop().items()})
    memory = MemBus()
    Session(memory, seed=seed).run(specs, coups)
    logs_of = {n: [main.log(n), *[extra.log(n) for extra in extras]] for n in replicated}
    logs_text = "".join("".join(texts) for texts in logs_of.values())
    return {
        "records": records, "reference": replay(memory.log), "status": status, "kills": killed,
        "seconds": took, "restored": logs_text.count('"event": "state_restored"'), "logs": logs_of,
        "standby_taken": logs_text.count('"event": "standby_taken"'),
    }  # fmt: skip


def check(result: dict[str, object]) -> None:
    """No event id written twice, a clean replay with the in-memory run's digest, every worker that
    was not killed stopped cleanly."""
    records = result["records"]
    assert isinstance(records, list)
    twice = [i for i, n in Counter(e.event_id for e in records).items() if n > 1]
    assert twice == [], f"{len(twice)} event ids written twice, e.g. {twice[:3]}"
    report = replay(records)
    assert report.clean, json.dumps(report.to_dict()["findings"][:5])
    assert report.digest == result["reference"].digest  # type: ignore[attr-defined]
    status = result["status"]
    assert isinstance(status, dict)
    # an extra replica started again may meet the stop before faust has installed its signal handlers
    allowed = {n: (0, -signal.SIGKILL, -signal.SIGTERM) if "#" in n else (0,) for n in status}
    assert {n: c for n, c in status.items() if c not in allowed[n]} == {}


def test_replicas_killed_mid_session_write_nothing_twice(kafka_broker: str, tmp_path: Path) -> None:
    """Two kills of an extra replica (seeded) during a short session on six partitions: every event id
    once, replay clean, the in-memory digest; the workers restored their partitions from snapshots."""
    result = soak(kafka_broker, tmp_path, seed=31, tables=3, coups=3, kills=2)
    check(result)
    assert result["kills"] == 2
    assert isinstance(result["restored"], int) and result["restored"] > 0


def test_replicas_killed_with_standby_stores_write_nothing_twice(kafka_broker: str, tmp_path: Path) -> None:
    """The same with standby stores (each member keeping the others' partitions warm): the takeovers
    restore from stores the standby rounds wrote while the other member applied records, and still
    nothing is written twice, the replay is clean, the digest the in-memory run's."""
    result = soak(kafka_broker, tmp_path, seed=32, tables=3, coups=3, kills=2, standby=True)
    check(result)
    assert result["kills"] == 2
    assert isinstance(result["standby_taken"], int) and result["standby_taken"] > 0


@pytest.mark.slow
@pytest.mark.parametrize(("seed", "standby"), [(1, False), (2, True), (3, False), (4, True)])
def test_crash_soak_many_kills(kafka_broker: str, tmp_path: Path, seed: int, standby: bool) -> None:
    """Seven tables, six coups each, five kills per run, four seeds (two with standby stores): nothing
    written twice, clean, the in-memory digest."""
    result = soak(kafka_broker, tmp_path, seed=seed, tables=7, coups=6, kills=5, standby=standby)
    check(result)
