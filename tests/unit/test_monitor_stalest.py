"""The monitor forgets the stalest account of a full table (:meth:`TableWatch.with_punter`) through a
heap cache (:class:`services.monitor.processor.Stalest`): the same accounts as the scan it replaced,
whatever the order of states it is given (older ones, diverging ones, restored ones, several tables)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.monitor import processor as monitor
from services.monitor.processor import Punter, TableWatch

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
        mp.setattr(monitor, "MAX_ACCOUNTS_PER_TABLE", CAP)
        mp.setattr(monitor, "STALEST", monitor.Stalest())
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
        mp.setattr(monitor, "MAX_ACCOUNTS_PER_TABLE", 2)
        mp.setattr(monitor, "STALEST", monitor.Stalest())
        t = TableWatch("T1", coups=5)
        for account in ("b", "a"):
            t = t.with_punter(account, t.punter(account))
        restored = replace(t, punters={"a": Punter(seen=9), "b": Punter(seen=1)}, coups=9)
        assert list(restored.with_punter("c", Punter()).punters) == ["a", "c"]
        assert list(t.with_punter("c", Punter()).punters) == [
            "b",
            "c",
        ]  # all seen in coup 5: "a", the lowest id, goes
