"""``group_edge``'s co-betting links (issue #29): an account that keeps betting the group's side joins
the group, an opposite bet breaks the link, and the group's test stays one observation per coup."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from services.core.baccarat.coup import Coup
from services.core.ledger import Wager
from services.core.values import replace
from services.monitor.alerts import Seen
from services.monitor.sequential_detectors import COBET_LINK, SUSPECT_MICRO, group_edge
from services.monitor.state import Punter, TableWatch


def coup(n: int, bets: list[tuple[str, str]]) -> Coup:
    wagers = tuple(Wager(f"b{n}-{a}", a, spot, 100) for a, spot in bets)
    return Coup(f"c{n}", n, "resolved", "2026-01-01T00:00:00.000Z", wagers)


def seen(n: int) -> Seen:
    return Seen(f"e{n}", "T", "2026-01-01T00:00:00.000Z", f"c{n}")


SUSPECT = Punter(edge=(SUSPECT_MICRO,))


def test_a_co_bettor_joins_the_group_and_an_opposite_bet_breaks_the_link() -> None:
    """After ``COBET_LINK`` coups on the suspect's side, an account is in the group without the suspect
    at the table; one bet on the other side and it is out."""
    t = TableWatch("T", punters={"s": SUSPECT})
    for n in range(COBET_LINK):
        t, _ = group_edge(t, coup(n, [("s", "banker"), ("m", "banker"), ("x", "player")]), "player", seen(n))
    assert t.cobet["m"] == COBET_LINK and "x" not in t.cobet
    alone, _ = group_edge(t, coup(9, [("m", "banker")]), "banker", seen(9))
    assert max(alone.group) > max(t.group) == 0  # observed (a win) with no suspect at the table
    broken, _ = group_edge(alone, coup(10, [("s", "banker"), ("m", "player")]), "banker", seen(10))
    assert "m" not in broken.cobet
    after, _ = group_edge(broken, coup(11, [("m", "banker")]), "banker", seen(11))
    assert after.group == broken.group  # no longer in the group: no observation


@settings(max_examples=60, deadline=None)
@given(
    coups=st.lists(
        st.tuples(st.lists(st.tuples(st.sampled_from("smnpq"), st.sampled_from(("banker", "player"))),
                           max_size=6), st.sampled_from(("banker", "player"))),
        max_size=30,
    )
)  # fmt: skip
def test_the_links_are_bounded_and_never_decided_by_the_outcome(
    coups: list[tuple[list[tuple[str, str]], str]],
) -> None:
    """The links after a coup do not depend on who won it (they are fixed by the bets), and each coup
    moves the group's CUSUMs by at most one observation."""
    t = TableWatch("T", punters={"s": SUSPECT})
    for n, (bets, winner) in enumerate(coups):
        c = coup(n, bets)
        a, _ = group_edge(t, c, "banker", seen(n))
        b, _ = group_edge(t, c, "player", seen(n))
        assert a.cobet == b.cobet
        t, _ = group_edge(t, c, winner, seen(n))
        t = replace(t, punters={"s": SUSPECT})
        assert all(v >= 1 for v in t.cobet.values())
