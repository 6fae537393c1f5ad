"""``casino-ledger serve``: the back-office HTTP API (docs/integration.md) and the pit boss's page.

FastAPI over the read model; OpenAPI 3.1 at ``/openapi.json`` (Swagger UI at ``/docs``). Bearer API
keys with roles (:data:`PERMISSIONS`): 401 without a valid key, 403 for a role that may not. Errors
are ``application/problem+json`` (RFC 9457). Commands carry an ``Idempotency-Key``: the same key with
the same body gives the same answer, with another body 409. A background thread projects the log
into the read model every ``poll_seconds``; the page follows it through server-sent events. With
``serve --kafka`` the commands go to the topics and ``project --kafka --follow`` keeps the read model
(:mod:`services.backoffice.kafka_commands`); that thread then checks the broker for readiness.
"""

import asyncio
import hashlib
import json
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse, Response, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline
from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from sqlalchemy import Engine, insert, select, update
from sqlalchemy.exc import IntegrityError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from services.backoffice import exports, probes, queries, roads
from services.backoffice import schema as s
from services.backoffice.apikeys import ApiKey, LiveKeys, verify
from services.backoffice.commands import BrokerUnavailable, Gateway, OutcomeTimeout
from services.backoffice.facts import writer_keys_for
from services.backoffice.projector import Periods, Projector
from services.core.boundary import is_player_account, own_namespace
from services.core.envelope import canonical, name_id
from services.runtime.embedded.log import ConsumerMoved, LogConflict
from services.runtime.logging import get_logger

STATIC = Path(__file__).with_name("static")

ADMIN = "admin"
PERMISSIONS: dict[str, frozenset[str]] = {
    "balance": frozenset({"auditor", "cashier", "terminal", ADMIN}),
    "statement": frozenset({"auditor", "cashier", ADMIN}),
    "rounds": frozenset({"analyst", "auditor", "operator", ADMIN}),
    "tables": frozenset({"analyst", "auditor", "operator", ADMIN}),
    "alerts": frozenset({"analyst", "auditor", "operator", ADMIN}),
    "casework": frozenset({"analyst", ADMIN}),
    "findings": frozenset({"auditor", "operator", ADMIN}),
    "cashier": frozenset({"cashier", ADMIN}),
    "bets": frozenset({"terminal", ADMIN}),
}
"""Which roles may use each group of routes (admin: every one)."""

Id = Annotated[str, Field(min_length=1, max_length=256, pattern=r"^\S+$")]


def _player_account(account_id: str) -> str:
    if not is_player_account(account_id):
        raise ValueError(
            "not_a_player_account: a table's, the cage's or the operator's account moves no money from here"
        )
    return account_id


PlayerAccount = Annotated[Id, AfterValidator(_player_account)]
"""A player's wallet (docs/trust.md): deposits, withdrawals and bets never name a table's account."""

Name = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z][a-z0-9_]*$")]
Currency = Annotated[str, Field(pattern=r"^[A-Z]{3}$")]
Amount = Annotated[int, Field(gt=0, le=10**12, strict=True)]
IdempotencyKey = Annotated[str, Header(alias="Idempotency-Key", min_length=1, max_length=200,
                                       pattern=r"^[\x21-\x7e]+$")]  # fmt: skip
Format = Literal["json", "csv"]
TIME_PATTERN = r"^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|z|[+-]\d{2}:\d{2}))?$"
Time = Annotated[str | None, Query(pattern=TIME_PATTERN, description="RFC 3339 time or YYYY-MM-DD (UTC)")]
Day = Annotated[str | None, Query(pattern=r"^\d{4}-\d{2}-\d{2}$", description="gaming day YYYY-MM-DD")]
Cursor = Annotated[str | None, Query(pattern=r"^[0-9]{1,18}$", description="next_cursor of the page before")]


# --- settings and state ------------------------------------------------------------------------------


@dataclass(slots=True)
class ServeSettings:
    """What ``serve`` runs on."""

    log_path: Path
    read_url: str
    keyring_path: Path | None = None
    periods: Periods = field(default_factory=Periods)
    poll_seconds: float = 0.5
    commands_refused: str | None = None
    """Why this server cannot sign commands into the log (its keyring did not write it): every command
    then answers 503 with this reason, reads go on."""
    kafka: Any = None
    """The Kafka runtime's settings (:class:`~services.runtime.settings.Settings`) when ``serve --kafka``:
    commands go to the topics, ``project --kafka --follow`` keeps the read model (``log_path`` unused)."""
    command_timeout_s: float = 15.0
    """On Kafka (or with ``pipeline_elsewhere``): how long a command waits for its outcome in the read
    model before answering 504."""
    pipeline_elsewhere: bool = False
    """On the embedded log with the back office's key alone: commands are appended, and another process
    (``casino-ledger pipeline --follow``) runs the pipeline; each command waits for its outcome."""


