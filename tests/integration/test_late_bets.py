"""A late bet (written after ``CloseBetting``) is refused at the same place in the table's chain on every
bus: after the deal's cards, as on one log (the embedded bus publishes the bet with the deal, and the
wallet forwards it to the inbox only after the deal is there). A bus with no single order (the in-memory
bus here, Kafka in ``tests/kafka/test_kafka_waits.py``) used to let the bet reach the dealer before the
deal: another table chain, another digest."""

from __future__ import annotations

from pathlib import Path

from services.app.simulator import Session, demo_tables
from services.core import topics
from services.core.envelope import Envelope, parse_record
from services.runtime.embedded.log import EmbeddedBus, EmbeddedLog
from services.runtime.replay import replay
from tests.helpers.membus import MemBus

SEED = 3
"""Two late bets in 2 tables x 3 coups."""


def table_chains(records: list[Envelope]) -> dict[str, list[str]]:
    """Each table's events as ``type/coup`` in chain order."""
    out: dict[str, list[str]] = {}
    for e in records:
        if e.topic == topics.TABLE_EVENTS:
            out.setdefault(e.key, []).append(f"{e.type}/{e.payload.get('coup_id')}")
    return out


def test_a_late_bet_is_refused_after_the_deal_on_the_in_memory_and_the_embedded_bus(tmp_path: Path) -> None:
    mem = MemBus()
    Session(mem, seed=SEED).run(demo_tables(2), 3)
    bus = EmbeddedBus(tmp_path / "e.db")
    try:
        Session(bus, seed=SEED).run(demo_tables(2), 3)
    finally:
        bus.close()
    with EmbeddedLog(tmp_path / "e.db", readonly=True) as log:
        embedded = [parse_record(raw) for *_, raw in log.iter_all()]
    late = [e for e in embedded if e.type == "BetRefused"]
    assert [e.payload["reason"] for e in late] == ["betting_closed", "betting_closed"]
    for refused in late:  # after the deal's first card, in the embedded log
        chain = table_chains(embedded)[refused.key]
        coup = refused.payload["coup_id"]
        assert chain.index(f"CardDealt/{coup}") < chain.index(f"BetRefused/{coup}")
    assert table_chains(mem.log) == table_chains(embedded)
    assert replay(mem.log).digest == replay(embedded).digest
