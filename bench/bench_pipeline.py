"""The whole embedded pipeline (dealer, settlement, audit, monitor) against raw SQLite, same run.

Pipeline: a seeded demo session (every variant) on a fresh SQLite log; events/s counts every record
the log ends with (requests, commands and every processor's output) over the wall time of the
session, simulator included. Baseline: plain ``sqlite3`` (same WAL and the log's own ``synchronous``)
inserting the very same record bytes in as many transactions as the pipeline committed (since
``EmbeddedBus`` commits groups of the session's steps: a handful; before, every runner round of every
step), and reading them back. The ratio is what the processors, validation and hash chains cost
over the disk. A second baseline writes them in transactions of :data:`FIXED_BATCH`, so that fewer
commits in the pipeline show as a better ratio instead of a faster baseline. A third is the issue's
own (#16): the same records in transactions of :data:`FIXED_BATCH` with ``synchronous=FULL`` (an fsync
per commit), whatever the log's setting.

Run: ``.venv/bin/python -m bench pipeline``. The session runs event driven on the bus, as the demo's
(:class:`~services.runtime.embedded.bus.EmbeddedBus`); ``BENCH_PIPELINE_EVENT_DRIVEN=0`` plays it
advancing the bus after every table's turn instead.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import time
from pathlib import Path

from services.core.envelope import Envelope
from services.runtime.compose import demo_pipeline
from services.runtime.embedded.bus import EmbeddedBus
from services.runtime.embedded.store import EmbeddedLog
from services.runtime.logging import configure
from services.simulation.simulator import DEFAULT_TABLES, Session

COUPS = 40
EVENT_DRIVEN = os.environ.get("BENCH_PIPELINE_EVENT_DRIVEN", "1") == "1"
"""Whether the session runs event driven on the bus (``EmbeddedBus(..., event_driven=True)``, as the demo
does), else it advances the bus between its steps."""
FIXED_BATCH = 100
"""The issue's baseline: the same records written in transactions of 100, whatever the pipeline did."""


def run_pipeline(db: Path, coups: int) -> tuple[float, float, list[bytes], int, str]:
    """Seconds for a seeded session (wall, then this process's CPU), the bytes of every record it
    logged, the transactions it committed and the log's ``synchronous`` setting."""
    bus = EmbeddedBus(db, demo_pipeline(), event_driven=EVENT_DRIVEN)
    publishes = 0
    publish = bus.publish

    def counted(envelopes: list[Envelope]) -> None:
        nonlocal publishes
        publishes += 1
        publish(envelopes)

    bus.publish = counted  # type: ignore[method-assign]
    sync = str(getattr(bus.log, "synchronous", "FULL"))  # the log before the setting existed: FULL
    started, cpu = time.perf_counter(), time.process_time()
    try:
        Session(bus, seed=1).run(list(DEFAULT_TABLES), coups)
    finally:
        bus.close()
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    with EmbeddedLog(db, readonly=True) as log:
        raws = [raw for *_, raw in log.iter_all()]
    commits = getattr(bus.log, "commits", None)  # group commits; before them: one per publish and batch
    if commits is None:
        commits = publishes + sum(getattr(r, "batches", 0) for r in bus.runners)
    return elapsed, cpu, raws, commits, sync


def run_raw(db: Path, raws: list[bytes], batch: int, sync: str = "FULL") -> float:
    """Seconds for raw sqlite3 to insert ``raws`` in transactions of ``batch`` and read them back."""
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute(f"PRAGMA synchronous={sync}")
    con.execute("CREATE TABLE r (o INTEGER PRIMARY KEY, body BLOB)")
    started = time.perf_counter()
    for i in range(0, len(raws), batch):
        con.execute("BEGIN")
        con.executemany("INSERT INTO r (body) VALUES (?)", ((r,) for r in raws[i : i + batch]))
        con.execute("COMMIT")
    n = sum(1 for _ in con.execute("SELECT body FROM r ORDER BY o"))
    elapsed = time.perf_counter() - started
    con.close()
    assert n == len(raws)
    return elapsed


def main() -> None:
    """Print pipeline events/s beside the raw SQLite baseline, and the ratio."""
    configure(level="WARNING")
    with tempfile.TemporaryDirectory() as tmp:
        seconds, cpu, raws, commits, sync = run_pipeline(Path(tmp) / "pipeline.db", COUPS)
        batch = max(1, round(len(raws) / commits)) if commits else 3
        raw_seconds = run_raw(Path(tmp) / "raw.db", raws, batch=batch, sync=sync)
        fixed_seconds = run_raw(Path(tmp) / "raw100.db", raws, batch=FIXED_BATCH, sync=sync)
        issue_seconds = run_raw(Path(tmp) / "raw100full.db", raws, batch=FIXED_BATCH, sync="FULL")
    n = len(raws)
    pipe, base = n / seconds, n / raw_seconds
    print(
        f"pipeline: {n} events ({COUPS} coups x {len(DEFAULT_TABLES)} tables) in {seconds:.2f} s = {pipe:,.0f} events/s"
        f" (CPU {cpu:.2f} s = {cpu / n * 1e6:.0f} us an event: steadier than the wall time on a shared machine)"
    )
    print(
        f"raw sqlite3 insert+read of the same {n} records ({commits} transactions: batches of {batch}, "
        f"synchronous={sync}): {raw_seconds:.2f} s = {base:,.0f} events/s"
    )
    print(f"ratio pipeline/raw: {pipe / base:.3f}")
    fixed = n / fixed_seconds
    print(
        f"raw sqlite3, same records in batches of {FIXED_BATCH} (a baseline that does not move with the "
        f"pipeline's commits): {fixed_seconds:.2f} s = {fixed:,.0f} events/s; ratio pipeline/raw: {pipe / fixed:.3f}"
    )
    issue = n / issue_seconds
    print(
        f"raw sqlite3, same records in batches of {FIXED_BATCH}, synchronous=FULL (issue #16's baseline): "
        f"{issue_seconds:.2f} s = {issue:,.0f} events/s; ratio pipeline/raw: {pipe / issue:.3f}"
    )


if __name__ == "__main__":
    main()
