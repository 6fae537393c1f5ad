"""One Kafka worker per record: the faust agent against a plain aiokafka loop in a faust app, same run.

Issue #16 asks for the Kafka worker's framework cost to be measured, not guessed. On one fresh Tansu
broker, the same input records (the ``casino.table.inbox`` records of a seeded session of the
house-banked tables, :data:`COUPS` coups each: the dealer's operator commands and settlement's bet
notices, in the order the session wrote them) are handled these ways, (a) and (b) each on its own fresh topics:

(a) **faust agent**: ``python -m bench.bench_worker agent`` in a subprocess: the worker as it was until
    issue #16, each processor a faust agent (``take_events`` batches handed to
    :meth:`~services.runtime.kafka.worker.Shell.on_batch`, sends through faust's producer, faust acking a
    batch once its acks are in and committing every 2.8 s (faust's default)); once with the default
    log level (INFO: one JSON line per batch and partition; one per record before issue #16's second
    round) and once at ``WARNING``;
(b) **the worker**: ``python -m services.cli.worker dealer`` itself, in a subprocess: a faust
    app whose one task owns an ``AIOKafkaConsumer`` in the service's consumer group and an
    ``AIOKafkaProducer``, and hands each ``getmany`` batch to the very same ``Shell.on_batch`` (same
    output index, decode, ``step``, log line, metrics, acks awaited per batch), then commits it;
(c) **raw aiokafka**: produce the same records to a fresh topic and consume them back, no processing
    (the bench process's CPU);
(d) **processing alone**: :meth:`~services.runtime.kafka.worker.Pipe.apply` (decode + ``step``) over the
    same records in order, no Kafka (the bench process's CPU); (e) the same plus the worker's JSON log
    line per record (DEBUG since issue #16), written to a file (the line's price);
(f) **sends**: the producer alone, 10,000 records of 1.5 kB acknowledged per 500: one ``send`` each
    (aiokafka's default 16 KiB batches, and 512 KiB) against the worker's
    :class:`~services.runtime.kafka.topic_io.Outbox` (``create_batch``/``send_batch``), CPU per record.

For (a) and (b) the clock runs from the first input sent (the worker has joined its group and idled:
``/readyz`` answered 200) until the group's committed offsets reach the input topics' ends; CPU is the
worker process's user+system time over that window (``/proc/<pid>/stat``) less what the same process
burnt idle over an equal time just before (heartbeats, faust's timers), per input record. The framework
overhead per record is (a) or (b) minus (d). Ratios to (c) are raw/worker: 1.0 would be a worker as
cheap per record as moving the record through Kafka and doing nothing with it.

Run: ``.venv/bin/python -m bench worker`` (``BENCH_WORKER_COUPS`` sizes the load; 120 coups give
about 3,000 records; ``BENCH_WORKER_PROFILE=DIR`` runs each worker under cProfile into ``DIR``). The
machine is shared: read CPU µs/record before records/s, and give ``uptime``. Figures: the docstring of
:mod:`services.runtime.kafka.worker`.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer  # type: ignore[import-untyped]
from aiokafka.admin import AIOKafkaAdminClient  # type: ignore[import-untyped]

from bench.bench_kafka import produce_consume
from services.core import topics
from services.runtime.compose import Composition
from services.runtime.kafka import metrics
from services.runtime.kafka.bus import group_id, quick_settings, worker_env
from services.runtime.kafka.topic_io import BATCH_BYTES, Outbox, aproduce_raw, new_consumer, partitions_of
from services.runtime.logging import configure, get_logger
from services.runtime.settings import Settings
from services.simulation.simulator import DEFAULT_TABLES, Session
from tests.helpers.broker import free_port, tansu
from tests.helpers.membus import MemBus

COUPS = int(os.environ.get("BENCH_WORKER_COUPS", "120"))
PARTITIONS = 3
SERVICE = "dealer"
"""The service measured: one processor, one input topic (``casino.table.inbox``) that none of its
outputs feed back into, so the pre-produced records are exactly the work it does in a session."""
HOUSE_TABLES = [t for t in DEFAULT_TABLES if t.variant in ("punto_banco", "ez_baccarat", "super6")]
IDLE_S = 2.0
READY_TIMEOUT_S = 90.0
DONE_TIMEOUT_S = 600.0
TICK_S = 1 / os.sysconf("SC_CLK_TCK")
PROFILE_DIR = os.environ.get("BENCH_WORKER_PROFILE", "")
"""When set, each worker process runs under cProfile and writes ``<dir>/<name>.prof`` when it stops
(the figures are then the profiler's, not the worker's: for finding where the time goes only)."""


@dataclass(frozen=True, slots=True)
class Figure:
    """One way of handling the records: wall seconds and CPU seconds spent on them."""

    name: str
    records: int
    wall_s: float
    cpu_s: float

    @property
    def per_s(self) -> float:
        return self.records / self.wall_s if self.wall_s > 0 else float("inf")

    @property
    def cpu_us(self) -> float:
        return self.cpu_s / self.records * 1e6


def inbox_records(coups: int) -> list[tuple[str, bytes, bytes]]:
    """The dealer's inputs of a seeded session, as (logical topic, key, value), in the order written."""
    bus = MemBus()
    Session(bus, seed=2026).run(list(HOUSE_TABLES), coups)
    return [(e.topic, e.key.encode(), e.to_json()) for e in bus.log if e.topic == topics.TABLE_INBOX]


