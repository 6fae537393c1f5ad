"""The embedded SQLite log and its runner, on real files, with toy processors defined here."""

from __future__ import annotations

import io
import json
import sqlite3
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from services.core import topics
from services.core.envelope import (
    Draft,
    Envelope,
    derive_id,
    name_id,
    parse_record,
    request,
    stage_namespace,
)
from services.core.errors import DomainError, Reason
from services.core.processor import Processor
from services.runtime.compose import demo_pipeline
from services.runtime.embedded.bus import EmbeddedBus
from services.runtime.embedded.runner import ConsumerMoved, Runner, run_until_idle
from services.runtime.embedded.store import (
    CHECKPOINT_RECORDS,
    WAL_AUTOCHECKPOINT_PAGES,
    EmbeddedLog,
    LogConflict,
)
from services.runtime.failures import ConfigError
from services.runtime.intake import EPOCH_OCCURRED_AT
from services.runtime.logging import bound, configure, get_logger
from services.runtime.replay import read_db, replay
from services.simulation.simulator import DEFAULT_TABLES, Session
from tests.helpers.kill import run_with_kills
from tests.helpers.membus import MemBus

Counts = dict[str, int]


class Echo(Processor[Counts]):
    """Echoes each inbox record on the table's event stream; every 4th per key adds a second event."""

    name = "echo"
    inputs: ClassVar[tuple[str, ...]] = (topics.TABLE_INBOX,)

    def initial(self) -> Counts:
        """No key seen yet."""
        return {}

    def handle(self, state: Counts, record: Envelope) -> tuple[Counts, list[Draft]]:
        """Refuse ``refuse`` payloads with a DomainError; otherwise count and echo."""
        if record.payload.get("refuse"):
            raise DomainError(Reason.WRONG_PHASE, "refused on request")
        n = state.get(record.key, 0) + 1
        echoed = {"n": n, "value": record.payload["value"]}
        drafts = [Draft("Echoed", topics.TABLE_EVENTS, record.key, echoed)]
        if n % 4 == 0:
            drafts.append(Draft("Fourth", topics.TABLE_EVENTS, record.key, {"n": n}))
        return {**state, record.key: n}, drafts


class SlowEcho(Echo):
    """Echo that takes a millisecond per record, so that kills land inside transactions."""

    def handle(self, state: Counts, record: Envelope) -> tuple[Counts, list[Draft]]:
        """As Echo, slowly."""
        time.sleep(0.001)
        return super().handle(state, record)


class Tally(Processor[int]):
    """Reads the echoes and writes a running total per table to the findings stream."""

    name = "tally"
    inputs: ClassVar[tuple[str, ...]] = (topics.TABLE_EVENTS,)

    def initial(self) -> int:
        """Nothing counted yet."""
        return 0

    def handle(self, state: int, record: Envelope) -> tuple[int, list[Draft]]:
        """Count one event."""
        return state + 1, [Draft("Tallied", topics.AUDIT_FINDINGS, record.key, {"total": state + 1})]


def ping(i: int, *, refuse: bool = False, key: str | None = None) -> Envelope:
    """The i-th toy input, on one of three tables."""
    return request(
        "Ping",
        topics.TABLE_INBOX,
        key or f"table-{i % 3}",
        {"value": i, "refuse": refuse},
        event_id=name_id("toy", str(i)),
        occurred_at=f"2026-11-22T20:{i // 60 % 60:02d}:{i % 60:02d}.000Z",
        producer="test",
    )


MALFORMED: list[bytes] = [
    b"\xff\xfe not even utf-8",
    b"{not json",
    b"[1, 2, 3]",
    b'{"event_id": "x-1", "occurred_at": "2026-11-22T21:00:00.000Z"}',
]


