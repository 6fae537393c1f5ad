"""The pipeline on Kafka (four worker processes on a local Tansu broker) against raw aiokafka, same run.

Pipeline throughput: the operator commands and wallet requests of a seeded session of the house-banked
tables (``punto_banco``, ``ez_baccarat``, ``super6``; :data:`COUPS` coups each) are produced at once
to fresh topics while dealer, settlement, audit and monitor run as separate worker processes; the clock
runs from the first send until every service has committed every record of its inputs. Events/s
counts every record the topics then hold (inputs and every service's outputs). Bets that reach the
table after its betting closed are refused and refunded: a real load, not the interactive demo.
The clock includes the last hops and commits after the final input (a few seconds, whatever the load),
so a larger load gives a rate nearer the steady state (here 60 coups gave about 850 events/s, 240 about
1,200 to 1,500).

Baseline: raw aiokafka, one producer and one consumer, producing the very same number of records of
the same sizes and keys to one fresh topic with as many partitions, then consuming them all back.

Latency: an interactive session (the simulator waits for each step, as a table would) through the
same workers; per bet, from the ``PlaceBet`` record's Kafka timestamp to the ``BetPlaced`` (funds held,
on the table's inbox), and from ``CoupResolved`` to each ``PayoutIssued`` and on to its
``PayoutApplied`` (the wallet credited): p50 and p99 in milliseconds.

Per hop: the latency of one hop of a session's chain, as the simulator sees it: a ``Deposit`` published
on :class:`~services.runtime.kafka.bus.KafkaBus`, settlement's worker consumes it, applies it and produces
``FundsDeposited``, the bus's waiter (``KafkaBus.wait``) sees it; :data:`HOPS` hops one after the other,
a random pause (0-30 ms) before each. Baseline, same run and broker: raw aiokafka doing the same hop with
no work, an echo (a consumer with the workers' fetch wait, a producer) between a producer and a consumer
with the waiter's fetch wait, all in this process.

Run: ``.venv/bin/python -m bench kafka`` (starts its own broker; ``BENCH_KAFKA_COUPS`` sizes the load;
``BENCH_KAFKA_PARTS`` picks among ``pipeline,latency,hop``, all by default).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # type: ignore[import-untyped]
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # type: ignore[import-untyped]

from services.core import topics
from services.core.envelope import name_id, request
from services.core.trust import Principal, authenticate
from services.runtime.kafka.bus import WAIT_FETCH_MS, KafkaBus, quick_settings, running
from services.runtime.kafka.topic_io import new_consumer, partitions_of, read_range
from services.runtime.keyring import demo_keyring
from services.runtime.logging import configure
from services.runtime.settings import Settings
from services.simulation.simulator import DEFAULT_TABLES, Session
from tests.helpers.broker import tansu
from tests.helpers.membus import MemBus

COUPS = int(os.environ.get("BENCH_KAFKA_COUPS", "240"))
HOPS = int(os.environ.get("BENCH_KAFKA_HOPS", "200"))
PARTS = os.environ.get("BENCH_KAFKA_PARTS", "pipeline,latency,hop").split(",")
PARTITIONS = 3
HOUSE_TABLES = [t for t in DEFAULT_TABLES if t.variant in ("punto_banco", "ez_baccarat", "super6")]
OUTSIDE = ("operator", "terminal")
"""The producers of the records the simulator writes (everything else is the services' output)."""


TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int, tid: int | None = None) -> float:
    """User + system CPU seconds of a live process, or of one of its threads (``/proc/.../stat``
    fields 14 and 15); 0 when it is gone."""
    path = f"/proc/{pid}/task/{tid}/stat" if tid is not None else f"/proc/{pid}/stat"
    try:
        fields = Path(path).read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) * TICK_S


def broker_pid() -> int | None:
    """The pid of the Tansu broker this process started (:func:`tests.helpers.broker.tansu`)."""
    me = os.getpid()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            head, _, rest = stat.read_text().rpartition(")")
        except OSError:
            continue
        if head.partition("(")[2].startswith("tansu") and int(rest.split()[1]) == me:
            return int(stat.parent.name)
    return None


