"""The embedded runtime (docs/architecture.md, the default): the log in one SQLite file and a runner per
processor.

**The log.** One table ``records`` holds every record of every topic, each the canonical JSON bytes of
its envelope (``Envelope.to_json()``) or, for outside writers, the bytes they sent. ``offset`` is one
global, strictly increasing position across topics, so a processor that reads several topics reads
them in one deterministic order, and an export is the log in that order. Appends are idempotent by
``event_id`` (a partial UNIQUE index): re-appending an identical record is a no-op, a different body
under an existing id raises :class:`LogConflict` (TigerBeetle's ``exists`` vs
``exists_with_different_*``). Ids are unique per origin: a processor's output (``internal``) and an
outside writer's record live in two id spaces, because an outsider can compute the id a processor is
about to derive (ids are derived from public data) and write a forgery under it first: the forgery is
refused by its consumer (docs/trust.md) and the real output still goes in, instead of a
:class:`LogConflict` that would stop the pipeline on every restart. Dead letters are
``casino.deadletter`` records, also seen through the ``deadletter`` view.

**Durability.** WAL journal, ``synchronous=NORMAL`` by default (``CASINO_SQLITE_SYNCHRONOUS``):
a commit survives any process crash (SIGKILL, which the crash tests check at seeded moments), and a
power loss or an OS crash may lose the last committed batches but never corrupts the file or
half-applies a batch: a batch's outputs, committed offset and applied ids are one transaction, and
WAL replays whole transactions or none. The WAL is fsynced at each checkpoint instead of each commit.
Checkpoints run when the pipeline is idle (:meth:`EmbeddedLog.checkpoint_if_due`: at the end of
:func:`run_until_idle` and of a group commit, once :data:`CHECKPOINT_RECORDS` records were appended
since the last), not inside a burst: SQLite's own checkpoint, every 1,000 pages by default, copied the
WAL into the file and fsynced both inside the commits of the 5,000 credits after a coup
(docs/performance.md#embedded-log-checkpoints-and-page-cache). SQLite's automatic checkpoint stays as a bound
(:data:`WAL_AUTOCHECKPOINT_PAGES`), so a power loss forgets at most that much of the WAL.
What such a loss forgets is a suffix of the log: the processors re-derive it from the inputs still
there, but an outside writer's record acknowledged in that suffix (a deposit at the cashier) is gone.
Where that matters, set ``CASINO_SQLITE_SYNCHRONOUS=FULL``: every commit is fsynced before it
returns, at the cost of one fsync per transaction (the runner commits once per batch).

**The runner.** :meth:`Runner.step_batch` is one ``BEGIN IMMEDIATE`` transaction: read the next input
records after the consumer's committed offset, decode each (undecodable bytes become a dead letter),
apply it with :func:`services.core.processor.step`, append the outputs, advance the committed offset,
commit. :func:`run_until_idle` groups the batches of one round of its runners in one transaction (group
commit: all of the round or none of it), and a record is decoded once for every runner of the process
that reads it (:attr:`EmbeddedLog.decoded`). The simulator's bus goes further: the steps of a session
share a transaction until enough records piled up (:class:`EmbeddedBus`, group commit). A crash
before the commit leaves the file as it was; after it, everything is there: nothing is lost and
nothing is repeated. Inside a transaction a runner's batches keep the committed offset and the
applied ids in memory and write them once, just before the commit (:meth:`EmbeddedLog.before_commit`):
a group of hundreds of batches wrote them hundreds of times. A runner that has read every input
skips its next read while nothing was appended to its topics (:meth:`Runner.idle`, no query: the log
counts its own appends per topic, and ``PRAGMA data_version`` tells it when another connection
committed): most reads of a caught-up runner would come back empty
(docs/performance.md#embedded-log-reads-and-transactions). The
:class:`~services.core.processor.ProcessorState` lives in memory and is snapshotted once
``snapshot_every`` records were applied since the last snapshot, in the same transaction as the offset,
by the first read after the runner has caught up (a batch came back short: the read that then finds
nothing takes it, in a transaction of its own where the runner steps alone), and at the latest after
:data:`SNAPSHOT_DEFER_MAX` times ``snapshot_every`` records: a snapshot costs time that grows with the
state (a wallet stage's is megabytes), and taken while a burst is read (5,000 credits after
a coup), or inside the transaction of its last batch, it delays the burst's last record (the speed
bench's last credit came that much later). A restart loads the snapshot and
re-applies the records after it: the core is deterministic, so it re-derives the very outputs already in
the log, whose appends are no-ops (and a :class:`LogConflict` there would expose a non-deterministic
processor instead of hiding it). The ids a consumer has applied are rows of the ``applied`` table
(:class:`LoggedIds`), written in the same transaction, looked up a batch at a time and never loaded
whole; the entries a processor keeps forever (its state's :class:`~services.core.kept.Kept` maps:
transfer ids, audit's settled bets) are rows of the ``kept`` table (:class:`LoggedKept`), likewise.
Neither is part of a snapshot: a snapshot and a start stay the size of the processor's live state
however many years the log holds (docs/adr/0002-embedded-bounded-state.md). A process about to end
(``ingest``, the bus closing) snapshots the runners that applied records since their last snapshot
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

import json
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from services.core.envelope import ChainHead, Envelope
from services.core.kept import kept_maps
from services.core.processor import Processor, ProcessorState, initial_state, step_encoded
from services.core.trust import Sealed
from services.runtime import intake
from services.runtime.embedded import snapshot
from services.runtime.embedded.attesting import ATTEST_EVERY, Attestor
from services.runtime.failures import NotALog
from services.runtime.logging import get_logger
from services.runtime.settings import setting
from services.runtime.tuning import gc_paused
from services.runtime.waits import Stream

S = TypeVar("S")

Synchronous = Literal["FULL", "NORMAL"]

DEFAULT_SYNCHRONOUS: Synchronous = "NORMAL"
"""The log's ``PRAGMA synchronous`` unless ``CASINO_SQLITE_SYNCHRONOUS`` (or the caller) says otherwise."""


