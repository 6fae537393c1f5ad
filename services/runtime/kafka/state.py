"""A Kafka worker's state per input partition: a local RocksDB store and a compacted changelog topic
(docs/adr/0001-kafka-state-store.md).

A *scope* is what one snapshot covers: one input partition of a single-input pipe (the dealer,
settlement's two stages: their state is keyed by the partition's tables or accounts), or every input
partition of a multi-input pipe (audit and monitor, which join several topics: :data:`WHOLE`).

A snapshot (:class:`Snapshot`) is data, written by the project's codec
(:mod:`services.runtime.embedded.snapshot`, never pickles): the processor's state, its chain heads, the
next input offset of each partition of the scope, the last ``seq`` applied per chained input stream
(duplicates found by sequence numbers), and, per output partition, an offset from which every output of
a record after the snapshot lies (:attr:`Snapshot.outputs`: what a restore reads back to find outputs
already written, instead of reading whole topics).

Each snapshot is written to the stage's changelog topic (:func:`changelog_topic`, compacted, partition =
the scope's input partition, so the latest snapshot of a scope is the last record of its partition)
and then to the local store with the changelog offset it got: a restart restores from the local store
when that offset is the changelog's latest, else from the changelog (another machine's worker).

The ids of the records applied (:class:`StoredIds`) are kept in the local store, written together with
the snapshot they belong to (never ahead of it); between snapshots they are in memory. So are the
entries a processor keeps forever (its state's :class:`~services.core.kept.Kept` maps, the wallet stage's
transfer ids: :class:`StoredKept`), which a snapshot therefore never carries; they also go to the
changelog, each as a record of its own (:func:`kept_key`) written before the snapshot that covers it, so
that a worker on another machine rebuilds them from the changelog records after its own local snapshot
(docs/adr/0010-kafka-kept-entries.md).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocksdict import Options, Rdict, WriteBatch

from services.core.envelope import ChainHead
from services.core.kept import kept_maps
from services.core.processor import Processor, ProcessorState
from services.runtime.embedded import snapshot

WHOLE = -1
"""The scope of a multi-input pipe: every partition of every input topic in one state."""

FORMAT = "casino-ledger/kafka-state-1"
"""The ``format`` field of every snapshot written here."""

_Heads = list[tuple[str, str, int, str]]
_Offsets = list[tuple[str, int, int]]
_Seqs = list[tuple[str, str, int]]
_FIELDS = frozenset({"format", "processor", "inner", "heads", "records", "offsets", "outputs", "seqs"})


class StateLost(Exception):
    """The log no longer holds what the state says was applied (a broker that lost its log, a topic
    recreated, a log start moved past the state): the worker must not carry on."""


def changelog_topic(stage: str) -> str:
    """The logical name of a stage's changelog topic (the settings' prefix is added like any topic's)."""
    return f"casino.state.{stage}"


def scope_key(stage: str, scope: int) -> bytes:
    """The changelog record key and local store key of one scope."""
    return f"{stage}/{'all' if scope == WHOLE else scope}".encode()


KEPT = b"/k/"
"""What follows a scope's key in the key of one of its kept entries' changelog records."""


def kept_key(stage: str, scope: int, name: str, key: str) -> bytes:
    """The changelog record key (and local store key, after ``k/``) of the entry ``key`` of the kept map
    ``name`` of one scope."""
    return scope_key(stage, scope) + KEPT + name.encode() + b"/" + key.encode()


def kept_entry(stage: str, scope: int, record_key: bytes | None) -> tuple[str, str] | None:
    """The (map name, entry key) a changelog record key of this scope names, ``None`` for any other."""
    prefix = scope_key(stage, scope) + KEPT
    if record_key is None or not record_key.startswith(prefix):
        return None
    name, _, key = record_key[len(prefix) :].decode().partition("/")
    return name, key


def kind_of(processor: Processor[Any]) -> str:
    """What a snapshot of ``processor`` names: its class."""
    return f"{FORMAT}:{snapshot.class_names(processor)[0]}"


def kinds_of(processor: Processor[Any]) -> frozenset[str]:
    """What a snapshot may name to be read back into ``processor``: its class, also under a module it
    was moved from (``Processor.formerly``)."""
    return frozenset(f"{FORMAT}:{name}" for name in snapshot.class_names(processor))


@dataclass(slots=True)
class Snapshot:
    """One scope's state as of its input offsets (see the module docstring)."""

    state: ProcessorState[Any]
    offsets: dict[tuple[str, int], int]
    """Next input offset per (logical topic, partition) of the scope."""
    outputs: dict[tuple[str, int], int]
    """Per output (logical topic, partition): every output of a record at or after :attr:`offsets`
    is at this offset or later."""
    seqs: dict[tuple[str, str], int] = field(default_factory=dict)
    """The last ``seq`` applied per chained input stream (topic, key)."""


def encode(processor: Processor[Any], snap: Snapshot) -> bytes:
    """``snap`` as JSON bytes (:class:`snapshot.SnapshotError` for a state the codec cannot write)."""
    return finish(encode_data(processor, snap), snap.outputs)