class Problem(Exception):
    """An error answered as ``application/problem+json``."""

    def __init__(self, status: int, title: str, detail: str = "", **extra: Any) -> None:
        super().__init__(detail or title)
        self.status, self.title, self.detail, self.extra = status, title, detail, extra


def problem_response(status: int, title: str, detail: str = "", **extra: Any) -> JSONResponse:
    """A problem+json answer (RFC 9457)."""
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail, **extra}
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body, status_code=status, media_type="application/problem+json", headers=headers)


# --- response models (for the OpenAPI document) ------------------------------------------------------


class Balance(BaseModel):
    account_id: str
    currency: str
    balance_minor: int


class StatementEntry(BaseModel):
    transfer_id: str
    occurred_at: str
    amount_minor: int
    balance_after_minor: int
    kind: str
    coup_id: str | None
    bet_id: str | None


class Statement(BaseModel):
    entries: list[StatementEntry]
    next_cursor: str | None


class TableReport(BaseModel):
    table_id: str
    day: str
    coups: int
    bets: int
    handle_minor: int
    win_minor: int = Field(
        description="what the house kept, commission included: all staked less all "
        "credited back (services.core.figures)"
    )
    commission_minor: int = Field(description="commission and levies the house took")
    hold_pct: float = Field(description="win over handle, in percent")
    paid_minor: int = Field(description="all credited back on bets (a player-banker's cover is no bet)")
    refused: int = Field(description="bets refused")
    bank_minor: int = Field(
        description="the player-banker's share: what the players holding the bank won "
        "(or lost, negative); 0 at a house-banked table"
    )


class ShiftReport(TableReport):
    shift: int


class Shifts(BaseModel):
    shifts: list[ShiftReport]


class RoundCard(BaseModel):
    n: int
    hand: str
    card: str
    shoe_position: int
    occurred_at: str


class RoundDecision(BaseModel):
    hand: str
    choice: str
    decided_by: str
    occurred_at: str


class RoundBet(BaseModel):
    bet_id: str
    account_id: str
    spot: str
    stake_minor: int
    currency: str
    status: str
    reason: str | None
    placed_at: str
    result: str | None
    win_minor: int | None
    commission_minor: int | None
    credit_minor: int | None
    balance_before_minor: int | None
    balance_after_minor: int | None
    payout_balance_before_minor: int | None
    payout_balance_after_minor: int | None


class Round(BaseModel):
    coup_id: str
    table_id: str
    shoe_id: str
    coup_number: int
    variant: str
    rules_version: str
    paytable: dict[str, Any]
    gaming_day: str
    shift: int
    status: str
    opened_at: str
    started_at: str | None
    ended_at: str | None
    outcome: str | None
    natural: bool | None
    hands: dict[str, Any] | None
    versus: dict[str, Any] | None
    events: list[Any] | None
    cards: list[RoundCard]
    decisions: list[RoundDecision]
    bets: list[RoundBet]


class RoundSummary(BaseModel):
    coup_id: str
    coup_number: int
    shoe_id: str
    outcome: str | None
    natural: bool | None
    hands: dict[str, Any]
    ended_at: str | None


class Rounds(BaseModel):
    rounds: list[RoundSummary]


class TableOverview(BaseModel):
    table_id: str
    variant: str
    rules_version: str
    currency: str
    shoe_id: str | None
    last_coup_id: str | None
    report: TableReport | None


class Tables(BaseModel):
    day: str | None
    position: int
    tables: list[TableOverview]


class RoadCell(BaseModel):
    col: int
    row: int
    value: str
    ties: int


class Roads(BaseModel):
    table_id: str
    shoe_id: str | None
    outcomes: list[str]
    bead_plate: list[RoadCell]
    big_road: list[RoadCell]
    big_eye_boy: list[RoadCell]
    small_road: list[RoadCell]
    cockroach_pig: list[RoadCell]


class Alert(BaseModel):
    event_id: str
    occurred_at: str
    table_id: str
    account_id: str | None
    detector: str
    category: str
    severity: str
    subject: dict[str, Any]
    observed: dict[str, Any]
    threshold: dict[str, Any]
    detail: str


