"""The same seeded session on Kafka and embedded, same run: how many times slower the broker makes it.

Session: :data:`TABLES` of the demo's tables, :data:`COUPS` coups each, seed 2026, the demo keyring.
Embedded (the baseline): a fresh SQLite log, the simulator over :class:`EmbeddedBus`, event driven as
``casino-ledger demo`` runs it (the advancing mode was the baseline until 2026-11-24). Kafka: four
worker processes (dealer, settlement, audit, monitor) on a local Tansu broker, the simulator over
:class:`KafkaBus`, the clock started once every group has joined and consumed (:func:`warm_up`). Kafka is timed twice in the same run:

- **lockstep**: after every step the simulator waits until every service has committed everything
  (``drain()``: the bus without ``advance``, as before this benchmark);
- **concurrent** (``Session.event_driven``, ``Session.play``): the tables play in a fixed round robin,
  each running until it waits for a record (a bet's outcome, the dealer's next answer, an account's
  payouts already caused) with ``KafkaBus.wait`` while the other tables' requests are in flight;
  audit and monitor catch up on their own, and the session ends with one ``drain()``.

The critical path of the concurrent session, in dependent hops (:mod:`bench.hop_model`: each stage one hop,
nothing else takes time), divides the Kafka session's time into the time a hop costs in it. The **raw
floor** is that many hops of raw aiokafka on the same broker doing no work (:func:`bench.bench_kafka.raw_hop`:
produce, an echo consumes and produces, a consumer sees it), with fetch waits of :data:`FLOOR_FETCH_MS`
(shorter than the pipeline's, so a floor below anything it could reach): what the session would take on
this broker if the workers, the bus and the simulator cost nothing. Measured on 2026-11-24 (2 cores): a raw
hop p50 3.6-3.9 ms at 1 ms fetch waits (5.8 ms at 10 ms), 123 hops: 0.44-0.48 s, 2.8-3x the embedded session
(0.16 s); issue #16's goal (3x) is at that floor.

All three runs must give the same replay digest (the workers run in demo mode, on the demo keyring the
embedded session uses): the schedule, not the timing, decides the log, so lockstep and concurrent
write the same one.

Run: ``.venv/bin/python -m bench session`` (``BENCH_SESSION_TABLES``, ``BENCH_SESSION_COUPS`` size it;
``BENCH_SESSION_LOCKSTEP=0`` skips the lockstep run, the slow one).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from bench.bench_kafka import bus_cpu, raw_hop
from bench.hop_model import critical_path
from services.core import topics
from services.core.envelope import name_id, request
from services.core.trust import Principal, authenticate
from services.runtime.compose import demo_pipeline
from services.runtime.embedded.bus import EmbeddedBus
from services.runtime.kafka.bus import KafkaBus, quick_settings, running
from services.runtime.keyring import demo_keyring
from services.runtime.logging import configure
from services.runtime.replay import read_db, replay
from services.runtime.settings import Settings
from services.simulation.simulator import Session, demo_tables
from tests.helpers.broker import tansu

TABLES = int(os.environ.get("BENCH_SESSION_TABLES", "3"))
COUPS = int(os.environ.get("BENCH_SESSION_COUPS", "10"))
LOCKSTEP = os.environ.get("BENCH_SESSION_LOCKSTEP", "1") != "0"
SEED = 2026
FLOOR_FETCH_MS = 1
"""The raw floor's fetch waits (echo and waiter): Tansu holds a fetch until its wait is over or it looks
again, so shorter waits find a record sooner; 1 ms is the shortest aiokafka takes."""


def embedded(db: Path) -> tuple[float, str]:
    """Seconds for the session on a fresh embedded log, and its replay digest."""
    bus = EmbeddedBus(db, demo_pipeline(), event_driven=True)  # what the demo runs
    started = time.perf_counter()
    try:
        Session(bus, seed=SEED).run(demo_tables(TABLES), COUPS)
    finally:
        bus.close()
    elapsed = time.perf_counter() - started
    return elapsed, replay(read_db(db)).digest


WARM_ACCOUNT = "bench:warm-up"
WARM_TABLE = "bench-warm-up"
"""The keys of the warm-up's records, left out of the replay."""


