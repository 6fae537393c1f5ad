"""The simulator event driven on the embedded bus (``event_driven=True``): every stream as
when it advances the bus between its steps, in fewer and fuller batches; the same log for the same
seed; and a session cut off at any wait (what a SIGKILL leaves: the log of its last commit) resumes to
the uninterrupted log."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from services.core.envelope import Envelope
from services.runtime.compose import demo_pipeline
from services.runtime.embedded.bus import EmbeddedBus
from services.runtime.replay import read_db, replay
from services.simulation.simulator import Session, demo_tables
from tests.helpers.attested import assert_every_chain_head_attested
from tests.helpers.streams import log_streams, whole_log

SEED = 21
TABLES = demo_tables(3)
COUPS = 6


def play(db: Path, *, event_driven: bool, **options: int) -> int:
    """A seeded session on the log at ``db``; the batches its runners applied."""
    bus = EmbeddedBus(db, demo_pipeline(), event_driven=event_driven, **options)
    try:
        Session(bus, seed=SEED).run(TABLES, COUPS)
    finally:
        bus.close()
    return sum(r.batches for r in bus.runners)


def test_every_stream_is_the_one_of_the_advancing_session_in_fuller_batches(tmp_path: Path) -> None:
    """Event driven, the session writes every stream (and so the digest) of the session that advances
    the bus after every table's turn, with fewer batches; only the streams' interleaving differs."""
    advancing = play(tmp_path / "advance.db", event_driven=False)
    waiting = play(tmp_path / "wait.db", event_driven=True)
    # every stream but the signed heads, which follow the batches (fewer, fuller ones here)
    assert log_streams(tmp_path / "wait.db", signed_heads=False) == log_streams(
        tmp_path / "advance.db", signed_heads=False
    )
    got, want = replay(read_db(tmp_path / "wait.db")), replay(read_db(tmp_path / "advance.db"))
    assert got.clean
    assert got.digest == want.digest
    assert whole_log(tmp_path / "wait.db") != whole_log(tmp_path / "advance.db")
    assert waiting < advancing * 0.75


def test_the_same_seed_gives_the_same_log_byte_for_byte(tmp_path: Path) -> None:
    """Two event-driven runs of one seed write the same records in the same order."""
    play(tmp_path / "a.db", event_driven=True)
    play(tmp_path / "b.db", event_driven=True, group_records=100)
    assert whole_log(tmp_path / "a.db") == whole_log(tmp_path / "b.db")


class _Stopped(Exception):
    """The session was stopped at a wait."""


class _StopAtWait(EmbeddedBus):
    """Stops the session right after its ``stop_at``-th wait; ``drop``: rolling back what the bus holds
    uncommitted, as a SIGKILL would (the log keeps its last commit), else committing it (a kill just
    after a commit)."""

    def __init__(self, path: Path, stop_at: int, *, drop: bool) -> None:
        super().__init__(path, demo_pipeline(), event_driven=True, group_records=150)
        self.stop_at, self.drop, self.waits, self.dropped = stop_at, drop, 0, False

    def wait(self, topic: str, key: str, match: Callable[[Envelope], bool]) -> Envelope:
        found = super().wait(topic, key, match)
        self.waits += 1
        if self.waits == self.stop_at:
            group, self._group = self._group, None
            if group is not None and self.drop:
                self.dropped = True
                group.__exit__(_Stopped, _Stopped(), None)
            elif group is not None:
                group.__exit__(None, None, None)
            self.log.close()
            raise _Stopped
        return found


@pytest.mark.parametrize("drop", [True, False], ids=["killed", "stopped-after-a-commit"])
def test_a_session_cut_off_at_any_wait_resumes_to_the_uninterrupted_log(tmp_path: Path, drop: bool) -> None:
    """Cut off after any wait, uncommitted records and all, the session run again from scratch on the
    same log ends with the very log of the uninterrupted run, byte for byte."""
    counting = _StopAtWait(tmp_path / "ref.db", stop_at=-1, drop=drop)
    try:
        Session(counting, seed=SEED).run(TABLES, COUPS)
    finally:
        counting.close()
    want = whole_log(tmp_path / "ref.db", signed_heads=False)  # a resumed run signs at its own moments
    dropped = 0
    for stop_at in range(5, counting.waits, counting.waits // 9):
        db = tmp_path / f"cut-{stop_at}.db"
        bus = _StopAtWait(db, stop_at, drop=drop)
        with pytest.raises(_Stopped):
            Session(bus, seed=SEED).run(TABLES, COUPS)
        dropped += bus.dropped
        play(db, event_driven=True)
        assert whole_log(db, signed_heads=False) == want, f"cut off after wait {stop_at}"
        assert_every_chain_head_attested([raw for *_, raw in whole_log(db)])
    assert not drop or dropped >= 6, "the kills dropped nothing uncommitted: the test shows nothing"


class _StopAtStep(EmbeddedBus):
    """The advancing bus (as the demo ran before it waited), stopping the session right after its
    ``stop_at``-th ``advance`` with everything committed."""

    def __init__(self, path: Path, stop_at: int) -> None:
        super().__init__(path, demo_pipeline(), group_records=150)
        self.stop_at, self.steps = stop_at, 0

    def advance(self, envelopes: Sequence[Envelope] = ()) -> None:
        super().advance(envelopes)
        self.steps += 1
        if self.steps == self.stop_at:
            self.close()
            raise _Stopped


def test_a_log_the_advancing_session_left_resumes_event_driven_to_every_stream(tmp_path: Path) -> None:
    """A log cut off while the session advanced the bus (a demo run before it waited: ``--resume``)
    resumes event driven to every stream of an uninterrupted run."""
    play(tmp_path / "ref.db", event_driven=False)
    want = log_streams(tmp_path / "ref.db", signed_heads=False)
    counting = _StopAtStep(tmp_path / "count.db", stop_at=-1)
    try:
        Session(counting, seed=SEED).run(TABLES, COUPS)
    finally:
        counting.close()
    for stop_at in range(3, counting.steps, counting.steps // 5):
        db = tmp_path / f"cut-{stop_at}.db"
        with pytest.raises(_Stopped):
            Session(_StopAtStep(db, stop_at), seed=SEED).run(TABLES, COUPS)
        play(db, event_driven=True)
        assert log_streams(db, signed_heads=False) == want, f"cut off after step {stop_at}"
        assert_every_chain_head_attested([raw for *_, raw in whole_log(db)])


class _Forgetful(dict[tuple[str, str], Envelope]):
    """A :attr:`Session.found` that keeps nothing: every look at an owed bet waits again."""

    def __setitem__(self, key: tuple[str, str], value: Envelope) -> None:
        pass


class _CountingBus(EmbeddedBus):
    waits = 0

    def wait(self, topic: str, key: str, match: Callable[[Envelope], bool]) -> Envelope:
        self.waits += 1
        return super().wait(topic, key, match)


def test_what_an_owed_bet_found_is_kept_and_changes_nothing(tmp_path: Path) -> None:
    """The session keeps the answer and the verdict it found for an owed bet (:attr:`Session.found`)
    instead of waiting for them again: the same log byte for byte as a session that waits every time,
    in fewer waits, and nothing kept once the bets are closed."""
    runs = {}
    for name, found in (("kept", None), ("forgotten", _Forgetful())):
        bus = _CountingBus(tmp_path / f"{name}.db", demo_pipeline(), event_driven=True)
        session = Session(bus, seed=SEED)
        if found is not None:
            session.found = found
        try:
            session.run(TABLES, COUPS)
        finally:
            bus.close()
        runs[name] = bus.waits, session
    assert whole_log(tmp_path / "kept.db") == whole_log(tmp_path / "forgotten.db")
    (kept, session), (forgotten, _) = runs["kept"], runs["forgotten"]
    assert kept < forgotten
    owed = {bet for bets in session.owed.values() for _t, _c, bet in bets}
    assert {bet for _kind, bet in session.found} <= owed
