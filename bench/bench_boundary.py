"""What the boundary's rules cost (docs/trust.md, services/core/boundary.py): ``authorize`` with the
rules and without them, same run, over every record of a seeded demo session (each authorized as its
writer); and audit's check of each wallet event's transfer id and account beside the same loop doing
nothing. CPU time of this process (``time.process_time``: the machine is shared), best of 5 rounds each,
alternated.

Run: ``.venv/bin/python -m bench boundary``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from services.audit.processor import boundary_findings
from services.core import topics, trust
from services.core.contract import payload_of
from services.core.envelope import Envelope
from services.core.trust import POLICY, Principal, authorize
from services.simulation.simulator import DEFAULT_TABLES, Session
from tests.helpers.membus import MemBus

COUPS = 20
ROUNDS = 5


def _writer(rec: Envelope) -> Principal:
    allowed = POLICY.get((rec.topic, rec.type), frozenset({Principal.SETTLEMENT}))
    return Principal(rec.producer) if rec.producer in allowed else sorted(allowed)[0]


def _best(fn: Callable[[], None], n: int) -> float:
    best = float("inf")
    for _ in range(ROUNDS):
        started = time.process_time()
        fn()
        best = min(best, time.process_time() - started)
    return best / n * 1e9


def main() -> None:
    """Print ns per record of authorize with and without the boundary rules, and the ratio; ns per
    wallet event of audit's boundary check."""
    bus = MemBus()
    Session(bus, seed=1).run(list(DEFAULT_TABLES), COUPS)
    pairs = [(rec, _writer(rec)) for rec in bus.log]
    wallet = [(rec, payload_of(rec, tolerant=True)) for rec in bus.log if rec.topic == topics.WALLET_EVENTS]
    transfers: list[tuple[Envelope, Any]] = [(r, p) for r, p in wallet if hasattr(p, "postings")]

    def with_rules() -> None:
        for rec, who in pairs:
            authorize(rec, who)

    def without_rules() -> None:
        for rec, who in pairs:
            authorize(rec, who)

    real = trust.request_refusal
    on = off = float("inf")
    for _ in range(3):  # alternated
        on = min(on, _best(with_rules, len(pairs)))
        trust.request_refusal = lambda *_a: None  # type: ignore[assignment]
        try:
            off = min(off, _best(without_rules, len(pairs)))
        finally:
            trust.request_refusal = real
    checked = _best(lambda: [boundary_findings(r, p) for r, p in transfers], len(transfers))
    empty = _best(lambda: [None for _r, _p in transfers], len(transfers))
    print(
        f"{len(pairs)} records ({COUPS} coups x {len(DEFAULT_TABLES)} tables), {len(transfers)} wallet transfers"
    )
    print(f"authorize without the boundary rules: {off:.0f} ns/record; with: {on:.0f} ns/record; "
          f"ratio with/without: {on / off:.3f}")  # fmt: skip
    print(
        f"audit's boundary check: {checked - empty:.0f} ns per wallet transfer ({checked:.0f} with the loop)"
    )


if __name__ == "__main__":
    main()
