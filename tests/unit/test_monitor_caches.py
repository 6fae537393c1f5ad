"""The monitor's caches beside its state answer what the scans they replaced answer, whatever the order
of states they are given (older ones, diverging ones, restored ones, several tables or coups): the
stalest account of a full table (:class:`services.monitor.state.Stalest`, in
:meth:`TableWatch.with_punter`) and an account's bets in a coup (:class:`services.monitor.detectors.CoupBets`,
in :func:`services.monitor.detectors.hedged_bets`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.core.baccarat.coup import Coup
from services.core.ledger import Wager
from services.monitor import detectors, state
from services.monitor.alerts import Seen
from services.monitor.state import Punter, TableWatch

CAP = 4


def _scanned(t: TableWatch, account_id: str, punter: Punter) -> Mapping[str, Punter]:
    """What ``with_punter`` kept before the cache: the least ``(seen, id)`` found by a scan."""
    punters = dict(t.punters)
    punters[account_id] = replace(punter, seen=t.coups)
    if len(punters) > CAP:
        stalest = min(punters, key=lambda a: (punters[a].seen, a))
        del punters[stalest]
    return punters


# each step: (which earlier state to start from: 0 the latest, k the k-th before; table; account; next coup?)
STEPS = st.lists(
    st.tuples(
        st.sampled_from([0, 0, 0, 0, 1, 3]),
        st.sampled_from(["T1", "T2"]),
        st.sampled_from([f"a{n}" for n in range(9)]),
        st.booleans(),
    ),
    max_size=120,
)


@settings(max_examples=300)
@given(STEPS)
def test_the_cache_forgets_the_accounts_the_scan_forgets(steps: list[tuple[int, str, str, bool]]) -> None:
    """Over random histories, branching from older states now and then, every table's punters are the
    ones the scan keeps (same accounts, same values, same order)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(state, "MAX_ACCOUNTS_PER_TABLE", CAP)
        mp.setattr(state, "STALEST", state.Stalest())
        history: dict[str, list[TableWatch]] = {"T1": [TableWatch("T1")], "T2": [TableWatch("T2")]}
        for back, table, account, next_coup in steps:
            states = history[table]
            t = states[max(0, len(states) - 1 - back)]
            if next_coup:
                t = replace(t, coups=t.coups + 1)
            got = t.with_punter(account, t.punter(account))
            want = _scanned(t, account, t.punter(account))
            assert list(got.punters.items()) == list(want.items())
            states.append(got)


def test_a_table_restored_from_elsewhere_is_scanned_afresh() -> None:
    """Punters the cache never saw (a snapshot restored: equal, not the same object) are answered from
    their own accounts, not from a heap kept for another mapping."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(state, "MAX_ACCOUNTS_PER_TABLE", 2)
        mp.setattr(state, "STALEST", state.Stalest())
        t = TableWatch("T1", coups=5)
        for account in ("b", "a"):
            t = t.with_punter(account, t.punter(account))
        restored = replace(t, punters={"a": Punter(seen=9), "b": Punter(seen=1)}, coups=9)
        assert list(restored.with_punter("c", Punter()).punters) == ["a", "c"]
        assert list(t.with_punter("c", Punter()).punters) == [
            "b",
            "c",
        ]  # all seen in coup 5: "a", the lowest id, goes


# each step: (which earlier coup to extend: 0 the latest, k the k-th before; coup id; account; spot)
BETS = st.lists(
    st.tuples(
        st.sampled_from([0, 0, 0, 0, 1, 2]),
        st.sampled_from(["c1", "c2"]),
        st.sampled_from(["a", "b", "c", "d"]),
        st.sampled_from(["player", "banker", "tie"]),
    ),
    max_size=80,
)


@settings(max_examples=300)
@given(BETS, st.booleans())
def test_an_accounts_bets_in_a_coup_are_those_a_scan_finds(
    steps: list[tuple[int, str, str, str]], copy: bool
) -> None:
    """Over random coups, extended from older states now and then (and, with ``copy``, given as equal
    tuples of other objects, as a restored snapshot gives them), :meth:`CoupBets.of` is the scan."""
    bets = detectors.CoupBets()
    coups: dict[str, list[Coup]] = {
        "c1": [Coup("c1", 1, "betting", "")],
        "c2": [Coup("c2", 2, "betting", "")],
    }
    for n, (back, coup_id, account, spot) in enumerate(steps):
        states = coups[coup_id]
        coup = states[max(0, len(states) - 1 - back)]
        if copy and n % 5 == 4:
            coup = replace(coup, wagers=tuple(replace(w) for w in coup.wagers))
        for who in ("a", "b", "c", "d"):
            assert bets.of(coup, who) == [w for w in coup.wagers if w.account_id == who]
        states.append(coup.accept(Wager(f"bet{n}", account, spot, 100)))


def test_hedged_bets_finds_the_earlier_bet_on_the_other_side() -> None:
    """The detector through the cache: a banker bet after the same account's player bet is a hedge."""
    rec = Seen("e", "T1", "2026-01-01T00:00:00.000Z", "c1", None)
    coup = Coup("c1", 1, "betting", "").accept(Wager("b1", "a", "player", 100))
    coup = coup.accept(Wager("b2", "z", "banker", 100))
    hedged, out = detectors.hedged_bets(coup, frozenset(), Wager("b3", "a", "banker", 100), rec)
    assert hedged == {"a"} and [a.found.subject["bet_ids"] for a in out] == [["b1", "b3"]]
    assert detectors.hedged_bets(coup, frozenset(), Wager("b4", "z", "player", 100), rec)[0] == {"z"}
    assert detectors.hedged_bets(coup, frozenset(), Wager("b5", "y", "banker", 100), rec) == (frozenset(), [])
