"""What the API and the command line read from the read model, in the JSON shapes of docs/integration.md."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, func, select

from services.core import figures
from services.integrations.backoffice import schema as s

MAX_PAGE = 500
"""The largest page a list returns."""


def normalise_time(value: str) -> str:
    """An RFC 3339 time (or a ``YYYY-MM-DD`` day) as the log writes times: UTC, milliseconds, ``Z``.

    Raises ``ValueError`` for anything else.
    """
    text = value.strip()
    if len(text) == 10:
        text += "T00:00:00Z"
    t = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    if t.tzinfo is None:
        raise ValueError("a time needs a zone (Z or ±hh:mm)")
    t = t.astimezone(UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def balance(conn: Connection, account_id: str) -> dict[str, Any] | None:
    """``{"account_id", "currency", "balance_minor"}``, or None for an account no posting names."""
    row = conn.execute(
        select(s.accounts.c.currency, s.accounts.c.balance_minor).where(s.accounts.c.account_id == account_id)
    ).first()
    if row is None:
        return None
    return {"account_id": account_id, "currency": row[0], "balance_minor": int(row[1])}


def statement(
    conn: Connection,
    account_id: str,
    *,
    since: str | None = None,
    until: str | None = None,
    cursor: int = 0,
    limit: int = 100,
) -> dict[str, Any]:
    """``{"entries": [...], "next_cursor"}``: the account's lines after ``cursor`` (a line number),
    ``since`` ≤ occurred_at < ``until``, at most ``limit``; ``next_cursor`` is null on the last page."""
    c = s.statement_lines.c
    q = select(s.statement_lines).where(c.account_id == account_id, c.line > cursor)
    if since:
        q = q.where(c.occurred_at >= since)
    if until:
        q = q.where(c.occurred_at < until)
    rows = conn.execute(q.order_by(c.line).limit(limit + 1)).mappings().all()
    page = rows[:limit]
    entries = [
        {
            "transfer_id": r["transfer_id"], "occurred_at": r["occurred_at"],
            "amount_minor": int(r["amount_minor"]), "balance_after_minor": int(r["balance_after_minor"]),
            "kind": r["kind"], "coup_id": r["coup_id"], "bet_id": r["bet_id"],
        }
        for r in page
    ]  # fmt: skip
    next_cursor = str(page[-1]["line"]) if len(rows) > limit else None
    return {"entries": entries, "next_cursor": next_cursor}


def account_exists(conn: Connection, account_id: str) -> bool:
    """Whether any posting names ``account_id``."""
    q = select(s.accounts.c.account_id).where(s.accounts.c.account_id == account_id)
    return conn.execute(q).first() is not None


def _loads_or_none(text: str | None) -> Any:
    """A stored JSON column, ``None`` where it is null."""
    return json.loads(text) if text is not None else None


def coup_record(conn: Connection, coup_id: str) -> dict[str, Any] | None:
    """The full game-round record of ``coup_id`` (None when unknown)."""
    r = conn.execute(select(s.rounds).where(s.rounds.c.coup_id == coup_id)).mappings().first()
    if r is None:
        return None
    cards = conn.execute(
        select(s.round_cards).where(s.round_cards.c.coup_id == coup_id).order_by(s.round_cards.c.n)
    ).mappings()
    decisions = conn.execute(
        select(s.round_decisions)
        .where(s.round_decisions.c.coup_id == coup_id)
        .order_by(s.round_decisions.c.n)
    ).mappings()
    bets = conn.execute(
        select(s.bets).where(s.bets.c.coup_id == coup_id).order_by(s.bets.c.placed_at, s.bets.c.bet_id)
    ).mappings()
    loads = _loads_or_none
    return {
        "coup_id": r["coup_id"], "table_id": r["table_id"], "shoe_id": r["shoe_id"],
        "coup_number": r["coup_number"], "variant": r["variant"], "rules_version": r["rules_version"],
        "paytable": json.loads(r["paytable"]), "gaming_day": r["gaming_day"], "shift": r["shift"],
        "status": r["status"], "opened_at": r["opened_at"], "started_at": r["started_at"],
        "ended_at": r["ended_at"], "outcome": r["outcome"], "natural": r["natural"],
        "hands": loads(r["hands"]), "versus": loads(r["versus"]), "events": loads(r["round_events"]),
        "cards": [
            {"n": c["n"], "hand": c["hand"], "card": c["card"], "shoe_position": c["shoe_position"],
             "occurred_at": c["occurred_at"]}
            for c in cards
        ],
        "decisions": [
            {"hand": d["hand"], "choice": d["choice"], "decided_by": d["decided_by"],
             "occurred_at": d["occurred_at"]}
            for d in decisions
        ],
        "bets": [
            {k: b[k] for k in (
                "bet_id", "account_id", "spot", "stake_minor", "currency", "status", "reason", "placed_at",
                "result", "win_minor", "commission_minor", "credit_minor", "balance_before_minor",
                "balance_after_minor", "payout_balance_before_minor", "payout_balance_after_minor",
            )}
            for b in bets
        ],
    }  # fmt: skip


def _period(conn: Connection, table_id: str, day: str, shift: int) -> dict[str, Any]:
    """The period's figures (:mod:`services.core.figures`) as the reports print them."""
    c = s.table_periods.c
    row = conn.execute(
        select(*(c[k] for k in figures.COUNTERS)).where(
            c.table_id == table_id, c.day == day, c.shift == shift
        )
    ).first()
    total = figures.Figures(*(int(v) for v in row)) if row else figures.NOTHING
    return report_fields(total)


