"""Canonical JSON: ours (:func:`services.core.envelope.canonical`, orjson with sorted keys) against the
RFC 8785 package (``rfc8785.dumps``), on the envelopes of a seeded session, same run.

Records: every envelope a seeded embedded session writes (:class:`bench.bench_worker.MemBus`, the house
tables, ``BENCH_CANONICAL_COUPS`` coups each, 60 by default), each as the mapping its hash covers (the
envelope without ``hash``). Each encoder writes all of them, in order, in alternating rounds; the best
round's CPU time per envelope is printed beside the baseline (:func:`~services.core.envelope.canonical_json`,
the standard library's encoder, our reference) as a ratio, and the package's time as a ratio of ours.
Every envelope's bytes are compared first: the run says how many the two encoders write alike.

Run: ``.venv/bin/python -m bench canonical``. The machine may be shared: read the ratios, not the
microseconds, and give ``uptime``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

import rfc8785

from bench.bench_worker import HOUSE_TABLES, MemBus, Session
from services.core.envelope import canonical, canonical_json

ROUNDS = 7


def envelopes(coups: int) -> list[dict[str, Any]]:
    """The hashed body of every envelope of a seeded session, in the order written."""
    bus = MemBus()
    Session(bus, seed=2026).run(list(HOUSE_TABLES), coups)
    bodies = []
    for e in bus.log:
        body = json.loads(e.to_json())
        body.pop("hash", None)
        bodies.append(body)
    return bodies


def _round(encode: Callable[[Any], bytes], records: list[dict[str, Any]]) -> float:
    started = time.process_time()
    for r in records:
        encode(r)
    return time.process_time() - started


def measure(records: list[dict[str, Any]]) -> dict[str, float]:
    """Best CPU microseconds per envelope of each encoder, rounds alternating."""
    encoders: dict[str, Callable[[Any], bytes]] = {
        "stdlib json (baseline)": canonical_json,
        "ours (orjson)": canonical,
        "rfc8785 package": rfc8785.dumps,
    }
    best = dict.fromkeys(encoders, float("inf"))
    for _ in range(ROUNDS):
        for name, encode in encoders.items():
            best[name] = min(best[name], _round(encode, records))
    return {name: 1e6 * seconds / len(records) for name, seconds in best.items()}


def main() -> None:
    """Print the agreement, then CPU us per envelope and the ratios."""
    coups = int(os.environ.get("BENCH_CANONICAL_COUPS", "60"))
    records = envelopes(coups)
    alike = sum(canonical(r) == rfc8785.dumps(r) for r in records)
    size = sum(len(canonical(r)) for r in records) / len(records)
    print(
        f"{len(records)} envelopes ({size:.0f} bytes on average); ours and rfc8785 write the same bytes "
        f"for {alike} of {len(records)}"
    )
    figures = measure(records)
    base, ours = figures["stdlib json (baseline)"], figures["ours (orjson)"]
    print(f"{'encoder':<24}{'us/envelope':>12}{'x baseline':>12}{'x ours':>9}")
    for name, us in figures.items():
        print(f"{name:<24}{us:>12.2f}{us / base:>12.2f}{us / ours:>9.2f}")
    print(f"uptime: {os.getloadavg()[0]:.2f} (1-min load)")
