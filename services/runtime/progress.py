"""How far a long command is, on stderr (stdout stays what scripts read): ``replay``, ``export``,
``ingest``, ``project --rebuild`` and the read model's catch-up.

At a terminal: a rich progress bar, gone when the work ends. Elsewhere (a pipe, a log file, CI): one
line per tenth of the way, ``<command>: N of TOTAL <unit>, M.m min`` as ``monitor-eval`` writes them,
but only once the work has run :data:`QUIET_S` seconds: a command that ends sooner prints nothing more
than it did before (scripts and tests read its stderr).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from services.runtime.settings import conventions

QUIET_S = 2.0
"""Seconds of work before the first line on a non-terminal stderr."""

Advance = Callable[[int], None]
"""Called with how much more of the total is done."""


class TenthLines:
    """One line on ``stream`` at each tenth of ``total`` reached once :data:`QUIET_S` seconds have
    passed."""

    def __init__(
        self, command: str, total: int, unit: str, stream: TextIO, *, quiet_s: float | None = None
    ) -> None:
        self.command, self.total, self.unit, self.stream = command, max(total, 1), unit, stream
        self.quiet_s = QUIET_S if quiet_s is None else quiet_s
        self.done, self.start = 0, time.monotonic()
        self.tenths_shown = 0

    def advance(self, n: int) -> None:
        """``n`` more done."""
        self.done = min(self.done + n, self.total)
        tenths = self.done * 10 // self.total
        if tenths <= self.tenths_shown:
            return
        elapsed = time.monotonic() - self.start
        if elapsed < self.quiet_s:
            return
        self.tenths_shown = tenths
        self.stream.write(
            f"{self.command}: {self.done:,} of {self.total:,} {self.unit}, {elapsed / 60:.1f} min\n"
        )
        self.stream.flush()


def _terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty() and not conventions().ci
    except ValueError:  # a closed stream
        return False


@contextmanager
def progress(
    command: str, total: int, unit: str, *, every: int = 1, stream: TextIO | None = None
) -> Iterator[Advance]:
    """A callable to report ``n`` more of ``total`` ``unit`` done, shown as the module says; the
    display is told once ``every`` units have piled up (a call per record stays cheap)."""
    out = sys.stderr if stream is None else stream
    if total <= 0:
        yield lambda n: None
        return
    if not _terminal(out):
        with _batched(TenthLines(command, total, unit, out).advance, every) as advance:
            yield advance
        return
    from rich.console import Console  # noqa: PLC0415
    from rich.progress import Progress  # noqa: PLC0415

    bar: Any = Progress(console=Console(file=out), transient=True)
    task = bar.add_task(f"{command}: {unit}", total=total)
    with bar, _batched(lambda n: bar.advance(task, n), every) as advance:
        yield advance


@contextmanager
def _batched(advance: Advance, every: int) -> Iterator[Advance]:
    pending = [0]

    def add(n: int) -> None:
        pending[0] += n
        if pending[0] >= every:
            advance(pending[0])
            pending[0] = 0

    try:
        yield add
    finally:
        if pending[0]:
            advance(pending[0])


COUNT_EVERY_S = 30.0
"""Seconds between two lines of a count without a total on a non-terminal stderr."""


class CountLines:
    """Work without a known total: one line on ``stream`` every :data:`COUNT_EVERY_S` seconds (the
    first after :data:`QUIET_S`), ``<command>: N <unit>, M.m min``."""

    def __init__(self, command: str, unit: str, stream: TextIO, *, every_s: float = COUNT_EVERY_S) -> None:
        self.command, self.unit, self.stream, self.every_s = command, unit, stream, every_s
        self.done, self.start = 0, time.monotonic()
        self.next_at = QUIET_S

    def advance(self, n: int) -> None:
        """``n`` more done."""
        self.done += n
        elapsed = time.monotonic() - self.start
        if elapsed >= self.next_at:
            self.next_at = elapsed + self.every_s
            self.stream.write(f"{self.command}: {self.done:,} {self.unit}, {elapsed / 60:.1f} min\n")
            self.stream.flush()


@contextmanager
def counting(command: str, unit: str, *, stream: TextIO | None = None) -> Iterator[Advance]:
    """Like :func:`progress` for work whose total is unknown (the pipeline until idle): a spinner with
    the count at a terminal, else :class:`CountLines`."""
    out = sys.stderr if stream is None else stream
    if not _terminal(out):
        yield CountLines(command, unit, out).advance
        return
    from rich.console import Console  # noqa: PLC0415
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn  # noqa: PLC0415

    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}: {task.completed:,} " + unit),
        TimeElapsedColumn(),
    )
    bar: Any = Progress(*columns, console=Console(file=out), transient=True)
    task = bar.add_task(command, total=None)
    with bar:
        yield lambda n: bar.advance(task, n)
