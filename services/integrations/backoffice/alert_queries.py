"""Reads for alerts an analyst can work (issue #29): the filtered list (every account of an alert, the
detector, a time range, the case's status), one alert with its case, the evidence behind it, and the
case view of accounts (the accounts linked to them, their tables, their alerts)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, func, select

from services.integrations.backoffice import schema as s

MAX_PAGE = 500
"""The largest page the list returns (a cursor reads on)."""

CASE_ALERTS_MAX = 500
"""Alerts a case view lists (the newest)."""

EVIDENCE_MAX = 2_000
"""Coups and bets an evidence answer holds at most (an alert names at most a few hundred)."""

_ALERT_FIELDS = (
    "event_id", "offset", "occurred_at", "table_id", "account_id", "detector", "category", "severity",
    "subject", "observed", "threshold", "detail",
)  # fmt: skip
_JSON = ("subject", "observed", "threshold")


def _select_alerts() -> Any:
    a, k = s.alerts.c, s.alert_cases.c
    status = func.coalesce(k.status, "open").label("status")
    cols = [a[f] for f in _ALERT_FIELDS]
    return select(*cols, status, k.assignee).select_from(
        s.alerts.outerjoin(s.alert_cases, k.alert_id == a.event_id)
    )


def _accounts(conn: Connection, offsets: Sequence[int]) -> dict[int, list[str]]:
    if not offsets:
        return {}
    x = s.alert_accounts.c
    found: dict[int, list[str]] = {o: [] for o in offsets}
    for offset, account in conn.execute(
        select(x.offset, x.account_id).where(x.offset.in_(offsets)).order_by(x.offset, x.account_id)
    ):
        found[int(offset)].append(str(account))
    return found


def _rows(conn: Connection, rows: Iterable[Any]) -> list[dict[str, Any]]:
    items = [dict(r) for r in rows]
    accounts = _accounts(conn, [int(r["offset"]) for r in items])
    for r in items:
        for k in _JSON:
            r[k] = json.loads(r[k])
        r["account_ids"] = accounts.get(int(r["offset"]), [])
    return items


def alerts(
    conn: Connection, *, table_id: str | None = None, account_id: str | None = None,
    severity: str | None = None, detector: str | None = None, status: str | None = None,
    since: str | None = None, until: str | None = None, cursor: int = 0, limit: int = 100,
) -> dict[str, Any]:  # fmt: skip
    """``{"alerts", "next_cursor"}``, oldest first, after ``cursor`` (an offset): filtered by table,
    any account of the alert, severity, detector, the case's status and ``since`` ≤ time < ``until``."""
    a = s.alerts.c
    q = _select_alerts().where(a.offset > cursor)
    if account_id:
        x = s.alert_accounts.c
        q = q.where(a.offset.in_(select(x.offset).where(x.account_id == account_id, x.offset > cursor)))
    for column, value in ((a.table_id, table_id), (a.severity, severity), (a.detector, detector)):
        if value:
            q = q.where(column == value)
    if status:
        q = q.where(func.coalesce(s.alert_cases.c.status, "open") == status)
    if since:
        q = q.where(a.occurred_at >= since)
    if until:
        q = q.where(a.occurred_at < until)
    rows = conn.execute(q.order_by(a.offset).limit(limit + 1)).mappings().all()
    page = rows[:limit]
    nxt = str(page[-1]["offset"]) if len(rows) > limit else None
    return {"alerts": _rows(conn, page), "next_cursor": nxt}


def alert(conn: Connection, alert_id: str) -> dict[str, Any] | None:
    """One alert with its accounts, its case's status and assignee, and every step asked on it."""
    row = conn.execute(_select_alerts().where(s.alerts.c.event_id == alert_id)).mappings().first()
    if row is None:
        return None
    found = _rows(conn, [row])[0]
    c = s.alert_case_steps.c
    steps = conn.execute(
        select(c.n, c.occurred_at, c.action, c.actor, c.assignee, c.note, c.status_before, c.status,
               c.refused, c.event_id).where(c.alert_id == alert_id).order_by(c.n)
    ).mappings()  # fmt: skip
    found["steps"] = [{**dict(r), "by": r["actor"]} for r in steps]
    for step in found["steps"]:
        step.pop("actor")
    return found


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def evidence_ids(subject: dict[str, Any]) -> tuple[list[str], list[str], list[str]]:
    """The coups, bets and records an alert's subject names (each once, in the subject's order)."""
    coups = [*_strings(subject.get("coup_ids")), *_strings(subject.get("coup_id"))]
    bets = _strings(subject.get("bet_ids")) + _strings(subject.get("bet_id"))
    events = _strings(subject.get("event_ids"))
    return _once(coups), _once(bets), _once(events)


def _once(ids: list[str]) -> list[str]:
    return list(dict.fromkeys(ids))[:EVIDENCE_MAX]


_BET_FIELDS = (
    "bet_id", "account_id", "table_id", "coup_id", "spot", "stake_minor", "currency", "status", "placed_at",
    "result", "win_minor", "commission_minor", "credit_minor",
)  # fmt: skip
_COUP_FIELDS = (
    "coup_id", "table_id", "shoe_id", "coup_number", "gaming_day", "status", "opened_at", "ended_at",
    "outcome", "natural",
)  # fmt: skip