def encode_data(processor: Processor[Any], snap: Snapshot) -> dict[str, Any]:
    """``snap`` as JSON-ready data, copied out of the live state, without its output positions (a
    worker encodes the state when a batch is handled and learns the positions when it lands)."""
    st = snap.state
    return {
        "format": FORMAT, "processor": kind_of(processor),
        "inner": snapshot.encode(st.inner, snapshot.state_type(processor)),
        "heads": snapshot.encode([(t, k, h.seq, h.hash) for (t, k), h in st.heads.items()], _Heads),
        "records": st.records,
        "offsets": snapshot.encode([(t, p, o) for (t, p), o in snap.offsets.items()], _Offsets),
        "seqs": snapshot.encode([(t, k, s) for (t, k), s in snap.seqs.items()], _Seqs),
    }  # fmt: skip


def finish(data: dict[str, Any], outputs: Mapping[tuple[str, int], int]) -> bytes:
    """The bytes of a snapshot from :func:`encode_data`'s ``data`` and its output positions."""
    positions = snapshot.encode([(t, p, o) for (t, p), o in outputs.items()], _Offsets)
    return snapshot.to_bytes({**data, "outputs": positions})


def decode(processor: Processor[Any], blob: bytes) -> Snapshot:
    """The snapshot :func:`encode` wrote for this processor's class; :class:`snapshot.SnapshotError`
    for anything else (foreign, corrupt, another class or format)."""
    data = snapshot.loads(blob, dict[str, Any])
    if set(data) != _FIELDS:
        raise snapshot.SnapshotError(f"not a Kafka state snapshot: fields {sorted(data)[:10]}")
    if data["format"] != FORMAT or data["processor"] not in kinds_of(processor):
        raise snapshot.SnapshotError("a snapshot of another format or processor")
    heads = snapshot.decode(data["heads"], _Heads)
    state: ProcessorState[Any] = ProcessorState(
        inner=snapshot.decode(data["inner"], snapshot.state_type(processor)),
        heads={(t, k): ChainHead(seq, h) for t, k, seq, h in heads},
        records=snapshot.decode(data["records"], int),
    )
    return Snapshot(
        state,
        {(t, p): o for t, p, o in snapshot.decode(data["offsets"], _Offsets)},
        {(t, p): o for t, p, o in snapshot.decode(data["outputs"], _Offsets)},
        {(t, k): s for t, k, s in snapshot.decode(data["seqs"], _Seqs)},
    )


_POSITION = struct.Struct(">q")

SLOTS = 16
"""Stores one data directory holds per service (workers of a service sharing it: tests, one host)."""