def report_fields(total: figures.Figures) -> dict[str, Any]:
    """A table report's figures: ``coups``, ``bets``, ``handle_minor``, ``win_minor``, ``commission_minor``,
    ``hold_pct`` (DESIGN §10), then ``paid_minor``, ``refused`` and the player-banker's ``bank_minor``."""
    return {
        "coups": total.coups, "bets": total.bets, "handle_minor": total.handle_minor,
        "win_minor": total.win_minor, "commission_minor": total.commission_minor, "hold_pct": total.hold_pct,
        "paid_minor": total.paid_minor, "refused": total.refused, "bank_minor": total.bank_minor,
    }  # fmt: skip


def table_exists(conn: Connection, table_id: str) -> bool:
    """Whether the table was ever opened."""
    q = select(s.tables.c.table_id).where(s.tables.c.table_id == table_id)
    return conn.execute(q).first() is not None


def table_report(conn: Connection, table_id: str, day: str) -> dict[str, Any]:
    """``{"table_id", "day", "coups", "bets", "handle_minor", "win_minor", "commission_minor", "hold_pct"}``
    for one gaming day (zeros for a day without play)."""
    return {"table_id": table_id, "day": day, **_period(conn, table_id, day, 0)}


def table_shifts(conn: Connection, table_id: str, day: str) -> list[dict[str, Any]]:
    """The same figures per shift of the gaming day (only shifts with play)."""
    c = s.table_periods.c
    shifts = conn.execute(
        select(c.shift).where(c.table_id == table_id, c.day == day, c.shift > 0).order_by(c.shift)
    ).scalars()
    out = []
    for shift in shifts:
        figures_of_shift = _period(conn, table_id, day, int(shift))
        out.append({"table_id": table_id, "day": day, "shift": int(shift), **figures_of_shift})
    return out


def latest_day(conn: Connection) -> str | None:
    """The latest gaming day with play at any table (the page's "today" on a replayed log)."""
    value = conn.execute(select(func.max(s.table_periods.c.day))).scalar()
    return str(value) if value is not None else None


def tables_overview(conn: Connection, day: str | None) -> list[dict[str, Any]]:
    """Every table with its variant, current shoe, last coup and its report for ``day``."""
    out = []
    for t in conn.execute(select(s.tables).order_by(s.tables.c.table_id)).mappings():
        report = table_report(conn, t["table_id"], day) if day else None
        out.append({
            "table_id": t["table_id"], "variant": t["variant"], "rules_version": t["rules_version"],
            "currency": t["currency"], "shoe_id": t["shoe_id"], "last_coup_id": t["last_coup_id"],
            "report": report,
        })  # fmt: skip
    return out


def last_rounds(conn: Connection, table_id: str, limit: int) -> list[dict[str, Any]]:
    """The table's last resolved coups, newest first, with their hands."""
    c = s.rounds.c
    rows = conn.execute(
        select(c.coup_id, c.coup_number, c.shoe_id, c.outcome, c.natural, c.hands, c.ended_at)
        .where(c.table_id == table_id, c.status == "resolved")
        .order_by(c.resolved_offset.desc())
        .limit(limit)
    ).mappings()
    return [
        {"coup_id": r["coup_id"], "coup_number": r["coup_number"], "shoe_id": r["shoe_id"],
         "outcome": r["outcome"], "natural": r["natural"], "hands": json.loads(r["hands"]),
         "ended_at": r["ended_at"]}
        for r in rows
    ]  # fmt: skip


