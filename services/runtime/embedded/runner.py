"""The embedded runtime's runners (docs/architecture.md): one :class:`Runner` per processor over the
:class:`~services.runtime.embedded.store.EmbeddedLog`, and :func:`run_until_idle`, which steps them
together.

**The runner.** :meth:`Runner.step_batch` is one ``BEGIN IMMEDIATE`` transaction: read the next input
records after the consumer's committed offset, decode each (undecodable bytes become a dead letter),
apply it with :func:`services.core.processor.step`, append the outputs, advance the committed offset,
commit. :func:`run_until_idle` groups the batches of one round of its runners in one transaction (group
commit: all of the round or none of it), and a record is decoded once for every runner of the process
that reads it (:attr:`EmbeddedLog.decoded`). The simulator's bus goes further: the steps of a session
share a transaction until enough records piled up (:class:`~services.runtime.embedded.bus.EmbeddedBus`,
group commit). A crash before the commit leaves the file as it was; after it, everything is there:
nothing is lost and nothing is repeated. Inside a transaction a runner's batches keep the committed
offset and the applied ids in memory and write them once, just before the commit
(:meth:`EmbeddedLog.before_commit`): a group of hundreds of batches wrote them hundreds of times. A
runner that has read every input skips its next read while nothing was appended to its topics
(:meth:`Runner.idle`, no query: the log counts its own appends per topic, and ``PRAGMA data_version``
tells it when another connection committed): most reads of a caught-up runner would come back empty
(docs/performance.md#embedded-log-reads-and-transactions). The
:class:`~services.core.processor.ProcessorState` lives in memory and is snapshotted once
``snapshot_every`` records were applied since the last snapshot, in the same transaction as the offset,
by the first read after the runner has caught up (a batch came back short: the read that then finds
nothing takes it, in a transaction of its own where the runner steps alone), and at the latest after
:data:`SNAPSHOT_DEFER_MAX` times ``snapshot_every`` records: a snapshot costs time that grows with the
state (a wallet stage's is megabytes), and taken while a burst is read (5,000 credits after a coup), or
inside the transaction of its last batch, it delays the burst's last record (the speed bench's last
credit came that much later). A restart loads the snapshot and re-applies the records after it: the core
is deterministic, so it re-derives the very outputs already in the log, whose appends are no-ops (and a
:class:`~services.runtime.embedded.store.LogConflict` there would expose a non-deterministic processor
instead of hiding it). The ids a consumer has applied are rows of the ``applied`` table
(:class:`LoggedIds`), written in the same transaction, looked up a batch at a time and never loaded
whole; the entries a processor keeps forever (its state's :class:`~services.core.kept.Kept` maps:
transfer ids, audit's settled bets) are rows of the ``kept`` table (:class:`LoggedKept`), likewise.
Neither is part of a snapshot: a snapshot and a start stay the size of the processor's live state however
many years the log holds (docs/adr/0002-embedded-bounded-state.md). A process about to end (``ingest``,
the bus closing) snapshots the runners that applied records since their last snapshot
(:meth:`Runner.snapshot_if_behind`), so the next start re-applies little.

Snapshots are data, never pickles (docs/trust.md): JSON written and read by
:mod:`services.runtime.embedded.snapshot`,
a codec driven by the state's type annotations — the code decides what classes a snapshot becomes,
the bytes only fill in values, so opening a crafted log file cannot run code. A snapshot is a cache
of the log: one of another processor class or format, one that does not decode into today's state
types exactly (a field added, a string where an int belongs) or one that is not JSON at all is
ignored with a warning, and the state is rebuilt from offset 0. A snapshot that decodes is trusted
as far as the file that holds the log is; audit and replay never read snapshots, only records.
Drop snapshots after changing a processor's state shape (:meth:`EmbeddedLog.drop_snapshots`) to
skip even the attempt.

"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from services.core.envelope import ChainHead, Envelope
from services.core.kept import kept_maps
from services.core.processor import Processor, ProcessorState, initial_state, step_encoded
from services.runtime import intake
from services.runtime.embedded import snapshot
from services.runtime.embedded.attesting import ATTEST_EVERY, Attestor
from services.runtime.embedded.store import EmbeddedLog
from services.runtime.logging import get_logger
from services.runtime.tuning import gc_paused

S = TypeVar("S")

SNAPSHOT_FORMAT = 4
"""Bumped when the snapshot layout changes; older snapshots are then ignored (but see
:data:`SNAPSHOT_READ`).
2: the applied ids live in the ``applied`` table, not in the snapshot.
3: JSON (:mod:`services.runtime.embedded.snapshot`) instead of pickles: ``{"format", "processor", "inner",
``"heads": [[topic, key, seq, hash], ...]``, ``"records"}``.
4: the same JSON, with every :class:`~services.core.kept.Kept` map empty: its entries live in the ``kept``
table (docs/adr/0002-embedded-bounded-state.md). A version that knows only 3 ignores it and rebuilds
from the log, instead of reading an empty map of transfer ids as the whole of them."""

SNAPSHOT_NAME = "casino-ledger/snapshot-4"
"""The ``format`` field of every snapshot written (a foreign JSON document does not carry it)."""

SNAPSHOT_READ = {3: "casino-ledger/snapshot-3", SNAPSHOT_FORMAT: SNAPSHOT_NAME}
"""The formats a runner reads, by number: a format-3 snapshot holds its kept maps in memory, and the
runner moves them into the ``kept`` table once (then snapshots again, in format 4)."""

TAIL_SNAPSHOT_RECORDS = 64
"""Records applied since the last snapshot from which :meth:`Runner.snapshot_if_behind` snapshots: a
short-lived process (``ingest``, the end of a demo) leaves a snapshot behind, so the next start re-applies
at most this many records per runner instead of up to twice ``snapshot_every``."""

_Heads = list[tuple[str, str, int, str]]

SNAPSHOT_DEFER_MAX = 2
"""A due snapshot waits for the runner to catch up, but never past this many times ``snapshot_every``
records (a runner that never catches up still snapshots, so a restart replays a bounded tail)."""


class ConsumerMoved(Exception):
    """Another runner with the same name committed this consumer's offset (two runners, one name)."""