class CpuMeter:
    """CPU seconds of named processes (or threads: ``(pid, tid)``) between :meth:`start` and :meth:`stop`,
    and the wall time: where a Kafka bench's CPU goes (broker, each worker, this process's threads)."""

    def __init__(self, named: Mapping[str, int | tuple[int, int]]) -> None:
        self.named = {k: v if isinstance(v, tuple) else (v, None) for k, v in named.items()}
        self.begin: dict[str, float] = {}
        self.used: dict[str, float] = {}
        self.wall = 0.0

    def _now(self) -> dict[str, float]:
        return {name: cpu_s(pid, tid) for name, (pid, tid) in self.named.items()}

    def start(self) -> None:
        self.begin, self.wall = self._now(), time.perf_counter()

    def stop(self) -> dict[str, float]:
        self.wall = time.perf_counter() - self.wall
        self.used = {k: v - self.begin[k] for k, v in self._now().items()}
        return self.used

    def line(self) -> str:
        """One line: each one's CPU seconds, the total, and the share of the 2 cores' wall time."""
        total = sum(self.used.values())
        parts = ", ".join(f"{k} {v:.2f}" for k, v in self.used.items())
        return (
            f"CPU s over {self.wall:.2f} s wall: {parts}; total {total:.2f} ({total / self.wall:.2f} cores)"
        )


def bus_cpu(bus: KafkaBus) -> CpuMeter:
    """A meter of the broker, each worker of ``bus``, this process's main thread and the bus's thread."""
    named: dict[str, int | tuple[int, int]] = {}
    broker = broker_pid()
    if broker is not None:
        named["tansu"] = broker
    if bus.workers is not None:
        named |= {name: proc.pid for name, proc in bus.workers.procs.items()}
    me = os.getpid()
    named["simulator"] = (me, threading.main_thread().native_id or me)
    named["bus thread"] = (me, bus._thread.native_id or me)
    return CpuMeter(named)


def _settings(broker: str) -> Settings:
    prefix = f"bench{uuid.uuid4().hex[:8]}."
    base = Settings(bootstrap_servers=broker, topic_prefix=prefix, partitions=PARTITIONS, demo_mode=True)
    return quick_settings(base, env={})


def session_inputs(coups: int) -> list[tuple[str, bytes, bytes]]:
    """The outside records of a seeded session, as (logical topic, key, value), in the order written."""
    bus = MemBus()
    Session(bus, seed=2026).run(list(HOUSE_TABLES), coups)
    return [(e.topic, e.key.encode(), e.to_json()) for e in bus.log if e.producer in OUTSIDE]


def bench_pipeline(broker: str, inputs: list[tuple[str, bytes, bytes]], logs: Path) -> tuple[float, int]:
    """Seconds from the first send until the workers have drained, and the records the topics hold."""
    with running(_settings(broker), logs / "bulk") as bus:
        bus.drain()  # every group has joined (the first join waits the rebalance timeout)
        started = time.perf_counter()
        bus.publish_raw(inputs)
        bus.drain()
        elapsed = time.perf_counter() - started
        return elapsed, len(bus.consume_all())


async def _baseline(broker: str, sizes: Sequence[tuple[bytes, bytes]]) -> float:
    name = f"bench-raw-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=broker)
    await admin.start()
    await admin.create_topics([NewTopic(name, PARTITIONS, 1)])
    await admin.close()
    wall, _cpu = await produce_consume(broker, name, sizes, fetch_max_wait_ms=100)
    return wall


async def produce_consume(
    broker: str | list[str],
    topic: str,
    records: Sequence[tuple[bytes | None, bytes]],
    *,
    fetch_max_wait_ms: int,
) -> tuple[float, float]:
    """The raw baseline: produce ``records`` (key, value) to ``topic`` (acks awaited) and consume them all
    back with one plain aiokafka consumer; the wall and this process's CPU seconds it took."""
    producer = AIOKafkaProducer(bootstrap_servers=broker, acks="all")
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=broker, auto_offset_reset="earliest", fetch_max_wait_ms=fetch_max_wait_ms
    )
    await producer.start()
    await consumer.start()
    try:
        started, cpu_from = time.perf_counter(), time.process_time()
        sent = [await producer.send(topic, value, key=key) for key, value in records]
        for fut in sent:
            await fut
        got = 0
        while got < len(records):
            batch = await consumer.getmany(timeout_ms=500)
            got += sum(len(msgs) for msgs in batch.values())
        return time.perf_counter() - started, time.process_time() - cpu_from
    finally:
        await producer.stop()
        await consumer.stop()