def synchronous_setting() -> Synchronous:
    """``CASINO_SQLITE_SYNCHRONOUS`` (``NORMAL`` or ``FULL``, any case; unset or empty: the default).

    Raises :class:`~services.runtime.failures.ConfigError` naming the variable for another value.
    """
    chosen: Synchronous = setting("sqlite_synchronous")
    return chosen


Row = tuple[int, str, str, bytes]
"""One record as read from the log: (offset, topic, key, raw bytes)."""

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

_PAGE = 1000


def _rows(cur: sqlite3.Cursor) -> list[Row]:
    """The rows of a ``SELECT "offset", topic, key, body`` as SQLite gives them: the columns' types
    already are int, str, str and bytes (a BLOB), so converting each one again per row cost more than
    the query for the runners' short reads (docs/performance.md#embedded-log-reads-and-transactions)."""
    rows: list[Row] = cur.fetchall()
    return rows


_INSERT = "INSERT INTO records (topic, key, event_id, type, body, internal) VALUES (?, ?, ?, ?, ?, ?)"

SNAPSHOT_DEFER_MAX = 2
"""A due snapshot waits for the runner to catch up, but never past this many times ``snapshot_every``
records (a runner that never catches up still snapshots, so a restart replays a bounded tail)."""

CHECKPOINT_RECORDS = 1000
"""Records appended since the last checkpoint from which an idle moment checkpoints the WAL (about
600 pages: SQLite's default cadence is 1,000)."""

WAL_AUTOCHECKPOINT_PAGES = 32_000
"""SQLite's automatic checkpoint (``PRAGMA wal_autocheckpoint``, pages of 4 KiB: 125 MiB): the bound
on the WAL when no idle moment comes, above what the burst of a speed coup's credits writes
(docs/performance.md#embedded-log-checkpoints-and-page-cache)."""

CACHE_KIB = 65_536
"""SQLite's page cache per connection (``PRAGMA cache_size``, KiB: 64 MiB; SQLite's default is 2 MiB).
Appends insert into three indexes at random places (event id, topic and key); with the default cache
those pages were read back from the OS on every batch
(docs/performance.md#embedded-log-checkpoints-and-page-cache)."""

DECODED_KEPT = 20_000
"""How many decoded records a log keeps for the other runners that read them (each decoded once)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    "offset" INTEGER PRIMARY KEY AUTOINCREMENT,
    topic TEXT NOT NULL,
    key TEXT NOT NULL,
    event_id TEXT,
    type TEXT,
    body BLOB NOT NULL,
    internal INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX IF NOT EXISTS records_origin_event_id ON records(internal, event_id)
    WHERE event_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS records_topic ON records(topic, "offset");
CREATE INDEX IF NOT EXISTS records_topic_key ON records(topic, key, "offset");
CREATE TABLE IF NOT EXISTS consumers (
    name TEXT PRIMARY KEY,
    "offset" INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS applied (
    consumer TEXT NOT NULL,
    event_id TEXT NOT NULL,
    "offset" INTEGER NOT NULL,
    PRIMARY KEY (consumer, event_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS applied_offset ON applied(consumer, "offset");
CREATE TABLE IF NOT EXISTS kept (
    consumer TEXT NOT NULL,
    name TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    "offset" INTEGER NOT NULL,
    PRIMARY KEY (consumer, name, key, "offset")
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS kept_offset ON kept(consumer, "offset");
CREATE TABLE IF NOT EXISTS snapshots (
    name TEXT PRIMARY KEY,
    "offset" INTEGER NOT NULL,
    kind TEXT NOT NULL,
    blob BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE VIEW IF NOT EXISTS deadletter AS
    SELECT "offset", key AS source_topic, event_id, body FROM records WHERE topic = 'casino.deadletter';
"""


class LogConflict(Exception):
    """A record was appended under an ``event_id`` the log already holds with different bytes."""

    def __init__(self, event_id: str, topic: str) -> None:
        super().__init__(
            f"event_id {event_id} already in the log with a different body (appending to {topic}); "
            "records are immutable: a correction is a new event with a new id"
        )
        self.event_id = event_id


class ConsumerMoved(Exception):
    """Another runner with the same name committed this consumer's offset (two runners, one name)."""