class LoggedIds:
    """A consumer's applied ids, kept in the log's ``applied`` table: written in the transaction that
    applies the records (so a rolled-back batch forgets them too: the runner then makes this object
    afresh) and never part of a snapshot, nor of memory: a start reads none of them.

    The runner asks for a whole batch at once (:meth:`prefetch`: one query, a primary-key lookup per
    record); the ids a batch adds are held in memory until :meth:`flush` writes them, just before the
    transaction commits. An id asked about outside the batch's (a caller stepping on its own) is looked
    up on its own.

    Each id is stored with the offset it was read at (``offset``, set by the runner before each step),
    so that a restart from a snapshot forgets the ids of the records it re-applies: the table always
    agrees with the state it sits beside.
    """

    def __init__(self, log: EmbeddedLog, consumer: str) -> None:
        self.log, self.consumer, self.offset = log, consumer, 0
        self._pending: dict[str, int] = {}
        self._asked: frozenset[str] = frozenset()
        self._known: set[str] = set()

    def prefetch(self, event_ids: Sequence[str]) -> None:
        """Look up a batch's ids at once (what :meth:`__contains__` then answers from memory)."""
        self._asked = frozenset(event_ids)
        self._known = self.log.applied_among(self.consumer, event_ids)

    def __contains__(self, event_id: object, /) -> bool:
        if event_id in self._pending:
            return True
        if event_id in self._asked:
            return event_id in self._known
        return isinstance(event_id, str) and self.log.was_applied(self.consumer, event_id)

    def add(self, event_id: str, /) -> None:
        self._pending.setdefault(event_id, self.offset)

    def flush(self) -> None:
        """Write the ids added since the last flush (inside the applying transaction)."""
        if self._pending:
            self.log.mark_applied_many(self.consumer, list(self._pending.items()))
            self._pending = {}
        self._asked, self._known = frozenset(), set()  # from now on the table answers


