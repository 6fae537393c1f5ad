"""A late bet (written after ``CloseBetting``) is refused at the same place in the table's chain on every
bus: after the deal's cards, as on one log (the embedded bus publishes the bet with the deal, and the
wallet forwards it to the inbox only after the deal is there). A bus with no single order (the in-memory
bus here, Kafka in ``tests/kafka/test_kafka_waits.py``) used to let the bet reach the dealer before the
deal: another table chain, another digest."""

from __future__ import annotations

from pathlib import Path

from services.core import topics
from services.core.envelope import Envelope, parse_record
from services.runtime.compose import demo_pipeline
from services.runtime.embedded.bus import EmbeddedBus
from services.runtime.embedded.store import EmbeddedLog
from services.runtime.replay import replay
from services.simulation.simulator import Session, demo_tables
from tests.helpers.membus import MemBus
from tests.helpers.streams import log_streams

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
    bus = EmbeddedBus(tmp_path / "e.db", demo_pipeline())
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


class _Stopped(Exception):
    """The session stopped right after a write (what a SIGKILL there leaves on the log)."""


class _StopAfterPublish(EmbeddedBus):
    """The embedded bus, stopping the session right after its ``stop_at``-th ``publish`` (records appended
    and committed, nothing processed: what a kill between a write and the next ``advance`` leaves)."""

    def __init__(self, path: Path, stop_at: int) -> None:
        super().__init__(path, demo_pipeline())
        self.stop_at, self.publishes = stop_at, 0

    def publish(self, envelopes: list[Envelope]) -> None:
        super().publish(envelopes)
        self.publishes += 1
        if self.publishes == self.stop_at:
            raise _Stopped


def test_a_session_stopped_after_any_publish_resumes_to_the_uninterrupted_log(tmp_path: Path) -> None:
    """Wherever the session is stopped right after a ``publish`` and then run again from scratch on the same
    log, every stream ends as in an uninterrupted run. A late bet used to be published apart from its deal:
    stopped between the two, the resumed session dealt (and paid) the coup before writing the bet, and the
    late bettor's wallet requests came in another order (seed 21, 3 tables x 12 coups)."""
    tables = demo_tables(3)
    ref = tmp_path / "ref.db"
    counting = _StopAfterPublish(ref, stop_at=-1)
    try:
        Session(counting, seed=21).run(tables, 12)
    finally:
        counting.close()
    want = log_streams(ref, signed_heads=False)  # a resumed run signs its heads at its own moments
    assert counting.publishes >= 1
    for stop_at in range(1, counting.publishes + 1):
        db = tmp_path / f"stopped-{stop_at}.db"
        bus = _StopAfterPublish(db, stop_at)
        try:
            Session(bus, seed=21).run(tables, 12)
        except _Stopped:
            pass
        finally:
            bus.close()
        resumed = EmbeddedBus(db, demo_pipeline())
        try:
            Session(resumed, seed=21).run(tables, 12)
        finally:
            resumed.close()
        assert log_streams(db, signed_heads=False) == want, f"stopped after publish {stop_at}"