def _settings(broker: str) -> Settings:
    prefix = f"benchw{uuid.uuid4().hex[:8]}."
    base = Settings(bootstrap_servers=broker, topic_prefix=prefix, partitions=PARTITIONS, demo_mode=True)
    return quick_settings(base, env={})


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a live process (``/proc/<pid>/stat`` fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) * TICK_S


async def _committed_all(settings: Settings, ends_total: int) -> None:
    """Return once the service's group has committed ``ends_total`` offsets on its input topic."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap_list)
    probe = new_consumer(settings)
    await admin.start()
    await probe.start()
    try:
        tps = await partitions_of(probe, [settings.topic(topics.TABLE_INBOX)])
        group = group_id(settings, SERVICE)
        coordinator = await admin.find_coordinator(group)
        deadline = time.monotonic() + DONE_TIMEOUT_S
        while True:
            found = await admin.list_consumer_group_offsets(
                group, group_coordinator_id=coordinator, partitions=tps
            )
            if sum(max(0, found[tp].offset) for tp in tps if tp in found) >= ends_total:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{group} did not commit {ends_total} offsets in {DONE_TIMEOUT_S} s")
            await asyncio.sleep(0.01)
    finally:
        await probe.stop()
        await admin.close()


def run_worker_process(
    name: str, argv: Sequence[str], settings: Settings, records: list[tuple[str, bytes, bytes]], logs: Path
) -> Figure:
    """Start ``argv`` as a worker of ``settings`` with its web server on, wait until ``/readyz`` says
    it has joined, measure its idle CPU, send ``records`` and wait until they are all committed."""
    port = free_port()
    if PROFILE_DIR:
        slug = "".join(c if c.isalnum() else "-" for c in name).strip("-")
        argv = [argv[0], "-m", "cProfile", "-o", str(Path(PROFILE_DIR) / f"{slug}.prof"), *argv[1:]]
    settings = settings.model_copy(update={"web_enabled": True, "web_port": port, "web_bind": "127.0.0.1"})
    env = {**os.environ, **worker_env(settings), "CASINO_DATA_DIR": str(logs / f"faust-{name}")}
    log_path = logs / f"{name}.log"
    with log_path.open("ab") as log:
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while metrics.probe(f"http://127.0.0.1:{port}/readyz", 1.0)[0] != 200:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{name} never ready: {log_path.read_text(errors='replace')[-2000:]}")
            time.sleep(0.1)
        time.sleep(1.0)  # let the join's aftermath settle
        idle_from = _cpu_s(proc.pid)
        time.sleep(IDLE_S)
        idle_rate = (_cpu_s(proc.pid) - idle_from) / IDLE_S
        cpu_from = _cpu_s(proc.pid)
        started = time.perf_counter()
        asyncio.run(aproduce_raw(settings, records))
        asyncio.run(_committed_all(settings, len(records)))
        wall = time.perf_counter() - started
        cpu = _cpu_s(proc.pid) - cpu_from - idle_rate * wall
        if proc.poll() is not None:
            raise RuntimeError(
                f"{name} exited {proc.returncode}: {log_path.read_text(errors='replace')[-2000:]}"
            )
        return Figure(name, len(records), wall, cpu)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(30)


async def _raw(settings: Settings, records: list[tuple[str, bytes, bytes]]) -> Figure:
    """(c): produce ``records`` to a fresh topic and consume them all back; this process's CPU."""
    from services.runtime.kafka.worker import ensure_topics  # noqa: PLC0415

    await ensure_topics(settings, ["raw"])
    pairs = [(key, value) for _, key, value in records]
    wall, cpu = await produce_consume(
        settings.bootstrap_list, settings.topic("raw"), pairs, fetch_max_wait_ms=50
    )
    return Figure("(c) raw aiokafka produce->consume", len(records), wall, cpu)


