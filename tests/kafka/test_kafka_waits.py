"""The event-driven session on Kafka (``Session.event_driven``): each step waits for the records it needs
(``KafkaBus.wait``), never for every consumer group to be idle, and still writes the log the embedded
bus writes: the same table chains, late bets included, and the same replay digest.

A late bet (written after ``CloseBetting``) is the case that differed: the embedded log holds it behind
the deal (the bet and the deal are published together, and the wallet forwards the bet to the table's
inbox only after the deal is there), so the dealer refuses it after the deal's cards; on Kafka the
session used to let it reach the inbox before publishing the deal. It now publishes the bet once the
deal is acknowledged, and waits for the bet's ``BetPlaced`` before any decision.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from services.core import topics
from services.core.envelope import Envelope, parse_record
from services.runtime.compose import demo_pipeline
from services.runtime.embedded.bus import EmbeddedBus
from services.runtime.embedded.store import EmbeddedLog
from services.runtime.kafka.bus import quick_settings, running
from services.runtime.replay import replay
from services.runtime.settings import Settings
from services.simulation.simulator import Session, demo_tables

pytestmark = pytest.mark.kafka

SEED = 3
"""Two late bets in 2 tables x 3 coups."""
COUPS = 3


def table_chains(records: list[Envelope]) -> dict[str, list[str]]:
    """Each table's events as ``type/coup`` in chain order."""
    out: dict[str, list[str]] = {}
    events = sorted((e for e in records if e.topic == topics.TABLE_EVENTS), key=lambda e: (e.key, e.seq or 0))
    for e in events:
        out.setdefault(e.key, []).append(f"{e.type}/{e.payload.get('coup_id')}")
    return out


def embedded_session(db: Path) -> list[Envelope]:
    bus = EmbeddedBus(db, demo_pipeline())
    try:
        Session(bus, seed=SEED).run(demo_tables(2), COUPS)
    finally:
        bus.close()
    with EmbeddedLog(db, readonly=True) as log:
        return [parse_record(raw) for *_, raw in log.iter_all()]


def test_the_event_driven_kafka_session_writes_the_embedded_log_late_bets_included(
    kafka_broker: str, tmp_path: Path
) -> None:
    base = Settings(bootstrap_servers=kafka_broker, topic_prefix=f"w{uuid.uuid4().hex[:10]}.", partitions=3,
                    demo_mode=True)  # fmt: skip
    with running(quick_settings(base, env={}), tmp_path / "workers") as bus:
        session = Session(bus, seed=SEED)
        assert session.event_driven
        session.run(demo_tables(2), COUPS)
        assert bus.drains == 1  # once, at the end: no step waited for every group
        records = bus.consume_all()
    embedded = embedded_session(tmp_path / "e.db")
    late = [e.payload["reason"] for e in records if e.type == "BetRefused"]
    assert late == ["betting_closed", "betting_closed"]
    assert table_chains(records) == table_chains(embedded)
    kafka, reference = replay(records), replay(embedded)
    assert kafka.clean and reference.clean
    assert kafka.digest == reference.digest
