"""The back office's routes over the read model and the commands (:mod:`services.integrations.backoffice.api`
includes
them in this order after ``/v1/health``; the alerts' routes are
:mod:`~services.integrations.backoffice.alerts_api`)."""

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import PlainTextResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from services.core.boundary import own_namespace
from services.core.envelope import name_id
from services.integrations.backoffice import exports, queries, roads
from services.integrations.backoffice.api_models import (
    PROBLEMS,
    Balance,
    BetCommand,
    CommandAnswer,
    Cursor,
    Day,
    Findings,
    Format,
    IdempotencyKey,
    MoneyCommand,
    Roads,
    Round,
    Rounds,
    Shifts,
    Statement,
    TableReport,
    Tables,
    Time,
)
from services.integrations.backoffice.apikeys import ApiKey
from services.integrations.backoffice.kit import Kit, Problem


def router(kit: Kit) -> APIRouter:
    """Every route of the read model and the commands, in the order the API documents them."""
    r = APIRouter()
    install_accounts(r, kit)
    install_tables(r, kit)
    install_stream(r, kit)
    install_commands(r, kit)
    return r



def install_accounts(r: APIRouter, kit: Kit) -> None:
    """Balances, statements and game-round records."""
    Conn = Annotated[Any, Depends(kit.conn)]

    @r.get("/v1/accounts/{account_id}/balance", response_model=Balance, responses=PROBLEMS,
             tags=["accounts"], dependencies=[kit.role("balance")])  # fmt: skip
    def get_balance(account_id: str, c: Conn) -> dict[str, Any]:
        """The account's balance: the fold of every posting naming it."""
        found = queries.balance(c, account_id)
        if found is None:
            raise Problem(404, "not found", f"no posting names account {account_id}")
        return found

    @r.get("/v1/accounts/{account_id}/statement", response_model=Statement, responses=PROBLEMS,
             tags=["accounts"], dependencies=[kit.role("statement")])  # fmt: skip
    def get_statement(  # noqa: PLR0917 (query parameters)
        account_id: str, request: Request, c: Conn,
        since: Time = None, until: Time = None, cursor: Cursor = None,
        limit: Annotated[int, Query(ge=1, le=queries.MAX_PAGE)] = 100, format: Format | None = None,
    ) -> Any:  # fmt: skip
        """One page of the account's statement lines (``since`` ≤ time < ``until``), oldest first;
        with ``format=csv`` (or ``Accept: text/csv``) the whole window as CSV."""
        lo, hi = kit.time_param(since, "since"), kit.time_param(until, "until")
        at = kit.cursor_param(cursor)
        if not queries.account_exists(c, account_id):
            raise Problem(404, "not found", f"no posting names account {account_id}")
        if kit.wants_csv(request, format):
            text = exports.statement_export(c, account_id, since=lo, until=hi, fmt="csv")
            return PlainTextResponse(text, media_type="text/csv; charset=utf-8")
        return queries.statement(c, account_id, since=lo, until=hi, cursor=at, limit=limit)

    @r.get("/v1/rounds/{coup_id:path}", response_model=Round, responses=PROBLEMS, tags=["rounds"],
             dependencies=[kit.role("rounds")])  # fmt: skip
    def get_round(coup_id: str, c: Conn) -> dict[str, Any]:
        """The full game-round record: variant, rules version, paytable, shoe and coup number, start
        and end, every card with its hand and shoe position, every decision and who made it, every
        bet with its payout and the wallet's balance before and after."""
        found = queries.coup_record(c, coup_id)
        if found is None:
            raise Problem(404, "not found", "no such coup")
        return found


