"""Long commands say how far they are (issue #30: ``monitor-eval`` printed nothing for 25 minutes): on
stderr, so stdout stays what scripts read."""

from __future__ import annotations

import re

import pytest

from services.cli import main
from services.simulation.adversaries import ADVERSARIES


def test_monitor_eval_says_how_far_it_is_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    """``monitor-eval --quick`` through a pipe: progress lines on stderr, each at a tenth of the way,
    counting up to every run (one per adversary, then honest play); stdout is the table alone."""
    assert main(["monitor-eval", "--quick"]) == 0
    out, err = capsys.readouterr()
    assert "| honest population |" in out and "| adversary |" in out and "monitor-eval:" not in out
    counts = [(int(a), int(b)) for a, b in re.findall(r"^monitor-eval: (\d+) of (\d+) runs", err, re.M)]
    assert counts, err
    totals = {b for _, b in counts}
    assert len(totals) == 1 and totals.pop() > len(ADVERSARIES)
    done = [a for a, _ in counts]
    assert done == sorted(done) and done[-1] == counts[-1][1]
    assert 2 <= len(done) <= 11
