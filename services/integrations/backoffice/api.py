"""``casino-ledger serve``: the back-office HTTP API (docs/integration.md) and the pit boss's page.

FastAPI over the read model; OpenAPI 3.1 at ``/openapi.json`` (Swagger UI at ``/docs``). Bearer API
keys with roles (:data:`PERMISSIONS`): 401 without a valid key, 403 for a role that may not. Errors
are ``application/problem+json`` (RFC 9457). Commands carry an ``Idempotency-Key``: the same key with
the same body gives the same answer, with another body 409. A background thread projects the log
into the read model every ``poll_seconds``; the page follows it through server-sent events. With
``serve --kafka`` the commands go to the topics and ``project --kafka --follow`` keeps the read model
(:mod:`services.integrations.backoffice.kafka_commands`); that thread then checks the broker for readiness.
"""

import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline
from sqlalchemy import Engine
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from services.integrations.backoffice import alerts_api, probes, routes
from services.integrations.backoffice.api_models import Health
from services.integrations.backoffice.apikeys import ApiKey, LiveKeys
from services.integrations.backoffice.commands import Gateway, Pipeline
from services.integrations.backoffice.facts import writer_keys_for
from services.integrations.backoffice.kit import PERMISSIONS, Kit, Problem, problem_response
from services.integrations.backoffice.projector import Periods, Projector
from services.runtime.logging import get_logger

STATIC = Path(__file__).with_name("static")

__all__ = ["PERMISSIONS", "BackOffice", "Problem", "ServeSettings", "contract_openapi", "create_app"]


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
    pipeline: Pipeline | None = None
    """On the embedded log, unless ``pipeline_elsewhere``: the processors the gateway runs (the composition
    root's, from the ``serve`` command: :func:`services.runtime.compose.keyring_pipeline`)."""


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
        """The API keys as the keyring holds them now
        (:class:`~services.integrations.backoffice.apikeys.LiveKeys`)."""
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
                       run_pipeline=not settings.pipeline_elsewhere, pipeline=settings.pipeline,
                       timeout_s=settings.command_timeout_s)  # fmt: skip
    from services.integrations.backoffice.kafka_commands import KafkaGateway  # noqa: PLC0415

    return KafkaGateway(settings.kafka, projector, keyring_path=settings.keyring_path,
                        timeout_s=settings.command_timeout_s)  # fmt: skip


def create_app(settings: ServeSettings, engine: Engine, *, follow: bool = True) -> FastAPI:
    """The FastAPI application over the read model at ``engine`` (already migrated)."""
    bo = BackOffice(settings, engine)
    app = FastAPIOffline(  # Swagger UI served from the package (fastapi-offline): no CDN on a closed network
        redoc_url=None,
        static_url="/docs-static",
        title="casino-ledger back office",
        version="1",
        description="The back-office API over the read model (docs/integration.md). "
        "Money in integer minor units.",
        lifespan=_lifespan(bo, follow=follow),
    )
    app.state.bo = bo
    probes.install(app, bo)  # /healthz, /readyz, /metrics
    _install_problems(app, bo)

    @app.get("/v1/health", response_model=Health, tags=["meta"])
    async def health() -> dict[str, str]:
        """Liveness (no key needed, no database read): the benchmark's baseline."""
        return {"status": "ok"}

    kit = Kit(bo)
    app.include_router(routes.router(kit))
    app.include_router(alerts_api.router(kit))
    app.openapi = lambda: contract_openapi(app)  # type: ignore[method-assign]

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app


def _lifespan(bo: BackOffice, *, follow: bool) -> Any:
    """Catch the read model up before serving, then project in a background thread until shut down."""
    settings = bo.settings

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

    return lifespan


def _install_problems(app: FastAPI, bo: BackOffice) -> None:
    """Every error as ``application/problem+json``."""

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