def write_inputs(log: EmbeddedLog, n: int, *, malformed_every: int = 0, refuse_every: int = 0) -> None:
    """n pings, some refused, with malformed bytes slipped in between."""
    for i in range(n):
        if malformed_every and i % malformed_every == malformed_every - 1:
            log.append_raw(topics.TABLE_INBOX, "table-x", MALFORMED[i // malformed_every % len(MALFORMED)])
        log.append([ping(i, refuse=bool(refuse_every) and i % refuse_every == refuse_every - 1)])


def rows(log: EmbeddedLog) -> list[tuple[int, str, str, bytes]]:
    """The whole log."""
    return list(log.iter_all())


def on(log: EmbeddedLog, topic: str) -> list[Envelope]:
    """The decoded records of one topic, in log order."""
    return [parse_record(raw) for _, t, _, raw in log.iter_all() if t == topic]


def reference_log(db: Path, n: int, **kw: Any) -> list[tuple[int, str, str, bytes]]:
    """The log after one uninterrupted run of Echo in one batch."""
    with EmbeddedLog(db) as log:
        write_inputs(log, n, **kw)
        Runner(log, Echo(), batch_limit=10_000).step_batch()
        return rows(log)


def test_outputs_are_numbered_chained_and_hashed(tmp_path: Path) -> None:
    """Each table's echoes carry seq 0,1,2…, link by prev_hash, hash-verify and derive ids from the input."""
    with EmbeddedLog(tmp_path / "log.db") as log:
        write_inputs(log, 30)
        inputs = {e.event_id: e for e in on(log, topics.TABLE_INBOX)}
        Runner(log, Echo(), batch_limit=7).step_batch()
        run_until_idle([Runner(log, Echo(), batch_limit=7)])
        streams: dict[str, list[Envelope]] = defaultdict(list)
        for env in on(log, topics.TABLE_EVENTS):
            streams[env.key].append(env)
    assert sorted(streams) == ["table-0", "table-1", "table-2"]
    for stream in streams.values():
        assert [e.seq for e in stream] == list(range(len(stream)))
        assert [e.prev_hash for e in stream] == [None] + [e.hash for e in stream[:-1]]
        assert all(e.hash == e.expected_hash() for e in stream)
        for e in stream:
            cause = inputs[e.causation_id or ""]
            assert e.causation_hash == cause.hash
            assert e.occurred_at == cause.occurred_at
            ns = stage_namespace(Echo.stage_name())
            assert e.event_id in {derive_id(cause.event_id, 0, ns), derive_id(cause.event_id, 1, ns)}
    assert sum(len(s) for s in streams.values()) == 30 + 3 * (10 // 4)  # 10 per table; every 4th adds one


def test_committed_offset_is_the_last_input_applied(tmp_path: Path) -> None:
    """After each batch the consumer's committed offset is the offset of the last input it read."""
    with EmbeddedLog(tmp_path / "log.db") as log:
        write_inputs(log, 10)
        input_offsets = [o for o, t, _, _ in rows(log) if t == topics.TABLE_INBOX]
        runner = Runner(log, Echo())
        assert runner.step_batch(4).offset == input_offsets[3]
        assert log.committed("echo") == input_offsets[3]
        runner.step_batch(100)
        assert log.committed("echo") == input_offsets[-1]
        assert runner.step_batch(100).records == 0


def test_restart_from_snapshot_gives_the_uninterrupted_log(tmp_path: Path) -> None:
    """A runner restarted from a snapshot older than its offset re-derives nothing new: same log."""
    expected = reference_log(tmp_path / "ref.db", 40, refuse_every=7)
    with EmbeddedLog(tmp_path / "log.db") as log:
        write_inputs(log, 40, refuse_every=7)
        first = Runner(log, Echo(), snapshot_every=10, batch_limit=6)
        for _ in range(5):  # full batches: the snapshot due after 12 records waits until 24 (2 x 10)
            first.step_batch()  # 30 records: snapshot after 24, committed at 30
        second = Runner(log, Echo(), snapshot_every=10, batch_limit=6)
        assert second.restored_from is not None
        assert second.restored_from < log.committed("echo")
        run_until_idle([second])
        assert rows(log) == expected


def test_reappending_every_input_changes_nothing(tmp_path: Path) -> None:
    """Appending every input again (as envelopes or as raw bytes) adds no record and no output."""
    with EmbeddedLog(tmp_path / "log.db") as log:
        write_inputs(log, 20)
        runner = Runner(log, Echo())
        run_until_idle([runner])
        before = rows(log)
        inputs = on(log, topics.TABLE_INBOX)
        assert log.append(inputs) == 0
        assert not any(log.append_raw(e.topic, e.key, e.to_json()) for e in inputs)
        assert run_until_idle([runner]) == 0
        run_until_idle([Runner(log, Echo())])  # no snapshot: rebuilds from offset 0, re-deriving all
        assert rows(log) == before


def test_a_different_body_under_an_existing_id_is_refused(tmp_path: Path) -> None:
    """Appending other bytes under an event id the log holds raises LogConflict and writes nothing."""
    with EmbeddedLog(tmp_path / "log.db") as log:
        log.append([ping(1)])
        altered = ping(2).model_copy(update={"event_id": ping(1).event_id})
        with pytest.raises(LogConflict, match=ping(1).event_id):
            log.append([ping(3), altered])
        assert [parse_record(r) for *_, r in rows(log)] == [ping(1)]


def test_malformed_bytes_are_dead_lettered_and_the_rest_goes_on(tmp_path: Path) -> None:
    """Each undecodable record becomes one DeadLetter with its bytes and reason; every ping is echoed."""
    with EmbeddedLog(tmp_path / "log.db") as log:
        write_inputs(log, 16, malformed_every=4)
        raw_bad = [(o, raw) for o, t, _, raw in rows(log) if t == topics.TABLE_INBOX and raw in MALFORMED]
        run_until_idle([Runner(log, Echo(), batch_limit=3)])
        dead = on(log, topics.DEADLETTER)
        echoed = on(log, topics.TABLE_EVENTS)
        view = log._conn.execute('SELECT body FROM deadletter ORDER BY "offset"').fetchall()
    assert len(raw_bad) == 4
    assert [d.payload["original"] for d in dead] == [raw.decode("utf-8", "replace") for _, raw in raw_bad]
    assert {d.payload["reason"] for d in dead} == {Reason.UNDECODABLE.value}
    assert {(d.key, d.payload["source_topic"]) for d in dead} == {(topics.TABLE_INBOX, topics.TABLE_INBOX)}
    assert [d.occurred_at for d in dead] == [EPOCH_OCCURRED_AT] * 3 + ["2026-11-22T21:00:00.000Z"]
    ids = [derive_id(f"dead/echo/{topics.TABLE_INBOX}/{o}", 0) for o, _ in raw_bad]
    assert [d.event_id for d in dead] == ids
    assert [bytes(b) for (b,) in view] == [d.to_json() for d in dead]
    assert sorted(e.payload["value"] for e in echoed if e.type == "Echoed") == list(range(16))


def test_domain_errors_are_dead_lettered_with_their_reason(tmp_path: Path) -> None:
    """A refused input becomes a DeadLetter naming it and its reason, and later inputs are still echoed."""
    with EmbeddedLog(tmp_path / "log.db") as log:
        write_inputs(log, 9, refuse_every=3)
        run_until_idle([Runner(log, Echo())])
        dead = on(log, topics.DEADLETTER)
        echoed = on(log, topics.TABLE_EVENTS)
    assert [d.payload["original_event_id"] for d in dead] == [ping(i).event_id for i in (2, 5, 8)]
    assert {d.payload["reason"] for d in dead} == {Reason.WRONG_PHASE.value}
    assert sorted(e.payload["value"] for e in echoed if e.type == "Echoed") == [0, 1, 3, 4, 6, 7]


def test_an_envelope_on_the_wrong_topic_is_dead_lettered(tmp_path: Path) -> None:
    """A valid envelope written to a topic other than its own is not applied but dead-lettered."""
    stray = request(
        "Ping",
        topics.WALLET_REQUESTS,
        "acc-1",
        {"value": 1},
        event_id="stray",
        occurred_at="2026-11-22T20:00:00.000Z",
        producer="test",
    )
    with EmbeddedLog(tmp_path / "log.db") as log:
        log.append_raw(topics.TABLE_INBOX, "table-0", stray.to_json())
        run_until_idle([Runner(log, Echo())])
        dead = on(log, topics.DEADLETTER)
        assert on(log, topics.TABLE_EVENTS) == []
    assert [(d.payload["reason"], d.occurred_at) for d in dead] == [
        (Reason.INVALID_PAYLOAD.value, stray.occurred_at)
    ]


def test_two_runners_round_robin_until_idle(tmp_path: Path) -> None:
    """run_until_idle drives a processor that reads another's outputs until both are caught up."""
    with EmbeddedLog(tmp_path / "log.db") as log:
        write_inputs(log, 25)
        applied = run_until_idle([Runner(log, Echo(), batch_limit=4), Runner(log, Tally(), batch_limit=3)])
        echoes = on(log, topics.TABLE_EVENTS)
        tallies = on(log, topics.AUDIT_FINDINGS)
        watched = (topics.TABLE_INBOX, topics.TABLE_EVENTS)
        last = {t: max(o for o, tt, _, _ in rows(log) if tt == t) for t in watched}
        committed = (log.committed("echo"), log.committed("tally"))
        assert committed == (last[topics.TABLE_INBOX], last[topics.TABLE_EVENTS])
    assert applied == 25 + len(echoes)
    assert [t.causation_id for t in tallies] == [e.event_id for e in echoes]
    assert [t.payload["total"] for t in tallies] == list(range(1, len(echoes) + 1))


def test_one_log_line_per_batch(tmp_path: Path) -> None:
    """The runner logs one summary line per non-empty batch: processor, records, outputs, offset."""
    configure(level="INFO", stream=io.StringIO())
    with EmbeddedLog(tmp_path / "log.db") as log:
        write_inputs(log, 10)
        runner = Runner(log, Echo(), name="echo-a", batch_limit=4)
        with capture_logs() as logs:
            results = [runner.step_batch() for _ in range(4)]
    batches = [e for e in logs if e["event"] == "batch"]
    assert [(b["processor"], b["records"], b["outputs"], b["offset"]) for b in batches] == [
        ("echo-a", r.records, r.outputs, r.offset) for r in results if r.records
    ]
    assert [r.records for r in results] == [4, 4, 2, 0]


@pytest.mark.parametrize(
    ("fmt", "is_json"), [("json", True), ("console", False)], ids=["LOG_FORMAT=json", "LOG_FORMAT=console"]
)
def test_log_lines_carry_the_bound_context(monkeypatch: pytest.MonkeyPatch, fmt: str, is_json: bool) -> None:
    """LOG_FORMAT picks JSON lines or the console renderer, and bound context reaches every line."""
    monkeypatch.setenv("LOG_FORMAT", fmt)
    monkeypatch.setenv("LOG_LEVEL", "INFO")
    out = io.StringIO()  # not a TTY: without LOG_FORMAT this would be JSON too
    try:
        configure(stream=out)
        with bound(table_id="table-7"):
            get_logger("test").info("hello", records=3)
        get_logger("test").info("after")
    finally:
        configure()
    first, second = out.getvalue().splitlines()
    if is_json:
        assert json.loads(first)["table_id"] == "table-7"
        assert json.loads(first)["records"] == 3
        assert "table_id" not in json.loads(second)
    else:
        assert "table_id=table-7" in first
        assert "table_id" not in second
        assert not first.startswith("{")


def test_iter_all_streams_in_log_order_page_by_page(tmp_path: Path) -> None:
    """iter_all yields every record once, in offset order, across page boundaries, and count agrees."""
    with EmbeddedLog(tmp_path / "log.db") as log:
        write_inputs(log, 11, malformed_every=5)
        paged = list(log.iter_all(page=2))
        assert [r[0] for r in paged] == sorted({r[0] for r in paged})
        assert paged == log.read([topics.TABLE_INBOX], 0, 1000)
        assert log.count() == len(paged) == 13
        assert log.count(topics.TABLE_INBOX) == 13


def test_append_raw_is_idempotent_by_its_event_id(tmp_path: Path) -> None:
    """Raw bytes naming an event id are appended once; bytes without one are appended each time."""
    with EmbeddedLog(tmp_path / "log.db") as log:
        assert [log.append_raw(topics.TABLE_INBOX, "t", ping(1).to_json()) for _ in range(2)] == [True, False]
        assert [log.append_raw(topics.TABLE_INBOX, "t", b"junk") for _ in range(2)] == [True, True]
        assert log.count() == 3


def test_the_wal_is_checkpointed_when_the_pipeline_is_idle_not_inside_a_burst(tmp_path: Path) -> None:
    """SQLite's own checkpoint is only a distant bound; the log checkpoints once CHECKPOINT_RECORDS
    were appended and the pipeline is idle (the end of run_until_idle), never inside a transaction."""
    with EmbeddedLog(tmp_path / "log.db") as log:
        assert log._conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == WAL_AUTOCHECKPOINT_PAGES
        with log.transaction():
            log.append([ping(i) for i in range(CHECKPOINT_RECORDS - 1)])
            assert not log.checkpoint_if_due()  # too few records
            log.append([ping(CHECKPOINT_RECORDS)])
            assert log.unchecked == CHECKPOINT_RECORDS
            assert not log.checkpoint_if_due()  # inside a transaction
        run_until_idle([Runner(log, Echo(), batch_limit=300)])  # the echoes: appended, then idle
        assert log.unchecked == 0
        _busy, frames, done = log._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        assert frames == done > 0
        assert not log.checkpoint_if_due()


def test_a_due_snapshot_waits_until_the_runner_has_caught_up(tmp_path: Path) -> None:
    """While batches come back full (a burst) a due snapshot waits; once a batch comes back short the
    next read takes it (after the burst's last batch committed, not inside it), as does an empty read;
    a runner that never catches up still snapshots at twice the interval."""
    with EmbeddedLog(tmp_path / "log.db") as log:
        write_inputs(log, 38)
        runner = Runner(log, Echo(), snapshot_every=10, batch_limit=6)
        runner.step_batch()
        runner.step_batch()  # 12 records: due, not taken
        assert log.load_snapshot("echo") is None
        runner.step_batch(7)
        assert log.load_snapshot("echo") is None  # 19 records: still full batches
        runner.step_batch(1)  # 20 = 2 x 10: taken however the batch ends
        snap = log.load_snapshot("echo")
        assert snap is not None
        assert snap[0] == runner.position == 20
        runner.step_batch(10)  # 30: due, full
        assert log.load_snapshot("echo") == snap
        runner.step_batch(20)  # the last eight, a short batch: caught up, not in the burst's last batch
        assert log.load_snapshot("echo") == snap
        assert not runner.idle()  # the next read takes it
        assert runner.step_batch().records == 0  # empty: taken
        after = log.load_snapshot("echo")
        assert after is not None
        assert after[0] == runner.position == 38
        assert runner.idle()
        write_inputs(log, 50)  # the first 38 are there already: twelve new records
        runner.step_batch(10)
        assert log.load_snapshot("echo") == after  # 10 due after a full batch: waits
        assert runner.step_batch().records == 2  # short: the next read takes it
        assert log.load_snapshot("echo") == after
        runner.step_batch()  # empty: caught up, taken
        last = log.load_snapshot("echo")
        assert last is not None
        assert last[0] == runner.position > after[0]


def test_an_unreadable_snapshot_is_ignored_and_the_log_replayed(tmp_path: Path) -> None:
    """A corrupt snapshot is not trusted: the runner rebuilds from offset 0 and the log is unchanged."""
    expected = reference_log(tmp_path / "ref.db", 30)
    with EmbeddedLog(tmp_path / "log.db") as log:
        write_inputs(log, 30)
        Runner(log, Echo(), snapshot_every=5, batch_limit=10).step_batch()
        log._conn.execute("UPDATE snapshots SET blob = ?", (b"garbage",))
        resumed = Runner(log, Echo(), snapshot_every=5, batch_limit=10)
        assert resumed.restored_from is None
        run_until_idle([resumed])
        assert rows(log) == expected


def test_two_runners_with_one_name_are_caught(tmp_path: Path) -> None:
    """A runner whose consumer offset was moved by another runner of the same name refuses to step."""
    with EmbeddedLog(tmp_path / "log.db") as log:
        write_inputs(log, 6)
        a, b = Runner(log, Echo(), batch_limit=2), Runner(log, Echo(), batch_limit=2)
        a.step_batch()
        with pytest.raises(ConsumerMoved):
            b.step_batch()
        assert b.step_batch().records == 2  # it reloaded the state and offset, and goes on from there


def test_two_runners_with_one_name_in_one_transaction_are_caught_at_its_commit(tmp_path: Path) -> None:
    """Batches of one transaction write their consumer's offset once, just before it commits: a second
    runner of the same name that committed first is caught there, and the transaction rolls back."""
    with EmbeddedLog(tmp_path / "log.db") as log:
        write_inputs(log, 6)
        a, b = Runner(log, Echo(), batch_limit=2), Runner(log, Echo(), batch_limit=2)
        b.step_batch()
        head = log.head()
        with pytest.raises(ConsumerMoved), log.transaction():
            a.step_batch()
            a.step_batch()
        assert log.head() == head
        assert log.committed("echo") == b.committed


def test_the_batches_of_one_transaction_write_the_offset_and_applied_ids_once(tmp_path: Path) -> None:
    """Inside one transaction (the bus's group commit) a runner's batches leave their committed offset
    and applied ids in memory and write them together before the commit: one statement each, not one
    per batch, with the same result as a transaction per batch."""
    statements: list[str] = []
    with EmbeddedLog(tmp_path / "log.db") as log:
        write_inputs(log, 9)
        runner = Runner(log, Echo(), batch_limit=2)
        marked: list[int] = []
        mark = log.mark_applied_many
        log.mark_applied_many = lambda consumer, ids: (marked.append(len(ids)), mark(consumer, ids))[1]  # type: ignore[method-assign]
        log._conn.set_trace_callback(statements.append)
        with log.transaction():
            for _ in range(4):
                runner.step_batch()
            assert log.committed("echo") == 0  # not written yet
        log._conn.set_trace_callback(None)
        assert sum("INTO consumers" in s for s in statements) == 1
        assert marked == [8]
        assert log.committed("echo") == runner.position
        assert len(log.applied_ids("echo")) == 8
        expected = reference_log(tmp_path / "ref.db", 9)
        run_until_idle([runner])
        assert rows(log) == expected


def test_an_idle_runner_reads_what_another_connection_appended(tmp_path: Path) -> None:
    """A runner that has read everything skips its reads while nothing is appended to its topics, but
    a record another connection (an outside writer, another process) commits is read all the same."""
    db = tmp_path / "log.db"
    with EmbeddedLog(db) as log:
        write_inputs(log, 3)
        runner = Runner(log, Echo())
        run_until_idle([runner])
        assert runner.idle()
        with EmbeddedLog(db) as other:
            other.append([ping(3)])
        assert run_until_idle([runner]) == 1
        assert [e.payload["value"] for e in on(log, topics.TABLE_EVENTS)] == [0, 1, 2, 3]
        log.append([ping(4)])  # through this connection: the runner is no longer idle at once
        assert not runner.idle()


def test_a_readonly_log_reads_and_refuses_writes(tmp_path: Path) -> None:
    """A log opened read-only yields the same records and cannot append."""
    with EmbeddedLog(tmp_path / "log.db") as log:
        write_inputs(log, 5)
        expected = rows(log)
    with EmbeddedLog(tmp_path / "log.db", readonly=True) as log:
        assert rows(log) == expected
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            log.append([ping(99)])


def test_the_log_file_is_in_wal_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The log uses the WAL journal and synchronous=NORMAL (1) by default."""
    monkeypatch.delenv("CASINO_SQLITE_SYNCHRONOUS", raising=False)
    with EmbeddedLog(tmp_path / "log.db") as log:
        assert log._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert log._conn.execute("PRAGMA synchronous").fetchone()[0] == 1


@pytest.mark.parametrize(("value", "pragma"), [("FULL", 2), ("full", 2), ("NORMAL", 1), ("", 1)])
def test_the_synchronous_setting_picks_the_fsync_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str, pragma: int
) -> None:
    """CASINO_SQLITE_SYNCHRONOUS sets the log's PRAGMA synchronous (empty: the NORMAL default)."""
    monkeypatch.setenv("CASINO_SQLITE_SYNCHRONOUS", value)
    with EmbeddedLog(tmp_path / "log.db") as log:
        assert log._conn.execute("PRAGMA synchronous").fetchone()[0] == pragma


def test_a_bad_synchronous_setting_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another value than NORMAL or FULL is refused with the variable's name, and no file is made."""
    monkeypatch.setenv("CASINO_SQLITE_SYNCHRONOUS", "OFF")
    with pytest.raises(ConfigError, match="CASINO_SQLITE_SYNCHRONOUS"):
        EmbeddedLog(tmp_path / "log.db")
    assert not (tmp_path / "log.db").exists()


def test_applied_ids_survive_a_rolled_back_batch_and_a_reopen(tmp_path: Path) -> None:
    """The runner's applied ids are the table's: after a batch that fails the runner restarts from its
    snapshot with the ids of the failed batch forgotten, and a runner reopened on a snapshot knows every
    id applied before it (looked up in the table: it loads none of them)."""
    db = tmp_path / "log.db"
    ids = [ping(i).event_id for i in range(4)]
    with EmbeddedLog(db) as log:
        write_inputs(log, 4)
        runner = Runner(log, Echo(), snapshot_every=1)
        runner.step_batch(2)
        assert log.applied_ids(runner.name) == set(ids[:2])
        assert [i in runner.ids for i in ids] == [True, True, False, False]

        def broken(*_: object, **__: object) -> int:
            raise sqlite3.OperationalError("disk I/O error")

        append, log.append_encoded = log.append_encoded, broken  # type: ignore[method-assign]  # the runner's write
        with pytest.raises(sqlite3.OperationalError):
            runner.step_batch(2)
        log.append_encoded = append  # type: ignore[method-assign]
        assert log.applied_ids(runner.name) == set(ids[:2])
        assert [i in runner.ids for i in ids] == [True, True, False, False]
        run_until_idle([runner])
        expected = rows(log)
        assert log.applied_ids(runner.name) == set(ids)
    with EmbeddedLog(db) as log:
        again = Runner(log, Echo(), snapshot_every=1)
        assert again.restored_from == again.position > 0
        assert all(i in again.state.applied for i in ids)
        assert ping(9).event_id not in again.state.applied
        log.append([ping(0)])  # re-delivered: a no-op, and the runner has nothing new to apply
        run_until_idle([again])
        assert rows(log) == expected


@settings(max_examples=15, deadline=None)
@given(
    n=st.integers(1, 30),
    cuts=st.lists(st.tuples(st.integers(1, 8), st.booleans()), min_size=1, max_size=12),
    snapshot_every=st.integers(1, 12),
)
def test_batching_and_restarts_never_change_the_log(
    n: int, cuts: list[tuple[int, bool]], snapshot_every: int
) -> None:
    """Whatever the batch sizes, snapshot cadence and restart points, the log equals a one-batch run."""
    with tempfile.TemporaryDirectory() as tmp:
        expected = reference_log(Path(tmp) / "ref.db", n, malformed_every=5, refuse_every=4)
        with EmbeddedLog(Path(tmp) / "log.db") as log:
            write_inputs(log, n, malformed_every=5, refuse_every=4)
            runner = Runner(log, Echo(), snapshot_every=snapshot_every)
            for limit, restart in cuts:
                runner.step_batch(limit)
                if restart:
                    runner = Runner(log, Echo(), snapshot_every=snapshot_every)
            run_until_idle([runner])
            assert rows(log) == expected


def _kill_worker(db: Path, pair: bool, ready: Callable[[], None] = lambda: None) -> None:
    """The child: SlowEcho (and Tally) in small batches until idle."""
    with EmbeddedLog(db) as log:
        runners: list[Runner[Any]] = [Runner(log, SlowEcho(), snapshot_every=7, batch_limit=3)]
        if pair:
            runners.append(Runner(log, Tally(), snapshot_every=5, batch_limit=4))
        ready()
        run_until_idle(runners)


@pytest.mark.parametrize("pair", [False, True], ids=["echo", "echo+tally"])
def test_sigkill_at_random_moments_loses_and_repeats_nothing(tmp_path: Path, pair: bool) -> None:
    """Killed with SIGKILL at 25 seeded random moments and resumed, the runners write the uninterrupted log.

    With one runner the whole log is identical byte for byte, offsets included; with two, the
    interleaving of their batches depends on when they were killed, so each topic's sequence is.
    """
    n = 500
    db, ref = tmp_path / "log.db", tmp_path / "ref.db"
    for path in (db, ref):
        with EmbeddedLog(path) as log:
            write_inputs(log, n, malformed_every=9, refuse_every=11)
    _kill_worker(ref, pair)
    offsets: list[int] = []

    def check() -> None:
        conn = sqlite3.connect(db)
        row = conn.execute("SELECT \"offset\" FROM consumers WHERE name = 'echo'").fetchone()
        offsets.append(int(row[0]) if row else 0)
        conn.close()

    report = run_with_kills(
        lambda ready: _kill_worker(db, pair, ready),
        kills=25,
        seed=20261122,
        max_delay_s=0.025,
        between=check,
    )
    assert report.kills == 25
    last_input = max(o for o, t, _, _ in rows_of(ref) if t == topics.TABLE_INBOX)
    assert any(0 < o < last_input for o in offsets)  # the kills interrupted real work, not just start-ups
    got, want = rows_of(db), rows_of(ref)
    if pair:
        for topic in topics.ALL_TOPICS:
            assert [r for _, t, _, r in got if t == topic] == [r for _, t, _, r in want if t == topic], topic
    else:
        assert got == want


def rows_of(db: Path) -> list[tuple[int, str, str, bytes]]:
    """The whole log of the file at ``db``."""
    with EmbeddedLog(db) as log:
        return rows(log)


def test_the_bus_runs_the_real_pipeline_to_the_in_memory_digest() -> None:
    """The dealer, settlement and audit over the SQLite log replay to the same digest as in memory."""
    mem = MemBus()
    Session(mem, seed=3).run(list(DEFAULT_TABLES[:1]), 6)
    with tempfile.TemporaryDirectory() as tmp:
        bus = EmbeddedBus(Path(tmp) / "log.db", demo_pipeline())
        try:
            Session(bus, seed=3).run(list(DEFAULT_TABLES[:1]), 6)
        finally:
            bus.close()
        report = replay(read_db(Path(tmp) / "log.db"))
    expected = replay(mem.log)
    assert report.clean
    attested = report.types.pop("HeadsAttested")  # both sign their heads, each at its own moments
    assert attested >= 1 and expected.types.pop("HeadsAttested") >= 1
    assert report.digest == expected.digest
    assert json.dumps(report.types, sort_keys=True) == json.dumps(expected.types, sort_keys=True)


def test_snapshots_do_not_grow_with_the_records_applied(tmp_path: Path) -> None:
    """A processor's snapshot holds its own state, not the id of every record it applied: after four
    times the records it is no larger and names none of them, yet a restart from it is still exact.

    Regression: the applied ids were pickled into every snapshot (27 MB per stage at 800k records)."""
    sizes = []
    for n in (500, 2000):
        with EmbeddedLog(tmp_path / f"log{n}.db") as log:
            write_inputs(log, n)
            run_until_idle([Runner(log, Echo(), snapshot_every=100, batch_limit=50)])
            snap = log.load_snapshot("echo")
            assert snap is not None
            sizes.append(len(snap[2]))
            assert not any(e.event_id.encode() in snap[2] for e in on(log, topics.TABLE_INBOX))
            write_inputs(log, 5)  # the same five first pings again: the log ignores them
            resumed = Runner(log, Echo(), snapshot_every=100)
            assert resumed.restored_from is not None
            run_until_idle([resumed])
        assert rows_of(tmp_path / f"log{n}.db") == reference_log(tmp_path / f"ref{n}.db", n)
    assert sizes[1] <= sizes[0] * 1.1


@pytest.mark.parametrize("declared", [True, False])
def test_a_snapshot_written_before_a_class_moved_is_read_where_the_move_is_declared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, declared: bool
) -> None:
    """A snapshot names its processor's class by module; a class moved to another module (issue #32)
    declares where it was (``formerly``) and its snapshots are still read, not rebuilt from the log on
    upgrade. Undeclared, the old snapshot is another class's: ignored, the log replayed. Either way the
    log is the same."""
    expected = reference_log(tmp_path / "ref.db", 30)
    with EmbeddedLog(tmp_path / "log.db") as log:
        write_inputs(log, 30)
        Runner(log, Echo(), snapshot_every=5, batch_limit=10).step_batch()
        saved = log.load_snapshot("echo")
        assert saved is not None
        offset, kind, blob = saved  # the class's module named in the row and in the snapshot itself
        moved = kind.replace(Echo.__module__, "services.old.home")
        log.save_snapshot("echo", offset, moved, blob.replace(Echo.__module__.encode(), b"services.old.home"))
        if declared:
            monkeypatch.setattr(Echo, "formerly", ("services.old.home",), raising=False)
        resumed = Runner(log, Echo(), snapshot_every=5, batch_limit=10)
        assert (resumed.restored_from is not None) is declared
        run_until_idle([resumed])
        assert rows(log) == expected
        kind = log.load_snapshot("echo")
        assert kind is not None and Echo.__module__ in kind[1]  # the next snapshot names where it is now