class EmbeddedLog:
    """The SQLite log: records of every topic under one global offset, consumer offsets, snapshots."""

    def __init__(
        self, path: str | Path, *, synchronous: Synchronous | None = None, readonly: bool = False
    ) -> None:
        """Open (creating when missing, unless ``readonly``) the log at ``path``.

        ``synchronous``: the fsync policy (module docstring); ``None`` reads :func:`synchronous_setting`.

        ``readonly`` opens an existing file without ever writing to it (replays of a copied log).
        Raises :class:`~services.runtime.failures.NotALog` for a path that is a directory, missing
        (``readonly``), not SQLite, damaged, or another application's SQLite database (whose file is
        then left untouched).
        """
        self.path = Path(path)
        self.readonly = readonly
        self.decoded: OrderedDict[int, Envelope] = OrderedDict()
        """Records decoded by one runner, by offset, for the others reading them (bounded: the oldest go,
        in O(1): a plain dict's ``next(iter(d))`` walks the holes its deletions left at the front)."""
        self.sealed = Sealed()
        """The records the runners of this object sealed, by id, with their exact bytes: a runner
        reading back a stage's output admits it without verifying its hash and MAC again (audit
        excepted: :func:`~services.core.processor.step_encoded`). Not forgotten on a rollback: what it
        holds are bytes this process sealed, whether or not the log keeps them."""
        self.commits = 0
        """Write transactions committed through this object (a benchmark's count)."""
        self.unchecked = 0
        """Records appended through this object since its last checkpoint (:meth:`checkpoint_if_due`)."""
        self.appended = 0
        """Records appended through this object (the bus's group commit counts them)."""
        self._versions: dict[str, int] = {}
        """Per topic, how many appends through this object added records to it (:meth:`input_mark`)."""
        self._epoch = 0
        """Bumped whenever the log may have changed behind :attr:`_versions` (a rollback, another
        connection's commit)."""
        self._data_version = -1
        self._before_commit: list[Callable[[], None]] = []
        self.synchronous: Synchronous = synchronous or synchronous_setting()
        if self.path.is_dir():
            raise NotALog(f"{self.path}: is a directory, not a log file")
        if readonly and not self.path.is_file():
            raise NotALog(f"{self.path}: no log file there")
        try:
            if readonly:
                uri = f"{self.path.resolve().as_uri()}?mode=ro"
                self._conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=30.0)
            else:
                self._conn = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
        except sqlite3.Error as exc:
            raise NotALog(f"{self.path}: cannot open it as a log ({exc})") from None
        try:
            self._check_is_a_log()
            if not readonly:
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute(f"PRAGMA synchronous={self.synchronous}")
                self._conn.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")
                self._conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
                self._migrate()
                self._conn.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise NotALog(f"{self.path}: not a casino-ledger log, or a damaged one ({exc})") from None
        except NotALog:
            self._conn.close()
            raise

    def _check_is_a_log(self) -> None:
        """A log holds a ``records`` table; an empty file is a new log; anything else is not ours."""
        rows = self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        names = {str(r[0]) for r in rows}
        if names and "records" not in names:
            shown = ", ".join(sorted(names)[:5])
            raise NotALog(f"{self.path}: an SQLite database of something else (tables: {shown}), not a log")
        if not names and self.readonly:
            raise NotALog(f"{self.path}: an empty file, not a log")

    def _migrate(self) -> None:
        """A log written before ids were unique per origin: add the column, replace the index (its old
        records count as outside records; a processor re-deriving one appends its own copy)."""
        cols = {row[1] for row in self._conn.execute("PRAGMA table_info(records)")}
        if cols and "internal" not in cols:
            self._conn.execute("ALTER TABLE records ADD COLUMN internal INTEGER NOT NULL DEFAULT 0")
            self._conn.execute("DROP INDEX IF EXISTS records_event_id")

    def close(self) -> None:
        """Close the connection (an open transaction is rolled back)."""
        self._conn.close()

    def __enter__(self) -> EmbeddedLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def transaction(self, *, write: bool = True) -> AbstractContextManager[None]:
        """One transaction (``BEGIN IMMEDIATE`` to write, ``BEGIN`` to read); inside one, joins it.

        A class, not a generator: a runner's batch and its appends enter it thousands of times a
        session, nearly always to join, and a generator's context manager costs more each time."""
        return _JOINED if self._conn.in_transaction else _Transaction(self, write)

    def _begin(self, write: bool) -> None:
        self._conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        if write:
            try:
                self._check_data_version()
            except BaseException:
                self._rollback()
                raise

    def _commit(self, write: bool) -> None:
        try:
            while self._before_commit:  # the deferred writes (a hook may defer another)
                self._before_commit.pop(0)()
        except BaseException:
            self._rollback()
            raise
        self._conn.execute("COMMIT")
        self.commits += write

    def _rollback(self) -> None:
        self._before_commit.clear()
        self._conn.execute("ROLLBACK")
        self.decoded.clear()  # offsets of rolled-back rows may be given to other records
        self._epoch += 1

    def before_commit(self, write: Callable[[], None]) -> None:
        """Run ``write`` inside the open transaction just before it commits (forgotten if it rolls
        back; an error there rolls it back): a runner's offset and applied ids, written once per
        transaction instead of once per batch."""
        self._before_commit.append(write)

    def _check_data_version(self) -> None:
        version = int(self._conn.execute("PRAGMA data_version").fetchone()[0])
        if version != self._data_version:  # another connection committed since: marks are stale
            self._data_version = version
            self._epoch += 1

    def input_mark(self, topic_names: Sequence[str]) -> tuple[int, int]:
        """A value that stays the same for as long as no record is appended to any of ``topic_names``
        (it may change without one: a rollback, another connection's commit). A runner that read all
        its topics has nothing to read while its mark stays."""
        versions = self._versions
        return self._epoch, sum(versions.get(t, 0) for t in topic_names)

    # -- writing -------------------------------------------------------------------------------------

    def append(self, envelopes: Iterable[Envelope], *, internal: bool = False) -> int:
        """Append envelopes in order, idempotently by ``event_id``; returns how many were new.

        ``internal``: the records are a processor's outputs (a runner's appends), whose ids are unique
        among outputs; outside writers' records (the default) are unique among themselves.
        """
        return self.append_encoded(((env, env.to_json()) for env in envelopes), internal=internal)

    def append_encoded(self, records: Iterable[tuple[Envelope, bytes]], *, internal: bool = False) -> int:
        """:meth:`append` of envelopes given with their bytes (``Envelope.to_json()``, as
        :func:`services.core.processor.step_encoded` made them while sealing)."""
        flag = int(internal)
        rows = [(env.topic, env.key, env.event_id, env.type, body, flag) for env, body in records]
        added, i = 0, 0
        with self.transaction():
            while i < len(rows):  # one statement for the rows; past an id already there, on from the next
                before = self._conn.total_changes
                try:
                    self._conn.executemany(_INSERT, rows[i:])
                except sqlite3.IntegrityError:
                    done = self._conn.total_changes - before
                    added, i = added + done, i + done
                    self._check_same(rows[i])
                    i += 1
                else:
                    added += self._conn.total_changes - before
                    break
        if added:
            self._appended(added, {row[0] for row in rows})
        return added

    def _appended(self, added: int, topic_names: Iterable[str]) -> None:
        self.unchecked += added
        self.appended += added
        for topic in topic_names:
            self._versions[topic] = self._versions.get(topic, 0) + 1

    def checkpoint_if_due(self) -> bool:
        """Checkpoint the WAL (``PASSIVE``: never waits for a reader; the next write then starts the WAL
        from its beginning) when :data:`CHECKPOINT_RECORDS` records were appended since the last
        checkpoint and no transaction is open; whether it did. Callers: the moments the pipeline is
        idle (the module docstring)."""
        if self.readonly or self.unchecked < CHECKPOINT_RECORDS or self._conn.in_transaction:
            return False
        self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        self.unchecked = 0
        return True

    def _check_same(self, row: tuple[str, str, str, str, bytes, int]) -> None:
        """``row`` was refused for its id: the log holds the same bytes under it, else
        :class:`LogConflict`."""
        topic, _key, event_id, _type, body, internal = row
        found = self._conn.execute(
            "SELECT body FROM records WHERE internal = ? AND event_id = ?", (internal, event_id)
        ).fetchone()
        if found is None:
            raise sqlite3.IntegrityError(f"a record of {topic} was not appended (event_id {event_id})")
        if bytes(found[0]) != body:
            raise LogConflict(str(event_id), topic) from None

    def append_raw(self, topic: str, key: str, raw: bytes) -> bool:
        """Append bytes from an outside writer as they are (malformed ones too: they reach the dead letter).

        When the bytes are a JSON object with a string ``event_id`` the append is idempotent by that
        id like :meth:`append`; returns whether a record was added.
        """
        event_id, type_ = intake.id_and_type_of(raw)
        with self.transaction():
            return self._insert(topic, key, event_id, type_, raw)

    def _insert(  # noqa: PLR0917 (one row's columns)
        self,
        topic: str,
        key: str,
        event_id: str | None,
        type_: str | None,
        body: bytes,
        internal: bool = False,
    ) -> bool:
        try:
            self._conn.execute(
                "INSERT INTO records (topic, key, event_id, type, body, internal) VALUES (?, ?, ?, ?, ?, ?)",
                (topic, key, event_id, type_, body, int(internal)),
            )
        except sqlite3.IntegrityError:
            found = self._conn.execute(
                "SELECT body FROM records WHERE internal = ? AND event_id = ?", (int(internal), event_id)
            ).fetchone()
            if found is None:
                raise
            if bytes(found[0]) != body:
                raise LogConflict(str(event_id), topic) from None
            return False
        self._appended(1, (topic,))
        return True

    # -- reading -------------------------------------------------------------------------------------

    def read(self, topic_names: Sequence[str], after_offset: int, limit: int) -> list[Row]:
        """Up to ``limit`` records of ``topic_names`` with offset > ``after_offset``, in log order."""
        marks = ",".join("?" * len(topic_names))
        cur = self._conn.execute(
            f'SELECT "offset", topic, key, body FROM records WHERE topic IN ({marks}) AND "offset" > ? '  # noqa: S608 (only placeholders)
            'ORDER BY "offset" LIMIT ?',
            (*topic_names, after_offset, limit),
        )
        return _rows(cur)

    def read_page(self, after_offset: int, limit: int) -> list[Row]:
        """Up to ``limit`` records of every topic with offset > ``after_offset``, in log order (by the
        primary key: no topic index to merge)."""
        cur = self._conn.execute(
            'SELECT "offset", topic, key, body FROM records WHERE "offset" > ? ORDER BY "offset" LIMIT ?',
            (after_offset, limit),
        )
        return _rows(cur)

    def read_key(self, topic: str, key: str, after_offset: int, limit: int = _PAGE) -> list[Row]:
        """Up to ``limit`` records of one topic and key with offset > ``after_offset``, in log order."""
        cur = self._conn.execute(
            'SELECT "offset", topic, key, body FROM records WHERE topic = ? AND key = ? AND "offset" > ? '
            'ORDER BY "offset" LIMIT ?',
            (topic, key, after_offset, limit),
        )
        return _rows(cur)

    def last_internal(self, topic: str, key: str) -> bytes | None:
        """The bytes of the last record a runner appended on ``topic`` under ``key`` (``None``: none)."""
        row = self._conn.execute(
            "SELECT body FROM records WHERE topic = ? AND key = ? AND internal = 1 "
            'ORDER BY "offset" DESC LIMIT 1',
            (topic, key),
        ).fetchone()
        return None if row is None else bytes(row[0])

    def decode(self, offset: int, raw: bytes) -> Envelope:
        """The envelope of the record at ``offset`` (whose bytes are ``raw``), decoded once for every
        reader through this object (:attr:`decoded`); :class:`~services.runtime.intake.DecodeError`
        if it does not decode."""
        record = self.decoded.get(offset)
        if record is None:
            record = intake.decode(raw)
            self.decoded[offset] = record
            if len(self.decoded) > DECODED_KEPT:
                self.decoded.popitem(last=False)
        return record

    def read_after(self, after_offset: int) -> list[Row]:
        """Every record with offset > ``after_offset``, in log order."""
        cur = self._conn.execute(
            'SELECT "offset", topic, key, body FROM records WHERE "offset" > ? ORDER BY "offset"',
            (after_offset,),
        )
        return _rows(cur)

    def iter_all(self, page: int = _PAGE) -> Iterator[Row]:
        """Every record in log order, fetched ``page`` rows at a time (never the whole log in memory)."""
        after = 0
        while True:
            cur = self._conn.execute(
                'SELECT "offset", topic, key, body FROM records WHERE "offset" > ? ORDER BY "offset" LIMIT ?',
                (after, page),
            )
            rows = [(int(o), str(t), str(k), bytes(b)) for o, t, k, b in cur]
            yield from rows
            if len(rows) < page:
                return
            after = rows[-1][0]

    def holds(self, event_id: str, *, internal: bool = False) -> bool:
        """Whether an outside writer's record (a processor's output, with ``internal``) has ``event_id``."""
        row = self._conn.execute(
            "SELECT 1 FROM records WHERE internal = ? AND event_id = ?", (int(internal), event_id)
        ).fetchone()
        return row is not None

    def count(self, topic: str | None = None) -> int:
        """How many records the log holds (on ``topic`` only, when given)."""
        if topic is None:
            row = self._conn.execute("SELECT count(*) FROM records").fetchone()
        else:
            row = self._conn.execute("SELECT count(*) FROM records WHERE topic = ?", (topic,)).fetchone()
        return int(row[0])

    def head(self) -> int:
        """The offset of the last record, 0 for an empty log."""
        row = self._conn.execute('SELECT max("offset") FROM records').fetchone()
        return int(row[0] or 0)

    # -- consumers and snapshots ---------------------------------------------------------------------

    def committed(self, name: str) -> int:
        """The committed offset of consumer ``name`` (the last offset it has fully applied), 0 if none."""
        row = self._conn.execute('SELECT "offset" FROM consumers WHERE name = ?', (name,)).fetchone()
        return int(row[0]) if row else 0

    def commit_offset(self, name: str, offset: int, *, expected: int | None = None) -> bool:
        """Set consumer ``name``'s committed offset (call inside the transaction that applied the records).

        With ``expected``, only when the committed offset still is ``expected`` (or none was committed
        and ``expected`` is 0 or more): returns whether it was set, in one statement.
        """
        if expected is None:
            self._conn.execute(
                'INSERT INTO consumers (name, "offset") VALUES (?, ?) '
                'ON CONFLICT(name) DO UPDATE SET "offset" = excluded."offset"',
                (name, offset),
            )
            return True
        cur = self._conn.execute(
            'INSERT INTO consumers (name, "offset") VALUES (?, ?) '
            'ON CONFLICT(name) DO UPDATE SET "offset" = excluded."offset" WHERE consumers."offset" = ?',
            (name, offset, expected),
        )
        return cur.rowcount == 1

    def save_snapshot(self, name: str, offset: int, kind: str, blob: bytes) -> None:
        """Keep ``blob`` as consumer ``name``'s state after ``offset`` (replacing the previous one)."""
        self._conn.execute(
            'INSERT INTO snapshots (name, "offset", kind, blob) VALUES (?, ?, ?, ?) ON CONFLICT(name) '
            'DO UPDATE SET "offset" = excluded."offset", kind = excluded.kind, blob = excluded.blob',
            (name, offset, kind, blob),
        )

    def load_snapshot(self, name: str) -> tuple[int, str, bytes] | None:
        """Consumer ``name``'s latest snapshot as (offset, kind, blob), if any."""
        row = self._conn.execute(
            'SELECT "offset", kind, blob FROM snapshots WHERE name = ?', (name,)
        ).fetchone()
        return (int(row[0]), str(row[1]), bytes(row[2])) if row else None

    def was_applied(self, consumer: str, event_id: str) -> bool:
        """Whether consumer ``consumer`` has applied the record with ``event_id``."""
        row = self._conn.execute(
            "SELECT 1 FROM applied WHERE consumer = ? AND event_id = ?", (consumer, event_id)
        ).fetchone()
        return row is not None

    def mark_applied(self, consumer: str, event_id: str, offset: int) -> None:
        """Remember that ``consumer`` applied ``event_id``, read at ``offset`` (inside the transaction
        that applied it)."""
        self.mark_applied_many(consumer, [(event_id, offset)])

    def mark_applied_many(self, consumer: str, ids: Sequence[tuple[str, int]]) -> None:
        """:meth:`mark_applied` for several (event id, offset) pairs at once."""
        insert = 'INSERT OR IGNORE INTO applied (consumer, event_id, "offset") VALUES (?, ?, ?)'
        self._conn.executemany(insert, [(consumer, e, o) for e, o in ids])

    def applied_among(self, consumer: str, event_ids: Sequence[str]) -> set[str]:
        """Which of ``event_ids`` ``consumer`` has applied (one query for a batch's records: a lookup in the
        table's primary key each, never the consumer's whole history)."""
        if len(event_ids) <= 1:
            return {e for e in event_ids if self.was_applied(consumer, e)}
        cur = self._conn.execute(  # CROSS JOIN: the ids outside (SQLite would otherwise scan the consumer's)
            "SELECT a.event_id FROM json_each(?) AS j CROSS JOIN applied AS a "
            "ON a.consumer = ? AND a.event_id = j.value",
            (json.dumps(list(event_ids)), consumer),
        )
        return {str(r[0]) for r in cur}

    def applied_ids(self, consumer: str) -> set[str]:
        """Every event id ``consumer`` has applied (its whole history: for tools and tests; a runner never
        reads it, it asks :meth:`applied_among`)."""
        cur = self._conn.execute("SELECT event_id FROM applied WHERE consumer = ?", (consumer,))
        return {str(r[0]) for r in cur}

    def forget_applied(self, consumer: str, after: int) -> None:
        """Forget what ``consumer`` applied from records after ``after``: it is about to apply them again
        (restarting from a snapshot taken at ``after``, or from scratch with 0). A range of the
        ``applied_offset`` index, not a scan of the consumer's history."""
        self._conn.execute('DELETE FROM applied WHERE consumer = ? AND "offset" > ?', (consumer, after))

    def kept_value(self, consumer: str, name: str, key: str) -> str | None:
        """The value ``consumer`` keeps under ``key`` in its map ``name`` (``kept`` table), if any: the one
        written last (a key written again keeps its earlier rows, so that forgetting what follows a
        snapshot brings back the value the snapshot saw)."""
        row = self._conn.execute(
            "SELECT value FROM kept WHERE consumer = ? AND name = ? AND key = ? "
            'ORDER BY "offset" DESC LIMIT 1',
            (consumer, name, key),
        ).fetchone()
        return str(row[0]) if row else None

    def keep_many(self, consumer: str, name: str, entries: Iterable[tuple[str, str, int]]) -> None:
        """Keep ``(key, value, offset)`` entries in ``consumer``'s map ``name`` (inside the transaction that
        applied the records at those offsets; the same key at the same offset is replaced)."""
        self._conn.executemany(
            'INSERT OR REPLACE INTO kept (consumer, name, key, value, "offset") VALUES (?, ?, ?, ?, ?)',
            [(consumer, name, k, v, o) for k, v, o in entries],
        )

    def forget_kept(self, consumer: str, after: int) -> None:
        """Forget what ``consumer`` kept from records after ``after`` (as :meth:`forget_applied`)."""
        self._conn.execute('DELETE FROM kept WHERE consumer = ? AND "offset" > ?', (consumer, after))

    def meta(self, name: str) -> str | None:
        """The value a tool stored under ``name`` (e.g. the demo's session options), if any."""
        try:
            row = self._conn.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        except sqlite3.OperationalError:  # a log written before the table existed, opened read-only
            return None
        return str(row[0]) if row else None

    def set_meta(self, name: str, value: str) -> None:
        """Store ``value`` under ``name`` (replacing it): facts about the file, never records."""
        with self.transaction():
            self._conn.execute(
                "INSERT INTO meta (name, value) VALUES (?, ?) "
                "ON CONFLICT(name) DO UPDATE SET value = excluded.value",
                (name, value),
            )

    def drop_snapshots(self) -> None:
        """Forget every snapshot (after a processor's state shape changed): the next start replays."""
        with self.transaction():
            self._conn.execute("DELETE FROM snapshots")


