"""The projector and the read model, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine, func, select

from services.cli.demo import summarise
from services.integrations.backoffice import queries
from services.integrations.backoffice import schema as s
from services.integrations.backoffice.projector import INPUTS, Periods, Projector, dump_rows
from services.runtime.embedded.store import EmbeddedLog
from tests.backoffice.folds import fold, records


def project(engine: Engine, path: Path, batch: int = 1000) -> Projector:
    projector = Projector(engine)
    with EmbeddedLog(path, readonly=True) as log:
        projector.catch_up(log, batch=batch)
    return projector


def test_migrations_create_exactly_the_schema(engine: Engine) -> None:
    """The shipped Alembic migrations produce exactly the tables, columns and indexes of the metadata."""
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), s.metadata)
    assert diff == []


def test_balances_and_statements_equal_the_fold_of_postings(engine: Engine, demo_log: Path) -> None:
    """Every account's balance and statement lines equal the fold of the log's postings."""
    project(engine, demo_log)
    balances, lines = fold(demo_log)
    assert len(balances) > 10
    with engine.connect() as c:
        for account, expected in balances.items():
            assert queries.balance(c, account)["balance_minor"] == expected, account
            got = queries.statement(c, account, limit=queries.MAX_PAGE)
            page = [(e["transfer_id"], e["amount_minor"], e["balance_after_minor"]) for e in got["entries"]]
            assert page == lines[account][: queries.MAX_PAGE], account


def test_wallet_balances_agree_with_the_wallet_stage(engine: Engine, demo_log: Path) -> None:
    """For every player wallet the projected balance is the wallet stage's last balance_after_minor."""
    project(engine, demo_log)
    last: dict[str, int] = {}
    for rec in records(demo_log):
        if rec["topic"] == "casino.wallet.events" and "balance_after_minor" in rec["payload"]:
            last[rec["payload"]["account_id"]] = rec["payload"]["balance_after_minor"]
    assert last
    with engine.connect() as c:
        for account, expected in last.items():
            assert queries.balance(c, account)["balance_minor"] == expected


def test_rebuild_gives_identical_rows(engine: Engine, demo_log: Path) -> None:
    """A read model dropped and rebuilt from the log, in other batch sizes, holds the very same rows."""
    projector = project(engine, demo_log)
    before = dump_rows(engine)
    assert before["bo_statement_lines"] and before["bo_rounds"]
    with EmbeddedLog(demo_log, readonly=True) as log:
        projector.rebuild()
        assert dump_rows(engine)["bo_accounts"] == []
        projector.catch_up(log, batch=37)
    assert dump_rows(engine) == before


def test_projection_is_exactly_once(engine: Engine, demo_log: Path) -> None:
    """Re-applying records at or before the position changes nothing; a failing batch leaves nothing."""
    projector = project(engine, demo_log)
    before = dump_rows(engine)
    with EmbeddedLog(demo_log, readonly=True) as log:
        rows = log.read(INPUTS, 0, 500)
    assert projector.apply(rows) == 0
    assert dump_rows(engine) == before

    fresh = Projector(engine, name="second")
    bad = [*rows[:50], (rows[49][0] + 1, "casino.wallet.events", "x", b"{}")]

    def boom(*_a: object) -> None:
        raise RuntimeError("crash in the middle of a batch")

    fresh._apply_one = boom  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        fresh.apply(bad)
    assert fresh.position() == 0
    assert dump_rows(engine) == before


def test_round_records_are_complete(engine: Engine, demo_log: Path) -> None:
    """Each resolved coup's record holds every card dealt, every decision and every accepted bet."""
    project(engine, demo_log)
    recs = records(demo_log)
    cards: Counter[str] = Counter(r["payload"]["coup_id"] for r in recs if r["type"] == "CardDealt")
    decisions = Counter(r["payload"]["coup_id"] for r in recs if r["type"] == "DecisionMade")
    stakes = Counter()
    for r in recs:
        if r["type"] == "BetAccepted":
            stakes[r["payload"]["coup_id"]] += r["payload"]["stake_minor"]
    resolved = [r["payload"] for r in recs if r["type"] == "CoupResolved"]
    assert resolved and sum(decisions.values()) > 0
    with engine.connect() as c:
        for p in resolved:
            got = queries.coup_record(c, p["coup_id"])
            assert got is not None and got["status"] == "resolved"
            assert got["variant"] == p["variant"] and got["rules_version"] == p["rules_version"]
            assert got["paytable"]
            assert (got["started_at"], got["ended_at"]) == (p["started_at"], p["ended_at"])
            assert len(got["cards"]) == cards[p["coup_id"]]
            dealt = Counter((x["hand"], x["card"]) for x in got["cards"])
            expected = Counter((h, card) for h, hand in p["hands"].items() for card in hand["cards"])
            assert dealt == expected
            assert len(got["decisions"]) == decisions[p["coup_id"]]
            assert all(d["decided_by"] for d in got["decisions"])
            accepted = [b for b in got["bets"] if b["status"] == "settled"]
            assert sum(b["stake_minor"] for b in accepted) == stakes[p["coup_id"]]
            for b in accepted:
                assert b["balance_before_minor"] - b["stake_minor"] == b["balance_after_minor"]
                assert b["payout_balance_after_minor"] is not None


