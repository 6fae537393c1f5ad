"""The Kept port (services/core/kept.py): the same answers in memory and through a store, and audit's
settled window the same wherever its entries live (docs/adr/0002-embedded-bounded-state.md)."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.audit import processor as audit
from services.core.kept import Kept
from services.runtime.embedded import snapshot


class DictStore:
    """A fake KeptStore (a unit test of the core's port): a dict, counting the writes."""

    def __init__(self) -> None:
        self.rows: dict[str, str] = {}
        self.writes = 0

    def get(self, key: str, /) -> str | None:
        return self.rows.get(key)

    def put(self, key: str, value: str, /) -> None:
        self.rows[key] = value
        self.writes += 1

    def put_many(self, entries: Mapping[str, str], /) -> None:
        for key, value in entries.items():
            self.put(key, value)


@given(st.lists(st.tuples(st.sampled_from("abcdef"), st.text(max_size=3)), max_size=30), st.integers(0, 30))
def test_a_bound_map_answers_what_the_memory_one_answers(puts: list[tuple[str, str]], bind_at: int) -> None:
    """Whatever the puts and whenever the store is bound, every lookup agrees with a map kept in memory."""
    memory, bound, store = Kept(), Kept(), DictStore()
    for i, (key, value) in enumerate(puts):
        if i == bind_at:
            bound.bind(store)
        memory[key] = value
        bound[key] = value
        for probe in "abcdefg":
            assert bound.get(probe) == memory.get(probe)
            assert (probe in bound) == (probe in memory)


def test_binding_moves_the_entries_into_the_store_and_out_of_the_snapshot() -> None:
    """The in-memory entries go to the store once; the map then encodes as an empty object, and it is
    looked up, never enumerated."""
    kept = Kept({"t/1": "fp1", "t/2": "fp2"})
    assert snapshot.encode(kept, Kept) == {"t/1": "fp1", "t/2": "fp2"}
    store = DictStore()
    assert kept.bind(store) == 2
    assert store.rows == {"t/1": "fp1", "t/2": "fp2"} and kept.entries == {}
    assert snapshot.encode(kept, Kept) == {}
    assert kept.get("t/2") == "fp2" and kept.bound
    with pytest.raises(TypeError):
        list(kept)
    with pytest.raises(TypeError):
        len(kept)


def test_an_older_snapshots_map_decodes_as_the_in_memory_entries() -> None:
    """A ``dict[str, str]`` as snapshots wrote it before Kept decodes into Kept's entries; anything
    else is refused."""
    assert snapshot.decode({"a": "1"}, Kept) == Kept({"a": "1"})
    with pytest.raises(snapshot.SnapshotError):
        snapshot.decode({"a": 1}, Kept)
    with pytest.raises(snapshot.SnapshotError):
        snapshot.decode([["a", "1"]], Kept)


@given(st.lists(st.sampled_from([f"bet-{i}" for i in range(12)]), max_size=60))
def test_audits_settled_window_is_the_same_in_memory_and_in_a_store(settles: list[str]) -> None:
    """Bets settled in any order, some twice: with a window of 5, the payout a lookup finds is the same
    whether ``settled`` is in memory or in a store, memory never holds more than the window, and a bet
    is found exactly when its last settlement is among the last 5."""
    window = 5
    memory, stored = audit.AuditState(), audit.AuditState()
    stored.settled.bind(DictStore())
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(audit, "SETTLED_WINDOW", window)
        for n, bet_id in enumerate(settles):
            for state in (memory, stored):
                audit._settle(state, bet_id, f"payout-{n}")
            assert len(memory.settled.entries) <= window and not stored.settled_order
            recent = settles[max(0, n + 1 - window) : n + 1]
            for probe in {*settles, "bet-x"}:
                found = audit._settled_by(memory, probe)
                assert found == audit._settled_by(stored, probe)
                assert (found is not None) == (probe in recent)