def shoe_outcomes(conn: Connection, table_id: str, shoe_id: str | None) -> tuple[str | None, list[str]]:
    """(shoe id, outcomes of its resolved coups in order): the table's current shoe unless given."""
    if shoe_id is None:
        shoe_id = conn.execute(select(s.tables.c.shoe_id).where(s.tables.c.table_id == table_id)).scalar()
    if shoe_id is None:
        return None, []
    c = s.rounds.c
    outcomes = conn.execute(
        select(c.outcome)
        .where(c.table_id == table_id, c.shoe_id == shoe_id, c.status == "resolved")
        .order_by(c.resolved_offset)
    ).scalars()
    return shoe_id, [str(o) for o in outcomes]


def _listing(
    conn: Connection,
    table: Any,
    *,
    table_id: str | None,
    account_id: str | None,
    severity: str | None,
    since: str | None,
    cursor: int,
    limit: int,
    fields: tuple[str, ...],
    json_fields: tuple[str, ...],
) -> tuple[list[dict[str, Any]], str | None]:
    c = table.c
    q = select(table).where(c.offset > cursor)
    if table_id:
        q = q.where(c.table_id == table_id)
    if account_id:
        q = q.where(c.account_id == account_id)
    if severity:
        q = q.where(c.severity == severity)
    if since:
        q = q.where(c.occurred_at >= since)
    rows = conn.execute(q.order_by(c.offset).limit(limit + 1)).mappings().all()
    page = rows[:limit]
    items = [{k: (json.loads(r[k]) if k in json_fields else r[k]) for k in fields} for r in page]
    return items, (str(page[-1]["offset"]) if len(rows) > limit else None)


def alerts(conn: Connection, **filters: Any) -> dict[str, Any]:
    """``{"alerts": [...], "next_cursor"}`` filtered by table, account, severity, since."""
    items, nxt = _listing(
        conn, s.alerts, **filters,
        fields=("event_id", "occurred_at", "table_id", "account_id", "detector", "category", "severity",
                "subject", "observed", "threshold", "detail"),
        json_fields=("subject", "observed", "threshold"),
    )  # fmt: skip
    return {"alerts": items, "next_cursor": nxt}


def findings(conn: Connection, **filters: Any) -> dict[str, Any]:
    """``{"findings": [...], "next_cursor"}`` filtered by table, account, severity, since."""
    items, nxt = _listing(
        conn, s.findings, **filters,
        fields=("event_id", "occurred_at", "table_id", "account_id", "reason", "severity", "subject",
                "expected", "recorded", "detail"),
        json_fields=("subject", "expected", "recorded"),
    )  # fmt: skip
    return {"findings": items, "next_cursor": nxt}


def transfer_outcome(conn: Connection, transfer_id: str, account_id: str) -> dict[str, Any] | None:
    """How the wallet stage answered a transfer: applied (with the balance after) or refused (reason)."""
    c = s.statement_lines.c
    line = conn.execute(
        select(c.balance_after_minor).where(c.transfer_id == transfer_id, c.account_id == account_id)
    ).first()
    if line is not None:
        return {"status": "applied", "reason": None, "balance_minor": int(line[0])}
    r = s.refusals.c
    refused = conn.execute(select(r.reason).where(r.transfer_id == transfer_id)).first()
    if refused is not None:
        found = balance(conn, account_id)
        return {"status": "refused", "reason": refused[0],
                "balance_minor": found["balance_minor"] if found else 0}  # fmt: skip
    return None


def bet_outcome(conn: Connection, bet_id: str, account_id: str) -> dict[str, Any]:
    """A bet's state after the pipeline ran: accepted, refused (late: refunded), rejected, pending."""
    b = conn.execute(select(s.bets.c.status, s.bets.c.reason).where(s.bets.c.bet_id == bet_id)).first()
    found = balance(conn, account_id)
    now = found["balance_minor"] if found else 0
    if b is not None:
        return {"status": str(b[0]), "reason": b[1], "balance_minor": now}
    r = s.refusals.c
    refused = conn.execute(select(r.reason).where(r.bet_id == bet_id)).first()
    if refused is not None:
        return {"status": "rejected", "reason": refused[0], "balance_minor": now}
    return {"status": "pending", "reason": None, "balance_minor": now}
