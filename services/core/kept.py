"""Ids a processor keeps forever, behind a port (docs/adr/0002-embedded-bounded-state.md).

Some facts must be remembered for the ledger's whole life: the wallet stage answers a transfer id it has
applied with "already done" (same content) or a conflict (other content) however long ago it was used.
Held in the processor's state, such a map grows with everything ever applied, and every snapshot
carries it: a start then costs the whole history. :class:`Kept` is that map, and where it lives is the
shell's choice:

* **in memory** (the default: unit tests, the replay, a runtime without a store): the entries are in
  :attr:`Kept.entries`, and a snapshot of the state carries them like any other field;
* **in a store** (the embedded runtime binds an SQLite table, a Kafka worker may bind its local store):
  :meth:`Kept.bind` hands the entries to a :class:`KeptStore`, and from then on every lookup and every
  write goes through it; :attr:`Kept.entries` stays empty, so a snapshot carries none.

The core stays pure: it calls :meth:`Kept.get` and sets entries, never knowing which. Determinism holds
as long as the store answers what was written to it, which the shell guarantees by writing the store in
the same transaction as the state's offset (and forgetting, on a restart from a snapshot, what was
written after it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any, Protocol


class KeptStore(Protocol):
    """A shell's store of kept entries (one map: one processor's one field)."""

    def get(self, key: str, /) -> str | None:
        """The value kept under ``key``, or ``None``."""

    def put(self, key: str, value: str, /) -> None:
        """Keep ``value`` under ``key`` (replacing any)."""

    def put_many(self, entries: Mapping[str, str], /) -> None:
        """:meth:`put` of every entry (moving a snapshot's in-memory entries into the store)."""


class Kept:
    """A ``str -> str`` map kept forever: in :attr:`entries` until a shell binds a store (see the module).

    A snapshot writes it as the JSON object of its in-memory entries (what a ``dict[str, str]`` field
    was before: an older snapshot's map reads back as the in-memory entries, which :meth:`bind` then
    moves into the store). Equality compares the in-memory entries and whether a store is bound."""

    __slots__ = ("_store", "entries")

    def __init__(self, entries: Mapping[str, str] | None = None) -> None:
        self.entries: dict[str, str] = dict(entries or {})
        self._store: KeptStore | None = None

    def bind(self, store: KeptStore) -> int:
        """Keep every entry in ``store`` from now on: the in-memory ones are moved there (how many is
        returned: a snapshot written before the store existed holds them)."""
        moved = len(self.entries)
        if moved:
            store.put_many(self.entries)
            self.entries = {}
        self._store = store
        return moved

    @property
    def bound(self) -> bool:
        """Whether a store holds the entries."""
        return self._store is not None

    def get(self, key: str, /) -> str | None:
        """The value kept under ``key``, or ``None``."""
        store = self._store
        return self.entries.get(key) if store is None else store.get(key)

    def __setitem__(self, key: str, value: str, /) -> None:
        store = self._store
        if store is None:
            self.entries[key] = value
        else:
            store.put(key, value)

    def __contains__(self, key: object, /) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    def __iter__(self) -> Iterator[str]:
        """The keys, in memory only (a store is not enumerated: it holds the whole history)."""
        if self._store is not None:
            raise TypeError("the entries are kept in a store: they are looked up, never enumerated")
        return iter(self.entries)

    def __len__(self) -> int:
        """How many entries, in memory only (see :meth:`__iter__`)."""
        if self._store is not None:
            raise TypeError("the entries are kept in a store: they are looked up, never counted")
        return len(self.entries)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Kept):
            return NotImplemented
        return self.entries == other.entries and self.bound == other.bound

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        where = "a store" if self.bound else f"{len(self.entries)} in memory"
        return f"Kept({where})"


def kept_maps(inner: Any) -> list[tuple[str, Kept]]:
    """The :class:`Kept` fields of a processor's inner state (a dataclass; none otherwise), by field name:
    what a shell binds to its store."""
    if not dataclasses.is_dataclass(inner):
        return []
    found = ((f.name, getattr(inner, f.name)) for f in dataclasses.fields(inner))
    return [(name, value) for name, value in found if isinstance(value, Kept)]
