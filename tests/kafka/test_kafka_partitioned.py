"""The monitor per partition (issue #31, docs/adr/0011-partitioned-audit-monitor.md): three working
replicas on six partitions, its dead letters re-keyed through a repartition topic so that partition *p*
of the table events and of the re-keyed dead letters go to one member; replicas SIGKILLed mid-session.

Before, the monitor ran one member at a time under a lease (ADR 0007): the others waited. The path of
the dead letters through the repartition topic is exercised by ``test_kafka_attacks`` (every forgery
alerted once).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.kafka.test_kafka_crash_soak import check, soak

pytestmark = pytest.mark.kafka

TABLE_EVENTS = "casino.table.events"
REKEYED = "casino.repartition.monitor.deadletter"


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
