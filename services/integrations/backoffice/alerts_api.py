"""Alerts an analyst can work (issue #29): the routes, an ``APIRouter`` the application includes.

* ``GET /v1/alerts`` — filters: table, account (any account of the alert: both of a linked pair),
  severity, detector, status (of the case), ``since`` ≤ time < ``until``; a cursor reads on past any
  count; ``format=csv`` for the page asked.
* ``GET /v1/alerts/{alert_id}`` — one alert, its case (status, assignee) and every step asked on it.
* ``GET /v1/alerts/{alert_id}/evidence`` — the coups and bets behind it, JSON or CSV.
* ``GET /v1/accounts/{account_id}/case``, ``GET /v1/alerts/{alert_id}/case`` — the case view: the
  accounts linked to them by alerts, their tables, their alerts.
* ``POST /v1/alerts/{alert_id}/acknowledge | assign | close`` — a step on the case, written to the log
  as ``WorkAlert`` (authenticated as ``backoffice``) and answered by the monitor's casework stage
  (``AlertCaseChanged``, chained and attested); 409 when the case's status does not allow it (the
  attempt stays on the record).
"""

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import PlainTextResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from services.core import topics
from services.core.envelope import derive_id, name_id, stage_namespace
from services.integrations.backoffice import alert_queries as aq
from services.integrations.backoffice import exports
from services.integrations.backoffice.api_models import PROBLEMS, Cursor, Format, IdempotencyKey, Time
from services.integrations.backoffice.apikeys import ApiKey
from services.integrations.backoffice.commands import PRINCIPAL
from services.integrations.backoffice.kit import Kit
from services.monitor.casework import Casework

Severity = Literal["info", "warning", "critical"]
Status = Literal["open", "acknowledged", "assigned", "closed"]
Action = Literal["acknowledge", "assign", "close"]
AnalystId = Annotated[str, Field(min_length=1, max_length=256, pattern=r"^\S+$")]
DetectorName = Annotated[str | None, Query(max_length=64, pattern=r"^[a-z][a-z0-9_]*$")]


class WorkedAlert(BaseModel):
    event_id: str
    offset: int
    occurred_at: str
    table_id: str
    account_id: str | None
    account_ids: list[str] = Field(description="every account the alert concerns")
    detector: str
    category: str
    severity: str
    status: Status = Field(description="where the alert's case stands")
    assignee: str | None
    subject: dict[str, Any]
    observed: dict[str, Any]
    threshold: dict[str, Any]
    detail: str


class WorkedAlerts(BaseModel):
    alerts: list[WorkedAlert]
    next_cursor: str | None = Field(description="give it as cursor= for the next page; null at the end")


class CaseStep(BaseModel):
    n: int
    occurred_at: str
    action: Action
    by: str
    assignee: str | None
    note: str | None
    status_before: Status
    status: Status
    refused: str | None
    event_id: str


class AlertCase(WorkedAlert):
    steps: list[CaseStep]


class EvidenceBet(BaseModel):
    bet_id: str
    account_id: str
    table_id: str
    coup_id: str | None
    spot: str
    stake_minor: int
    currency: str
    status: str
    placed_at: str
    result: str | None
    win_minor: int | None
    commission_minor: int | None
    credit_minor: int | None
    named: bool | None = Field(None, description="the alert names this bet (else: another bet of its coup)")


class EvidenceCoup(BaseModel):
    coup_id: str
    table_id: str
    shoe_id: str
    coup_number: int
    gaming_day: str
    status: str
    opened_at: str
    ended_at: str | None
    outcome: str | None
    natural: bool | None
    bets: list[EvidenceBet]


class Evidence(BaseModel):
    alert: WorkedAlert
    coups: list[EvidenceCoup]
    bets: list[EvidenceBet] = Field(description="the bets the alert names")
    event_ids: list[str]
    missing: dict[str, list[str]] = Field(description="ids the alert names that the read model lacks")
    evidence_count: int | None = Field(description="observations the detector counted (it names the last)")


class LinkedAccount(BaseModel):
    account_id: str
    shared_alerts: int


class CaseTable(BaseModel):
    table_id: str
    bets: int
    staked_minor: int
    alerts: int


