"""Process settings of a long-running shell (the CLI's commands, a Kafka worker): the cyclic garbage
collector's thresholds.

A processor holds its state for the life of the process (every account's balance, every transfer's
fingerprint) and makes a few container objects per record, almost all freed by reference counting.
With CPython's default thresholds (700, 10, 10) a young collection runs every 700 net allocations and
every 100th of them walks the middle generation, which on a long run holds most of the state: on the
speed-baccarat credit path (5,000 payouts, then 5,000 wallet credits) the collector took about a sixth
of the CPU (hot16's profile: 0.24 s of 1.4 s). :data:`THRESHOLDS` makes young collections rarer; the
interpreter's own rule still keeps full collections proportional to the heap (one only when the
objects promoted since the last reach a quarter of the long-lived ones).

Only thresholds: nothing is frozen here (the replay freezes its own heap while it streams:
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
