"""Prometheus metrics, liveness and readiness of a Kafka worker (docs/operations.md, "Metrics and probes").

Served where ``CASINO_WEB_ENABLED=1``, ``CASINO_WEB_BIND`` (default ``127.0.0.1``: never every interface
unless asked, the container manifests ask for ``0.0.0.0``) and ``CASINO_WEB_PORT`` say:

* ``GET /metrics``: the Prometheus text format (:data:`METRICS` lists every family this module defines,
  the process collector adds ``process_*``);
* ``GET /healthz``: 200 while the process is alive and its event loop answers (a probe that waits on
  the loop longer than :data:`LOOP_STALL_S` gets 503); JSON ``{"status", "loop_lag_s", "uptime_s"}``;
* ``GET /readyz``: 200 once the consumer group has assigned the worker its partitions and every
  assigned input partition is caught up (at most ``CASINO_READY_MAX_LAG`` records behind its high
  watermark), else 503; JSON ``{"ready", "assigned", "lag": {"topic[p]": n}}``. A worker of a group
  with more members than partitions may hold none: it is ready (a standby); so is a member of audit
  or monitor waiting for its service's lease (:mod:`services.runtime.kafka.lease`).

**Why faust's own web server.** The worker already runs faust's aiohttp server (``web_enabled``,
``web_port``, ``web_bind``); faust 0.15.3 adds views with ``app.page`` and lets each built-in
blueprint be switched off. With ``/router``, ``/table``, ``/graph`` and the statistics pages off, it
serves exactly our three routes (and faust's ``/`` index, ``{"status": "OK"}``), starts before the
consumer joins its group (so liveness answers during a long first join) and stops with the worker: no
second server, port or lifecycle to manage.

**Cost on the hot path.** Nothing here runs per record except a dict increment: the shell fills a
:class:`Tally` while it handles a batch (one entry per input record, one per output sent) and
:meth:`WorkerMetrics.flush` turns it into counter increments once per batch. Lag, assignment and
readiness are computed when scraped, from the offsets the consumer already holds (no broker call).

Label values come from our own outputs (reason codes, severities, detectors are enums of the core)
or, for input types, from the registry of known types; anything else is ``unknown``, so a hostile
record cannot create label values.
"""

from __future__ import annotations

import asyncio
import sys
import time
import urllib.error
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import click
from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client import Counter as PromCounter
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from services.core.contract import PAYLOADS
from services.core.envelope import Envelope
from services.core.reasons import Reason
from services.runtime.failures import exit_status

LOOP_STALL_S = 5.0
"""/healthz answers 503 when the event loop took longer than this to come back to the probe."""

REFUSAL_TYPES = frozenset(
    {"BetRefused", "BetRejected", "CommandRefused", "TransferRefused", "WithdrawalRejected"}
)
"""Business refusals (events with a ``reason``), counted by type and reason."""

WATCHED = REFUSAL_TYPES | {"DeadLetter", "BetAccepted", "PayoutIssued", "AuditFinding", "AnomalyDetected"}
"""Output types whose payloads feed a metric; every other output is only counted."""

KNOWN_TYPES = frozenset(PAYLOADS)
UNDECODABLE = Reason.UNDECODABLE.value
UNKNOWN = "unknown"
_LABEL_MAX = 64