class CaseView(BaseModel):
    accounts: list[str]
    linked_accounts: list[LinkedAccount]
    tables: list[CaseTable]
    alerts: list[WorkedAlert]
    alerts_total: int


class AssignBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    assignee: AnalystId


class CloseBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    note: Annotated[str, Field(min_length=1, max_length=2000, pattern=r"\S")]


class NoBody(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CaseAnswer(BaseModel):
    request_id: str
    alert_id: str
    action: Action
    status_before: Status
    status: Status
    assignee: str | None


def router(kit: Kit) -> APIRouter:
    """The routes of the module docstring."""
    r = APIRouter(tags=["monitoring"], responses=PROBLEMS)
    Conn = Annotated[Any, Depends(kit.conn)]
    read = [kit.role("alerts")]

    def csv_answer(rows: list[dict[str, Any]], fields: tuple[str, ...]) -> PlainTextResponse:
        return PlainTextResponse(exports.to_csv(rows, fields), media_type="text/csv; charset=utf-8")

    @r.get("/v1/alerts", response_model=WorkedAlerts, dependencies=read,
           summary="Monitor alerts (AnomalyDetected), oldest first")  # fmt: skip
    def list_alerts(  # noqa: PLR0917 (query parameters)
        request: Request, c: Conn, table: str | None = None, account: str | None = None,
        severity: Severity | None = None, detector: DetectorName = None, status: Status | None = None,
        since: Time = None, until: Time = None, cursor: Cursor = None,
        limit: Annotated[int, Query(ge=1, le=aq.MAX_PAGE)] = 100, format: Format | None = None,
    ) -> Any:  # fmt: skip
        """Alerts after ``cursor``, filtered: ``account`` matches any account of the alert (both of a
        linked pair), ``status`` the case's; ``since`` ≤ time < ``until``. ``format=csv``: this page."""
        page = aq.alerts(
            c, table_id=table, account_id=account, severity=severity, detector=detector, status=status,
            since=kit.time_param(since, "since"), until=kit.time_param(until, "until"),
            cursor=kit.cursor_param(cursor), limit=limit,
        )  # fmt: skip
        if kit.wants_csv(request, format):
            rows = [{**a, "account_ids": " ".join(a["account_ids"])} for a in page["alerts"]]
            return csv_answer(rows, ALERT_CSV_FIELDS)
        return page

    def found(c: Any, alert_id: str) -> dict[str, Any]:
        got = aq.alert(c, alert_id)
        if got is None:
            raise kit.problem(404, "not found", "no such alert")
        return got

    @r.get("/v1/alerts/{alert_id}", response_model=AlertCase, dependencies=read)
    def get_alert(alert_id: str, c: Conn) -> dict[str, Any]:
        """One alert with its accounts, its case (status, assignee) and every step asked on it."""
        return found(c, alert_id)

    @r.get("/v1/alerts/{alert_id}/evidence", response_model=Evidence, dependencies=read)
    def get_evidence(alert_id: str, request: Request, c: Conn, format: Format | None = None) -> Any:
        """The coups and bets behind the alert (each coup with all its bets), and the records it names;
        ``format=csv``: one row per bet, coup without bets, or record."""
        ev = aq.evidence(c, alert_id)
        if ev is None:
            raise kit.problem(404, "not found", "no such alert")
        if kit.wants_csv(request, format):
            return csv_answer(aq.evidence_rows(ev), aq.EVIDENCE_CSV_FIELDS)
        return ev

    @r.get("/v1/alerts/{alert_id}/case", response_model=CaseView, dependencies=read)
    def get_alert_case(alert_id: str, c: Conn) -> dict[str, Any]:
        """The case view of the alert's accounts (see ``/v1/accounts/{account_id}/case``)."""
        accounts = found(c, alert_id)["account_ids"]
        return aq.case(c, accounts)

    @r.get("/v1/accounts/{account_id}/case", response_model=CaseView, dependencies=read, tags=["accounts"])
    def get_account_case(account_id: str, c: Conn) -> dict[str, Any]:
        """The case view of an account: the accounts its alerts also name (linked, with how many they
        share), the tables where it bet or was alerted on, its alerts (the newest 500) and their count."""
        if not aq.account_known(c, account_id):
            raise kit.problem(404, "not found", f"nothing names account {account_id}")
        return aq.case(c, [account_id])

    install_steps(r, kit)
    return r


ALERT_CSV_FIELDS = (
    "event_id", "occurred_at", "table_id", "detector", "category", "severity", "status", "assignee",
    "account_ids", "detail",
)  # fmt: skip


def request_id_of(key_id: str, idem: str) -> str:
    """The id of the ``WorkAlert`` the back office writes for API key ``key_id`` and ``idem`` (as every
    back-office command's: :func:`services.integrations.backoffice.commands.Gateway.command`)."""
    return name_id(PRINCIPAL, key_id, idem)


def step_id(request_id: str) -> str:
    """The id of the ``AlertCaseChanged`` the casework stage writes in answer to ``request_id`` (its
    first and only output)."""
    return derive_id(request_id, 0, stage_namespace(Casework.stage_name()))


def install_steps(r: APIRouter, kit: Kit) -> None:
    """``POST /v1/alerts/{alert_id}/acknowledge | assign | close``."""

    def step(alert_id: str, action: Action, body: BaseModel, key: ApiKey, idem: str) -> Response:
        with kit.bo.engine.connect() as c:
            if aq.alert(c, alert_id) is None:
                raise kit.problem(404, "not found", "no such alert")

        def run(retry: bool) -> tuple[int, dict[str, Any]]:
            payload = {"alert_id": alert_id, "action": action, "by": key.key_id, **body.model_dump()}

            def answered() -> tuple[dict[str, Any] | None, dict[str, Any]]:
                """The step the casework stage wrote for this request (its id derives from the
                request's), as the read model holds it, and the alert."""
                with kit.bo.engine.connect() as c:
                    got = aq.alert(c, alert_id) or {"steps": []}
                wanted = step_id(request_id_of(key.key_id, idem))
                return next((s for s in got["steps"] if s["event_id"] == wanted), None), got

            request_id, (last, got) = kit.bo.gateway.command(
                "WorkAlert", alert_id, payload, key_id=key.key_id, idem=idem, outcome=answered,
                final=lambda found: found[0] is not None, retry=retry, topic=topics.CASEWORK,
            )  # fmt: skip
            assert last is not None  # final
            answer = {"request_id": request_id, "alert_id": alert_id, "action": action,
                      "status_before": last["status_before"], "status": last["status"],
                      "assignee": got.get("assignee")}  # fmt: skip
            if last["refused"]:
                detail = f"{last['refused']}: cannot {action} a case that is {last['status_before']}"
                return 409, {**_problem(409, "conflict", detail), **answer}
            return 200, answer

        return kit.idempotent(f"alert-{action}", key, idem, body, run)

    casework = kit.role("casework")

    @r.post("/v1/alerts/{alert_id}/acknowledge", response_model=CaseAnswer, tags=["commands"])
    def acknowledge(alert_id: str, idem: IdempotencyKey, key: Annotated[ApiKey, casework]) -> Response:
        """Acknowledge an open alert (``open`` → ``acknowledged``); 409 from any other status."""
        return step(alert_id, "acknowledge", NoBody(), key, idem)

    @r.post("/v1/alerts/{alert_id}/assign", response_model=CaseAnswer, tags=["commands"])
    def assign(
        alert_id: str, body: AssignBody, idem: IdempotencyKey, key: Annotated[ApiKey, casework]
    ) -> Response:
        """Assign the case to an analyst (again, to reassign it); 409 once it is closed."""
        return step(alert_id, "assign", body, key, idem)

    @r.post("/v1/alerts/{alert_id}/close", response_model=CaseAnswer, tags=["commands"])
    def close(
        alert_id: str, body: CloseBody, idem: IdempotencyKey, key: Annotated[ApiKey, casework]
    ) -> Response:
        """Close the case with a note (why: cleared, referred, barred…); 409 when it is already closed."""
        return step(alert_id, "close", body, key, idem)


def _problem(status: int, title: str, detail: str) -> dict[str, Any]:
    return {"type": "about:blank", "title": title, "status": status, "detail": detail}
