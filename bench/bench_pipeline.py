"""The whole embedded pipeline (dealer, settlement, audit, monitor) against raw SQLite, same run.

Pipeline: a seeded demo session (every variant) on a fresh SQLite log; events/s counts every record
the log ends with (requests, commands and every processor's output) over the wall time of the
session, simulator included. Baseline: plain ``sqlite3`` (same WAL and ``synchronous=FULL``) inserting
the very same record bytes, one transaction per record batch of the same average size as the
pipeline's, and reading them back. The ratio is what the processors, validation and hash chains cost
over the disk.

Run: ``.venv/bin/python -m bench pipeline``.
"""

from __future__ import annotations

import sqlite3
import tempfile
import time
from pathlib import Path

from services.runtime.embedded import EmbeddedBus, EmbeddedLog
from services.runtime.logging import configure
from services.runtime.simulator import DEFAULT_TABLES, Session

COUPS = 40


def run_pipeline(db: Path, coups: int) -> tuple[float, list[bytes]]:
    """Seconds for a seeded session, and the bytes of every record it logged."""
    bus = EmbeddedBus(db)
    started = time.perf_counter()
    try:
        Session(bus, seed=1).run(list(DEFAULT_TABLES), coups)
    finally:
        bus.close()
    elapsed = time.perf_counter() - started
    with EmbeddedLog(db, readonly=True) as log:
        raws = [raw for *_, raw in log.iter_all()]
    return elapsed, raws


def run_raw(db: Path, raws: list[bytes], batch: int) -> float:
    """Seconds for raw sqlite3 to insert ``raws`` in transactions of ``batch`` and read them back."""
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
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
        seconds, raws = run_pipeline(Path(tmp) / "pipeline.db", COUPS)
        # the bus commits one transaction per processor batch; about 3 records each on this workload
        raw_seconds = run_raw(Path(tmp) / "raw.db", raws, batch=3)
    n = len(raws)
    pipe, base = n / seconds, n / raw_seconds
    print(
        f"pipeline: {n} events ({COUPS} coups x {len(DEFAULT_TABLES)} tables) in {seconds:.2f} s = {pipe:,.0f} events/s"
    )
    print(
        f"raw sqlite3 insert+read of the same {n} records (batches of 3): {raw_seconds:.2f} s = {base:,.0f} events/s"
    )
    print(f"ratio pipeline/raw: {pipe / base:.3f}")


if __name__ == "__main__":
    main()
