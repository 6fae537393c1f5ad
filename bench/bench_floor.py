"""Issue #16's embedded-pipeline goal against the floor of the work the design requires, same run.

The goal: the whole embedded pipeline at 0.3 of raw SQLite writing and reading the same records (the
issue's baseline: transactions of 100, ``synchronous=FULL``). That leaves, per event, the raw per-event
time divided by 0.3: the *budget*. This benchmark measures, on the very records of a seeded demo session:

- the raw SQLite time per event (the issue's baseline, :func:`bench.bench_pipeline.run_raw`), and so the
  budget;
- the **independent audit alone**: decoding each record from its bytes and stepping the audit processor
  over it (its own hash, MAC, chain and rules checks, its findings and checkpoints), CPU per record, beside
  plain ``json.loads`` of the same bytes. Audit reads every record of the log, verifies each by itself
  (never the writers' memo: docs/trust.md) and must be independent of the code it judges, so no pipeline
  can do less than this for each event.

When the audit alone plus SQLite's own time exceeds the budget, the goal is out of reach of this design
in this language whatever the other stages (dealer, settlement, monitor, the simulator) cost. Measured on
2026-11-24 (2 cores, idle, twice): raw 7.7 us an event (130k/s), budget 25.6 us; audit alone 19.7-20.3 us a
record (3.2-3.3x json.loads), plus SQLite: 27.4-28.0 us = 1.07-1.09 of the budget, before any other stage
does anything. (Under disk load the FULL baseline's fsyncs slow it several times over: measure idle.)

Run: ``.venv/bin/python -m bench floor`` (``BENCH_FLOOR_COUPS`` sizes the session: 40 coups x 7 tables).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

from bench.bench_pipeline import FIXED_BATCH, run_raw
from services.audit.processor import Audit
from services.core.processor import initial_state, step_encoded
from services.runtime import intake
from services.runtime.compose import Composition, demo_pipeline
from services.runtime.embedded.bus import EmbeddedBus
from services.runtime.embedded.store import EmbeddedLog
from services.runtime.logging import configure
from services.simulation.simulator import DEFAULT_TABLES, Session

COUPS = int(os.environ.get("BENCH_FLOOR_COUPS", "40"))
GOAL = 0.3
"""Issue #16: the embedded pipeline at 0.3 of raw SQLite or better."""
ROUNDS = 3


def session_records(db: Path) -> list[bytes]:
    """The bytes of every record of a seeded demo session (every variant), in log order."""
    bus = EmbeddedBus(db, demo_pipeline(), event_driven=True)
    try:
        Session(bus, seed=1).run(list(DEFAULT_TABLES), COUPS)
    finally:
        bus.close()
    with EmbeddedLog(db, readonly=True) as log:
        return [raw for *_, raw in log.iter_all()]


def audit_us(raws: list[bytes]) -> float:
    """CPU microseconds a record for a fresh audit (the demo composition's: guard, key, cadence) to
    decode every record and step over it, best of :data:`ROUNDS`."""
    audit = next(p for p in Composition.demo().processors() if isinstance(p, Audit))
    best = float("inf")
    for _ in range(ROUNDS):
        state = initial_state(audit)
        started = time.process_time()
        for raw in raws:
            try:
                env = intake.decode(raw)
            except intake.DecodeError:
                continue
            step_encoded(audit, state, env, raw)
        best = min(best, time.process_time() - started)
    return best / len(raws) * 1e6


def loads_us(raws: list[bytes]) -> float:
    """CPU microseconds a record for plain ``json.loads`` of the same bytes, best of :data:`ROUNDS`."""
    best = float("inf")
    for _ in range(ROUNDS):
        started = time.process_time()
        for raw in raws:
            json.loads(raw)
        best = min(best, time.process_time() - started)
    return best / len(raws) * 1e6


def main() -> dict[str, float]:
    """Print the goal's budget an event beside the audit's and SQLite's own cost."""
    configure(level="WARNING")
    with tempfile.TemporaryDirectory() as tmp:
        raws = session_records(Path(tmp) / "session.db")
        raw_s = run_raw(Path(tmp) / "raw.db", raws, batch=FIXED_BATCH, sync="FULL")
    n = len(raws)
    raw_us = raw_s / n * 1e6
    budget = raw_us / GOAL
    audit, loads = audit_us(raws), loads_us(raws)
    floor = audit + raw_us
    print(f"{n} records ({COUPS} coups x {len(DEFAULT_TABLES)} tables)")
    print(f"raw sqlite3, batches of {FIXED_BATCH}, synchronous=FULL (issue #16's baseline): {raw_us:.1f} us an "
          f"event ({n / raw_s:,.0f}/s); the goal ({GOAL}) leaves {budget:.1f} us an event")  # fmt: skip
    print(f"json.loads of each record (baseline): {loads:.1f} CPU us; the independent audit alone (decode + "
          f"step): {audit:.1f} CPU us a record ({audit / loads:.1f}x json.loads)")  # fmt: skip
    print(f"audit + SQLite's own time: {floor:.1f} us an event = {floor / budget:.2f} of the budget, before "
          f"dealer, settlement, monitor and the simulator")  # fmt: skip
    return {"budget us": budget, "audit us": audit, "raw us": raw_us, "floor/budget": floor / budget}


if __name__ == "__main__":
    main()