# name: (kind, help, labels): the families of /metrics, also read by the Grafana dashboard test.
METRICS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "casino_records_handled_total": (
        "counter", "Input records handled, by processor, topic and type (undecodable: not an envelope)",
        ("service", "processor", "topic", "type"),
    ),
    "casino_records_caught_up_total": (
        "counter", "Input records re-applied from history after a start or a rebalance (catch-up)",
        ("service", "processor", "topic"),
    ),
    "casino_records_written_total": (
        "counter", "Output records written to Kafka (acknowledged or pending), by topic and type",
        ("service", "topic", "type"),
    ),
    "casino_dead_letters_total": (
        "counter", "Dead letters written, by the processor that wrote them and reason code",
        ("service", "processor", "reason"),
    ),
    "casino_refusals_total": (
        "counter", "Business refusals written (BetRefused, BetRejected, ...), by type and reason code",
        ("service", "processor", "type", "reason"),
    ),
    "casino_batch_duration_seconds": (
        "histogram", "Time to handle one batch: apply every record and await every output's ack",
        ("service", "processor"),
    ),
    "casino_batch_records": (
        "histogram", "Records in one batch", ("service", "processor"),
    ),
    "casino_bets_total": (
        "counter", "Bets accepted into a coup (BetAccepted written)", ("service", "currency"),
    ),
    "casino_bet_stake_minor_total": (
        "counter", "Stakes of the bets accepted, in minor units", ("service", "currency"),
    ),
    "casino_payouts_total": (
        "counter", "Payouts issued (PayoutIssued written), by result", ("service", "result", "currency"),
    ),
    "casino_payout_credit_minor_total": (
        "counter", "Credited back to wallets by payouts (stake returned + win - commission), minor units",
        ("service", "currency"),
    ),
    "casino_payout_win_minor_total": ("counter", "Wins paid, in minor units", ("service", "currency")),
    "casino_payout_commission_minor_total": (
        "counter", "Commission taken by payouts, in minor units", ("service", "currency"),
    ),
    "casino_audit_findings_total": (
        "counter", "Audit findings written, by reason code and severity", ("service", "reason", "severity"),
    ),
    "casino_anomalies_total": (
        "counter", "Monitor anomalies raised, by detector and severity", ("service", "detector", "severity"),
    ),
    "casino_consumer_lag_records": (
        "gauge", "Records of an assigned input partition not handled yet (high watermark - next offset)",
        ("service", "topic", "partition"),
    ),
    "casino_assigned_partitions": ("gauge", "Input partitions assigned to this worker", ("service",)),
    "casino_ready": ("gauge", "1 when /readyz answers 200 (assigned and caught up)", ("service",)),
    "casino_output_index_ids": (
        "gauge", "Event ids of outputs written since the snapshots the last restore started from",
        ("service",),
    ),
    "casino_state_snapshots_total": (
        "counter", "State snapshots written to the changelog and the local store", ("service",),
    ),
    "casino_state_snapshot_bytes_total": (
        "counter", "Bytes of the state snapshots written", ("service",),
    ),
    "casino_standby_snapshots_total": (
        "counter", "Snapshots of partitions other members own taken into the local store by the standby "
        "rounds (CASINO_STANDBY_STORES)", ("service",),
    ),
    "casino_log_lost_total": (
        "counter", "Times the worker found the log lost what its state says was applied (it then exits)",
        ("service",),
    ),
}  # fmt: skip

_COUNT_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)


def _label(value: object) -> str:
    """A label value from an output's payload field: a short string, else ``unknown``."""
    return value if isinstance(value, str) and 0 < len(value) <= _LABEL_MAX else UNKNOWN


def _type_label(type_: str | None) -> str:
    if type_ is None:
        return UNDECODABLE
    return type_ if type_ in KNOWN_TYPES else UNKNOWN


