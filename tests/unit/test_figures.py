"""The figures' one definition (services/core/figures.py), on records built here: any order of the same
records gives the same figures; the house's win is all staked less all credited back, covers
included; the player-banker's share is his payouts less his stakes and covers; a cover is no bet."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from services.core import figures, topics

TABLE = "T1"
SPOTS = ("banker", "player", "tie", "ponte", "bank", "bank_cover")


def bet(spot: str, stake: int) -> tuple[str, str, dict[str, Any]]:
    return topics.TABLE_EVENTS, "BetAccepted", {"table_id": TABLE, "spot": spot, "stake_minor": stake}


def payout(spot: str, stake: int, credit: int, commission: int) -> tuple[str, str, dict[str, Any]]:
    postings = [{"account": f"table:{TABLE}:escrow", "amount_minor": -stake},
                {"account": "player:1", "amount_minor": credit},
                {"account": f"table:{TABLE}:commission", "amount_minor": commission},
                {"account": f"table:{TABLE}:house", "amount_minor": stake - credit - commission}]  # fmt: skip
    return topics.WALLET_REQUESTS, "PayoutIssued", {
        "table_id": TABLE, "spot": spot, "stake_minor": stake, "credit_minor": credit,
        "commission_minor": commission, "postings": postings,
    }  # fmt: skip


settled = st.lists(
    st.tuples(
        st.sampled_from(SPOTS), st.integers(1, 10**9), st.integers(0, 3 * 10**9), st.integers(0, 10**7)
    ),
    max_size=30,
)


@given(settled, st.randoms(use_true_random=False))
def test_the_figures_of_settled_bets(bets: list[tuple[str, int, int, int]], rng: Any) -> None:
    """Whatever the bets and in whatever order their records come: bets and handle leave covers out,
    win = all staked − all credited, the bank's share = its payouts − its stakes, commission = what
    was posted to the commission account, and win + bank + punters = 0."""
    records = [r for s, stake, credit, fee in bets for r in (bet(s, stake), payout(s, stake, credit, fee))]
    got = figures.fold(records).get(TABLE, figures.NOTHING)
    rng.shuffle(records)
    assert figures.fold(records).get(TABLE, figures.NOTHING) == got
    wagers = [b for b in bets if b[0] != "bank_cover"]
    assert (got.bets, got.handle_minor) == (len(wagers), sum(b[1] for b in wagers))
    assert got.win_minor == sum(b[1] for b in bets) - sum(b[2] for b in bets)
    assert got.bank_minor == sum(b[2] - b[1] for b in bets if b[0] in ("bank", "bank_cover"))
    assert got.commission_minor == sum(b[3] for b in bets)
    assert got.punters_minor == sum(b[2] - b[1] for b in bets if b[0] not in ("bank", "bank_cover"))
    assert got.win_minor + got.bank_minor + got.punters_minor == 0


def test_a_payout_counts_once_on_the_wallet_requests() -> None:
    """A ``PayoutIssued`` seen elsewhere than where settlement writes it moves nothing; a refused cover
    is no refused bet; a resolved coup is one coup."""
    _, kind, p = payout("banker", 100, 195, 5)
    assert figures.of_record(topics.WALLET_EVENTS, kind, p) is None
    assert (
        figures.of_record(topics.TABLE_EVENTS, "BetRefused", {"table_id": TABLE, "spot": "bank_cover"})
        is None
    )
    assert figures.of_record(
        topics.TABLE_EVENTS, "BetRefused", {"table_id": TABLE, "spot": "tie"}
    ) == figures.Figures(refused=1)
    assert figures.of_record(topics.TABLE_EVENTS, "CoupResolved", {"table_id": TABLE}) == figures.Figures(
        coups=1
    )


def test_hold() -> None:
    """Hold is win over handle: basis points floored, percent rounded to 4 places; none without handle."""
    f = figures.Figures(handle_minor=3, paid_minor=2)
    assert (f.win_minor, f.hold_bps, f.hold_pct) == (1, 3333, 33.3333)
    assert (figures.NOTHING.hold_bps, figures.NOTHING.hold_pct) == (0, 0.0)