def processing_alone(
    settings: Settings, records: list[tuple[str, bytes, bytes]], log: Path | None = None
) -> Figure:
    """(d): decode and ``step`` every record in order, as the worker's pipe does, without Kafka; with
    ``log``, also write the worker's per-record JSON line (:meth:`Shell.log_record`, at DEBUG since
    issue #16) to that file."""
    from services.runtime.kafka.worker import Pipe, Shell  # noqa: PLC0415

    (processor,) = Composition.from_settings(settings).service(SERVICE)
    pipe = Pipe(processor, settings)
    with open(os.devnull if log is None else log, "w", encoding="utf-8") as out:
        configure(level="DEBUG" if log else "WARNING", fmt="json", stream=out)
        logger = get_logger("casino_ledger.kafka")
        cpu_from, started = time.process_time(), time.perf_counter()
        for offset, (logical, _, value) in enumerate(records):
            outputs = pipe.apply(logical, 0, offset, value)  # partition and offset only name a dead letter
            if log is not None:
                Shell.log_record(
                    pipe, logical, 0, offset, outputs=len(outputs), sent=len(outputs), log=logger
                )
        cpu, wall = time.process_time() - cpu_from, time.perf_counter() - started
    configure(level="WARNING")
    name = "(d) decode + step, no Kafka" if log is None else "(e) decode + step + log line"
    return Figure(name, len(records), wall, cpu)


def embedded_runner(settings: Settings, records: list[tuple[str, bytes, bytes]], folder: Path) -> Figure:
    """(g): the same processor through the embedded runner (:class:`~services.runtime.embedded.runner.Runner`
    on a SQLite log, its default batches and snapshots), the records appended before the clock starts:
    what issue #31 compares the worker's CPU per record with."""
    from services.runtime.embedded.runner import Runner, run_until_idle  # noqa: PLC0415
    from services.runtime.embedded.store import EmbeddedLog  # noqa: PLC0415

    (processor,) = Composition.from_settings(settings).service(SERVICE)
    with EmbeddedLog(folder / "embedded.db") as log:
        for logical, key, value in records:
            log.append_raw(logical, key.decode(), value)
        runner = Runner(log, processor)
        cpu_from, started = time.process_time(), time.perf_counter()
        applied = run_until_idle([runner])
        cpu, wall = time.process_time() - cpu_from, time.perf_counter() - started
    assert applied == len(records), (applied, len(records))
    return Figure("(g) embedded runner (SQLite), same processor", len(records), wall, cpu)


# -- (a): the faust agent the worker was until issue #16 (runs in the subprocess) ---------------------


class _FaustSends:
    """What :class:`~services.runtime.kafka.topic_io.Outbox` needs of a producer (``partitions_for``,
    ``create_batch``, ``send_batch``), through faust's: each record of a batch is one faust send."""

    def __init__(self, app: Any, partitions: int) -> None:
        self.app = app
        self.partitions = partitions
        self.topics: dict[str, Any] = {}

    async def partitions_for(self, physical: str) -> set[int]:
        return set(range(self.partitions))

    def create_batch(self) -> _FaustBatch:
        return _FaustBatch()

    async def send_batch(self, batch: _FaustBatch, physical: str, *, partition: int) -> Any:
        if physical not in self.topics:
            self.topics[physical] = self.app.topic(physical, key_serializer="raw", value_serializer="raw")
        topic = self.topics[physical]
        sent = [await topic.send(key=key, value=value, partition=partition) for key, value in batch.records]
        return asyncio.gather(*sent)


class _FaustBatch:
    """A batch for :class:`_FaustSends`: the records, unbounded."""

    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes]] = []

    def append(self, *, key: bytes, value: bytes, timestamp: None) -> bool:
        self.records.append((key, value))
        return True


def _faust_fetch_wait(ms: int) -> None:
    """Make faust's worker consumers wait at most ``ms`` per fetch (faust 0.15 hard-codes 1,500 ms)."""
    from faust.transport.drivers import aiokafka as driver  # noqa: PLC0415

    thread = driver.AIOKafkaConsumerThread
    original = thread._create_worker_consumer

    def create(self: Any, transport: Any) -> Any:
        consumer = original(self, transport)
        consumer._fetch_max_wait_ms = ms
        return consumer

    thread._create_worker_consumer = create  # type: ignore[method-assign]


