"""``serve``'s own ``/healthz``, ``/readyz`` and ``/metrics`` (docs/operations.md, "Metrics and probes").

* ``/healthz``: 200 while the process is alive and its event loop comes round in time (503 when it
  stalls), as a worker's;
* ``/readyz``: 200 once the read model is as current as the log was at start and the last projection
  round succeeded; 503 before and after a failed round. On Kafka (``serve --kafka``): 200 while the
  broker accepts a connection and the read model answers, 503 otherwise. Body ``{"ready", "position"}``
  (on Kafka, the records ``project --kafka`` applied);
* ``/metrics``: the Prometheus text format, label ``service="serve"``: HTTP requests by route template,
  method and status, their latency, the read model's position, projection failures, readiness, and
  the process collectors.

No key is needed for them (a kubelet and Prometheus have none) and they are not in the OpenAPI
document; they tell nothing about an account. Route labels are the route *templates*
(``/v1/accounts/{account_id}/balance``) or ``unmatched``: a client cannot create label values.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from prometheus_client import CollectorRegistry, GCCollector, Histogram, PlatformCollector, ProcessCollector
from prometheus_client import Counter as PromCounter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from starlette.concurrency import run_in_threadpool

SERVICE = "serve"
PROBE_PATHS = ("/healthz", "/readyz", "/metrics")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class _ReadModel:
    """Gauges read when scraped: the read model's position, readiness, projection failures."""

    def __init__(self, bo: Any) -> None:
        self.bo = bo

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        position = GaugeMetricFamily("casino_read_model_position", "Last log offset projected into the read "
                                     "model", labels=["service"])  # fmt: skip
        with contextlib.suppress(Exception):  # the database is away: the scrape answers, the gauge is empty
            position.add_metric([SERVICE], self.bo.position())
        yield position
        ready = GaugeMetricFamily("casino_ready", "1 when /readyz answers 200", labels=["service"])
        ready.add_metric([SERVICE], 1 if self.bo.ready else 0)
        yield ready
        failures = CounterMetricFamily("casino_projection_failures", "Projection rounds that failed",
                                       labels=["service"])  # fmt: skip
        failures.add_metric([SERVICE], self.bo.projection_failures)
        yield failures


def install(app: FastAPI, bo: Any) -> CollectorRegistry:
    """Add the three routes and the request counting to ``app`` (``bo``: its :class:`BackOffice`, with
    ``ready``, ``projection_failures`` and ``position()``). Returns the registry."""
    from services.runtime.kafka.metrics import LOOP_STALL_S  # noqa: PLC0415

    registry = CollectorRegistry(auto_describe=True)
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    registry.register(_ReadModel(bo))
    requests = PromCounter("casino_http_requests", "HTTP requests answered, by route template, method and "
                           "status", ("service", "route", "method", "status"), registry=registry)  # fmt: skip
    latency = Histogram("casino_http_request_duration_seconds", "Time to the response's start, by route "
                        "template", ("service", "route"), registry=registry)  # fmt: skip
    started = time.monotonic()

    def counting(inner: ASGIApp) -> ASGIApp:
        async def app_(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await inner(scope, receive, send)
                return
            t0 = time.perf_counter()

            async def sending(message: Message) -> None:
                if message["type"] == "http.response.start":
                    route = getattr(scope.get("route"), "path", "unmatched")
                    requests.labels(SERVICE, route, scope["method"], str(message["status"])).inc()
                    latency.labels(SERVICE, route).observe(time.perf_counter() - t0)
                await send(message)

            await inner(scope, receive, sending)

        return app_

    app.add_middleware(_Wrap, wrap=counting)

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> JSONResponse:
        import asyncio  # noqa: PLC0415

        loop = asyncio.get_running_loop()
        asked = loop.time()
        await asyncio.sleep(0)
        lag_s = loop.time() - asked
        ok = lag_s <= LOOP_STALL_S
        body = {"status": "ok" if ok else "stalled", "loop_lag_s": round(lag_s, 6),
                "uptime_s": round(time.monotonic() - started, 3)}  # fmt: skip
        return JSONResponse(body, status_code=200 if ok else 503)

    @app.get("/readyz", include_in_schema=False)
    async def readyz() -> JSONResponse:
        try:
            position: int | None = await run_in_threadpool(bo.position)
        except Exception:
            position = None
        ready = bool(bo.ready) and position is not None
        return JSONResponse({"ready": ready, "position": position}, status_code=200 if ready else 503)

    @app.get("/metrics", include_in_schema=False)
    async def metrics() -> Response:
        body = await run_in_threadpool(generate_latest, registry)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    return registry


class _Wrap:
    """A pure ASGI middleware built from a wrapping function (no BaseHTTPMiddleware: streaming
    responses, the page's server-sent events among them, pass through untouched)."""

    def __init__(self, app: ASGIApp, wrap: Callable[[ASGIApp], ASGIApp]) -> None:
        self._app = wrap(app)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(scope, receive, send)
