"""Process settings of a long-running shell (the CLI's commands, a Kafka worker): the cyclic garbage
collector's thresholds.

A processor holds its state for the life of the process (every account's balance, every transfer's
fingerprint) and makes a few container objects per record, almost all freed by reference counting.
With CPython's default thresholds (700, 10, 10) a young collection runs every 700 net allocations and
every 100th of them walks the middle generation, which on a long run holds most of the state: on the
speed-baccarat credit path (5,000 payouts, then 5,000 wallet credits) the collector took about a sixth
of the CPU (docs/performance.md#garbage-collector). :data:`THRESHOLDS` makes young collections rarer; the
interpreter's own rule still keeps full collections proportional to the heap (one only when the
objects promoted since the last reach a quarter of the long-lived ones).

And :class:`gc_paused`, the collector paused around one batch of the embedded runner, whose outputs
are alive together (docs/performance.md#garbage-collector).

Nothing is frozen here (the replay freezes its own heap while it streams:
:class:`services.audit.replay.replayer.Replayer`).
"""

from __future__ import annotations

import gc
from typing import Final

THRESHOLDS: Final = (50_000, 20, 20)
"""Young collections every 50,000 net allocations (default 700); the middle generation every 20 young
ones, the old every 20 middle ones (the quarter rule above still bounds full collections)."""


def tune_gc() -> None:
    """Set :data:`THRESHOLDS` (idempotent; what ``casino-ledger`` does before any command runs)."""
    gc.set_threshold(*THRESHOLDS)


class gc_paused:  # a lower-case name: used as ``with gc_paused():``, as a function would be
    """The cyclic collector paused for the body of a ``with``: one batch of a runner, whose outputs are
    alive together until they are appended (a speed coup's ``CoupResolved``: 5,000 payouts, a dozen
    containers each). A young collection falling inside such a batch walks all of them, a visible
    share of the coup's credit path (docs/performance.md#garbage-collector). Paused, the
    collection comes after the batch, once its temporaries are freed (reference counting still frees
    everything as usual; only the cycle finder waits).

    Nested-safe: only the ``with`` that found the collector enabled enables it again, on leaving,
    whether the body returned or raised; a collector disabled by someone else stays disabled. A class,
    not a generator: the embedded runner enters it for every batch (thousands a session)."""

    __slots__ = ("_paused",)

    def __init__(self) -> None:
        self._paused = False

    def __enter__(self) -> None:
        if gc.isenabled():
            gc.disable()
            self._paused = True

    def __exit__(self, *exc: object) -> None:
        if self._paused:
            self._paused = False
            gc.enable()