def agent_main() -> None:
    """``python -m bench.bench_worker agent``: the dealer as the faust agent the worker was before issue
    #16: ``take_events`` batches handed to :meth:`Shell.on_batch`, sends through faust's producer, faust
    acking each batch once its acks are in and committing every 2.8 s (faust's default)."""
    import faust  # noqa: PLC0415

    from services.runtime.kafka import worker  # noqa: PLC0415

    settings = Settings()
    configure(level=settings.log_level or None, fmt=settings.log_format)
    processors = list(Composition.from_settings(settings).service(SERVICE))
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    loop.run_until_complete(worker.ensure_topics(settings, worker.service_topics(processors)))
    if settings.fetch_max_wait_ms is not None:
        _faust_fetch_wait(settings.fetch_max_wait_ms)
    app = faust.App(
        group_id(settings, SERVICE),
        broker=[f"kafka://{s}" for s in settings.bootstrap_list],
        topic_partitions=settings.partitions,
        consumer_auto_offset_reset="earliest",
        broker_rebalance_timeout=settings.rebalance_timeout_s,
        broker_session_timeout=settings.session_timeout_s,
        broker_heartbeat_interval=settings.heartbeat_interval_s,
        broker_commit_interval=2.8,  # faust's default: the agents' commit cadence before the switch
        **metrics.web_settings(settings),
        store="memory://",
        datadir=str(settings.data_dir),
        autodiscover=False,
    )
    shell = worker.Shell(app, settings, processors, service=SERVICE)
    shell.producer = _FaustSends(app, settings.partitions)
    shell.consumer = _FaustAssignment(app)
    metrics.serve(app, shell)

    async def on_assigned(sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> None:
        shell.assigned = True  # no state store here: nothing to restore

    app.on_partitions_assigned.connect(on_assigned)
    (pipe,) = shell.pipes
    channel = app.topic(
        *(settings.topic(t) for t in pipe.processor.inputs),
        key_serializer="raw",
        value_serializer="raw",
        partitions=settings.partitions,
    )

    async def process(stream: Any) -> None:
        async for events in stream.take_events(settings.batch_max, within=settings.batch_wait_ms / 1000):
            records = [(m.topic, m.partition, m.offset, m.value) for m in (e.message for e in events)]
            await shell.on_batch(pipe, records)

    app.agent(channel, name=f"{SERVICE}.0.{pipe.processor.name}", concurrency=1)(process)
    runner = faust.Worker(
        app, loop=loop, loglevel="WARNING", quiet=True, redirect_stdouts=False, override_logging=False
    )
    runner.spinner = None
    runner.execute_from_commandline()


class _FaustAssignment:
    """What readiness reads of the shell's consumer (``assignment``, ``highwater``), from faust's."""

    def __init__(self, app: Any) -> None:
        self.app = app

    def assignment(self) -> Any:
        return self.app.consumer.assignment()

    def highwater(self, tp: Any) -> Any:
        return self.app.consumer.highwater(tp)


SEND_RECORDS = 10_000
SEND_CHUNK = 500
"""Acks awaited per this many records, as a worker awaits them once per batch (``CASINO_BATCH_MAX``)."""


def _send_records() -> list[tuple[bytes, bytes]]:
    """:data:`SEND_RECORDS` records of 1.5 kB (about a payout's envelope), keys over 5,000 accounts."""
    return [(f"player:{n % 5000:05d}".encode(), b"%05d" % n + b"x" * 1495) for n in range(SEND_RECORDS)]


async def _by_send(producer: AIOKafkaProducer, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    """Send the records one ``send`` each, acks awaited per chunk."""
    for n in range(0, len(records), SEND_CHUNK):
        acks = [await producer.send(topic, value, key=key) for key, value in records[n : n + SEND_CHUNK]]
        for ack in acks:
            await ack


async def _by_outbox(producer: AIOKafkaProducer, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    """Send the records through an :class:`Outbox` (``create_batch``, ``send_batch``), acks awaited per
    chunk."""
    outbox = Outbox(producer)
    for n in range(0, len(records), SEND_CHUNK):
        for key, value in records[n : n + SEND_CHUNK]:
            await outbox.add(topic, key, value, "")
        for _, ack in await outbox.flush():
            await ack


async def _send_cpu(settings: Settings, topic: str, batch_bytes: int, way: Any) -> float:
    """CPU seconds of this process to send :func:`_send_records` one ``way`` (:func:`_by_send`,
    :func:`_by_outbox`) through a warmed producer of ``batch_bytes`` batches."""
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.bootstrap_list, acks="all", max_batch_size=batch_bytes
    )
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"warm", key=b"warm")
        records = _send_records()
        cpu_from = time.process_time()
        await way(producer, topic, records)
        return time.process_time() - cpu_from
    finally:
        await producer.stop()


def sends(broker: str, rounds: int = 2) -> dict[str, list[float]]:
    """(f): CPU us per record to produce the same records one ``send`` each or in batches, with
    aiokafka's default batch size and :data:`BATCH_BYTES`; each way ``rounds`` times, alternating, each
    time to a fresh topic of :data:`PARTITIONS` partitions."""
    ways = {
        "send, 16 KiB batches (aiokafka's default)": (_by_send, 16384),
        f"send, {BATCH_BYTES // 1024} KiB batches": (_by_send, BATCH_BYTES),
        "Outbox (send_batch), 16 KiB": (_by_outbox, 16384),
        f"Outbox (send_batch), {BATCH_BYTES // 1024} KiB (the worker)": (_by_outbox, BATCH_BYTES),
    }
    out: dict[str, list[float]] = {name: [] for name in ways}
    settings = _settings(broker)
    for _ in range(rounds):
        for name, (way, batch_bytes) in ways.items():
            topic = f"sends-{uuid.uuid4().hex[:8]}"
            asyncio.run(_create(settings, topic))
            out[name].append(
                asyncio.run(_send_cpu(settings, settings.topic(topic), batch_bytes, way)) / SEND_RECORDS * 1e6
            )
    return out


async def _create(settings: Settings, topic: str) -> None:
    from services.runtime.kafka.worker import ensure_topics  # noqa: PLC0415

    await ensure_topics(settings, [topic])


def _line(f: Figure, raw: Figure, step: Figure | None) -> str:
    over = f" (framework {f.cpu_us - step.cpu_us:,.0f} us)" if step is not None and f is not step else ""
    return (
        f"{f.name:<37} {f.per_s:>9,.0f} records/s {f.cpu_us:>8,.0f} CPU us/record{over}; "
        f"vs raw: {f.per_s / raw.per_s:.3f} by wall, {raw.cpu_us / f.cpu_us:.3f} by CPU"
    )


def main() -> dict[str, float]:
    """Print (a)-(d) in records/s and CPU us/record, with ratios to raw aiokafka."""
    configure(level="WARNING")
    records = inbox_records(COUPS)
    print(f"{len(records)} casino.table.inbox records ({COUPS} coups x {len(HOUSE_TABLES)} tables), load: "
          f"{os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}", flush=True)  # fmt: skip
    py = sys.executable
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory() as tmp, tansu(Path(tmp) / "tansu.log") as broker:
        logs = Path(tmp)
        raw = asyncio.run(_raw(_settings(broker), records))
        sent = sends(broker)
        step = processing_alone(_settings(broker), records)
        logged = processing_alone(_settings(broker), records, logs / "records.log")
        embedded = embedded_runner(_settings(broker), records, logs)
        agent = [py, "-m", "bench.bench_worker", "agent"]
        loop = [py, "-m", "services.cli.worker", SERVICE]
        quiet = {"log_level": "WARNING"}
        figures.append(
            run_worker_process("(a) faust agent, take_events", agent, _settings(broker), records, logs)
        )
        figures.append(
            run_worker_process(
                "(b) worker: aiokafka loop (faust app)", loop, _settings(broker), records, logs
            )
        )
        quiet_settings = _settings(broker).model_copy(update=quiet)
        figures.append(
            run_worker_process("(a) faust agent, log WARNING", agent, quiet_settings, records, logs)
        )
        quiet_settings = _settings(broker).model_copy(update=quiet)
        figures.append(
            run_worker_process("(b) worker loop, log WARNING", loop, quiet_settings, records, logs)
        )
    for f in figures:
        print(_line(f, raw, step))
    print(_line(raw, raw, None))
    print(_line(step, raw, None))
    print(_line(logged, raw, None))
    print(_line(embedded, raw, None))
    for f in figures:
        print(f"{f.name}: {f.cpu_us / embedded.cpu_us:.2f}x the embedded runner's CPU per record (goal: 2)")
    for name, cpu_us in sent.items():
        print(f"(f) {name:<45} {' / '.join(f'{us:.1f}' for us in cpu_us)} CPU us/record "
              f"({SEND_RECORDS:,} records of 1.5 kB, acks per {SEND_CHUNK})")  # fmt: skip
    every = [*figures, raw, step, logged, embedded]
    return {f"{f.name} cpu_us": f.cpu_us for f in every} | {f"{f.name} per_s": f.per_s for f in every}


if __name__ == "__main__":
    if sys.argv[1:] == ["agent"]:
        agent_main()
    else:
        main()
