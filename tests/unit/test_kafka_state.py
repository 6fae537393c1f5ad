"""The Kafka worker's state store (issue #31): snapshots as data, the local RocksDB store, applied ids
never ahead of their snapshot, scopes per input partition, duplicates found by sequence numbers."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.core import topics
from services.core.envelope import Draft, Envelope
from services.core.processor import Processor, initial_state, step
from services.runtime.embedded.snapshot import SnapshotError
from services.runtime.kafka import state as state_store
from services.runtime.kafka.worker import Pipe
from services.runtime.settings import Settings
from tests.kafka.toy import Toy, add


class Counted(Processor[dict[str, int]]):
    """Counts the records of each key of a chained stream (the toy's outputs)."""

    name: ClassVar[str] = "counted"
    inputs: ClassVar[tuple[str, ...]] = (topics.WALLET_EVENTS,)
    outputs: ClassVar[tuple[str, ...]] = (topics.DEADLETTER,)

    def initial(self) -> dict[str, int]:
        """Nothing counted."""
        return {}

    def handle(self, state: dict[str, int], record: Envelope) -> tuple[dict[str, int], list[Draft]]:
        """One more record of the key."""
        return {**state, record.key: state.get(record.key, 0) + 1}, []


def chained(n: int, key: str = "acct-1") -> list[Envelope]:
    """``n`` records of one chained stream (seq 0, 1, …): the toy's outputs for ``n`` deposits."""
    toy, state = Toy(), initial_state(Toy())
    out: list[Envelope] = []
    for i in range(n):
        out += [e for e in step(toy, state, add(key, i, 20)) if e.type == "Added"]
    return out


def test_a_snapshot_reads_back_as_the_state_offsets_positions_and_seqs() -> None:
    """Encoded then decoded: the same inner state, heads, record count, offsets, output positions and
    seqs; the bytes are JSON, not a pickle."""
    toy, st_ = Toy(), initial_state(Toy())
    for i in range(5):
        step(toy, st_, add(f"acct-{i % 2}", i, 7))
    snap = state_store.Snapshot(
        st_,
        {(topics.WALLET_REQUESTS, 3): 5},
        {(topics.WALLET_EVENTS, 0): 12},
        {(topics.TABLE_EVENTS, "T1"): 4},
    )
    blob = state_store.encode(toy, snap)
    assert blob.startswith(b"{")
    back = state_store.decode(toy, blob)
    assert back.state.inner == st_.inner and back.state.heads == st_.heads
    assert back.state.records == 5
    assert (back.offsets, back.outputs, back.seqs) == (snap.offsets, snap.outputs, snap.seqs)


def test_a_snapshot_of_another_processor_or_not_a_snapshot_is_refused() -> None:
    """Another processor's snapshot, a foreign JSON document and garbage: SnapshotError, never a state."""
    blob = state_store.encode(Toy(), state_store.Snapshot(initial_state(Toy()), {}, {}))
    with pytest.raises(SnapshotError):
        state_store.decode(Counted(), blob)
    for foreign in (b'{"inner": {}}', b"\x80\x04pickle", b"[]"):
        with pytest.raises(SnapshotError):
            state_store.decode(Toy(), foreign)


def test_the_local_store_keeps_a_snapshot_with_its_changelog_offset_and_its_ids(tmp_path: Path) -> None:
    """Saved once with its ids: the snapshot and offset read back, the ids are there, another scope's
    are not; reopened, the same."""
    store = state_store.LocalStore(tmp_path / "s")
    assert store.snapshot("dealer", 2) is None
    store.save("dealer", 2, 41, b"{}", {"id-1", "id-2"})
    assert store.snapshot("dealer", 2) == (41, b"{}")
    assert store.has_id("dealer", 2, "id-1") and not store.has_id("dealer", 3, "id-1")
    store.close()
    again = state_store.LocalStore(tmp_path / "s")
    assert again.snapshot("dealer", 2) == (41, b"{}") and again.has_id("dealer", 2, "id-2")
    again.close()


def test_two_workers_sharing_a_data_directory_get_their_own_stores(tmp_path: Path) -> None:
    """The second worker of a service on one data directory opens the next free slot."""
    first = state_store.LocalStore.open(tmp_path, "settlement")
    second = state_store.LocalStore.open(tmp_path, "settlement")
    assert (first.path.name, second.path.name) == ("settlement", "settlement.1")
    first.close()
    second.close()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from(["add", "take", "write"]), max_size=30))
def test_applied_ids_reach_the_store_only_with_their_snapshot(
    tmp_path_factory: pytest.TempPathFactory, ops: list[str]
) -> None:
    """However adds, snapshots taken and snapshots written interleave: every id added answers ``in``;
    the store holds exactly the ids of the snapshots written (never one applied after them)."""
    store = state_store.LocalStore(tmp_path_factory.mktemp("ids") / "s")
    ids = state_store.StoredIds(store, "toy", 0)
    added: list[str] = []
    taken: list[set[str]] = []
    written: set[str] = set()
    for n, op in enumerate(ops):
        if op == "add":
            ids.add(f"e{n}")
            added.append(f"e{n}")
        elif op == "take":
            taken.append(ids.take())
        elif taken:
            batch = taken.pop(0)
            store.save("toy", 0, n, b"{}", batch)
            ids.written(batch)
            written |= batch
    assert all(i in ids for i in added)
    assert {i for i in added if store.has_id("toy", 0, i)} == written
    store.close()


