"""How far a long command is: a line per tenth on a non-terminal stderr once the work has run a
moment; nothing from a command that ends sooner."""

from __future__ import annotations

import io
import re

import pytest

from services.runtime import progress as p


def test_a_line_per_tenth_once_the_quiet_moment_is_over(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the quiet moment over at once: ten lines for a thousand units, counting up to the total."""
    monkeypatch.setattr(p, "QUIET_S", 0.0)
    out = io.StringIO()
    with p.progress("replay", 1000, "records", every=7, stream=out) as advance:
        for _ in range(1000):
            advance(1)
    counts = [int(n.replace(",", "")) for n in re.findall(r"^replay: ([\d,]+) of 1,000 records, \d+\.\d min$",
                                                           out.getvalue(), re.M)]  # fmt: skip
    assert len(counts) == 10 and counts == sorted(counts) and counts[-1] == 1000


def test_a_short_run_prints_nothing() -> None:
    """Work that ends within the quiet moment leaves stderr as it was (scripts read it)."""
    out = io.StringIO()
    with p.progress("export", 10_000, "records", every=1000, stream=out) as advance:
        advance(10_000)
    assert out.getvalue() == ""


def test_no_total_counts_every_while(monkeypatch: pytest.MonkeyPatch) -> None:
    """Work without a total (the pipeline until idle): a line with the count, then none until the
    interval passes."""
    monkeypatch.setattr(p, "QUIET_S", 0.0)
    out = io.StringIO()
    with p.counting("ingest", "records through the pipeline", stream=out) as advance:
        advance(5)
        advance(7)
    assert re.fullmatch(r"ingest: 5 records through the pipeline, 0\.0 min\n", out.getvalue())


def test_a_terminal_gets_a_bar_that_goes_away(monkeypatch: pytest.MonkeyPatch) -> None:
    """At a terminal a rich bar is drawn on the stream given (stderr), and no tenth lines."""

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(p, "QUIET_S", 0.0)
    out = Tty()
    with p.progress("replay", 100, "records", stream=out) as advance:
        advance(100)
    assert "of 100 records" not in out.getvalue()
