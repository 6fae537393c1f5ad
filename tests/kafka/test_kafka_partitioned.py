"""The monitor per partition (issue #31, docs/adr/0011-partitioned-audit-monitor.md): three working
replicas on six partitions, its dead letters re-keyed through a repartition topic so that partition *p*
of the table events and of the re-keyed dead letters go to one member; replicas SIGKILLed mid-session.

Before, the monitor ran one member at a time under a lease (ADR 0007): the others waited.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from services.core import topics
from services.core.envelope import Envelope
from services.runtime.kafka.bus import KafkaBus, Workers, quick_settings
from services.runtime.kafka.worker import EXIT_CONFIG, TopicSpec, ensure_topics, repartition_topic
from services.runtime.keyring import Keyring
from services.runtime.settings import Settings
from tests.helpers import attacks
from tests.kafka.test_kafka_attacks import reference, ring_file  # noqa: F401 (fixtures)
from tests.kafka.test_kafka_crash_soak import check, soak

pytestmark = pytest.mark.kafka

TABLE_EVENTS = "casino.table.events"
REKEYED = repartition_topic("monitor", topics.DEADLETTER)


def _lines(text: str, event: str) -> list[dict[str, Any]]:
    found = [json.loads(line) for line in text.splitlines() if line.startswith("{") and f'"{event}"' in line]
    return [line for line in found if line.get("event") == event]


def test_three_monitor_replicas_share_the_partitions_and_survive_kills(
    kafka_broker: str, tmp_path: Path
) -> None:
    """Three monitor replicas, two SIGKILLs (each started again a coup later): every event id once, the
    replay clean with the in-memory digest (every table's alerts folded in order), no replica waiting
    for a lease, table events handled by more than one replica, and every monitor state restored over
    partition *p* of both its inputs (co-partitioned)."""
    result = soak(
        kafka_broker, tmp_path, seed=11, tables=4, coups=4, kills=2, replicated=("monitor",), copies=2
    )
    check(result)
    assert result["kills"] == 2
    logs = result["logs"]
    assert isinstance(logs, dict)
    monitor: list[str] = logs["monitor"]
    assert not any('"lease_wait"' in text or '"lease_held"' in text for text in monitor)
    handled = [
        {b["partition"] for b in _lines(text, "batch") if b["topic"] == TABLE_EVENTS} for text in monitor
    ]
    assert sum(1 for parts in handled if parts) >= 2, handled
    restored = [r for text in monitor for r in _lines(text, "state_restored") if r["stage"] == "monitor"]
    assert restored, "no monitor scope restored from a snapshot"
    for r in restored:
        assert set(r["offsets"]) == {f"{TABLE_EVENTS}[{r['scope']}]", f"{REKEYED}[{r['scope']}]"}, r


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_monitor_replicas_soak(kafka_broker: str, tmp_path: Path, seed: int) -> None:
    """Seven tables, six coups each, three monitor replicas, four kills per run: nothing written twice,
    clean with the in-memory digest."""
    result = soak(
        kafka_broker, tmp_path, seed=seed, tables=7, coups=6, kills=4, replicated=("monitor",), copies=2
    )
    check(result)
    assert result["kills"] == 4


def test_forgeries_are_alerted_once_by_three_monitor_replicas(
    kafka_broker: str, ring_file: tuple[Keyring, Path], reference: list[Envelope], tmp_path: Path,  # noqa: F811
) -> None:  # fmt: skip
    """Issue #8's forgeries with three monitor replicas on six partitions: each refused record's dead
    letter goes through the repartition topic to one member, which alerts it once; every alert chain
    runs 0, 1, 2, … without a fork; no alert written twice."""
    ring, path = ring_file
    base = Settings(bootstrap_servers=kafka_broker, topic_prefix=f"r{uuid.uuid4().hex[:10]}.", partitions=6,
                    keyring=path, demo_mode=False, log_level="INFO")  # fmt: skip
    settings = quick_settings(base, env={})
    asyncio.run(ensure_topics(settings, list(topics.ALL_TOPICS)))
    main = Workers(settings, tmp_path / "main")
    extras = [Workers(settings, tmp_path / f"extra{i}", services=("monitor",)) for i in range(2)]
    for workers in (main, *extras):
        workers.start()
    made = attacks.attacks(ring, reference)
    try:
        with KafkaBus(settings, workers=main) as bus:
            attacks.play(bus, ring, [a.record for a in made])
            records = bus.consume_all()
    finally:
        status = {
            **main.stop(),
            **{f"monitor#{i}": c for i, w in enumerate(extras) for c in w.stop().values()},
        }
    assert {n: c for n, c in status.items() if c != 0} == {}
    expected = {a.record.event_id: a.reason for a in made}
    assert attacks.refusals(records) == expected
    assert attacks.alerts(records) == expected
    alerted = Counter(e.event_id for e in records if e.topic == topics.MONITOR_ALERTS)
    assert [i for i, n in alerted.items() if n > 1] == []  # (a forgery squats a real payout's id: not ours)
    chains: dict[str, list[int | None]] = {}
    for e in records:
        if e.topic == topics.MONITOR_ALERTS:
            chains.setdefault(e.key, []).append(e.seq)
    assert chains and all(seqs == list(range(len(seqs))) for seqs in chains.values()), chains
    working = [w.log("monitor") for w in (main, *extras)]
    assert sum(1 for text in working if any(b["topic"] == REKEYED for b in _lines(text, "batch"))) >= 1


def test_a_repartition_topic_of_another_partition_count_stops_the_monitor(
    kafka_broker: str, tmp_path: Path
) -> None:
    """The re-keyed dead letters' topic made by hand with 3 partitions beside table events of 6: the
    monitor would put a table's dead-letter alerts in another member's partition, so it does not start:
    one ``copartition_mismatch`` line, exit 78 (as Kafka Streams refuses a topology whose joined topics
    differ)."""
    settings = quick_settings(
        Settings(
            bootstrap_servers=kafka_broker,
            topic_prefix=f"c{uuid.uuid4().hex[:10]}.",
            partitions=6,
            demo_mode=True,
        ),
        env={},
    )
    asyncio.run(ensure_topics(settings, [*topics.ALL_TOPICS, TopicSpec(REKEYED, 3, -1)]))
    workers = Workers(settings, tmp_path, services=("monitor",))
    workers.start()
    try:
        status = workers.procs["monitor"].wait(120)
    finally:
        workers.stop()
    log = workers.log("monitor")
    assert status == EXIT_CONFIG, log[-2000:]
    [line] = _lines(log, "copartition_mismatch")
    assert line["partitions"] == {TABLE_EVENTS: 6, REKEYED: 3}