def install_tables(r: APIRouter, kit: Kit) -> None:
    """The tables' results, shifts, last coups and roads."""
    Conn = Annotated[Any, Depends(kit.conn)]

    @r.get("/v1/tables", response_model=Tables, responses=PROBLEMS, tags=["tables"],
             dependencies=[kit.role("tables")])  # fmt: skip
    def get_tables(c: Conn) -> dict[str, Any]:
        """Every table with its results for the latest gaming day with play."""
        day = queries.latest_day(c)
        return {"day": day, "position": kit.bo.position(), "tables": queries.tables_overview(c, day)}

    @r.get("/v1/tables/{table_id}/report", response_model=TableReport, responses=PROBLEMS,
             tags=["tables"], dependencies=[kit.role("tables")])  # fmt: skip
    def get_report(table_id: str, request: Request, c: Conn, day: Day = None,
                   format: Format | None = None) -> Any:  # fmt: skip
        """The table's results for one gaming day (default: the latest with play): coups, bets,
        handle, win (what the house kept, commission included), commission, hold %."""
        if not queries.table_exists(c, table_id):
            raise Problem(404, "not found", f"no table {table_id}")
        report = queries.table_report(c, table_id, kit.day_param(c, day))
        if kit.wants_csv(request, format):
            text = exports.reports_export([report], "csv")
            return PlainTextResponse(text, media_type="text/csv; charset=utf-8")
        return report

    @r.get("/v1/tables/{table_id}/shifts", response_model=Shifts, responses=PROBLEMS, tags=["tables"],
             dependencies=[kit.role("tables")])  # fmt: skip
    def get_shifts(table_id: str, request: Request, c: Conn, day: Day = None,
                   format: Format | None = None) -> Any:  # fmt: skip
        """The same figures per shift of the gaming day."""
        if not queries.table_exists(c, table_id):
            raise Problem(404, "not found", f"no table {table_id}")
        shifts = queries.table_shifts(c, table_id, kit.day_param(c, day))
        if kit.wants_csv(request, format):
            text = exports.reports_export(shifts, "csv", shifts=True)
            return PlainTextResponse(text, media_type="text/csv; charset=utf-8")
        return {"shifts": shifts}

    @r.get("/v1/tables/{table_id}/rounds", response_model=Rounds, responses=PROBLEMS, tags=["tables"],
             dependencies=[kit.role("tables")])  # fmt: skip
    def get_last_rounds(table_id: str, c: Conn,
                        limit: Annotated[int, Query(ge=1, le=100)] = 10) -> dict[str, Any]:  # fmt: skip
        """The table's last resolved coups with their cards, newest first."""
        if not queries.table_exists(c, table_id):
            raise Problem(404, "not found", f"no table {table_id}")
        return {"rounds": queries.last_rounds(c, table_id, limit)}

    @r.get("/v1/tables/{table_id}/roads", response_model=Roads, responses=PROBLEMS, tags=["tables"],
             dependencies=[kit.role("tables")])  # fmt: skip
    def get_roads(table_id: str, c: Conn, shoe_id: str | None = None) -> dict[str, Any]:
        """The five scoreboard roads of a shoe (default: the table's current shoe)."""
        if not queries.table_exists(c, table_id):
            raise Problem(404, "not found", f"no table {table_id}")
        shoe, outcomes = queries.shoe_outcomes(c, table_id, shoe_id)
        return {"table_id": table_id, "shoe_id": shoe, "outcomes": outcomes, **roads.roads(outcomes)}


def install_stream(r: APIRouter, kit: Kit) -> None:
    """Audit findings and the read model's position as server-sent events."""
    Conn = Annotated[Any, Depends(kit.conn)]

    @r.get("/v1/findings", response_model=Findings, responses=PROBLEMS, tags=["monitoring"],
           dependencies=[kit.role("findings")], summary="Audit findings, oldest first")  # fmt: skip
    def run(  # noqa: PLR0917 (query parameters; the name is the OpenAPI operation id's)
        c: Conn, table: str | None = None, account: str | None = None,
        severity: Literal["info", "warning", "critical"] | None = None, since: Time = None,
        cursor: Cursor = None, limit: Annotated[int, Query(ge=1, le=queries.MAX_PAGE)] = 100,
    ) -> dict[str, Any]:  # fmt: skip
        return queries.findings(
            c, table_id=table, account_id=account, severity=severity, since=kit.time_param(since, "since"),
            cursor=kit.cursor_param(cursor), limit=limit,
        )  # fmt: skip

    @r.get("/v1/stream", tags=["tables"], responses=PROBLEMS, dependencies=[kit.role("tables")],
             response_class=StreamingResponse)  # fmt: skip
    async def stream(
        request: Request, max_seconds: Annotated[int, Query(ge=1, le=3600)] = 3600
    ) -> StreamingResponse:
        """Server-sent events: ``event: position`` with ``{"position": n}`` each time the read model
        moves (and once at the start), a comment every 15 s; closes after ``max_seconds``."""

        async def events() -> AsyncIterator[str]:
            last, waited, quiet = -1, 0.0, 0.0
            step = max(0.1, kit.bo.settings.poll_seconds / 2)
            while waited < max_seconds and not await request.is_disconnected():
                pos = await run_in_threadpool(kit.bo.position)
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