class LoggedKept:
    """One :class:`~services.core.kept.Kept` map of a consumer's state, kept in the log's ``kept`` table
    (the port's SQLite adapter): lookups go to the table (a primary-key lookup), writes are held in
    memory until :meth:`flush` writes them with the rest of the batch's bookkeeping, each with the offset
    of the record that wrote it (read from the consumer's :class:`LoggedIds`), so a restart from a
    snapshot forgets what the records after it wrote, as it forgets their applied ids."""

    def __init__(self, log: EmbeddedLog, consumer: str, name: str, ids: LoggedIds) -> None:
        self.log, self.consumer, self.name, self.ids = log, consumer, name, ids
        self._latest: dict[str, str] = {}
        self._rows: list[tuple[str, str, int]] = []
        """Every write since the last flush (a key written twice keeps both rows: see
        :meth:`EmbeddedLog.kept_value`)."""

    def get(self, key: str, /) -> str | None:
        held = self._latest.get(key)
        if held is not None:
            return held
        return self.log.kept_value(self.consumer, self.name, key)

    def put(self, key: str, value: str, /) -> None:
        self._latest[key] = value
        self._rows.append((key, value, self.ids.offset))

    def put_many(self, entries: Mapping[str, str], /) -> None:
        for key, value in entries.items():
            self.put(key, value)

    def flush(self) -> None:
        """Write the entries put since the last flush (inside the applying transaction)."""
        if self._rows:
            self.log.keep_many(self.consumer, self.name, self._rows)
            self._latest, self._rows = {}, []


@dataclass(frozen=True, slots=True)
class BatchResult:
    """What one :meth:`Runner.step_batch` did."""

    records: int
    outputs: int
    offset: int