def test_a_pipe_keeps_one_state_per_input_partition() -> None:
    """Records of two partitions of a single-input processor fold into two states; a multi-input
    processor's records into one."""
    pipe = Pipe(Toy(), Settings())
    pipe.apply(topics.WALLET_REQUESTS, 0, 0, add("acct-1", 0, 3).to_json())
    pipe.apply(topics.WALLET_REQUESTS, 1, 0, add("acct-2", 1, 4).to_json())
    assert {s: dict(st_.inner) for s, st_ in pipe.states.items()} == {0: {"acct-1": 3}, 1: {"acct-2": 4}}
    assert pipe.scope(5) == 5
    audit_like = Pipe(Counted(), Settings())
    audit_like.whole = True
    assert audit_like.scope(5) == state_store.WHOLE


def test_a_chained_record_at_or_below_the_last_seq_is_a_duplicate_even_on_a_fresh_worker() -> None:
    """The seqs travel in the snapshot: a worker that restored one (without the applied ids of the
    worker that wrote it) still skips a chained record it has applied, at another offset, and applies
    the next one."""
    records = chained(3)
    first = Pipe(Counted(), Settings())
    for offset, env in enumerate(records[:2]):
        first.apply(topics.WALLET_EVENTS, 0, offset, env.to_json())
    snap = state_store.Snapshot(first.states[0], first.offsets_of(0), {}, first.seqs[0])
    restored = state_store.decode(Counted(), state_store.encode(Counted(), snap))
    second = Pipe(Counted(), Settings())
    second.install(0, restored)
    assert second.states[0].applied == set()
    second.apply(topics.WALLET_EVENTS, 0, 7, records[1].to_json())  # written again further on
    assert dict(second.states[0].inner) == {"acct-1": 2}
    second.apply(topics.WALLET_EVENTS, 0, 8, records[2].to_json())
    assert dict(second.states[0].inner) == {"acct-1": 3}


def test_one_store_used_with_two_topic_prefixes_keeps_them_apart(tmp_path: Path) -> None:
    """Two pipelines (topic prefixes) on one data directory: one's snapshot and ids are not the other's."""
    store = state_store.LocalStore(tmp_path / "s")
    first = Pipe(Toy(), Settings(topic_prefix="a."), store=store)
    second = Pipe(Toy(), Settings(topic_prefix="b."), store=store)
    first.apply(topics.WALLET_REQUESTS, 0, 0, add("acct-1", 0, 3).to_json())
    ids = first.states[0].applied
    assert isinstance(ids, state_store.StoredIds)
    store.save(first.stored_as, 0, 0, b"{}", ids.take())
    assert store.snapshot(first.stored_as, 0) is not None and store.snapshot(second.stored_as, 0) is None
    assert "req-acct-1-0" in first.state_of(0).applied
    assert "req-acct-1-0" not in second.state_of(0).applied
    store.close()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["put", "take", "write"]), st.sampled_from("abc")), max_size=30))
def test_kept_entries_reach_the_store_only_with_their_snapshot(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, str]]
) -> None:
    """However puts, snapshots taken and snapshots written interleave: a kept map answers the last value
    put under each key; the store holds, per key, the last value of the snapshots written."""
    store = state_store.LocalStore(tmp_path_factory.mktemp("kept") / "s")
    kept = state_store.StoredKept(store, "wallet", 0, "transfers")
    last: dict[str, str] = {}
    taken: list[dict[str, str]] = []
    stored: dict[str, str] = {}
    for n, (op, key) in enumerate(ops):
        if op == "put":
            kept.put(key, f"v{n}")
            last[key] = f"v{n}"
        elif op == "take":
            taken.append(kept.take())
        elif taken:
            batch = taken.pop(0)
            store.save("wallet", 0, n, b"{}", kept={"transfers": batch})
            kept.written(batch)
            stored |= batch
    assert {k: kept.get(k) for k in "abc"} == {k: last.get(k) for k in "abc"}
    assert {k: store.kept_value("wallet", 0, "transfers", k) for k in "abc"} == {
        k: stored.get(k) for k in "abc"
    }
    store.close()


def test_kept_entries_are_named_per_scope_and_forgotten_per_scope(tmp_path: Path) -> None:
    """A changelog record key names its scope's kept entry (and no other scope's); forgetting a scope's
    entries (a rebuild from the partition's beginning) leaves the other scopes' and the snapshots."""
    named = state_store.kept_key("wallet", 2, "transfers", "deposit/x/1")
    assert state_store.kept_entry("wallet", 2, named) == ("transfers", "deposit/x/1")
    assert state_store.kept_entry("wallet", 1, state_store.kept_key("wallet", 12, "transfers", "t")) is None
    assert state_store.kept_entry("wallet", 2, state_store.scope_key("wallet", 2)) is None
    store = state_store.LocalStore(tmp_path / "s")
    for scope in (1, 2, 12):
        store.save("wallet", scope, 0, b"{}", kept={"transfers": {"t": str(scope)}})
    store.forget_kept("wallet", 1)
    assert [store.kept_value("wallet", s, "transfers", "t") for s in (1, 2, 12)] == [None, "2", "12"]
    assert store.snapshot("wallet", 1) == (0, b"{}")
    store.close()


def test_a_snapshot_written_before_a_class_moved_is_read_where_the_move_is_declared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Kafka state store names the class by module as the embedded log does: a snapshot written
    under a module the class declares it was in (``formerly``) decodes; under any other, it is refused."""
    toy, st_ = Toy(), initial_state(Toy())
    step(toy, st_, add("acct-1", 0, 7))
    blob = state_store.encode(toy, state_store.Snapshot(st_, {(topics.WALLET_REQUESTS, 0): 1}, {}))
    old = blob.replace(Toy.__module__.encode(), b"services.old.home")
    assert old != blob
    with pytest.raises(SnapshotError):
        state_store.decode(toy, old)
    monkeypatch.setattr(Toy, "formerly", ("services.old.home",), raising=False)
    assert state_store.decode(toy, old).state.inner == st_.inner
