"""The simulator over the embedded bus while audit lags (``EmbeddedBus.advance``): the same records
as in lockstep, only audit's at later offsets; the same session twice gives the same log."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from services.core import topics
from services.core.envelope import Envelope
from services.runtime.embedded import EmbeddedBus, EmbeddedLog
from services.runtime.replay import read_db, replay
from services.runtime.simulator import DEFAULT_TABLES, Session

TABLES = list(DEFAULT_TABLES[:3])
COUPS = 14


class Lockstep:
    """The bus without ``advance()``: the session settles every processor between its steps."""

    def __init__(self, bus: EmbeddedBus) -> None:
        self.bus = bus

    def publish(self, envelopes: list[Envelope]) -> None:
        """The wrapped bus's publish."""
        self.bus.publish(envelopes)

    def settle(self) -> None:
        """Every processor until idle."""
        self.bus.settle()

    def read(self, topic: str, key: str) -> list[Envelope]:
        """The wrapped bus's read."""
        return self.bus.read(topic, key)


def play(db: Path, *, lockstep: bool) -> list[tuple[str, bytes]]:
    """A seeded session on a fresh log at ``db``; every record as (topic, bytes) in log order."""
    bus = EmbeddedBus(db, lag_records=300)
    try:
        Session(Lockstep(bus) if lockstep else bus, seed=4).run(TABLES, COUPS)
    finally:
        bus.close()
    with EmbeddedLog(db, readonly=True) as log:
        return [(topic, raw) for _o, topic, _k, raw in log.iter_all()]


@pytest.fixture(autouse=True)
def _often(monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint every 2 coups of a table (live audit and replay), so that audit writes while lagging."""
    monkeypatch.setenv("CASINO_AUDIT_CHECKPOINT_EVERY", "2")


def test_audit_lagging_writes_the_same_records_and_only_moves_its_own(tmp_path: Path) -> None:
    """Every stage but audit writes the same records in the same order; audit writes the same records
    (checkpoints claim the same alerts) later; the replay digest is the lockstep one."""
    step = play(tmp_path / "lockstep.db", lockstep=True)
    lag = play(tmp_path / "lag.db", lockstep=False)
    assert Counter(step) == Counter(lag)
    assert any(b'"alerts":{"count":' in raw and b'"count":0' not in raw for _t, raw in step), "no alert claimed"
    assert step != lag, "audit did not move: the test shows nothing"
    mine = {topics.AUDIT_FINDINGS}
    assert [r for r in step if r[0] not in mine] == [r for r in lag if r[0] not in mine]
    assert [r for r in step if r[0] in mine] == [r for r in lag if r[0] in mine]
    want, got = replay(read_db(tmp_path / "lockstep.db")), replay(read_db(tmp_path / "lag.db"))
    assert got.clean and got.digest == want.digest


def test_the_same_session_gives_the_same_log(tmp_path: Path) -> None:
    """Run after run, byte for byte (ids and times derived, never the wall clock)."""
    assert play(tmp_path / "a.db", lockstep=False) == play(tmp_path / "b.db", lockstep=False)