def bench_latency(broker: str, logs: Path, coups: int) -> dict[str, list[float]]:
    """Per-step latencies (ms, from Kafka timestamps) of an interactive session of two tables."""
    settings = _settings(broker)
    with running(settings, logs / "latency") as bus:
        Session(bus, seed=2026).run(list(DEFAULT_TABLES[:2]), coups)
    stamped = asyncio.run(_timestamps(settings))
    at: dict[tuple[str, str], float] = {}
    for type_, ref, ts in stamped:
        at.setdefault((type_, ref), ts)
    out: dict[str, list[float]] = {"bet held": [], "coup resolved -> payout issued": [], "payout applied": []}
    for (type_, ref), ts in at.items():
        if type_ == "BetPlaced" and ("PlaceBet", ref) in at:
            out["bet held"].append(ts - at[("PlaceBet", ref)])
        elif type_ == "PayoutIssued":
            coup, _, _ = ref.partition("|")
            if ("CoupResolved", coup) in at:
                out["coup resolved -> payout issued"].append(ts - at[("CoupResolved", coup)])
        elif type_ == "PayoutApplied" and ("PayoutIssued", ref) in at:
            out["payout applied"].append(ts - at[("PayoutIssued", ref)])
    return out


async def _timestamps(settings: Settings) -> list[tuple[str, str, float]]:
    """(type, reference, Kafka timestamp in ms) of the records the latencies need."""
    consumer = new_consumer(settings)
    await consumer.start()
    try:
        wanted = (topics.WALLET_REQUESTS, topics.TABLE_INBOX, topics.TABLE_EVENTS, topics.WALLET_EVENTS)
        tps = await partitions_of(consumer, [settings.topic(t) for t in wanted])
        ends = await consumer.end_offsets(tps)
        read, _ = await read_range(consumer, {}, ends, to_end=True)
    finally:
        await consumer.stop()
    out: list[tuple[str, str, float]] = []
    for msgs in read.values():
        for m in msgs:
            env = json.loads(m.value)
            p = env["payload"]
            if env["type"] in ("PlaceBet", "BetPlaced"):
                out.append((env["type"], p["bet_id"], float(m.timestamp)))
            elif env["type"] == "CoupResolved":
                out.append((env["type"], p["coup_id"], float(m.timestamp)))
            elif env["type"] == "PayoutIssued" and env["topic"] == topics.WALLET_REQUESTS:
                out.append((env["type"], f"{p['coup_id']}|{p['payout_id']}", float(m.timestamp)))
                out.append(("PayoutIssued", p["payout_id"], float(m.timestamp)))
            elif env["type"] == "PayoutApplied":
                out.append((env["type"], p["payout_id"], float(m.timestamp)))
    return out


def bench_hop(broker: str, logs: Path, hops: int) -> list[float]:
    """Milliseconds of each of ``hops`` deposits from ``publish`` to the waiter seeing ``FundsDeposited``."""
    key = demo_keyring().key(Principal.CASHIER)
    out: list[float] = []
    rng = random.Random(16)
    with running(_settings(broker), logs / "hop") as bus:
        bus.drain()  # every group has joined
        for n in range(hops + 1):
            account = f"hop:{n % 7}"
            env = request("Deposit", topics.WALLET_REQUESTS, account,
                          {"account_id": account, "amount_minor": 100, "currency": "EUR"},
                          event_id=name_id("bench", "hop", str(n)), occurred_at="2026-11-23T20:00:00.000Z",
                          producer=Principal.CASHIER.value)  # fmt: skip
            time.sleep(rng.uniform(0, 0.03))
            started = time.perf_counter()
            bus.publish([authenticate(env, key)])
            bus.wait(topics.WALLET_EVENTS, account, lambda e, cause=env.event_id: e.causation_id == cause)
            if n:  # the first wait also assigns the waiter
                out.append((time.perf_counter() - started) * 1000)
    return out


