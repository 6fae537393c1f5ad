"""The embedded runtime's log (docs/architecture.md, the default): every record of every topic in one
SQLite file, consumer offsets, applied ids, kept entries and snapshots (:class:`EmbeddedLog`); its
runners are :mod:`services.runtime.embedded.runner`.

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

**Durability.** WAL journal, ``synchronous=NORMAL`` by default (``CASINO_SQLITE_SYNCHRONOUS``): a commit
survives any process crash (SIGKILL, which the crash tests check at seeded moments), and a power loss or
an OS crash may lose the last committed batches but never corrupts the file or half-applies a batch: a
batch's outputs, committed offset and applied ids are one transaction, and WAL replays whole transactions
or none. The WAL is fsynced at each checkpoint instead of each commit. Checkpoints run when the pipeline
is idle (:meth:`EmbeddedLog.checkpoint_if_due`: at the end of
:func:`~services.runtime.embedded.runner.run_until_idle` and of a group commit, once
:data:`CHECKPOINT_RECORDS` records were appended since the last), not inside a burst: SQLite's own
checkpoint, every 1,000 pages by default, copied the WAL into the file and fsynced both inside the
commits of the 5,000 credits after a coup (docs/performance.md#embedded-log-checkpoints-and-page-cache).
SQLite's automatic checkpoint stays as a bound (:data:`WAL_AUTOCHECKPOINT_PAGES`), so a power loss
forgets at most that much of the WAL. What such a loss forgets is a suffix of the log: the processors
re-derive it from the inputs still there, but an outside writer's record acknowledged in that suffix (a
deposit at the cashier) is gone. Where that matters, set ``CASINO_SQLITE_SYNCHRONOUS=FULL``: every commit
is fsynced before it returns, at the cost of one fsync per transaction (the runner commits once per
batch).
"""

from __future__ import annotations

import json
import sqlite3
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Literal

from services.core.envelope import Envelope
from services.core.trust import Sealed
from services.runtime import intake
from services.runtime.failures import NotALog
from services.runtime.settings import setting

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

_PAGE = 1000


def _rows(cur: sqlite3.Cursor) -> list[Row]:
    """The rows of a ``SELECT "offset", topic, key, body`` as SQLite gives them: the columns' types
    already are int, str, str and bytes (a BLOB), so converting each one again per row cost more than
    the query for the runners' short reads (docs/performance.md#embedded-log-reads-and-transactions)."""
    rows: list[Row] = cur.fetchall()
    return rows


_INSERT = "INSERT INTO records (topic, key, event_id, type, body, internal) VALUES (?, ?, ?, ?, ?, ?)"

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