def warm_up(bus: KafkaBus) -> None:
    """Make every group join and consume before the clock starts: on empty topics ``drain()`` returns
    at once, while the workers are still joining. A deposit (settlement answers; audit and monitor read
    the answer) and a command to a table that does not exist (the dealer refuses it; the payout stage,
    audit and monitor read the refusal), each waited for, then every group idle."""
    ring = demo_keyring()
    at = "2026-11-22T19:59:59.000Z"
    deposit = request("Deposit", topics.WALLET_REQUESTS, WARM_ACCOUNT,
                      {"account_id": WARM_ACCOUNT, "amount_minor": 1_000, "currency": "EUR"},
                      event_id=name_id("bench", "warm-up", "deposit"), occurred_at=at,
                      producer=Principal.CASHIER.value)  # fmt: skip
    command = request("CloseShoe", topics.TABLE_INBOX, WARM_TABLE, {"table_id": WARM_TABLE},
                      event_id=name_id("bench", "warm-up", "command"), occurred_at=at,
                      producer=Principal.OPERATOR.value)  # fmt: skip
    bus.publish([authenticate(deposit, ring.key(Principal.CASHIER)),
                 authenticate(command, ring.key(Principal.OPERATOR))])  # fmt: skip
    bus.wait(topics.WALLET_EVENTS, WARM_ACCOUNT, lambda e: True)
    bus.wait(topics.TABLE_EVENTS, WARM_TABLE, lambda e: True)
    bus.drain()


def on_kafka(broker: str, logs: Path, *, lockstep: bool) -> tuple[float, str]:
    """Seconds for the session on fresh topics (after every group joined and consumed), and its replay
    digest (the warm-up's records left out)."""
    base = Settings(
        bootstrap_servers=broker, topic_prefix=f"bs{uuid.uuid4().hex[:8]}.", partitions=3, demo_mode=True
    )
    with running(quick_settings(base, env={}), logs) as bus:
        warm_up(bus)
        meter = bus_cpu(bus)
        meter.start()
        time.sleep(1.0)
        meter.stop()
        print(f"idle, before the session: {meter.line()}")
        meter.start()
        started = time.perf_counter()
        Session(bus, seed=SEED, lockstep=lockstep).run(demo_tables(TABLES), COUPS)
        elapsed = time.perf_counter() - started
        meter.stop()
        print(meter.line())
        records = [e for e in bus.consume_all() if e.key not in (WARM_ACCOUNT, WARM_TABLE)]
    return elapsed, replay(records).digest


def main() -> dict[str, float]:
    """Print the Kafka session's time (lockstep and concurrent) beside the embedded session's."""
    configure(level="WARNING")
    with tempfile.TemporaryDirectory() as tmp, tansu(Path(tmp) / "tansu.log") as broker:
        base_s, digest = embedded(Path(tmp) / "session.db")
        out = {"embedded s": base_s}
        what = f"{TABLES} tables x {COUPS} coups"
        print(f"embedded session ({what}): {base_s:.2f} s (digest {digest})")
        if LOCKSTEP:
            step_s, step_digest = on_kafka(broker, Path(tmp) / "lockstep", lockstep=True)
            out["lockstep s"] = step_s
            print(f"kafka session, lockstep (drain after every step): {step_s:.1f} s = "
                  f"{step_s / base_s:.1f}x embedded ({_same(digest, step_digest)})")  # fmt: skip
        event_s, event_digest = on_kafka(broker, Path(tmp) / "event", lockstep=False)
        out["concurrent s"] = event_s
        print(f"kafka session, concurrent tables (each waits for its own records): {event_s:.1f} s = "
              f"{event_s / base_s:.1f}x embedded ({_same(digest, event_digest)})")  # fmt: skip
        hops = critical_path(TABLES, COUPS, SEED)
        out["critical path hops"] = hops
        print(
            f"critical path of the concurrent session: {hops} dependent hops (bench/hop_model.py); "
            f"{event_s / hops * 1000:.1f} ms a hop on Kafka"
        )
        raw = statistics.median(asyncio.run(raw_hop(broker, 200, FLOOR_FETCH_MS, FLOOR_FETCH_MS)))
        floor_s = raw * hops / 1000
        out["raw floor s"] = floor_s
        print(
            f"raw floor: {hops} hops of raw aiokafka on this broker doing no work (p50 {raw:.1f} ms a hop, "
            f"fetch waits {FLOOR_FETCH_MS} ms): {floor_s:.2f} s = {floor_s / base_s:.1f}x embedded; "
            f"the Kafka session is {event_s / floor_s:.1f}x the floor"
        )
    return out


def _same(reference: str, digest: str) -> str:
    return "the embedded digest" if digest == reference else f"DIGEST DIFFERS: {digest}"


if __name__ == "__main__":
    main()