async def raw_hop(broker: str, hops: int, worker_wait_ms: int, waiter_wait_ms: int) -> list[float]:
    """Milliseconds of each of ``hops`` raw hops: produce -> an echo consumes and produces -> consumed."""
    names = [f"hop-{uuid.uuid4().hex[:8]}-{side}" for side in ("in", "out")]
    admin = AIOKafkaAdminClient(bootstrap_servers=broker)
    await admin.start()
    await admin.create_topics([NewTopic(name, PARTITIONS, 1) for name in names])
    await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=broker, acks="all")
    echo_out = AIOKafkaProducer(bootstrap_servers=broker, acks="all")
    echo = AIOKafkaConsumer(names[0], bootstrap_servers=broker, auto_offset_reset="earliest",
                            fetch_max_wait_ms=worker_wait_ms, group_id=names[0])  # fmt: skip
    waiter = AIOKafkaConsumer(names[1], bootstrap_servers=broker, auto_offset_reset="earliest",
                              fetch_max_wait_ms=waiter_wait_ms)  # fmt: skip
    clients = (producer, echo_out, echo, waiter)
    for client in clients:
        await client.start()

    async def forward() -> None:
        while True:
            for msgs in (await echo.getmany(timeout_ms=1000)).values():
                sent = [await echo_out.send(names[1], m.value, key=m.key) for m in msgs]
                for fut in sent:
                    await fut

    task = asyncio.create_task(forward())
    rng = random.Random(16)
    out: list[float] = []
    try:
        for n in range(hops + 1):
            await asyncio.sleep(rng.uniform(0, 0.03))
            started = time.perf_counter()
            await (await producer.send(names[0], b"x" * 600, key=f"hop:{n % 7}".encode()))
            while not await waiter.getmany(timeout_ms=5 * waiter_wait_ms):
                pass
            if n:
                out.append((time.perf_counter() - started) * 1000)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        for client in clients:
            await client.stop()
    return out


def _pct(values: list[float], q: float) -> float:
    return (
        statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] if len(values) > 1 else values[0]
    )


def main() -> dict[str, float]:
    """Print pipeline events/s beside raw aiokafka's, their ratio, the per-step latencies and the
    per-hop latency beside raw aiokafka's (the parts of :data:`PARTS`)."""
    configure(level="WARNING")
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp, tansu(Path(tmp) / "tansu.log") as broker:
        if "pipeline" in PARTS:
            results |= _pipeline(broker, Path(tmp))
        if "latency" in PARTS:
            lat = bench_latency(broker, Path(tmp), 20)
            for step, values in lat.items():
                if values:
                    p50, p99 = _pct(values, 50), _pct(values, 99)
                    results |= {f"{step} p50 ms": p50, f"{step} p99 ms": p99}
                    print(f"latency {step}: p50 {p50:.0f} ms, p99 {p99:.0f} ms ({len(values)} samples)")
        if "hop" in PARTS:
            results |= _hops(broker, Path(tmp))
    return results


def _pipeline(broker: str, tmp: Path) -> dict[str, float]:
    inputs = session_inputs(COUPS)
    pipeline_s, records = bench_pipeline(broker, inputs, tmp)
    # the baseline moves as many records as the pipeline's topics hold, of the inputs' sizes, cycled
    sizes = [(inputs[i % len(inputs)][1], inputs[i % len(inputs)][2]) for i in range(records)]
    baseline_s = asyncio.run(_baseline(broker, sizes))
    pipe_eps, raw_eps = records / pipeline_s, records / baseline_s
    print(
        f"kafka pipeline (4 worker processes, {PARTITIONS} partitions): {pipe_eps:,.0f} events/s "
        f"({records} records, {len(inputs)} inputs, {COUPS} coups x {len(HOUSE_TABLES)} tables, "
        f"{pipeline_s:.1f} s); raw aiokafka produce->consume of {records} records: {raw_eps:,.0f}/s; "
        f"ratio {pipe_eps / raw_eps:.3f}"
    )
    return {"pipeline_eps": pipe_eps, "baseline_eps": raw_eps}


def _hops(broker: str, tmp: Path) -> dict[str, float]:
    settings = _settings(broker)
    worker_wait = settings.fetch_max_wait_ms or 1500
    hop = bench_hop(broker, tmp, HOPS)
    raw = asyncio.run(raw_hop(broker, HOPS, worker_wait, WAIT_FETCH_MS))
    p50, raw50 = statistics.median(hop), statistics.median(raw)
    print(
        f"per hop (publish -> settlement -> the bus's waiter, {HOPS} hops): p50 {p50:.1f} ms, "
        f"p90 {_pct(hop, 90):.1f} ms; raw aiokafka echo (fetch waits {worker_wait}/{WAIT_FETCH_MS} ms): "
        f"p50 {raw50:.1f} ms, p90 {_pct(raw, 90):.1f} ms; ratio {p50 / raw50:.1f}x"
    )
    return {"hop p50 ms": p50, "raw hop p50 ms": raw50}


if __name__ == "__main__":
    main()
