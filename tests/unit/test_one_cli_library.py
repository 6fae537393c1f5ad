"""One command-line library: every entry point parses with click, keeping its command line."""

from __future__ import annotations

import pytest

from services.cli import worker
from services.runtime.kafka import metrics
from services.simulation import monitor_eval


def test_module_entry_points_refuse_a_bad_invocation(capsys: pytest.CaptureFixture[str]) -> None:
    """A missing or unknown argument: status 2 and the reason on stderr, as argparse gave before."""
    assert metrics.main(["bogus"]) == 2
    assert "bogus" in capsys.readouterr().err
    assert worker.main([]) == 2
    assert "NAME" in capsys.readouterr().err
    assert worker.main(["dealer", "--no-such-option"]) == 2
    assert "--no-such-option" in capsys.readouterr().err


def test_module_entry_points_keep_their_options(capsys: pytest.CaptureFixture[str]) -> None:
    """--help lists the options the deploy files and the bus pass, and exits 0."""
    assert worker.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(o in out for o in ("NAME", "--broker", "--factory", "--spec"))
    assert metrics.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(o in out for o in ("healthz", "readyz", "metrics", "--url"))


def test_monitor_eval_counts_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    """The options arrive parsed by the casino-ledger command line; a count below 1 is exit 2."""
    from services.cli import main  # noqa: PLC0415

    assert main(["monitor-eval", "--quick", "--full"]) == 2
    assert "not allowed with argument --quick" in capsys.readouterr().err
    assert main(["monitor-eval", "--honest-coups", "0", "--no-progress"]) == 2
    assert "positive" in capsys.readouterr().err
    for option in ("--jobs", "--crowded-coups"):
        assert main(["monitor-eval", option, "0", "--no-progress"]) == 2, option
        assert "positive" in capsys.readouterr().err
    assert callable(monitor_eval.main)