class Alerts(BaseModel):
    alerts: list[Alert]
    next_cursor: str | None


class Finding(BaseModel):
    event_id: str
    occurred_at: str
    table_id: str
    account_id: str | None
    reason: str
    severity: str
    subject: dict[str, Any]
    expected: Any
    recorded: Any
    detail: str


class Findings(BaseModel):
    findings: list[Finding]
    next_cursor: str | None


class Health(BaseModel):
    status: str


class MoneyCommand(BaseModel):
    """A deposit or withdrawal at the cashier."""

    model_config = ConfigDict(extra="forbid")
    account_id: PlayerAccount
    amount_minor: Amount
    currency: Currency


class BetCommand(BaseModel):
    """A bet from a table terminal (``bet_id`` derived from the Idempotency-Key when not given)."""

    model_config = ConfigDict(extra="forbid")
    account_id: PlayerAccount
    table_id: Id
    spot: Name
    stake_minor: Amount
    currency: Currency
    coup_id: Id | None = None
    bet_id: Id | None = None


class CommandAnswer(BaseModel):
    request_id: str
    account_id: str
    transfer_id: str | None = None
    bet_id: str | None = None
    status: str
    reason: str | None
    balance_minor: int


class ProblemBody(BaseModel):
    type: str
    title: str
    status: int
    detail: str


PROBLEMS: dict[int | str, dict[str, Any]] = {
    code: {"model": ProblemBody, "content": {"application/problem+json": {}}}
    for code in (400, 401, 403, 404, 409, 422, 503, 504)
}


# --- the OpenAPI document -----------------------------------------------------------------------------


def _route_roles(route: Any) -> frozenset[str] | None:
    """The roles that may use ``route`` (``None``: no key needed), from its ``role()`` dependency."""
    from fastapi.params import Depends as DependsParam  # noqa: PLC0415

    found: list[Any] = list(getattr(route, "dependencies", []))
    dependant = getattr(route, "dependant", None)
    for sub in getattr(dependant, "dependencies", []):
        found.append(sub)
    for dep in found:
        call = dep.dependency if isinstance(dep, DependsParam) else getattr(dep, "call", None)
        group = getattr(call, "role_group", None)
        if group is not None:
            return PERMISSIONS[group]
    return None


def _flat(routes: list[Any]) -> Iterator[Any]:
    """Every route, those of an included router too (FastAPI keeps it as one entry, unprefixed here)."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        yield from _flat(inner.routes) if inner is not None else (route,)


def contract_openapi(app: FastAPI) -> dict[str, Any]:
    """The OpenAPI document with the whole contract: each operation's roles (``x-roles`` and a line of
    its description; the bearer scheme where a key is needed) and every error answer under
    ``application/problem+json`` with the :class:`ProblemBody` schema (FastAPI puts the models of the
    ``responses`` under ``application/json``, and its own 422 schema, which this API never sends)."""
    if app.openapi_schema:
        return app.openapi_schema
    from fastapi.openapi.utils import get_openapi  # noqa: PLC0415
    from fastapi.routing import APIRoute  # noqa: PLC0415

    doc = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    problem = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/ProblemBody"}}}
    roles_of = {(m.lower(), r.path_format): _route_roles(r) for r in _flat(app.routes)
                if isinstance(r, APIRoute) for m in r.methods or ()}  # fmt: skip
    for path, operations in doc.get("paths", {}).items():
        for method, op in operations.items():
            for code, answer in op.get("responses", {}).items():
                if code.isdigit() and int(code) >= 400:
                    answer["content"] = problem
                    if code == "422":
                        answer["description"] = "the request is invalid, or the command was refused"
            roles = roles_of.get((method, path))
            if roles is not None:
                op["x-roles"] = sorted(roles)
                line = f"Roles: {', '.join(sorted(roles))} (an API key of another role: 403)."
                op["description"] = f"{op.get('description', '').rstrip()}\n\n{line}".lstrip()
                op["security"] = [{"HTTPBearer": []}]
            else:
                op.pop("security", None)
    schemas = doc.get("components", {}).get("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    app.openapi_schema = doc
    return doc


# --- the application ---------------------------------------------------------------------------------


class BackOffice:
    """What the routes share: the read model, the projector, the command gateway, the API keys."""

    def __init__(self, settings: ServeSettings, engine: Engine) -> None:
        self.settings = settings
        self.engine = engine
        writers = writer_keys_for(settings.log_path, settings.keyring_path) if settings.kafka is None else {}
        self.projector = Projector(engine, periods=settings.periods, writers=writers)
        self.gateway = _gateway(settings, self.projector)
        self.live_keys = LiveKeys(settings.keyring_path)  # re-read when the keyring changes: a revoked key
        self.commands = threading.Lock()
        self.stop = threading.Event()
        self.logger = get_logger("casino_ledger.backoffice")
        self.ready = False
        """The read model is as current as the log was at start and the last projection round succeeded."""
        self.projection_failures = 0

    def position(self) -> int:
        """How far the read model is: the log's offset projected (on Kafka, records applied)."""
        return int(self.gateway.position())

    @property
    def keys(self) -> dict[str, ApiKey]:
        """The API keys as the keyring holds them now (:class:`~services.backoffice.apikeys.LiveKeys`)."""
        return self.live_keys.current()

    def follow(self) -> None:
        """Project the log every ``poll_seconds`` until stopped (the background thread); on Kafka, check
        that the broker and the read model answer (``project --kafka --follow`` projects); on the back
        office's key alone, that a ``pipeline`` process runs on the log."""
        while not self.stop.is_set():
            try:
                self.gateway.catch_up()
                getattr(self.gateway, "check", lambda: None)()  # embedded, key alone: a pipeline runs
                self.ready = True
            except Exception as exc:  # keep serving reads; say why in the log (no secrets in it)
                if self.ready or not self.projection_failures:  # once per outage, not every round
                    self.logger.warning("projection failed", error=type(exc).__name__, detail=str(exc)[:200])
                self.ready = False
                self.projection_failures += 1
            self.stop.wait(self.settings.poll_seconds)