def install_commands(r: APIRouter, kit: Kit) -> None:
    """Deposits, withdrawals and bets: commands on the log, idempotent."""

    def money(route: str, type_: str, body: MoneyCommand, key: ApiKey, idem: str) -> Response:
        def run(retry: bool) -> tuple[int, dict[str, Any]]:
            transfer_id = own_namespace("backoffice") + name_id("backoffice-transfer", key.key_id, idem)
            payload = {
                "amount_minor": body.amount_minor, "currency": body.currency, "transfer_id": transfer_id,
            }  # fmt: skip

            def outcome() -> dict[str, Any] | None:
                with kit.bo.engine.connect() as c:
                    return queries.transfer_outcome(c, transfer_id, body.account_id)

            request_id, found = kit.bo.gateway.command(type_, body.account_id, payload, key_id=key.key_id,
                                                   idem=idem, outcome=outcome, final=_known,
                                                   retry=retry)  # fmt: skip
            with kit.bo.engine.connect() as c:
                out = found or {
                    "status": "pending", "reason": None,
                    "balance_minor": (queries.balance(c, body.account_id) or {}).get("balance_minor", 0),
                }  # fmt: skip
            answer = {
                "request_id": request_id, "account_id": body.account_id, "transfer_id": transfer_id, **out,
            }  # fmt: skip
            return (201 if out["status"] == "applied" else 422), _refused(answer)

        return kit.idempotent(route, key, idem, body, run)

    @r.post("/v1/cashier/deposits", status_code=201, response_model=CommandAnswer, responses=PROBLEMS,
              tags=["commands"])  # fmt: skip
    def deposit(body: MoneyCommand, idem: IdempotencyKey,
                key: Annotated[ApiKey, kit.role("cashier")]) -> Response:  # fmt: skip
        """Credit a wallet from the cage (``Deposit``); 201 when applied, 422 problem when refused."""
        return money("deposits", "Deposit", body, key, idem)

    @r.post("/v1/cashier/withdrawals", status_code=201, response_model=CommandAnswer, responses=PROBLEMS,
              tags=["commands"])  # fmt: skip
    def withdraw(body: MoneyCommand, idem: IdempotencyKey,
                 key: Annotated[ApiKey, kit.role("cashier")]) -> Response:  # fmt: skip
        """Pay a wallet out to the cage (``Withdraw``); 422 problem when refused (insufficient funds)."""
        return money("withdrawals", "Withdraw", body, key, idem)

    @r.post("/v1/bets", status_code=201, response_model=CommandAnswer, responses=PROBLEMS,
              tags=["commands"])  # fmt: skip
    def bet(body: BetCommand, idem: IdempotencyKey, key: Annotated[ApiKey, kit.role("bets")]) -> Response:
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
                with kit.bo.engine.connect() as c:
                    return queries.bet_outcome(c, bet_id, body.account_id)

            request_id, out = kit.bo.gateway.command("PlaceBet", body.account_id, payload, key_id=key.key_id,
                                                 idem=idem, outcome=outcome, final=_answered,
                                                 retry=retry)  # fmt: skip
            answer = {"request_id": request_id, "account_id": body.account_id, "bet_id": bet_id, **out}
            ok = out["status"] in ("accepted", "reserved", "settled")
            return (201 if ok else 422), _refused(answer)

        return kit.idempotent("bets", key, idem, body, run)


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