class LocalStore:
    """The worker's RocksDB store (``rocksdict``, raw bytes): per scope its latest snapshot with the
    changelog offset it was written at (``s/…``), and the ids of the records applied (``a/…``)."""

    def __init__(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.db = Rdict(str(path), Options(raw_mode=True))

    @classmethod
    def open(cls, base: Path, service: str, slots: int = SLOTS) -> LocalStore:
        """The first of ``base/service``, ``base/service.1``, … that no other process holds: workers of
        one service sharing a data directory each get their own store (any one does: a snapshot is used
        only when its changelog offset is the changelog's latest)."""
        error: Exception | None = None
        for slot in range(slots):
            try:
                return cls(base / (service if slot == 0 else f"{service}.{slot}"))
            except Exception as exc:  # rocksdict raises a bare Exception for a held lock
                if "lock" not in str(exc).lower():
                    raise
                error = exc
        raise OSError(f"every state store slot under {base} is held by another worker: {error}")

    def close(self) -> None:
        """Flush and close the store."""
        self.db.close()

    def snapshot(self, stage: str, scope: int) -> tuple[int, bytes] | None:
        """The scope's latest local snapshot: (changelog offset, bytes)."""
        value = self.db.get(b"s/" + scope_key(stage, scope))
        if value is None or len(value) < _POSITION.size:
            return None
        return _POSITION.unpack_from(value)[0], bytes(value[_POSITION.size :])

    def save(
        self,
        stage: str,
        scope: int,
        position: int,
        blob: bytes,
        ids: Iterable[str] = (),
        *,
        kept: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        """Keep ``blob`` as the scope's snapshot, written at changelog offset ``position``, the ids
        applied up to it and the kept entries written since the last one (by map name), in one atomic
        write."""
        batch = WriteBatch(raw_mode=True)
        prefix = b"a/" + scope_key(stage, scope) + b"/"
        for event_id in ids:
            batch.put(prefix + event_id.encode(), b"")
        _put_kept(batch, stage, scope, kept or {})
        batch.put(b"s/" + scope_key(stage, scope), _POSITION.pack(position) + blob)
        self.db.write(batch)

    def save_kept(self, stage: str, scope: int, kept: Mapping[str, Mapping[str, str]]) -> None:
        """Keep kept entries read from the changelog ahead of the snapshot that covers them (a restore or
        a standby reading them in chunks, the snapshot last: :meth:`save`). Safe ahead of it: a local
        snapshot older than the changelog's latest is never restored from (the latest is read again)."""
        batch = WriteBatch(raw_mode=True)
        _put_kept(batch, stage, scope, kept)
        self.db.write(batch)

    def flush(self) -> None:
        """Write the store's memtable out to disk and free it (RocksDB holds recent writes in memory up
        to its write buffer size: after taking many kept entries in at once, that memory would stay)."""
        self.db.flush(True)

    def kept_value(self, stage: str, scope: int, name: str, key: str) -> str | None:
        """The value of entry ``key`` of the scope's kept map ``name`` as of its latest local snapshot."""
        value = self.db.get(b"k/" + kept_key(stage, scope, name, key))
        return None if value is None else bytes(value).decode()

    def forget_kept(self, stage: str, scope: int) -> None:
        """Drop every kept entry of the scope (a scope rebuilt from its partition's beginning)."""
        prefix = b"k/" + scope_key(stage, scope) + KEPT
        self.db.delete_range(prefix, prefix[:-1] + bytes([prefix[-1] + 1]))

    def has_id(self, stage: str, scope: int, event_id: str) -> bool:
        """Whether ``event_id`` was applied in the scope as of its latest local snapshot."""
        return self.db.get(b"a/" + scope_key(stage, scope) + b"/" + event_id.encode()) is not None


def _put_kept(batch: WriteBatch, stage: str, scope: int, kept: Mapping[str, Mapping[str, str]]) -> None:
    """Add the scope's kept entries (by map name) to a store write."""
    for name, entries in kept.items():
        for key, value in entries.items():
            batch.put(b"k/" + kept_key(stage, scope, name, key), value.encode())


class StoredIds:
    """The ids a scope has applied (:class:`~services.core.processor.AppliedIds`): those up to the last
    local snapshot in the store, the rest in memory until the next snapshot takes them (:meth:`take`).
    A duplicate input whose stream is chained is found by its ``seq`` first (:class:`Snapshot`)."""

    def __init__(self, store: LocalStore | None, stage: str, scope: int) -> None:
        self.store, self.stage, self.scope = store, stage, scope
        self.pending: set[str] = set()
        self.taken: list[set[str]] = []

    def __contains__(self, event_id: object, /) -> bool:
        if not isinstance(event_id, str):
            return False
        if event_id in self.pending or any(event_id in t for t in self.taken):
            return True
        return self.store is not None and self.store.has_id(self.stage, self.scope, event_id)

    def add(self, event_id: str, /) -> None:
        self.pending.add(event_id)

    def take(self) -> set[str]:
        """The ids applied since the last :meth:`take`, for the snapshot being made (still answered
        from memory until :meth:`written`)."""
        taken, self.pending = self.pending, set()
        self.taken.append(taken)
        return taken

    def written(self, ids: set[str]) -> None:
        """``ids`` (from :meth:`take`) are in the store now."""
        self.taken = [t for t in self.taken if t is not ids]

    def __len__(self) -> int:
        return len(self.pending) + sum(map(len, self.taken))


class StoredKept:
    """One :class:`~services.core.kept.Kept` map of a scope's state, kept in the local store (the port's
    RocksDB adapter, like :class:`StoredIds`): entries written since the last snapshot in memory, then
    taken by the snapshot being made (:meth:`take`) and answered from memory until it is in the store."""

    def __init__(self, store: LocalStore, stage: str, scope: int, name: str) -> None:
        self.store, self.stage, self.scope, self.name = store, stage, scope, name
        self.pending: dict[str, str] = {}
        self.taken: list[dict[str, str]] = []

    def get(self, key: str, /) -> str | None:
        found = self.pending.get(key)
        for taken in reversed(self.taken):
            if found is not None:
                break
            found = taken.get(key)
        return found if found is not None else self.store.kept_value(self.stage, self.scope, self.name, key)

    def put(self, key: str, value: str, /) -> None:
        self.pending[key] = value

    def put_many(self, entries: Mapping[str, str], /) -> None:
        self.pending.update(entries)

    def take(self) -> dict[str, str]:
        """The entries written since the last :meth:`take`, for the snapshot being made."""
        taken, self.pending = self.pending, {}
        self.taken.append(taken)
        return taken

    def written(self, entries: dict[str, str]) -> None:
        """``entries`` (from :meth:`take`) are in the store now."""
        self.taken = [t for t in self.taken if t is not entries]


def bind_kept(state: ProcessorState[Any], store: LocalStore, stage: str, scope: int) -> list[StoredKept]:
    """Bind every kept map of ``state`` to the local store (the in-memory entries of a snapshot written
    before the store held them move to its pending entries: the next snapshot writes them)."""
    out = []
    for name, kept in kept_maps(state.inner):
        stored = StoredKept(store, stage, scope, name)
        kept.bind(stored)
        out.append(stored)
    return out


def min_positions(snaps: Mapping[Any, Snapshot]) -> dict[tuple[str, int], int]:
    """Per output partition, the smallest position any of ``snaps`` names."""
    out: dict[tuple[str, int], int] = {}
    for snap in snaps.values():
        for tp, offset in snap.outputs.items():
            out[tp] = min(out.get(tp, offset), offset)
    return out