def _minor(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


@dataclass(slots=True)
class Tally:
    """What one batch did, filled on the hot path with dict increments and flushed once per batch."""

    handled: Counter[tuple[str, str, str | None]] = field(default_factory=Counter)
    caught_up: Counter[tuple[str, str]] = field(default_factory=Counter)
    written: Counter[tuple[str, str]] = field(default_factory=Counter)
    watched: list[Envelope] = field(default_factory=list)

    def input(self, processor: str, topic: str, type_: str | None, records: int = 1) -> None:
        """``records`` input records of one type handled (``type_`` None: they did not decode)."""
        self.handled[(processor, topic, type_)] += records

    def replayed(self, processor: str, topic: str, records: int) -> None:
        """``records`` input records re-applied by a catch-up."""
        self.caught_up[(processor, topic)] += records

    def output(self, env: Envelope) -> None:
        """One output record sent."""
        self.written[(env.topic, env.type)] += 1
        if env.type in WATCHED:
            self.watched.append(env)

    def clear(self) -> None:
        """Forget everything (after a flush)."""
        self.handled.clear()
        self.caught_up.clear()
        self.written.clear()
        self.watched.clear()


@dataclass(frozen=True, slots=True)
class Status:
    """A worker's partitions as the probes and the scrape see them."""

    assigned: bool
    lag: Mapping[tuple[str, int], int | None]
    """Per assigned input partition (logical topic, partition): records behind, None while unknown."""

    def ready(self, max_lag: int) -> bool:
        """Assigned, and every assigned partition known and at most ``max_lag`` records behind."""
        return self.assigned and all(n is not None and n <= max_lag for n in self.lag.values())


StatusSource = Callable[[], Status]


class WorkerMetrics:
    """The metric families of one worker (its own registry: several apps may live in one process)."""

    def __init__(self, service: str, *, process_collectors: bool = True) -> None:
        self.service = service
        self.registry = CollectorRegistry(auto_describe=True)
        self.started = time.monotonic()
        self.status_source: StatusSource | None = None
        self.max_lag = 0
        self.index_size: Callable[[], int] = lambda: 0
        if process_collectors:
            ProcessCollector(registry=self.registry)
            PlatformCollector(registry=self.registry)
            GCCollector(registry=self.registry)
        made: dict[str, Any] = {}
        for name, (kind, doc, labels) in METRICS.items():
            if kind == "counter":
                made[name] = PromCounter(name.removesuffix("_total"), doc, labels, registry=self.registry)
            elif kind == "histogram":
                buckets = _COUNT_BUCKETS if name == "casino_batch_records" else Histogram.DEFAULT_BUCKETS
                made[name] = Histogram(name, doc, labels, buckets=buckets, registry=self.registry)
        self._m = made
        self.registry.register(_Scraped(self))

    def status(self) -> Status:
        """The current assignment and lag (not assigned when no source is attached)."""
        return self.status_source() if self.status_source is not None else Status(False, {})

    def flush(self, tally: Tally, processor: str, records: int, seconds: float) -> None:
        """Turn one batch's tally into counter increments, observe its size and duration, clear it."""
        s = self.service
        m = self._m
        for (proc, topic, type_), n in tally.handled.items():
            m["casino_records_handled_total"].labels(s, proc, topic, _type_label(type_)).inc(n)
        for (proc, topic), n in tally.caught_up.items():
            m["casino_records_caught_up_total"].labels(s, proc, topic).inc(n)
        for (topic, type_), n in tally.written.items():
            m["casino_records_written_total"].labels(s, topic, _type_label(type_)).inc(n)
        if tally.watched:
            self._watched(tally.watched)
        m["casino_batch_records"].labels(s, processor).observe(records)
        m["casino_batch_duration_seconds"].labels(s, processor).observe(seconds)
        tally.clear()

    def snapshot(self, size: int) -> None:
        """Count one state snapshot written, of ``size`` bytes."""
        self._m["casino_state_snapshots_total"].labels(self.service).inc()
        self._m["casino_state_snapshot_bytes_total"].labels(self.service).inc(size)

    def standby_taken(self) -> None:
        """Count one snapshot a standby round took in."""
        self._m["casino_standby_snapshots_total"].labels(self.service).inc()

    def lost(self) -> None:
        """Count a lost log (the worker exits next)."""
        self._m["casino_log_lost_total"].labels(self.service).inc()

    def _watched(self, envelopes: Iterable[Envelope]) -> None:
        counts: Counter[tuple[str, ...]] = Counter()
        for env in envelopes:
            p = env.payload
            t = env.type
            if t == "DeadLetter":
                counts[("casino_dead_letters_total", _label(env.producer), _label(p.get("reason")))] += 1
            elif t in REFUSAL_TYPES:
                counts[("casino_refusals_total", _label(env.producer), t, _label(p.get("reason")))] += 1
            elif t == "BetAccepted":
                cur = _label(p.get("currency"))
                counts[("casino_bets_total", cur)] += 1
                counts[("casino_bet_stake_minor_total", cur)] += _minor(p.get("stake_minor"))
            elif t == "PayoutIssued":
                cur = _label(p.get("currency"))
                counts[("casino_payouts_total", _label(p.get("result")), cur)] += 1
                counts[("casino_payout_credit_minor_total", cur)] += _minor(p.get("credit_minor"))
                counts[("casino_payout_win_minor_total", cur)] += _minor(p.get("win_minor"))
                counts[("casino_payout_commission_minor_total", cur)] += _minor(p.get("commission_minor"))
            elif t == "AuditFinding":
                severity = _label(p.get("severity"))
                counts[("casino_audit_findings_total", _label(p.get("reason")), severity)] += 1
            elif t == "AnomalyDetected":
                severity = _label(p.get("severity"))
                counts[("casino_anomalies_total", _label(p.get("detector")), severity)] += 1
        for (name, *labels), n in counts.items():
            counter = self._m[name].labels(self.service, *labels)
            if n:
                counter.inc(n)

    def exposition(self) -> bytes:
        """The Prometheus text format of every family."""
        return generate_latest(self.registry)


class _Scraped:
    """The gauges computed at scrape time: lag per partition, assignment, readiness, index size."""

    def __init__(self, metrics: WorkerMetrics) -> None:
        self.metrics = metrics

    def describe(self) -> list[Metric]:
        return [self._family(name) for name in _SCRAPED]

    def _family(self, name: str) -> GaugeMetricFamily:
        _, doc, labels = METRICS[name]
        return GaugeMetricFamily(name, doc, labels=labels)

    def collect(self) -> Iterator[Metric]:
        m = self.metrics
        status = m.status()
        lag = self._family("casino_consumer_lag_records")
        for (topic, partition), n in sorted(status.lag.items()):
            if n is not None:
                lag.add_metric([m.service, topic, str(partition)], n)
        yield lag
        for name, value in (
            ("casino_assigned_partitions", len(status.lag)),
            ("casino_ready", int(status.ready(m.max_lag))),
            ("casino_output_index_ids", m.index_size()),
        ):
            family = self._family(name)
            family.add_metric([m.service], value)
            yield family


_SCRAPED = (
    "casino_consumer_lag_records",
    "casino_assigned_partitions",
    "casino_ready",
    "casino_output_index_ids",
)


# -- the worker side: the status of a faust app's shell, and the three views -----------------------


def shell_status(shell: Any) -> Status:
    """Assignment and lag of a :class:`services.runtime.kafka.worker.Shell`'s input partitions.

    A worker with a state store (:mod:`services.runtime.kafka.state`): a partition not restored since the
    assignment has no lag known (not ready); handled = the next offset its state will apply. Without
    one: the larger of that and the group's committed offset. The high
    watermark is the one the consumer learnt from its last fetch. Reads only what the consumer already
    holds: no broker call, safe to run on every scrape.
    """
    consumer = shell.consumer
    if getattr(shell, "standby", False):
        return Status(True, {})  # waiting for the lease: holds nothing, as a spare member of a group
    if not shell.assigned or consumer is None:
        return Status(False, {})
    try:
        assignment = list(consumer.assignment())
    except Exception:  # the consumer is not started yet, or is stopping
        return Status(False, {})
    committed: Mapping[Any, int | None] = shell.committed
    restored = shell.restored if getattr(shell, "store", None) is not None else None
    inputs = {shell.settings.topic(t): pipe for pipe in shell.pipes for t in pipe.inputs}
    lag: dict[tuple[str, int], int | None] = {}
    for tp in assignment:
        pipe = inputs.get(tp.topic)
        if pipe is None:
            continue
        logical = shell.settings.logical(tp.topic)
        try:
            highwater = consumer.highwater(tp)
        except Exception:
            highwater = None
        if restored is not None and tp not in restored:
            lag[(logical, tp.partition)] = None  # not restored yet: not ready, whatever the offsets say
            continue
        done = pipe.next_offset.get((logical, tp.partition), 0)
        if restored is None:
            done = max(done, committed.get(tp) or 0)
        lag[(logical, tp.partition)] = None if highwater is None else max(0, highwater - done)
    return Status(True, lag)


def web_settings(settings: Any) -> dict[str, Any]:
    """faust App keyword arguments: the web server where the settings say, with only our routes."""
    return {
        "web_enabled": settings.web_enabled,
        "web_port": settings.web_port,
        "web_bind": settings.web_bind,
        "web_router_enabled": False,
        "web_tables_enabled": False,
        "web_stats_enabled": False,
        "web_graph_enabled": False,
        "web_metrics_enabled": False,
    }


def _lag_json(status: Status) -> dict[str, int | None]:
    return {f"{topic}[{partition}]": n for (topic, partition), n in sorted(status.lag.items())}


def serve(app: Any, shell: Any) -> None:
    """Attach the shell's status to its metrics and, when the web server is on, add the three views."""
    metrics: WorkerMetrics = shell.metrics
    metrics.status_source = lambda: shell_status(shell)
    metrics.max_lag = shell.settings.ready_max_lag
    metrics.index_size = lambda: len(shell.index.ids)
    if not shell.settings.web_enabled:
        return
    from faust import web  # noqa: PLC0415 (only a worker with its web server on needs it)

    @app.page("/metrics")
    class MetricsView(web.View):
        async def get(self, request: web.Request) -> web.Response:
            return self.bytes(metrics.exposition(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    @app.page("/healthz")
    class HealthView(web.View):
        async def get(self, request: web.Request) -> web.Response:
            body, status = await health(metrics)
            return self.json(body, status=status)

    @app.page("/readyz")
    class ReadyView(web.View):
        async def get(self, request: web.Request) -> web.Response:
            body, status = readiness(metrics)
            return self.json(body, status=status)


async def health(metrics: WorkerMetrics) -> tuple[dict[str, Any], int]:
    """``/healthz``: the body and the status (503 when the event loop takes too long to come round)."""
    loop = asyncio.get_running_loop()
    asked = loop.time()
    await asyncio.sleep(0)  # back in the queue: how long the loop takes to come round
    lag_s = loop.time() - asked
    body = {
        "status": "ok" if lag_s <= LOOP_STALL_S else "stalled",
        "loop_lag_s": round(lag_s, 6),
        "uptime_s": round(time.monotonic() - metrics.started, 3),
    }
    return body, 200 if lag_s <= LOOP_STALL_S else 503


def readiness(metrics: WorkerMetrics) -> tuple[dict[str, Any], int]:
    """``/readyz``: the body and the status (200 when assigned and caught up)."""
    status = metrics.status()
    ready = status.ready(metrics.max_lag)
    return {"ready": ready, "assigned": status.assigned, "lag": _lag_json(status)}, 200 if ready else 503


async def serve_standalone(metrics: WorkerMetrics, bind: str, port: int) -> Any:
    """The same three routes on an aiohttp server of their own, for a process that is not a faust app
    (the seamless caller). Returns the runner: ``await runner.cleanup()`` stops it."""
    from aiohttp import web  # noqa: PLC0415 (only a process with its web server on needs it)

    async def get_metrics(_request: web.Request) -> web.Response:
        return web.Response(body=metrics.exposition(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def get_health(_request: web.Request) -> web.Response:
        body, status = await health(metrics)
        return web.json_response(body, status=status)

    async def get_ready(_request: web.Request) -> web.Response:
        body, status = readiness(metrics)
        return web.json_response(body, status=status)

    app = web.Application()
    app.router.add_get("/metrics", get_metrics)
    app.router.add_get("/healthz", get_health)
    app.router.add_get("/readyz", get_ready)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, bind, port).start()
    return runner


# -- the container probe --------------------------------------------------------------------------


def probe(url: str, timeout_s: float = 3.0) -> tuple[int, str]:
    """GET ``url``: the status code and body (0 and the error when nothing answered)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:  # noqa: S310 (http only, ours)
            return int(response.status), response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")
    except (OSError, ValueError) as exc:
        return 0, str(exc)


@click.command(name="python -m services.runtime.kafka.metrics")
@click.argument("path", type=click.Choice(["healthz", "readyz", "metrics"]))
@click.option("--url", default=None, help="Full URL instead of the local CASINO_WEB_PORT.")
def probe_command(path: str, url: str | None) -> int:
    """A container's probe: ask the worker's PATH endpoint; exit 0 when it answers 200."""
    from services.runtime.settings import Settings  # noqa: PLC0415

    url = url or f"http://127.0.0.1:{Settings().web_port}/{path}"
    code, body = probe(url)
    if code != 200:
        print(f"casino-ledger: {url}: {code or 'no answer'} {body.strip()[:200]}", file=sys.stderr)  # noqa: T201
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m services.runtime.kafka.metrics healthz|readyz|metrics [--url URL]``: a container's probe
    (exit 0 when 200, 1 otherwise, 2 for a bad invocation). Asks
    ``http://127.0.0.1:$CASINO_WEB_PORT/<path>`` (the image has no curl); ``--url`` overrides."""
    return exit_status(probe_command, argv)


def family_names(exposition: str) -> set[str]:
    """The metric family names of a Prometheus text exposition (``# TYPE`` lines)."""
    names: set[str] = set()
    for line in exposition.splitlines():
        if line.startswith("# TYPE "):
            names.add(line.split()[2])
    return names


def samples(exposition: str) -> dict[str, float]:
    """Every sample of a text exposition: ``name{labels}`` → value (for tests and the probe)."""
    out: dict[str, float] = defaultdict(float)
    for line in exposition.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return dict(out)


if __name__ == "__main__":
    sys.exit(main())
