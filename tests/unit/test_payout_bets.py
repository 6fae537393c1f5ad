"""The payout stage keeps a coup's accepted bets in runs (:data:`~services.settlement.payout_stage.Bets`):
adding one leaves the value before it as it was, reading gives every bet in acceptance order, a
snapshot round trips, and a coup of more bets than a run is paid bet for bet in that order."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.core.baccarat import get_variant
from services.core.ledger import Wager
from services.runtime.embedded import snapshot
from services.settlement.payout_stage import (
    BET_RUN,
    Bets,
    PayoutStage,
    PayoutState,
    PayoutTable,
    bets_of,
    with_bet,
)
from services.simulation.simulator import CURRENCY, Session, TablePlay, TableSpec
from tests.helpers.membus import MemBus


def _wager(n: int) -> Wager:
    return Wager(f"b{n}", f"a{n % 7}", ("player", "banker", "tie")[n % 3], 100 * (1 + n % 4))


@settings(max_examples=30, deadline=None)
@given(n=st.integers(0, 3 * BET_RUN + 5))
def test_adding_bets_one_by_one_keeps_every_earlier_value_and_their_order(n: int) -> None:
    """Each value of the chain reads as the bets added so far, in order, after every later addition;
    every run but the last is full."""
    values: list[Bets] = [()]
    for i in range(n):
        values.append(with_bet(values[-1], _wager(i)))
    for i, bets in enumerate(values):
        assert bets_of(bets) == tuple(_wager(j) for j in range(i))
        assert all(len(run) == BET_RUN for run in bets[:-1])
        assert all(0 < len(run) <= BET_RUN for run in bets)


def test_a_table_with_more_bets_than_a_run_round_trips_a_snapshot() -> None:
    """A payout state holding a coup of three runs and a bit encodes and decodes to an equal state."""
    bets: Bets = ()
    for i in range(2 * BET_RUN + 3):
        bets = with_bet(bets, _wager(i))
    table = PayoutTable(get_variant("punto_banco").config(), "EUR", {"T1/S1/1": bets})
    state = PayoutState({"T1": table})
    assert snapshot.loads(snapshot.dumps(state, PayoutState), PayoutState) == state


def test_a_snapshot_of_a_coup_s_bets_as_one_flat_array_is_refused() -> None:
    """A snapshot written before the runs (a coup's bets one flat array of bets) does not decode: the
    codec raises :class:`~services.runtime.embedded.snapshot.SnapshotError`, on which the embedded runner
    rebuilds the state from the log (a snapshot with no coup open still decodes)."""
    table = PayoutTable(get_variant("punto_banco").config(), "EUR", {})
    data = snapshot.encode(PayoutState({"T1": table}), PayoutState)
    assert snapshot.decode(data, PayoutState) == PayoutState({"T1": table})
    data["tables"]["T1"]["wagers"] = {"T1/S1/1": [snapshot.encode(_wager(0), Wager)]}
    with pytest.raises(snapshot.SnapshotError):
        snapshot.decode(data, PayoutState)


TABLE = TableSpec("T-many", "punto_banco", min_minor=100, max_minor=100_000)


def test_a_coup_of_many_runs_of_bets_is_paid_bet_for_bet_in_acceptance_order() -> None:
    """Through the whole pipeline, a coup of 2.5 runs of bets: one ``PayoutIssued`` per accepted bet, in
    the order the dealer accepted them, each credited; the coup's bets are then forgotten."""
    bus = MemBus()
    players = 2 * BET_RUN + BET_RUN // 2
    session = Session(bus, seed=11, players=players, deposit_minor=1_000_000)
    for account in session.accounts():
        session.wallet("Deposit", account, {"amount_minor": session.deposit_minor, "currency": CURRENCY})
    play = TablePlay(session, TABLE)
    play.open()
    session.command("OpenBetting", TABLE.table_id, {})
    session.drain()
    play.coup_id = session.finish(play._opened_coup())
    for n, account in enumerate(session.accounts()):
        session.wallet("PlaceBet", account, {
            "bet_id": f"bet-{n}", "table_id": TABLE.table_id, "coup_id": play.coup_id,
            "spot": ("player", "banker", "tie")[n % 3], "stake_minor": 100 * (1 + n % 5),
            "currency": CURRENCY,
        })  # fmt: skip
    session.drain()
    session.command("CloseBetting", TABLE.table_id, {})
    session.command("DealCoup", TABLE.table_id, {})
    session.drain()
    session.finish(play._play_out())
    accepted = [e.payload["bet_id"] for e in bus.of_type("BetAccepted")]
    assert len(accepted) == players
    assert [e.payload["bet_id"] for e in bus.of_type("PayoutIssued")] == accepted
    assert sorted(e.payload["bet_id"] for e in bus.of_type("PayoutApplied")) == sorted(accepted)
    assert not bus.of_type("DeadLetter")
    (payout_state,) = [s for p, s in bus.procs if isinstance(p, PayoutStage)]
    assert all(not t.wagers for t in payout_state.inner.tables.values())
