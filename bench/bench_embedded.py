"""Throughput of the embedded runner against raw SQLite, measured in the same run on the same disk.

Pipeline: ``run_until_idle`` over N input records with a toy echo processor (decode with pydantic,
the core ``step`` with idempotence and hash-chained sealing, idempotent append of one output per
input, committed offset; one transaction per batch of 500). Baseline: plain ``sqlite3`` inserting the
same N input bytes and N output-sized blobs in transactions of 500 and reading them back, with the same
WAL and ``synchronous`` settings. The ratio says what the runner's bookkeeping costs over the disk.

Run: ``.venv/bin/python bench/bench_embedded.py`` (or through ``python -m bench``).
"""

from __future__ import annotations

import sqlite3
import tempfile
import time
from pathlib import Path
from typing import ClassVar, Literal

from services.core import topics
from services.core.envelope import Draft, Envelope, name_id, request
from services.core.processor import Processor
from services.runtime.embedded.runner import Runner, run_until_idle
from services.runtime.embedded.store import EmbeddedLog
from services.runtime.logging import configure

BATCH = 500
Sync = Literal["FULL", "NORMAL"]
SYNCS: tuple[Sync, ...] = ("FULL", "NORMAL")


class Echo(Processor[dict[str, int]]):
    """One chained output per input, counted per key (the test suite's toy, without refusals)."""

    name = "echo"
    inputs: ClassVar[tuple[str, ...]] = (topics.TABLE_INBOX,)

    def initial(self) -> dict[str, int]:
        """No key seen."""
        return {}

    def handle(self, state: dict[str, int], record: Envelope) -> tuple[dict[str, int], list[Draft]]:
        """Count and echo (mutating the dict: the bench measures the runner, not dict copies)."""
        state[record.key] = state.get(record.key, 0) + 1
        payload = {"n": state[record.key], "value": record.payload["value"]}
        return state, [Draft("Echoed", topics.TABLE_EVENTS, record.key, payload)]


def _inputs(n: int) -> list[Envelope]:
    return [
        request(
            "Ping",
            topics.TABLE_INBOX,
            f"table-{i % 8}",
            {"value": i},
            event_id=name_id("bench", str(i)),
            occurred_at="2026-11-22T20:00:00.000Z",
            producer="bench",
        )
        for i in range(n)
    ]


def bench_pipeline(db: Path, inputs: list[Envelope], synchronous: Sync) -> float:
    """Seconds for the runner to apply every input (the inputs are written before the clock starts)."""
    with EmbeddedLog(db, synchronous=synchronous) as log:
        log.append(inputs)
        log.checkpoint_if_due()  # the inputs' WAL frames are not the runner's to checkpoint
        runner = Runner(log, Echo(), batch_limit=BATCH, snapshot_every=10 * BATCH)
        started = time.perf_counter()
        applied = run_until_idle([runner])
        elapsed = time.perf_counter() - started
        assert applied == len(inputs) and log.count(topics.TABLE_EVENTS) == len(inputs)
    return elapsed


def bench_baseline(db: Path, inputs: list[Envelope], synchronous: Sync) -> float:
    """Seconds for raw SQLite to read N records back and insert N as large, batch by batch."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute("CREATE TABLE records (o INTEGER PRIMARY KEY, topic TEXT, key TEXT, body BLOB)")
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO records (topic, key, body) VALUES (?, ?, ?)",
        [(e.topic, e.key, e.to_json()) for e in inputs],
    )
    conn.execute("COMMIT")
    started = time.perf_counter()
    after = 0
    while True:
        conn.execute("BEGIN IMMEDIATE")
        batch = conn.execute(
            "SELECT o, topic, key, body FROM records WHERE topic = ? AND o > ? ORDER BY o LIMIT ?",
            (topics.TABLE_INBOX, after, BATCH),
        ).fetchall()
        if not batch:
            conn.execute("COMMIT")
            break
        conn.executemany(
            "INSERT INTO records (topic, key, body) VALUES (?, ?, ?)",
            [(topics.TABLE_EVENTS, key, bytes(body) * 2) for _, _, key, body in batch],
        )
        conn.execute("COMMIT")
        after = batch[-1][0]
    elapsed = time.perf_counter() - started
    conn.close()
    return elapsed


def main(records: int = 10_000) -> dict[str, float]:
    """Print records/s of the runner and of raw SQLite, and their ratio, for FULL and NORMAL sync."""
    configure(level="WARNING")
    inputs = _inputs(records)
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for sync in SYNCS:
            pipeline_s = bench_pipeline(Path(tmp) / f"pipeline-{sync}.db", inputs, sync)
            baseline_s = bench_baseline(Path(tmp) / f"baseline-{sync}.db", inputs, sync)
            pipeline_rps, baseline_rps = records / pipeline_s, records / baseline_s
            results[f"pipeline_{sync.lower()}_rps"] = pipeline_rps
            results[f"baseline_{sync.lower()}_rps"] = baseline_rps
            print(
                f"embedded runner, synchronous={sync}: {pipeline_rps:,.0f} records/s; "
                f"raw SQLite read+insert: {baseline_rps:,.0f} records/s; "
                f"ratio {pipeline_rps / baseline_rps:.3f} ({records} records, batches of {BATCH})"
            )
    return results


if __name__ == "__main__":
    main()
