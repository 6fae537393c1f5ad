"""What the back office's routes share (:mod:`services.integrations.backoffice.routes`,
:mod:`~services.integrations.backoffice.alerts_api`): API-key roles, a read-model connection, parameter
parsing,
problem answers and idempotent commands."""

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends, Request
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel
from sqlalchemy import Engine, insert, select, update
from sqlalchemy.exc import IntegrityError

from services.core.envelope import canonical
from services.integrations.backoffice import queries
from services.integrations.backoffice import schema as s
from services.integrations.backoffice.api_models import Format
from services.integrations.backoffice.apikeys import ApiKey, verify
from services.integrations.backoffice.commands import BrokerUnavailable, OutcomeTimeout
from services.runtime.embedded.runner import ConsumerMoved
from services.runtime.embedded.store import LogConflict

if TYPE_CHECKING:
    from services.integrations.backoffice.api import BackOffice

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

bearer = HTTPBearer(auto_error=False, description="an API key from `casino-ledger apikey new`")


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


PENDING = 0
"""The status of a stored answer not known yet: the command is on the log (Kafka), its outcome was not
projected in time; a retry with the same key and body reads it instead of writing again."""

Run = Callable[[bool], tuple[int, dict[str, Any]]]
"""A command's work: given whether it is a retry, its status code and answer."""


@dataclass(frozen=True, slots=True)
class Kit:
    """The routes' shared dependencies over one :class:`~services.integrations.backoffice.api.BackOffice`."""

    bo: "BackOffice"
    problem: type[Problem] = Problem

    def role(self, group: str) -> Any:
        """A dependency that admits an API key of a role allowed ``group`` (401 / 403 otherwise)."""
        allowed = PERMISSIONS[group]
        bo = self.bo

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

    def conn(self) -> Iterator[Any]:
        """A read-model connection for one request."""
        with self.bo.engine.connect() as c:
            yield c

    @staticmethod
    def time_param(value: str | None, name: str) -> str | None:
        """``value`` as the read model's time (400 when it is none)."""
        if value is None:
            return None
        try:
            return queries.normalise_time(value)
        except ValueError:
            raise Problem(400, "bad request", f"{name}: not an RFC 3339 time or YYYY-MM-DD") from None

    @staticmethod
    def cursor_param(value: str | None) -> int:
        """A cursor this API returned, as its position (400 otherwise)."""
        if value is None:
            return 0
        if not value.isdigit() or len(value) > 18:
            raise Problem(400, "bad request", "cursor: not a cursor this API returned")
        return int(value)

    @staticmethod
    def wants_csv(request: Request, fmt: Format | None) -> bool:
        """``format=csv``, or ``Accept: text/csv`` when no format is given."""
        if fmt is not None:
            return fmt == "csv"
        return "text/csv" in request.headers.get("accept", "")

    @staticmethod
    def day_param(c: Any, day: str | None) -> str:
        """The gaming day asked (default: the latest with play; 400 when it is no day)."""
        if day is None:
            return queries.latest_day(c) or "1970-01-01"
        try:
            return queries.normalise_time(day)[:10] if len(day) == 10 else _bad_day()
        except ValueError:
            return _bad_day()

    def idempotent(self, route: str, key: ApiKey, idem: str, body: BaseModel, run: Run) -> Response:
        """Run a command once per API key and ``Idempotency-Key``: the same key with the same body gives
        the stored answer, with another body 409; an outcome not projected in time answers 504 and a
        retry reads it."""
        bo = self.bo
        if bo.settings.commands_refused:
            raise Problem(503, "commands unavailable", bo.settings.commands_refused)
        digest = hashlib.sha256(canonical({"route": route, "body": body.model_dump(mode="json")})).hexdigest()
        with bo.commands:
            found = _stored(bo.engine, key.key_id, idem)
            if found is not None:
                if found[0] != route or found[1] != digest:
                    raise Problem(409, "conflict", "this Idempotency-Key was used with another request")
                if int(found[2]) != PENDING:
                    return _answer(int(found[2]), str(found[3]))
            retry = found is not None  # on the log already, its outcome came too late last time (Kafka)
            request = (key.key_id, idem, route, digest)
            status, answer = _ran(bo.engine, run, retry, request)
            text = json.dumps(answer)
            _remember(bo.engine, request, status, text, replace=retry)
            return _answer(status, text)


def _bad_day() -> str:
    raise Problem(400, "bad request", "day: expected YYYY-MM-DD")


def _stored(engine: Engine, key_id: str, idem: str) -> Any:
    """The stored answer row for (API key, Idempotency-Key), if any."""
    t = s.idempotency.c
    with engine.connect() as c:
        return c.execute(
            select(t.route, t.request_hash, t.status_code, t.response).where(
                t.principal == key_id, t.key == idem
            )
        ).first()


def _ran(
    engine: Engine, run: Run, retry: bool, request: tuple[str, str, str, str]
) -> tuple[int, dict[str, Any]]:
    """``run(retry)``, its failures as problems (a timeout first stored as :data:`PENDING`)."""
    try:
        return run(retry)
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
            _remember(engine, request, PENDING, "", replace=False)
        raise Problem(504, "outcome not yet projected", str(exc)) from None


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


def _answer(status: int, text: str) -> Response:
    media = "application/json" if status < 400 else "application/problem+json"
    return Response(text, status_code=status, media_type=media)