class Runner(Generic[S]):
    """Drives one processor over the log, one transaction per batch (see the module docstring).

    ``name`` is the consumer's name in the log (offsets and snapshots); it must be unique per log,
    and defaults to the processor's name (two stages sharing a processor name need their own).
    """

    def __init__(
        self,
        log: EmbeddedLog,
        processor: Processor[S],
        name: str | None = None,
        *,
        snapshot_every: int = 5000,
        batch_limit: int = 500,
    ) -> None:
        self.log = log
        self.processor = processor
        self.name = name or processor.name
        self.snapshot_every = snapshot_every
        self.batch_limit = batch_limit
        names = snapshot.class_names(processor)
        self._kind = f"{SNAPSHOT_FORMAT}:{names[0]}"
        self._kinds = {f"{n}:{name}": n for n in SNAPSHOT_READ for name in names}
        """The kinds of snapshot this runner reads, with their format number."""
        self._state_type = snapshot.state_type(processor)
        self._logger = get_logger("casino_ledger.embedded")
        self._state: ProcessorState[S] | None = None
        """The state, once :meth:`_materialize` has restored it (``None``: not yet needed)."""
        self._snap: tuple[int, str, bytes] | None = None
        self.ids = LoggedIds(log, self.name)
        self._kept: list[LoggedKept] = []
        self.position = 0
        self.committed = 0
        self._restored_from: int | None = None
        self._since_snapshot = 0
        self.batches = 0
        """Transactions that applied records (a benchmark's count)."""
        self._flushed = 0
        """The committed offset as the log holds it (:attr:`committed` may be ahead inside a
        transaction, until :meth:`_write_offset` runs before the commit)."""
        self._deferred = False
        self._idle_mark: tuple[int, int] | None = None
        """The log's :meth:`~EmbeddedLog.input_mark` when a read found every input consumed."""
        self.attestor = Attestor(log, processor)
        """The writer's signed heads, once per transaction (:mod:`services.runtime.embedded.attesting`)."""
        self.restore()

    def restore(self) -> None:
        """Reload from the latest snapshot (or from scratch) and the committed offset. The snapshot is
        decoded when the runner first has a record to apply, or its state is asked for
        (:meth:`_materialize`): a start that finds nothing to read for this runner decodes nothing
        (an ``ingest`` of a deposit wakes three of the six)."""
        with self.log.transaction(write=False):
            self.committed = self._flushed = self.log.committed(self.name)
            self._snap = self.log.load_snapshot(self.name)
        self._idle_mark, self._deferred = None, False
        self._state, self._restored_from, self._since_snapshot = None, None, 0
        self.ids, self._kept = LoggedIds(self.log, self.name), []  # what a rolled-back batch held: gone
        snap = self._snap
        self.position = snap[0] if snap is not None and snap[1] in self._kinds else 0
        """Where the next read starts: the snapshot's offset until it is decoded (0 if it then does not)."""
        with self.log.transaction(write=False):
            self.attestor.resume(lambda: self.state.heads)

    @property
    def state(self) -> ProcessorState[S]:
        """The processor's state (restored from the snapshot on first use)."""
        if self._state is None:
            self._materialize()
        assert self._state is not None
        return self._state

    @state.setter
    def state(self, value: ProcessorState[S]) -> None:
        self._state = value

    @property
    def restored_from(self) -> int | None:
        """The offset of the snapshot the state was restored from (``None``: rebuilt from scratch)."""
        if self._state is None:
            self._materialize()
        return self._restored_from

    def _materialize(self) -> None:
        """Decode the snapshot :meth:`restore` read (or start from scratch), forget what the log holds
        past it, bind the state's kept maps to the ``kept`` table (:meth:`_bind_kept`)."""
        snap, self._snap = self._snap, None
        state, self.position = initial_state(self.processor), 0
        if snap is not None and snap[1] in self._kinds:
            try:
                state = self._decode(snap[2], self._kinds[snap[1]])
            except snapshot.SnapshotError as exc:  # foreign, corrupt or crafted: rebuild from the log
                self._logger.warning("snapshot ignored", processor=self.name, offset=snap[0], why=str(exc))
            else:
                self.position, self._restored_from = snap[0], snap[0]
        elif snap is not None:
            self._logger.info("snapshot of another kind ignored", processor=self.name, offset=snap[0])
        self._state = state
        self.ids.offset = self.position
        state.applied = self.ids
        if self.log.readonly:
            self._bind_kept()
            return
        with self.log.transaction():
            self.log.forget_applied(self.name, self.position)
            self.log.forget_kept(self.name, self.position)
            moved = self._bind_kept()
            if moved:  # a format-3 snapshot's kept maps, now in the table: never read from a snapshot again
                self._logger.warning(
                    "kept entries moved out of the snapshot", processor=self.name, entries=moved,
                    offset=self.position,
                )  # fmt: skip
                self._flush_kept()
                self._snapshot()

    def _bind_kept(self) -> int:
        """Bind every :class:`~services.core.kept.Kept` field of the processor's state to the ``kept``
        table (named by the field); returns how many in-memory entries were moved there."""
        self._kept = []
        moved = 0
        for name, value in kept_maps(self.state.inner):
            store = LoggedKept(self.log, self.name, name, self.ids)
            moved += value.bind(store)
            self._kept.append(store)
        return moved

    def _flush_kept(self) -> None:
        for store in self._kept:
            store.flush()

    def snapshot_if_behind(self, records: int = TAIL_SNAPSHOT_RECORDS) -> bool:
        """Snapshot now (in a transaction of its own) when at least ``records`` records were applied
        since the last snapshot, so that the next start re-applies fewer; whether it did. For a process
        about to end: ``ingest``, a demo's bus closing."""
        if not self.snapshot_due(records):
            return False
        self.snapshot()
        return True

    def snapshot_due(self, records: int = TAIL_SNAPSHOT_RECORDS) -> bool:
        """Whether :meth:`snapshot_if_behind` would snapshot now."""
        return self._since_snapshot >= records and not self.log.readonly

    def step_batch(self, limit: int | None = None) -> BatchResult:
        """Apply up to ``limit`` next input records in one transaction; see the module docstring."""
        started = time.perf_counter()
        try:
            with gc_paused(), self.log.transaction():
                result = self._apply_batch(limit or self.batch_limit)
        except BaseException:
            self.restore()  # the in-memory state may hold half a batch that was rolled back
            raise
        if result.records:
            self.batches += 1
            self._logger.info(
                "batch",
                processor=self.name,
                records=result.records,
                outputs=result.outputs,
                offset=result.offset,
                ms=round((time.perf_counter() - started) * 1000, 3),
            )
        return result

    def idle(self) -> bool:
        """Whether the runner has certainly nothing to read: its last read consumed every input, and
        nothing was appended to its topics since (no query: :meth:`EmbeddedLog.input_mark`)."""
        return self._idle_mark is not None and self._idle_mark == self.log.input_mark(self.processor.inputs)

    def _apply_batch(self, limit: int) -> BatchResult:
        mark = self.log.input_mark(self.processor.inputs)
        rows = self.log.read(self.processor.inputs, self.position, limit)
        if rows and self._state is None:  # something to apply: now the state is needed
            self._materialize()  # (a snapshot that does not decode moves the position back to 0)
            rows = self.log.read(self.processor.inputs, self.position, limit)
        self._idle_mark = mark if len(rows) < limit else None
        if not rows:
            if self.log.committed(self.name) != self._flushed:
                raise ConsumerMoved(f"consumer {self.name!r} was advanced by another runner")
            if self._since_snapshot >= self.snapshot_every:  # caught up: the snapshot that waited
                self._snapshot()
            return BatchResult(0, 0, self.position)
        outputs: list[tuple[Envelope, bytes]] = []
        decode, sealed = self.log.decode, self.log.sealed
        read: list[tuple[int, str, bytes, Envelope | intake.DecodeError]] = []
        for offset, topic, _key, raw in rows:  # decoded first: the batch's applied ids in one query
            try:
                record = decode(offset, raw)
                intake.check_topic(record, topic, raw)
            except intake.DecodeError as exc:
                read.append((offset, topic, raw, exc))
            else:
                read.append((offset, topic, raw, record))
        self.ids.prefetch([r.event_id for *_, r in read if not isinstance(r, intake.DecodeError)])
        for offset, topic, raw, item in read:
            if isinstance(item, intake.DecodeError):
                position = f"dead/{self.name}/{topic}/{offset}"  # the runner's name: one dead letter each
                dead = intake.dead_letter_of(self.processor, item, topic, position)
                outputs.append((dead, dead.to_json()))
                continue
            self.ids.offset = offset
            outputs.extend(step_encoded(self.processor, self.state, item, raw, sealed))
        self.log.append_encoded(outputs, internal=True)
        self.attestor.note(outputs)
        self.position = rows[-1][0]
        self.committed = max(self.committed, self.position)
        if not self._deferred:
            self._deferred = True
            self.log.before_commit(self._write_offset)
        self._since_snapshot += len(rows)
        if self._since_snapshot >= SNAPSHOT_DEFER_MAX * self.snapshot_every:
            self._snapshot()
        elif self._since_snapshot >= self.snapshot_every and len(rows) < limit:
            self._idle_mark = None  # caught up: the next read (empty) takes the snapshot that waited
        return BatchResult(len(rows), len(outputs), self.position)

    def _write_offset(self) -> None:
        """Write the applied ids and the committed offset the transaction's batches left (once per
        transaction, just before it commits)."""
        self._deferred = False
        self.ids.flush()
        self._flush_kept()
        if self.committed != self._flushed:
            # one statement checks that no other runner moved this consumer and commits the offset
            if not self.log.commit_offset(self.name, self.committed, expected=self._flushed):
                raise ConsumerMoved(f"consumer {self.name!r} was advanced by another runner")
            self._flushed = self.committed

    def _encode(self) -> bytes:
        heads = [(t, k, h.seq, h.hash) for (t, k), h in self.state.heads.items()]
        return snapshot.to_bytes({
            "format": SNAPSHOT_NAME, "processor": self._kind,
            "inner": snapshot.encode(self.state.inner, self._state_type),
            "heads": snapshot.encode(heads, _Heads), "records": self.state.records,
        })  # fmt: skip

    def _decode(self, blob: bytes, fmt: int = SNAPSHOT_FORMAT) -> ProcessorState[S]:
        data = snapshot.loads(blob, dict[str, Any])
        if set(data) != {"format", "processor", "inner", "heads", "records"}:
            raise snapshot.SnapshotError(f"not a snapshot: fields {sorted(data)[:10]}")
        kinds = {f"{fmt}:{name}" for name in snapshot.class_names(self.processor)}
        if data["format"] != SNAPSHOT_READ.get(fmt) or data["processor"] not in kinds:
            raise snapshot.SnapshotError("a snapshot of another format or processor")
        inner = snapshot.decode(data["inner"], self._state_type)
        heads = snapshot.decode(data["heads"], _Heads)
        records = snapshot.decode(data["records"], int)
        return ProcessorState(
            inner=inner, heads={(t, k): ChainHead(seq, h) for t, k, seq, h in heads}, records=records
        )

    def _snapshot(self) -> None:
        try:
            blob = self._encode()
        except snapshot.SnapshotError as exc:  # a state the codec cannot write: restarts replay instead
            self._logger.warning("snapshot skipped", processor=self.name, why=str(exc))
        else:
            self.log.save_snapshot(self.name, self.position, self._kind, blob)
        self._since_snapshot = 0

    def snapshot(self) -> None:
        """Snapshot the state now (with the committed offset, in one transaction)."""
        with self.log.transaction():
            self._snapshot()