def _gateway(settings: ServeSettings, projector: Projector) -> Any:
    """The commands' way in: the embedded log's :class:`Gateway`, or Kafka's with ``settings.kafka``."""
    if settings.kafka is None:
        return Gateway(settings.log_path, projector, keyring_path=settings.keyring_path,
                       run_pipeline=not settings.pipeline_elsewhere,
                       timeout_s=settings.command_timeout_s)  # fmt: skip
    from services.backoffice.kafka_commands import KafkaGateway  # noqa: PLC0415

    return KafkaGateway(settings.kafka, projector, keyring_path=settings.keyring_path,
                        timeout_s=settings.command_timeout_s)  # fmt: skip


bearer = HTTPBearer(auto_error=False, description="an API key from `casino-ledger apikey new`")


def create_app(settings: ServeSettings, engine: Engine, *, follow: bool = True) -> FastAPI:  # noqa: PLR0915 (routes are closures over the app)
    """The FastAPI application over the read model at ``engine`` (already migrated)."""
    bo = BackOffice(settings, engine)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if settings.kafka is None:
            await run_in_threadpool(bo.gateway.catch_up)  # serve a read model as current as the log
            bo.ready = not settings.pipeline_elsewhere  # else once follow() has seen a pipeline process
        thread = threading.Thread(target=bo.follow, name="projector", daemon=True) if follow else None
        if thread:
            thread.start()
        yield
        bo.stop.set()
        if thread:
            await run_in_threadpool(thread.join, 10)
        bo.gateway.close()

    app = FastAPIOffline(  # Swagger UI served from the package (fastapi-offline): no CDN on a closed network
        redoc_url=None,
        static_url="/docs-static",
        title="casino-ledger back office",
        version="1",
        description="The back-office API over the read model (docs/integration.md). "
        "Money in integer minor units.",
        lifespan=lifespan,
    )
    app.state.bo = bo
    probes.install(app, bo)  # /healthz, /readyz, /metrics

    @app.exception_handler(Problem)
    async def _problem(_request: Request, exc: Problem) -> JSONResponse:
        return problem_response(exc.status, exc.title, exc.detail, **exc.extra)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        response = problem_response(exc.status_code, str(exc.detail), "")
        for name, value in (exc.headers or {}).items():
            response.headers[name] = value
        return response

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        # a bare 500 told the caller nothing and the operator less: one log line with the cause (its
        # type and first line, no secret is in either), a problem+json that says where to look
        detail = (str(exc).strip().splitlines() or [""])[0][:300]
        bo.logger.error("request failed", method=request.method, path=request.url.path,
                        error=type(exc).__name__, detail=detail)  # fmt: skip
        return problem_response(500, "internal error", f"{type(exc).__name__}: see the serve log")

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', '')}" for e in exc.errors()
        )
        return problem_response(422, "invalid request", errors[:2000])

    def role(group: str) -> Any:
        allowed = PERMISSIONS[group]

        def check(creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> ApiKey:
            if creds is None or creds.scheme.lower() != "bearer":
                raise Problem(401, "unauthorized", "an API key is required: Authorization: Bearer <key>")
            key = verify(bo.keys, creds.credentials)
            if key is None:
                raise Problem(401, "unauthorized", "unknown API key")
            if key.role not in allowed:
                raise Problem(403, "forbidden", f"role {key.role} may not use this route")
            return key

        check.role_group = group  # type: ignore[attr-defined]  # read by the OpenAPI document's roles
        return Depends(check)

    def conn() -> Iterator[Any]:
        with engine.connect() as c:
            yield c

    Conn = Annotated[Any, Depends(conn)]

    def time_param(value: str | None, name: str) -> str | None:
        if value is None:
            return None
        try:
            return queries.normalise_time(value)
        except ValueError:
            raise Problem(400, "bad request", f"{name}: not an RFC 3339 time or YYYY-MM-DD") from None

    def cursor_param(value: str | None) -> int:
        if value is None:
            return 0
        if not value.isdigit() or len(value) > 18:
            raise Problem(400, "bad request", "cursor: not a cursor this API returned")
        return int(value)

    def wants_csv(request: Request, fmt: Format | None) -> bool:
        if fmt is not None:
            return fmt == "csv"
        return "text/csv" in request.headers.get("accept", "")

    def day_param(c: Any, day: str | None) -> str:
        if day is None:
            return queries.latest_day(c) or "1970-01-01"
        try:
            return queries.normalise_time(day)[:10] if len(day) == 10 else _bad_day()
        except ValueError:
            return _bad_day()

    def _bad_day() -> str:
        raise Problem(400, "bad request", "day: expected YYYY-MM-DD")

    # -- reads ------------------------------------------------------------------------------------

    @app.get("/v1/health", response_model=Health, tags=["meta"])
    async def health() -> dict[str, str]:
        """Liveness (no key needed, no database read): the benchmark's baseline."""
        return {"status": "ok"}

    @app.get("/v1/accounts/{account_id}/balance", response_model=Balance, responses=PROBLEMS,
             tags=["accounts"], dependencies=[role("balance")])  # fmt: skip
    def get_balance(account_id: str, c: Conn) -> dict[str, Any]:
        """The account's balance: the fold of every posting naming it."""
        found = queries.balance(c, account_id)
        if found is None:
            raise Problem(404, "not found", f"no posting names account {account_id}")
        return found

    @app.get("/v1/accounts/{account_id}/statement", response_model=Statement, responses=PROBLEMS,
             tags=["accounts"], dependencies=[role("statement")])  # fmt: skip
    def get_statement(  # noqa: PLR0917 (query parameters)
        account_id: str, request: Request, c: Conn,
        since: Time = None, until: Time = None, cursor: Cursor = None,
        limit: Annotated[int, Query(ge=1, le=queries.MAX_PAGE)] = 100, format: Format | None = None,
    ) -> Any:  # fmt: skip
        """One page of the account's statement lines (``since`` ≤ time < ``until``), oldest first;
        with ``format=csv`` (or ``Accept: text/csv``) the whole window as CSV."""
        lo, hi = time_param(since, "since"), time_param(until, "until")
        at = cursor_param(cursor)
        if not queries.account_exists(c, account_id):
            raise Problem(404, "not found", f"no posting names account {account_id}")
        if wants_csv(request, format):
            text = exports.statement_export(c, account_id, since=lo, until=hi, fmt="csv")
            return PlainTextResponse(text, media_type="text/csv; charset=utf-8")
        return queries.statement(c, account_id, since=lo, until=hi, cursor=at, limit=limit)

    @app.get("/v1/rounds/{coup_id:path}", response_model=Round, responses=PROBLEMS, tags=["rounds"],
             dependencies=[role("rounds")])  # fmt: skip
    def get_round(coup_id: str, c: Conn) -> dict[str, Any]:
        """The full game-round record: variant, rules version, paytable, shoe and coup number, start
        and end, every card with its hand and shoe position, every decision and who made it, every
        bet with its payout and the wallet's balance before and after."""
        found = queries.round_record(c, coup_id)
        if found is None:
            raise Problem(404, "not found", "no such coup")
        return found

    @app.get("/v1/tables", response_model=Tables, responses=PROBLEMS, tags=["tables"],
             dependencies=[role("tables")])  # fmt: skip
    def get_tables(c: Conn) -> dict[str, Any]:
        """Every table with its results for the latest gaming day with play."""
        day = queries.latest_day(c)
        return {"day": day, "position": bo.position(), "tables": queries.tables_overview(c, day)}

    @app.get("/v1/tables/{table_id}/report", response_model=TableReport, responses=PROBLEMS,
             tags=["tables"], dependencies=[role("tables")])  # fmt: skip
    def get_report(table_id: str, request: Request, c: Conn, day: Day = None,
                   format: Format | None = None) -> Any:  # fmt: skip
        """The table's results for one gaming day (default: the latest with play): coups, bets,
        handle, win (what the house kept, commission included), commission, hold %."""
        if not queries.table_exists(c, table_id):
            raise Problem(404, "not found", f"no table {table_id}")
        report = queries.table_report(c, table_id, day_param(c, day))
        if wants_csv(request, format):
            text = exports.reports_export([report], "csv")
            return PlainTextResponse(text, media_type="text/csv; charset=utf-8")
        return report

    @app.get("/v1/tables/{table_id}/shifts", response_model=Shifts, responses=PROBLEMS, tags=["tables"],
             dependencies=[role("tables")])  # fmt: skip
    def get_shifts(table_id: str, request: Request, c: Conn, day: Day = None,
                   format: Format | None = None) -> Any:  # fmt: skip
        """The same figures per shift of the gaming day."""
        if not queries.table_exists(c, table_id):
            raise Problem(404, "not found", f"no table {table_id}")
        shifts = queries.table_shifts(c, table_id, day_param(c, day))
        if wants_csv(request, format):
            text = exports.reports_export(shifts, "csv", shifts=True)
            return PlainTextResponse(text, media_type="text/csv; charset=utf-8")
        return {"shifts": shifts}

    @app.get("/v1/tables/{table_id}/rounds", response_model=Rounds, responses=PROBLEMS, tags=["tables"],
             dependencies=[role("tables")])  # fmt: skip
    def get_last_rounds(table_id: str, c: Conn,
                        limit: Annotated[int, Query(ge=1, le=100)] = 10) -> dict[str, Any]:  # fmt: skip
        """The table's last resolved coups with their cards, newest first."""
        if not queries.table_exists(c, table_id):
            raise Problem(404, "not found", f"no table {table_id}")
        return {"rounds": queries.last_rounds(c, table_id, limit)}

    @app.get("/v1/tables/{table_id}/roads", response_model=Roads, responses=PROBLEMS, tags=["tables"],
             dependencies=[role("tables")])  # fmt: skip
    def get_roads(table_id: str, c: Conn, shoe_id: str | None = None) -> dict[str, Any]:
        """The five scoreboard roads of a shoe (default: the table's current shoe)."""
        if not queries.table_exists(c, table_id):
            raise Problem(404, "not found", f"no table {table_id}")
        shoe, outcomes = queries.shoe_outcomes(c, table_id, shoe_id)
        return {"table_id": table_id, "shoe_id": shoe, "outcomes": outcomes, **roads.roads(outcomes)}

    def listing(kind: str) -> Any:
        def run(  # noqa: PLR0917 (query parameters)
            c: Conn, table: str | None = None, account: str | None = None,
            severity: Literal["info", "warning", "critical"] | None = None, since: Time = None,
            cursor: Cursor = None, limit: Annotated[int, Query(ge=1, le=queries.MAX_PAGE)] = 100,
        ) -> dict[str, Any]:  # fmt: skip
            filters = {
                "table_id": table, "account_id": account, "severity": severity,
                "since": time_param(since, "since"), "cursor": cursor_param(cursor), "limit": limit,
            }  # fmt: skip
            return queries.alerts(c, **filters) if kind == "alerts" else queries.findings(c, **filters)

        return run

    app.get("/v1/findings", response_model=Findings, responses=PROBLEMS, tags=["monitoring"],
            dependencies=[role("findings")], summary="Audit findings, oldest first",
            )(listing("findings"))  # fmt: skip

    @app.get("/v1/stream", tags=["tables"], responses=PROBLEMS, dependencies=[role("tables")],
             response_class=StreamingResponse)  # fmt: skip
    async def stream(
        request: Request, max_seconds: Annotated[int, Query(ge=1, le=3600)] = 3600
    ) -> StreamingResponse:
        """Server-sent events: ``event: position`` with ``{"position": n}`` each time the read model
        moves (and once at the start), a comment every 15 s; closes after ``max_seconds``."""

        async def events() -> AsyncIterator[str]:
            last, waited, quiet = -1, 0.0, 0.0
            step = max(0.1, settings.poll_seconds / 2)
            while waited < max_seconds and not await request.is_disconnected():
                pos = await run_in_threadpool(bo.position)
                if pos != last:
                    last, quiet = pos, 0.0
                    yield f"event: position\ndata: {json.dumps({'position': pos})}\n\n"
                elif quiet >= 15:
                    quiet = 0.0
                    yield ": keep-alive\n\n"
                await asyncio.sleep(step)
                waited, quiet = waited + step, quiet + step

        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        return StreamingResponse(events(), media_type="text/event-stream", headers=headers)

    # -- commands ---------------------------------------------------------------------------------

    def idempotent(route: str, key: ApiKey, idem: str, body: BaseModel, run: Any) -> Response:
        if settings.commands_refused:
            raise Problem(503, "commands unavailable", settings.commands_refused)
        digest = hashlib.sha256(canonical({"route": route, "body": body.model_dump(mode="json")})).hexdigest()
        t = s.idempotency.c
        with bo.commands:
            with engine.connect() as c:
                found = c.execute(
                    select(t.route, t.request_hash, t.status_code, t.response).where(
                        t.principal == key.key_id, t.key == idem
                    )
                ).first()
            if found is not None:
                if found[0] != route or found[1] != digest:
                    raise Problem(409, "conflict", "this Idempotency-Key was used with another request")
                if int(found[2]) != PENDING:
                    return _answer(int(found[2]), str(found[3]))
            retry = found is not None  # on the log already, its outcome came too late last time (Kafka)
            try:
                status, answer = run(retry)
            except LogConflict:
                detail = "the log holds another request under this Idempotency-Key (answers lost?)"
                raise Problem(409, "conflict", detail) from None
            except ConsumerMoved:
                raise Problem(503, "unavailable", "another process is running the pipeline on this log; "
                              "retry with the same Idempotency-Key") from None  # fmt: skip
            except BrokerUnavailable as exc:
                raise Problem(503, "unavailable", f"{exc}; retry with the same Idempotency-Key") from None
            except OutcomeTimeout as exc:
                if not retry:  # a retry, on any server of this read model, reads the outcome
                    _remember(engine, (key.key_id, idem, route, digest), PENDING, "", replace=False)
                raise Problem(504, "outcome not yet projected", str(exc)) from None
            text = json.dumps(answer)
            _remember(engine, (key.key_id, idem, route, digest), status, text, replace=retry)
            return _answer(status, text)

    def money(route: str, type_: str, body: MoneyCommand, key: ApiKey, idem: str) -> Response:
        def run(retry: bool) -> tuple[int, dict[str, Any]]:
            transfer_id = own_namespace("backoffice") + name_id("backoffice-transfer", key.key_id, idem)
            payload = {
                "amount_minor": body.amount_minor, "currency": body.currency, "transfer_id": transfer_id,
            }  # fmt: skip

            def outcome() -> dict[str, Any] | None:
                with engine.connect() as c:
                    return queries.transfer_outcome(c, transfer_id, body.account_id)

            request_id, found = bo.gateway.command(type_, body.account_id, payload, key_id=key.key_id,
                                                   idem=idem, outcome=outcome, final=_known,
                                                   retry=retry)  # fmt: skip
            with engine.connect() as c:
                out = found or {
                    "status": "pending", "reason": None,
                    "balance_minor": (queries.balance(c, body.account_id) or {}).get("balance_minor", 0),
                }  # fmt: skip
            answer = {
                "request_id": request_id, "account_id": body.account_id, "transfer_id": transfer_id, **out,
            }  # fmt: skip
            return (201 if out["status"] == "applied" else 422), _refused(answer)

        return idempotent(route, key, idem, body, run)

    @app.post("/v1/cashier/deposits", status_code=201, response_model=CommandAnswer, responses=PROBLEMS,
              tags=["commands"])  # fmt: skip
    def deposit(body: MoneyCommand, idem: IdempotencyKey,
                key: Annotated[ApiKey, role("cashier")]) -> Response:  # fmt: skip
        """Credit a wallet from the cage (``Deposit``); 201 when applied, 422 problem when refused."""
        return money("deposits", "Deposit", body, key, idem)

    @app.post("/v1/cashier/withdrawals", status_code=201, response_model=CommandAnswer, responses=PROBLEMS,
              tags=["commands"])  # fmt: skip
    def withdraw(body: MoneyCommand, idem: IdempotencyKey,
                 key: Annotated[ApiKey, role("cashier")]) -> Response:  # fmt: skip
        """Pay a wallet out to the cage (``Withdraw``); 422 problem when refused (insufficient funds)."""
        return money("withdrawals", "Withdraw", body, key, idem)

    @app.post("/v1/bets", status_code=201, response_model=CommandAnswer, responses=PROBLEMS,
              tags=["commands"])  # fmt: skip
    def bet(body: BetCommand, idem: IdempotencyKey, key: Annotated[ApiKey, role("bets")]) -> Response:
        """Place a bet (``PlaceBet``): 201 with status ``accepted`` when the table took it into the open
        coup (``reserved`` while the table has not answered), 422 problem when it was rejected (funds,
        limits) or refused by the dealer (late: the stake is refunded)."""

        def run(retry: bool) -> tuple[int, dict[str, Any]]:
            bet_id = body.bet_id or name_id("backoffice-bet", key.key_id, idem)
            payload = {
                "bet_id": bet_id, "table_id": body.table_id, "coup_id": body.coup_id, "spot": body.spot,
                "stake_minor": body.stake_minor, "currency": body.currency,
            }  # fmt: skip

            def outcome() -> dict[str, Any]:
                with engine.connect() as c:
                    return queries.bet_outcome(c, bet_id, body.account_id)

            request_id, out = bo.gateway.command("PlaceBet", body.account_id, payload, key_id=key.key_id,
                                                 idem=idem, outcome=outcome, final=_answered,
                                                 retry=retry)  # fmt: skip
            answer = {"request_id": request_id, "account_id": body.account_id, "bet_id": bet_id, **out}
            ok = out["status"] in ("accepted", "reserved", "settled")
            return (201 if ok else 422), _refused(answer)

        return idempotent("bets", key, idem, body, run)

    from services.backoffice import alerts_api  # noqa: PLC0415 (it reads this module's types)

    app.include_router(alerts_api.router(alerts_api.Kit(
        bo=bo, role=role, conn=conn, time_param=time_param, cursor_param=cursor_param, wants_csv=wants_csv,
        idempotent=idempotent, problem=Problem,
    )))  # fmt: skip

    # -- the page ---------------------------------------------------------------------------------

    app.openapi = lambda: contract_openapi(app)  # type: ignore[method-assign]

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app


PENDING = 0
"""The status of a stored answer not known yet: the command is on the log (Kafka), its outcome was not
projected in time; a retry with the same key and body reads it instead of writing again."""


def _remember(engine: Engine, request: tuple[str, str, str, str], status: int, text: str, *,
              replace: bool) -> None:  # fmt: skip
    """Store the answer to ``request`` (API key id, Idempotency-Key, route, request digest); ``replace``:
    over its :data:`PENDING` row."""
    key_id, idem, route, digest = request
    t = s.idempotency
    try:
        with engine.begin() as c:
            if replace:
                pending = (t.c.principal == key_id, t.c.key == idem, t.c.status_code == PENDING)
                c.execute(update(t).where(*pending).values(status_code=status, response=text))
            else:
                c.execute(insert(t).values(principal=key_id, key=idem, route=route, request_hash=digest,
                                           status_code=status, response=text))  # fmt: skip
    except IntegrityError:  # a second server on the same read model answered first
        raise Problem(409, "conflict", "this Idempotency-Key is being used concurrently") from None


def _known(outcome: dict[str, Any] | None) -> bool:
    """A transfer's outcome is in the read model (applied or refused)."""
    return outcome is not None


def _answered(outcome: dict[str, Any]) -> bool:
    """A bet's outcome is in the read model: the table took it, refused it, or the wallet rejected it."""
    return outcome["status"] not in ("pending", "reserved")


def _refused(answer: dict[str, Any]) -> dict[str, Any]:
    """A refused command's answer as a problem body (the fields of the answer kept beside)."""
    if answer["status"] in ("applied", "accepted", "reserved", "settled"):
        return answer
    rest = {k: v for k, v in answer.items() if k != "status"}
    detail = f"{answer['status']}: {answer.get('reason')}"
    return {"type": "about:blank", "title": "refused", "status": 422, "detail": detail,
            "outcome": answer["status"], **rest}  # fmt: skip


def _answer(status: int, text: str) -> Response:
    media = "application/json" if status < 400 else "application/problem+json"
    return Response(text, status_code=status, media_type=media)
