"""The projector's share of issue #29: every account of an alert indexed, and alerts' cases.

Kept apart from :mod:`.projector` (which calls these) so that each piece stays small: the rows here are,
like every projected row, a function of the records alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, bindparam, func, select

from services.core.envelope import Envelope
from services.integrations.backoffice import schema as s

ACCOUNTS_MAX = 64
"""Accounts indexed per alert (the contract's bound on ``account_ids``)."""


def accounts_of(p: Mapping[str, Any]) -> list[str]:
    """Every account an ``AnomalyDetected`` concerns: its ``account_ids``, else those its subject names
    (``account_ids``, ``account_id``; an alert written before ``account_ids`` existed), once each."""
    subject = p.get("subject") or {}
    named: list[Any] = list(p.get("account_ids") or [])
    if not named and isinstance(subject, Mapping):
        many = subject.get("account_ids")
        named = [
            *(many if isinstance(many, list) else []),
            subject.get("account_id") or subject.get("account"),
        ]
    return [a for a in dict.fromkeys(named) if isinstance(a, str) and a][:ACCOUNTS_MAX]


def index_alert_accounts(conn: Connection, offset: int, event_id: str, p: Mapping[str, Any]) -> None:
    """One ``bo_alert_accounts`` row per account of the alert at ``offset``."""
    rows = [{"account_id": a, "offset": offset, "event_id": event_id} for a in accounts_of(p)]
    if rows:
        conn.execute(s.alert_accounts.insert(), rows)


_ALERT = select(s.alerts.c.event_id).where(s.alerts.c.event_id == bindparam("b_key"))
_STEPS = (
    select(func.count())
    .select_from(s.alert_case_steps)
    .where(s.alert_case_steps.c.alert_id == bindparam("b_key"))
)
_CASE = select(s.alert_cases.c.assignee).where(s.alert_cases.c.alert_id == bindparam("b_key"))


def case_changed(_projector: Any, conn: Connection, offset: int, env: Envelope, p: dict[str, Any]) -> None:
    """An ``AlertCaseChanged``: the step recorded (refused ones too); the case moved when it was taken.
    A step on an alert the read model does not hold moves nothing (the back office checks it first)."""
    alert_id = p["alert_id"]
    if len(alert_id) > 64 or conn.execute(_ALERT, {"b_key": alert_id}).first() is None:
        return
    n = int(conn.execute(_STEPS, {"b_key": alert_id}).scalar_one())
    conn.execute(s.alert_case_steps.insert(), {
        "alert_id": alert_id, "n": n, "event_id": env.event_id, "offset": offset,
        "occurred_at": env.occurred_at, "action": p["action"], "actor": p["by"],
        "assignee": p.get("assignee"), "note": p.get("note"), "status_before": p["status_before"],
        "status": p["status"], "refused": p.get("refused"),
    })  # fmt: skip
    if p.get("refused") is not None:
        return
    found = conn.execute(_CASE, {"b_key": alert_id}).first()
    assignee = p.get("assignee") or (found[0] if found else None)
    values = {"status": p["status"], "assignee": assignee, "updated_at": env.occurred_at, "steps": n + 1}
    if found is None:
        conn.execute(s.alert_cases.insert(), {"alert_id": alert_id, **values})
    else:
        conn.execute(s.alert_cases.update().where(s.alert_cases.c.alert_id == alert_id), values)