def run_until_idle(
    runners: Sequence[Runner[Any]],
    limit: int | None = None,
    *,
    seal: bool = False,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Step the runners round-robin, one batch each per round, until a round moves nothing; then each
    runner's signed heads of what it wrote meanwhile and, with ``seal``, its ``idle`` seal (the
    pipeline went idle): :func:`seal_idle`. Attesting here, not per commit, keeps the log the same
    whatever the transactions (a bus's group commits).

    Returns the number of input records applied (``progress``, when given, is told each round's). The
    interleaving is a function of the log alone, so the same log and the same runners give the same
    output log.

    A round is one transaction (group commit): every runner's batch in it (outputs, offset, applied
    ids) commits together or not at all; on an error every runner reloads its state from what the log
    committed before the round, then the error goes on.
    """
    total = 0
    while True:
        moved = _round(runners, limit)
        if not moved:
            seal_idle(runners, seal=seal)
            if runners:
                runners[0].log.checkpoint_if_due()  # idle: the WAL's checkpoint, out of the burst
            return total
        total += moved
        if progress is not None:
            progress(moved)


def seal_idle(runners: Sequence[Runner[Any]], *, seal: bool = True) -> None:
    """Every runner's pending attestation and (``seal``) its ``idle`` seal, in one transaction."""
    if not runners or not (seal or any(r.attestor.records >= ATTEST_EVERY for r in runners)):
        return
    log = runners[0].log
    try:
        with log.transaction():
            for runner in runners:
                if seal:
                    runner.attestor.seal()
                else:
                    runner.attestor.flush()
    except BaseException:
        for runner in runners:
            runner.restore()
        raise


def _round(runners: Sequence[Runner[Any]], limit: int | None) -> int:
    if not runners:
        return 0
    log = runners[0].log
    moved = 0
    try:
        with log.transaction():
            for runner in runners:
                if not runner.idle():  # else its read would come back empty: skip the batch
                    moved += runner.step_batch(limit).records
    except BaseException:
        for runner in runners:  # the round was rolled back: what each holds in memory is ahead of it
            runner.restore()
        raise
    return moved
