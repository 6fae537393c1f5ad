"""Group commit on the embedded bus (``EmbeddedBus.advance``): the steps of a session share transactions,
the log is the one a commit per step writes, and a session cut off inside a group (what a SIGKILL there
leaves: the group's steps gone, the log as committed before it) resumes to the uninterrupted log."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from services.core import topics
from services.core.envelope import Envelope, request
from services.core.trust import authenticate
from services.runtime.compose import demo_pipeline
from services.runtime.embedded.bus import EmbeddedBus
from services.runtime.embedded.store import LogConflict
from services.runtime.replay import read_db, replay
from services.simulation.simulator import Session, demo_tables
from tests.helpers.bus_contract import CASHIER, account, deposit
from tests.helpers.streams import log_streams, whole_log

SEED = 21
TABLES = demo_tables(3)
COUPS = 6


def play(db: Path, **options: int) -> int:
    """A seeded session on the log at ``db``; the transactions it committed."""
    bus = EmbeddedBus(db, demo_pipeline(), **options)
    opened = bus.log.commits
    try:
        Session(bus, seed=SEED).run(TABLES, COUPS)
    finally:
        bus.close()
    return bus.log.commits - opened


def test_steps_share_transactions_and_the_log_is_the_one_of_a_commit_per_step(tmp_path: Path) -> None:
    """Hundreds of steps, a handful of commits (the log used to commit every runner round of every
    step), and the very same records in the very same order as with a commit per step."""
    grouped = play(tmp_path / "grouped.db", group_records=1_000)
    each = play(tmp_path / "each.db", group_records=0)
    assert whole_log(tmp_path / "grouped.db") == whole_log(tmp_path / "each.db")
    records = len(whole_log(tmp_path / "grouped.db"))
    assert grouped <= records // 1_000 + 3  # + 1: the snapshots the closing bus leaves, in one commit
    assert each > 10 * grouped


class _Killed(Exception):
    """The session stopped inside a group: its steps were never committed (what a SIGKILL leaves)."""


class _KilledAtStep(EmbeddedBus):
    """Stops the session right after its ``kill_at``-th ``advance`` and drops the held group, as a crash
    would: the log keeps what was committed before it."""

    def __init__(self, path: Path, kill_at: int, group_records: int) -> None:
        super().__init__(path, demo_pipeline(), group_records=group_records)
        self.kill_at, self.steps, self.dropped = kill_at, 0, False

    def advance(self, envelopes: Sequence[Envelope] = ()) -> None:
        super().advance(envelopes)
        self.steps += 1
        if self.steps == self.kill_at:
            group, self._group = self._group, None
            if group is not None:  # rolled back, as by a crash: the log keeps what was committed
                self.dropped = True
                group.__exit__(_Killed, _Killed(), None)
            self.log.close()
            raise _Killed


def test_a_session_killed_inside_a_group_resumes_to_the_uninterrupted_log(tmp_path: Path) -> None:
    """Killed after any step, uncommitted steps and all, the session run again from scratch on the same
    log ends with every stream of the uninterrupted run."""
    play(tmp_path / "ref.db")
    want = log_streams(tmp_path / "ref.db", signed_heads=False)  # a killed run signs at its own moments
    counting = _KilledAtStep(tmp_path / "count.db", kill_at=-1, group_records=0)
    try:
        Session(counting, seed=SEED).run(TABLES, COUPS)
    finally:
        counting.close()
    dropped = 0
    for kill_at in range(7, counting.steps, counting.steps // 8):
        db = tmp_path / f"killed-{kill_at}.db"
        bus = _KilledAtStep(db, kill_at, group_records=150)
        with pytest.raises(_Killed):
            Session(bus, seed=SEED).run(TABLES, COUPS)
        dropped += bus.dropped
        play(db)
        assert log_streams(db, signed_heads=False) == want, f"killed after step {kill_at}"
    assert dropped >= 6, "the kills dropped no uncommitted steps: the test shows nothing"


def conflicting(env: Envelope) -> Envelope:
    """Another record under ``env``'s event id (another amount)."""
    forged = request(
        env.type, env.topic, env.key, {**env.payload, "amount_minor": 1},
        event_id=env.event_id, occurred_at=env.occurred_at, producer=env.producer,
    )  # fmt: skip
    return authenticate(forged, CASHIER)


def test_an_error_inside_a_group_rolls_it_back_and_the_runners_carry_on_from_the_log(tmp_path: Path) -> None:
    """A step that fails (a record conflicting with one in the log) takes its whole group with it: the
    steps before it in the group are gone too, every runner reloads from what was committed, and the
    same steps done again give the log of a run without the failed group."""
    a = account()

    def steps(bus: EmbeddedBus, *, fail: bool) -> None:
        bus.publish([deposit(a, 1)])
        bus.drain()  # committed
        if fail:
            bus.advance([deposit(a, 2)])  # held: applied by the runners, not committed
            with pytest.raises(LogConflict):
                bus.advance([conflicting(deposit(a, 1))])
        bus.advance([deposit(a, 2), deposit(a, 3)])
        bus.drain()

    for name, fail in (("ref.db", False), ("failed.db", True)):
        bus = EmbeddedBus(tmp_path / name, demo_pipeline(), group_records=10**9)
        try:
            steps(bus, fail=fail)
            balances = [e.payload["balance_after_minor"] for e in bus.read(topics.WALLET_EVENTS, a)]
        finally:
            bus.close()
        assert balances == [1_000, 3_000, 6_000], name
    # every record the same, in the same order; the signed heads aside: a runner reloaded after the
    # rollback may name again a dead letter or a hand-off it already named (naming is idempotent)
    failed, ref = tmp_path / "failed.db", tmp_path / "ref.db"
    assert whole_log(failed, signed_heads=False) == whole_log(ref, signed_heads=False)
    one, two = replay(read_db(failed)), replay(read_db(ref))
    assert (one.verdict, one.digest, one.findings) == (two.verdict, two.digest, two.findings)
    assert one.attestation["unattested"] == two.attestation["unattested"]