def evidence(conn: Connection, alert_id: str) -> dict[str, Any] | None:
    """Everything behind an alert that the read model holds: each coup its subject names (with every bet
    of it, so a linked pair's bets stand beside each other), each bet it names (with its coup), the
    records it names; ``evidence_count`` is how many observations the detector counted."""
    found = alert(conn, alert_id)
    if found is None:
        return None
    coup_ids, bet_ids, event_ids = evidence_ids(found["subject"])
    b, r = s.bets.c, s.rounds.c
    bets_q = select(*[b[f] for f in _BET_FIELDS])
    named = [dict(x) for x in conn.execute(bets_q.where(b.bet_id.in_(bet_ids))).mappings()]
    coup_ids = list(dict.fromkeys([*coup_ids, *(x["coup_id"] for x in named if x["coup_id"])]))[:EVIDENCE_MAX]
    coups = {x["coup_id"]: {**dict(x), "bets": []} for x in conn.execute(
        select(*[r[f] for f in _COUP_FIELDS]).where(r.coup_id.in_(coup_ids))).mappings()}  # fmt: skip
    for bet in conn.execute(
        bets_q.where(b.coup_id.in_(list(coups))).order_by(b.placed_at, b.bet_id)
    ).mappings():
        coups[bet["coup_id"]]["bets"].append({**dict(bet), "named": bet["bet_id"] in bet_ids})
    return {
        "alert": {k: v for k, v in found.items() if k != "steps"},
        "coups": [coups[c] for c in coup_ids if c in coups],
        "bets": sorted(named, key=lambda x: (x["placed_at"], x["bet_id"])),
        "event_ids": event_ids,
        "missing": {"coup_ids": [c for c in coup_ids if c not in coups],
                    "bet_ids": sorted(set(bet_ids) - {x["bet_id"] for x in named})},
        "evidence_count": found["subject"].get("evidence_count"),
    }  # fmt: skip


EVIDENCE_CSV_FIELDS = (
    "alert_id", "detector", "kind", "coup_id", "coup_number", "outcome", "bet_id", "named", "account_id",
    "table_id", "spot", "stake_minor", "result", "win_minor", "placed_at", "ended_at", "event_id",
)  # fmt: skip


_COUP_CSV = ("coup_id", "coup_number", "outcome", "table_id", "ended_at")


def evidence_rows(ev: dict[str, Any]) -> list[dict[str, Any]]:
    """The evidence as flat rows (one per bet of each coup, one per coup without bets, one per record
    named): what the CSV export holds."""
    head = {"alert_id": ev["alert"]["event_id"], "detector": ev["alert"]["detector"]}
    out: list[dict[str, Any]] = []
    for coup in ev["coups"]:
        base = {**head, "kind": "coup", **{k: coup[k] for k in _COUP_CSV}}
        out += [{**base, "kind": "bet", **{k: bet[k] for k in EVIDENCE_CSV_FIELDS if k in bet}}
                for bet in coup["bets"]] or [base]  # fmt: skip
    in_coups = {b["bet_id"] for c in ev["coups"] for b in c["bets"]}
    out += [{**head, "kind": "bet", "named": True, **{k: b[k] for k in EVIDENCE_CSV_FIELDS if k in b}}
            for b in ev["bets"] if b["bet_id"] not in in_coups]  # fmt: skip
    out += [{**head, "kind": "record", "table_id": ev["alert"]["table_id"], "event_id": e}
            for e in ev["event_ids"]]  # fmt: skip
    return out


def case(conn: Connection, accounts: Sequence[str]) -> dict[str, Any]:
    """The case view of ``accounts``: every alert naming one of them (newest :data:`CASE_ALERTS_MAX`),
    the other accounts those alerts name (linked, with how many alerts they share), and the tables
    where the accounts bet or were alerted on (bets, stakes, alerts)."""
    x, a, b = s.alert_accounts.c, s.alerts.c, s.bets.c
    offsets = select(x.offset).where(x.account_id.in_(accounts))
    q = _select_alerts().where(a.offset.in_(offsets)).order_by(a.offset.desc()).limit(CASE_ALERTS_MAX)
    listed = _rows(conn, conn.execute(q).mappings().all())
    linked = conn.execute(
        select(x.account_id, func.count()).where(x.offset.in_(offsets), x.account_id.not_in(accounts))
        .group_by(x.account_id).order_by(func.count().desc(), x.account_id)
    ).all()  # fmt: skip
    tables: dict[str, dict[str, Any]] = {}
    for table_id, n, staked in conn.execute(
        select(b.table_id, func.count(), func.coalesce(func.sum(b.stake_minor), 0))
        .where(b.account_id.in_(accounts)).group_by(b.table_id)
    ):  # fmt: skip
        tables[table_id] = {"table_id": table_id, "bets": int(n), "staked_minor": int(staked), "alerts": 0}
    for table_id, n in conn.execute(
        select(a.table_id, func.count()).where(a.offset.in_(offsets)).group_by(a.table_id)
    ):
        tables.setdefault(table_id, {"table_id": table_id, "bets": 0, "staked_minor": 0, "alerts": 0})
        tables[table_id]["alerts"] = int(n)
    total = conn.execute(select(func.count()).select_from(s.alerts).where(a.offset.in_(offsets))).scalar_one()
    return {
        "accounts": list(accounts),
        "linked_accounts": [{"account_id": acc, "shared_alerts": int(n)} for acc, n in linked],
        "tables": sorted(tables.values(), key=lambda t: t["table_id"]),
        "alerts": listed,
        "alerts_total": int(total),
    }


def account_known(conn: Connection, account_id: str) -> bool:
    """Whether any bet, posting or alert names ``account_id``."""
    for q in (
        select(s.alert_accounts.c.account_id).where(s.alert_accounts.c.account_id == account_id).limit(1),
        select(s.bets.c.bet_id).where(s.bets.c.account_id == account_id).limit(1),
        select(s.accounts.c.account_id).where(s.accounts.c.account_id == account_id).limit(1),
    ):
        if conn.execute(q).first() is not None:
            return True
    return False