def test_table_reports_agree_with_the_demo_summary(engine: Engine, demo_log: Path) -> None:
    """Per table, the gaming-day report's coups, bets, handle, win and commission equal the demo's own
    summary of the log (one gaming day: the session lasts minutes)."""
    project(engine, demo_log)
    with EmbeddedLog(demo_log, readonly=True) as log:
        summary = summarise(raw for *_, raw in log.iter_all())
    with engine.connect() as c:
        day = queries.latest_day(c)
        for table_id, t in summary.items():
            r = queries.table_report(c, table_id, day)
            assert (r["coups"], r["bets"], r["handle_minor"], r["win_minor"], r["commission_minor"]) == (
                t.coups,
                t.bets,
                t.handle_minor,
                t.win_minor,
                t.commission_minor,
            )
            shifts = queries.table_shifts(c, table_id, day)
            assert sum(x["handle_minor"] for x in shifts) == r["handle_minor"]


def test_alerts_and_findings_are_projected(engine: Engine, demo_log: Path) -> None:
    """Every AnomalyDetected and AuditFinding of the log is one row, with its subject intact."""
    project(engine, demo_log)
    recs = records(demo_log)
    anomalies = [r for r in recs if r["type"] == "AnomalyDetected"]
    found = [r for r in recs if r["type"] == "AuditFinding"]
    with engine.connect() as c:
        assert c.execute(select(func.count()).select_from(s.alerts)).scalar() == len(anomalies)
        assert c.execute(select(func.count()).select_from(s.findings)).scalar() == len(found)
        listed = queries.alerts(
            c, table_id=None, account_id=None, severity=None, since=None, cursor=0, limit=queries.MAX_PAGE
        )
    assert [a["subject"] for a in listed["alerts"]] == [r["payload"]["subject"] for r in anomalies][:500]


@pytest.mark.parametrize(
    ("occurred_at", "cutoff", "shift_hours", "day", "shift"),
    [
        ("2026-11-22T05:59:59.999Z", 6, 8, "2026-11-21", 3),  # before the cut-off: yesterday's night shift
        ("2026-11-22T06:00:00.000Z", 6, 8, "2026-11-22", 1),
        ("2026-11-22T13:59:00.000Z", 6, 8, "2026-11-22", 1),
        ("2026-11-22T14:00:00.000Z", 6, 8, "2026-11-22", 2),
        ("2026-11-22T22:00:00.000Z", 6, 8, "2026-11-22", 3),
        ("2026-11-23T01:00:00.000Z", 6, 8, "2026-11-22", 3),
        ("2026-11-22T00:00:00.000Z", 0, 12, "2026-11-22", 1),
        ("2026-11-22T12:00:00.000Z", 0, 12, "2026-11-22", 2),
        ("2026-11-22T07:30:00+02:00", 6, 8, "2026-11-21", 3),  # 05:30 UTC
    ],
)
def test_gaming_day_and_shift(occurred_at: str, cutoff: int, shift_hours: int, day: str, shift: int) -> None:
    """A time maps to the gaming day that started at the last cut-off, and to its shift."""
    assert Periods(cutoff, shift_hours).of(occurred_at) == (day, shift)


def test_invalid_records_are_skipped(engine: Engine) -> None:
    """Garbage and forged-looking records on an input topic are counted as skipped, not projected."""
    projector = Projector(engine)
    forged = {
        "event_id": "x",
        "type": "FundsDeposited",
        "topic": "casino.wallet.events",
        "key": "a",
        "occurred_at": "2026-01-01T00:00:00Z",
        "producer": "evil",
        "hash": "0",
        "payload": {"no": 1},
    }
    rows = [
        (1, "casino.wallet.events", "a", b"not json"),
        (2, "casino.wallet.events", "a", json.dumps(forged).encode()),
    ]
    assert projector.apply(rows) == 2
    assert projector.skipped == 2 and projector.position() == 2
    assert dump_rows(engine)["bo_accounts"] == []
