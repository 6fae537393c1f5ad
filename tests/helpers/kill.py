"""A crash harness: run a worker in a child process, SIGKILL it at pseudo-random moments, resume it.

Reusable for any worker over the embedded log (one runner or the whole pipeline): ``work(ready)`` is
a function that opens the log itself, calls ``ready()`` when it starts applying records, works until
it has nothing left to do and returns. The child is
forked from the test process (no interpreter start-up per run, so dozens of kills stay fast) and is
killed with SIGKILL, which no handler can intercept: a genuine crash at whatever instruction it was.

Fork rule: the parent must not hold an open SQLite connection to the log while it forks (close it
before calling :func:`run_with_kills`), as SQLite forbids carrying a connection across ``fork``.
"""

from __future__ import annotations

import multiprocessing
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class KillReport:
    """What the harness did: kills that hit a running worker, and worker processes started."""

    kills: int
    starts: int


def run_with_kills(
    work: Callable[[Callable[[], None]], None],
    *,
    kills: int = 20,
    seed: int = 0,
    min_delay_s: float = 0.0,
    max_delay_s: float = 0.025,
    timeout_s: float = 60.0,
    between: Callable[[], None] | None = None,
) -> KillReport:
    """Start ``work(ready)`` in a child, SIGKILL it at a seeded random moment, repeat; then let it finish.

    ``work`` calls ``ready()`` once it has opened the log and restored its state; the kill comes a
    delay uniform in [``min_delay_s``, ``max_delay_s``] later, so kills land inside the work whatever
    the machine's start-up speed (a worker that never calls ``ready`` is killed after the delay from
    its start). Stops killing early if a child finishes on its own (the caller asserts ``kills``).
    ``between`` runs in the parent after each kill (e.g. to look at the log between crashes).
    Raises ``RuntimeError`` when a child fails on its own or the last run does not finish cleanly.
    """
    ctx = multiprocessing.get_context("fork")
    rng = random.Random(seed)
    done = starts = 0
    while done < kills:
        ready = ctx.Event()
        child = ctx.Process(target=work, args=(ready.set,), daemon=True)
        child.start()
        starts += 1
        deadline = time.monotonic() + timeout_s
        while not ready.wait(0.002) and child.exitcode is None and time.monotonic() < deadline:
            pass
        time.sleep(rng.uniform(min_delay_s, max_delay_s))
        if child.exitcode is None:
            child.kill()
        child.join(timeout_s)
        if child.exitcode == -signal.SIGKILL:
            done += 1
            if between is not None:
                between()
            continue
        if child.exitcode != 0:
            raise RuntimeError(f"worker failed on its own with exit code {child.exitcode}")
        return KillReport(done, starts)  # finished before it could be killed again
    last = ctx.Process(target=work, args=(lambda: None,), daemon=True)
    last.start()
    last.join(timeout_s)
    if last.exitcode != 0:
        last.kill()
        raise RuntimeError(f"the final, unkilled run ended with exit code {last.exitcode}")
    return KillReport(done, starts + 1)
