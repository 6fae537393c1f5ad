"""What trust at the input costs per record: ``step`` with and without authentication, same run.

Workload: a seeded demo session (every variant, in memory) whose records are all authenticated; each
processor of the pipeline then re-applies exactly the records it consumed, from a fresh state, twice:
*with auth* (built by the composition root: every input's hash recomputed and its MAC checked, the
policy applied, every output signed) and *without* (the same processors with no guard). The
difference is the cost of docs/trust.md per input record; the ratio is with/without. Best of 3 runs each.

Run: ``.venv/bin/python -m bench trust``.
"""

from __future__ import annotations

import time
from typing import Any

from services.core.envelope import Envelope
from services.core.processor import Processor, initial_state, step
from services.runtime.compose import Composition
from services.simulation.simulator import DEFAULT_TABLES, Session
from tests.helpers.membus import MemBus

COUPS = 20
ROUNDS = 3


def inputs() -> list[Envelope]:
    """Every record of a seeded, authenticated session, in log order."""
    bus = MemBus()
    Session(bus, seed=1).run(list(DEFAULT_TABLES), COUPS)
    return bus.log


def run(processors: list[Processor[Any]], records: list[tuple[Envelope, bytes]]) -> tuple[float, int]:
    """Seconds to step every processor over its own inputs from a fresh state (each with the bytes it
    was decoded from, as both runtimes hand it over); records stepped."""
    n = 0
    started = time.perf_counter()
    for proc in processors:
        state = initial_state(proc)
        for rec, raw in records:
            if rec.topic in proc.inputs:
                step(proc, state, rec, raw)
                n += 1
    return time.perf_counter() - started, n


def main() -> None:
    """Print µs per record with and without auth, the difference and the ratio, and the checks alone."""
    log = inputs()
    records = [(rec, rec.to_json()) for rec in log]
    guarded = Composition.demo().processors()
    bare = Composition.demo().processors()
    for proc in bare:
        proc.guard = None
    with_auth = without = float("inf")
    n = 0
    for _ in range(ROUNDS):  # alternated, so that a busy machine weighs on both alike
        seconds, n = run(bare, records)
        without = min(without, seconds)
        with_auth = min(with_auth, run(guarded, records)[0])
    guard = Composition.demo().keyring.guard("settlement")
    alone = float("inf")
    for _ in range(ROUNDS):
        started = time.perf_counter()
        for rec, raw in records:
            guard.admit(rec, raw=raw)
            guard.auth_for(rec.hash)
        alone = min(alone, (time.perf_counter() - started) / len(records) * 1e6)
    per_with, per_without = with_auth / n * 1e6, without / n * 1e6
    print(f"{n} records stepped ({len(log)} in the log, {COUPS} coups x {len(DEFAULT_TABLES)} tables)")
    print(f"step without auth: {per_without:.1f} us/record; with auth: {per_with:.1f} us/record")
    print(
        f"auth cost: {per_with - per_without:.1f} us/record; ratio with/without: {per_with / per_without:.3f}"
    )
    print(
        f"verify + authorize + sign alone: {alone:.1f} us/record (hash over the raw bytes, one HMAC each way)"
    )


if __name__ == "__main__":
    main()