_JOINED = nullcontext()
"""What :meth:`EmbeddedLog.transaction` gives inside a transaction: nothing to begin or end."""


class _Transaction:
    """:meth:`EmbeddedLog.transaction` when none is open: begin, then commit (rollback on an error)."""

    __slots__ = ("log", "write")

    def __init__(self, log: EmbeddedLog, write: bool) -> None:
        self.log, self.write = log, write

    def __enter__(self) -> None:
        self.log._begin(self.write)

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is None:
            self.log._commit(self.write)
        else:
            self.log._rollback()


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
        kind = f"{fmt}:{self._kind.partition(':')[2]}"
        if (data["format"], data["processor"]) != (SNAPSHOT_READ.get(fmt), kind):
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


LAGGING = frozenset({"audit"})
"""Consumers :meth:`EmbeddedBus.advance` lets lag: what they write no other stage reads back."""


GROUP_RECORDS = 1000
"""How many records :meth:`EmbeddedBus.advance` lets pile up in one transaction before it commits. The
time the commits take falls with their number while what a crash loses grows (it is re-derived, so
only time): 1,000 is where the curve flattens (docs/performance.md#embedded-group-commit,
docs/adr/0004-group-commit.md).
The crash tests' sessions (about 1,450 records) still commit once before their final drain."""


