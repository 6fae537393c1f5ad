"""``ingest`` of one deposit on a long embedded log against the same on a short one, same run (issue #31).

The logs: seeded demo sessions (every variant's table, the demo keyring) of about 10,000 and 100,000
records (``BENCH_INGEST_SIZES``, comma separated), each built once and cached under ``var/bench/``
(keyed by size and seed), then copied for every measurement. A size above :data:`PLAYED_MAX` (the
issue's 1,000,000) is not played (a session writes a few hundred records a second on this shared
machine: 1M would take hours): it is the largest played log, after one ingest, with its *history*
grown to that size — records under fresh ids on a topic no processor reads, as many applied ids and
kept entries per record as the played log holds, every one older than the snapshots — so that every
table a start or an ingest touches has the size it would have, and the processors' state stays that
of the played session (bounded live state is the claim under test: the played sizes show it).

Measured on each copy, in this process (no interpreter start-up): :func:`services.cli.ingest.main` of a
file of one cashier deposit, as ``casino-ledger ingest --as cashier`` runs it: open the log, append,
restore the six runners, run the pipeline until idle, summarise. The *first* ingest after the build
pays whatever the build left for it (a tail since the last snapshot, a format change); then
``BENCH_INGEST_ROUNDS`` (default 3) more are timed and their median is the *steady* figure. Printed per
size: CPU and wall seconds of both, the snapshots' bytes and the rows of the ``applied`` table (what a
start reads), and the steady CPU as a ratio to the smallest log's: the goal is 1.5 or less at 1M.

``BENCH_INGEST_PROFILE=1`` also prints a cProfile of one steady ingest on the largest log.

Run: ``.venv/bin/python -m bench ingest``.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import pstats
import shutil
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from services.cli import ingest
from services.runtime.compose import demo_pipeline
from services.runtime.embedded.bus import EmbeddedBus
from services.runtime.logging import configure
from services.simulation.simulator import DEFAULT_TABLES, Session

SIZES = [int(s) for s in os.environ.get("BENCH_INGEST_SIZES", "10000,100000").split(",") if s.strip()]
ROUNDS = max(1, int(os.environ.get("BENCH_INGEST_ROUNDS", "3")))
PROFILE = os.environ.get("BENCH_INGEST_PROFILE") == "1"
SEED = 31
RECORDS_PER_COUP = 42
"""About the records one coup of the demo tables writes (bets, wallet moves, cards, payouts)."""
CACHE = Path("var/bench")
PLAYED_MAX = 100_000
"""Sizes above this are the largest played log with its history grown (the module docstring)."""
HISTORY_TOPIC = "bench.history"


def build_log(records: int, seed: int = SEED) -> Path:
    """The cached log of a demo session of about ``records`` records (built once)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    out = CACHE / f"ingest-{records}-seed{seed}.db"
    if out.exists():
        return out
    tables = list(DEFAULT_TABLES)
    coups = max(1, records // (RECORDS_PER_COUP * len(tables)))
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        db = Path(tmp) / "log.db"
        started = time.perf_counter()
        bus = EmbeddedBus(db, demo_pipeline(), synchronous="NORMAL", event_driven=True)
        try:
            Session(bus, seed=seed).run(tables, coups)
        finally:
            bus.close()
        print(f"  built {out} in {time.perf_counter() - started:.0f} s", flush=True)
        db.rename(out)
    return out


def grow_history(played: Path, records: int, folder: Path) -> Path:
    """A copy of ``played`` (after one ingest: its snapshots current) whose history holds ``records``
    records: the played records' bodies again under fresh ids on :data:`HISTORY_TOPIC`, and applied ids
    and kept entries in the played log's proportions, all at offset 1 (older than any snapshot)."""
    out = CACHE / f"ingest-{records}-grown-from-{played.stem}.db"
    if out.exists():
        return out
    db = folder / "grown.db"
    shutil.copyfile(played, db)
    ingest_once(db, _deposit_file(folder, -1))
    conn = sqlite3.connect(db)
    try:
        have = conn.execute("SELECT count(*) FROM records").fetchone()[0]
        extra = records - have
        bodies = [row[0] for row in conn.execute('SELECT body FROM records ORDER BY "offset" LIMIT 20000')]
        applied = conn.execute("SELECT consumer, count(*) FROM applied GROUP BY consumer").fetchall()
        kept = conn.execute("SELECT consumer, name, count(*), max(value) FROM kept GROUP BY 1, 2").fetchall()
        with conn:
            conn.executemany(
                "INSERT INTO records (topic, key, event_id, type, body, internal) VALUES (?, ?, ?, ?, ?, 1)",
                ((HISTORY_TOPIC, f"k{i % 997}", f"history-{i}", "History", bodies[i % len(bodies)])
                 for i in range(extra)),
            )  # fmt: skip
            for consumer, n in applied:
                more = n * extra // have
                conn.executemany(
                    'INSERT INTO applied (consumer, event_id, "offset") VALUES (?, ?, 1)',
                    ((consumer, f"history-{i}") for i in range(more)),
                )
            for consumer, name, n, sample in kept:
                more = n * extra // have
                conn.executemany(
                    'INSERT INTO kept (consumer, name, key, value, "offset") VALUES (?, ?, ?, ?, 1)',
                    ((consumer, name, f"history/{i}", sample) for i in range(more)),
                )
    finally:
        conn.close()
    shutil.move(db, out)
    return out


def _deposit_file(folder: Path, n: int) -> Path:
    line = {"type": "Deposit", "key": "player:001",
            "payload": {"account_id": "player:001", "amount_minor": 100 + n, "currency": "EUR"}}  # fmt: skip
    path = folder / f"deposit-{n}.jsonl"
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    return path


def ingest_once(db: Path, source: Path) -> tuple[float, float]:
    """(CPU s, wall s) of one ``ingest --as cashier`` of ``source`` into ``db``."""
    args = argparse.Namespace(db=str(db), as_=["cashier"], file=str(source))
    out = io.StringIO()
    started, cpu = time.perf_counter(), time.process_time()
    with contextlib.redirect_stdout(out):
        code = ingest.main(args)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - started
    summary = json.loads(out.getvalue().splitlines()[-1])
    assert code == 0 and summary["appended"] == 1 and summary["refused"] == 0, summary
    return cpu, wall


def held(db: Path) -> tuple[int, int, int]:
    """(records, snapshot bytes, applied-id rows): the log's length and what a start reads of it."""
    conn = sqlite3.connect(db)
    try:
        records = conn.execute("SELECT count(*) FROM records").fetchone()[0]
        snap = conn.execute("SELECT coalesce(sum(length(blob)), 0) FROM snapshots").fetchone()[0]
        applied = conn.execute("SELECT count(*) FROM applied").fetchone()[0]
    finally:
        conn.close()
    return int(records), int(snap), int(applied)


def measure(cached: Path, folder: Path, *, profile: bool = False) -> dict[str, float]:
    """First and steady (median) ingest of one deposit on a copy of ``cached``."""
    db = folder / "log.db"
    shutil.copyfile(cached, db)
    first_cpu, first_wall = ingest_once(db, _deposit_file(folder, 0))
    rounds = [ingest_once(db, _deposit_file(folder, n)) for n in range(1, ROUNDS + 1)]
    records, snap, applied = held(db)
    if profile:
        prof = cProfile.Profile()
        prof.enable()
        ingest_once(db, _deposit_file(folder, ROUNDS + 1))
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(18)
        print(text.getvalue())
    return {
        "records": records, "snapshot_bytes": snap, "applied_rows": applied, "grown": "grown" in cached.name,
        "first_cpu": first_cpu, "first_wall": first_wall,
        "cpu": statistics.median(r[0] for r in rounds), "wall": statistics.median(r[1] for r in rounds),
    }  # fmt: skip


def main() -> None:
    """Build (or reuse) the logs, time the ingests, print the figures and the ratios."""
    configure(level="WARNING")
    os.environ["CASINO_DEMO_MODE"] = "true"  # the logs are written with the public demo keyring
    os.environ.pop("CASINO_KEYRING", None)
    results: list[dict[str, float]] = []
    played = [s for s in sorted(SIZES) if s <= PLAYED_MAX]
    for size in sorted(SIZES):
        with tempfile.TemporaryDirectory() as tmp:
            if size <= PLAYED_MAX:
                cached = build_log(size)
            else:
                cached = grow_history(build_log(max(played, default=PLAYED_MAX)), size, Path(tmp))
            results.append(measure(cached, Path(tmp), profile=PROFILE and size == max(SIZES)))
    base = results[0]
    print(f"bench_ingest: one deposit through `ingest`, {ROUNDS} steady rounds (median), CPU seconds")
    for r in results:
        print(
            f"  log of {r['records']:>9,.0f} records{' (grown)' if r['grown'] else ''}: first {r['first_cpu']:6.3f} s (wall {r['first_wall']:6.3f}),"
            f" steady {r['cpu']:6.3f} s (wall {r['wall']:6.3f}); snapshots {r['snapshot_bytes'] / 1024:9,.0f} KiB,"
            f" applied ids {r['applied_rows']:>9,.0f}; steady/smallest {r['cpu'] / base['cpu']:5.2f}"
        )
    print("  goal (issue #31): steady at 1M records <= 1.5 x at 10k")


if __name__ == "__main__":
    main()