class EmbeddedBus:
    """The simulator's bus over the embedded log: dealer, settlement (payout, wallet), audit, monitor.

    :meth:`drain` runs every runner until idle. :meth:`advance` is what the simulator calls between
    the steps of a coup: the stages a table waits for and the monitor run until idle, while audit
    (:data:`LAGGING`) catches up only once ``lag_records`` records have piled up, in large batches.

    Why audit only, and why that changes no record: no stage reads audit's outputs back (findings and
    checkpoints; its dead letters raise no alert, the monitor alerts on the primary consumer's only),
    so every other stage appends the same records in the same order as if audit ran in lockstep. Audit
    reads its inputs in log order, which is then the same too, so it derives the very same records:
    only their offsets move (later in the log). The monitor does not lag: audit's checkpoints count the
    alerts audit has read so far, so alerts written later would change what a checkpoint claims.

    **Group commit across steps.** :meth:`advance` does not commit: its appends and every runner round
    it runs join one transaction the bus holds open, committed once ``group_records`` records have
    been added since it began (and by :meth:`publish`, :meth:`drain`, :meth:`commit` and
    :meth:`close`). The records and their order are those of a commit per step; only the commits are
    far fewer. A crash loses the steps since the last commit, never part of
    one: every commit ends a whole ``advance`` (a point where the log was committed before too), so
    what is left is a log the resumed session (which re-publishes from scratch; identical records are
    no-ops) carries on from, as after a kill between two steps. An error inside a step rolls the
    group back and reloads every runner from the log. ``group_records=0`` commits every step.

    **Event driven** (``event_driven=True``): the simulator then waits for each record it needs
    (:meth:`wait`) instead of advancing the bus after every table's turn. :meth:`publish` appends into
    the held group without running anything, and a :meth:`wait` returns a record already on the log at
    once, else runs the stages as :meth:`advance` does and looks again. So every table's turn goes out
    before the pipeline runs, and the runners read several records a batch, half as many batches
    (docs/performance.md#embedded-group-commit). The session's waits keep
    every stream's order as in lockstep (:class:`services.simulation.simulator.Session`), so every stream, the
    digest included, is the same; only the interleaving of the streams in the log differs (another
    export), the same for the same seed, run after run. Commits come at the end of a wait (once
    ``group_records`` records piled up): a crash leaves the log of a moment the session was waiting, and
    the resumed session, replayed from scratch, finds every record it waits for up to that moment and
    goes on from there as the uninterrupted one did.
    """

    def __init__(
        self,
        path: str | Path,
        runners: Sequence[tuple[str, Processor[Any]]],
        *,
        lag_records: int = 5000,
        synchronous: Synchronous | None = None,
        group_records: int = GROUP_RECORDS,
        event_driven: bool = False,
    ) -> None:
        self.log = EmbeddedLog(path, synchronous=synchronous)
        self.event_driven = event_driven
        self.runners: list[Runner[Any]] = [
            Runner(self.log, proc, name) for name, proc in runners
        ]
        self._interactive = [r for r in self.runners if r.name not in LAGGING]
        self._lagging = [r for r in self.runners if r.name in LAGGING]
        self.lag_records = lag_records
        self.group_records = group_records
        self._cursors: dict[tuple[str, str], int] = {}
        self._group: AbstractContextManager[None] | None = None
        """The transaction :meth:`advance` holds open (group commit), if any."""
        self._group_from = 0
        """How many records the log had appended (:attr:`EmbeddedLog.appended`) when the group began."""
        self._waited: dict[tuple[str, str], Stream] = {}
        """Event driven: the records of every stream waited on so far, in log order, up to
        :attr:`_indexed_to` (:meth:`wait`)."""
        self._indexed_to = 0

    @contextmanager
    def _grouped(self) -> Iterator[None]:
        """Run the body inside the held transaction (begun if none is held); on an error roll the whole
        group back and reload every runner from what the log committed, then let the error go on."""
        if self._group is None:
            begun = self.log.transaction()
            begun.__enter__()
            self._group, self._group_from = begun, self.log.appended
        try:
            yield
        except BaseException as exc:
            held, self._group = self._group, None
            if held is not None:  # rolled back (and the decoded records forgotten)
                held.__exit__(type(exc), exc, exc.__traceback__)
            self._forget()
            raise

    def _forget(self) -> None:
        """After a rollback: reload every runner, and forget the records read that may be gone."""
        for runner in self.runners:
            runner.restore()
        self._waited.clear()
        self._indexed_to = 0

    def commit(self) -> None:
        """Commit the transaction :meth:`advance` holds, if any."""
        group, self._group = self._group, None
        if group is not None:
            try:
                group.__exit__(None, None, None)  # the runners' deferred writes, then COMMIT
            except BaseException:  # rolled back: reload every runner from what the log committed
                self._forget()
                raise
            self.log.checkpoint_if_due()

    def publish(self, envelopes: list[Envelope]) -> None:
        """Append outside records, committed on return (with whatever :meth:`advance` held); event
        driven, held in the group like the rest (committed by a later :meth:`wait` or :meth:`drain`)."""
        with self._grouped():
            self.log.append(envelopes)
        if not self.event_driven:
            self.commit()

    def drain(self, *, seal: bool = True) -> None:
        """Run every processor until nothing is left to do, then (``seal``) each writer's ``idle`` seal;
        commit."""
        with self._grouped():
            run_until_idle(self.runners, seal=seal)
        self.commit()

    def advance(self, envelopes: Sequence[Envelope] = ()) -> None:
        """Append ``envelopes`` and run every stage but the lagging ones until idle; the lagging ones once
        they lag by ``lag_records``. All of it in the transaction the bus holds (group commit: see the
        class docstring), committed once ``group_records`` records have piled up in it."""
        with self._grouped():
            if envelopes:
                self.log.append(envelopes)
            self._run_interactive()
        self._commit_if_due()

    def _run_interactive(self) -> None:
        """Every stage but the lagging ones until idle, the lagging ones once they lag by
        ``lag_records`` (inside the held group)."""
        run_until_idle(self._interactive)
        if self._lagging and self.log.head() - min(r.position for r in self._lagging) >= self.lag_records:
            run_until_idle(self._lagging, self.lag_records)

    def _commit_if_due(self) -> None:
        if self.log.appended - self._group_from >= self.group_records:
            self.commit()

    def read(self, topic: str, key: str) -> list[Envelope]:
        """The records on ``topic`` under ``key`` not yet returned by an earlier call."""
        found = list(self._records(topic, key, self._cursors.get((topic, key), 0)))
        if found:
            self._cursors[(topic, key)] = found[-1][0]
        return [env for _offset, env in found]

    def wait(self, topic: str, key: str, match: Callable[[Envelope], bool]) -> Envelope:
        """The first record on ``topic`` under ``key`` that ``match`` accepts (:class:`LookupError` if
        there is none once every processor is idle: nothing would write it).

        Not event driven: once every processor has run until idle. Event driven: a record already on
        the log is returned at once; else the stages run until idle (as :meth:`advance` runs them),
        then every processor."""
        if not self.event_driven:
            self.drain(seal=False)
            for _offset, env in self._records(topic, key, 0):
                if match(env):
                    return env
            raise LookupError(f"no such record on {topic} under {key}, and the processors are idle")
        stream = self._waited.get((topic, key))
        if stream is not None and (known := stream.first(match)) is not None:
            return known  # read already: nothing to run, nothing new to commit
        with self._grouped():
            found = self._find(topic, key, match)
            if found is None:
                self._run_interactive()
                found = self._find(topic, key, match)
            if found is None:
                run_until_idle(self.runners)
                found = self._find(topic, key, match)
        self._commit_if_due()
        if found is None:
            raise LookupError(f"no such record on {topic} under {key}, and the processors are idle")
        return found

    def _find(self, topic: str, key: str, match: Callable[[Envelope], bool]) -> Envelope | None:
        """The first record on the stream that ``match`` accepts among those on the log now, looking only
        at the records not looked at already (:meth:`wait` has looked at those read before it ran)."""
        stream = self._waited.get((topic, key))
        if stream is None:
            self._index()
            stream = self._waited[(topic, key)] = Stream()
            for _offset, env in self._records(topic, key, 0):
                stream.add(env)
            return stream.first(match)
        known = len(stream.records)  # every record up to here was looked at: by wait, or the last _find
        self._index()
        return stream.first(match, known) if len(stream.records) > known else None

    def _index(self) -> None:
        """Bring every stream waited on up to the log's head."""
        rows = self.log.read_after(self._indexed_to)
        if not rows:
            return
        waited = self._waited
        for offset, topic, key, raw in rows:
            stream = waited.get((topic, key))
            if stream is not None:
                try:
                    stream.add(self.log.decode(offset, raw))
                except intake.DecodeError:  # no match accepts it; its readers dead-letter it
                    continue
        self._indexed_to = rows[-1][0]

    def _records(self, topic: str, key: str, after: int) -> Iterator[tuple[int, Envelope]]:
        """The records on ``topic`` under ``key`` after offset ``after``, with their offsets, in log order
        (each decoded once for every reader: :meth:`EmbeddedLog.decode`; undecodable ones left out)."""
        while rows := self.log.read_key(topic, key, after):
            for offset, _topic, _key, raw in rows:
                try:
                    yield offset, self.log.decode(offset, raw)
                except intake.DecodeError:  # its readers dead-letter it
                    continue
            after = rows[-1][0]

    def close(self) -> None:
        """Commit what is held, leave a snapshot of every runner that applied records since its last
        (:meth:`Runner.snapshot_if_behind`: the next start re-applies little), then close the log."""
        self.commit()
        if any(runner.snapshot_due() for runner in self.runners):
            with self.log.transaction():  # one commit for all of them
                for runner in self.runners:
                    runner.snapshot_if_behind()
        self.log.close()
