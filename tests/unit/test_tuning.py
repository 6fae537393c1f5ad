"""The CLI sets the collector's thresholds before any command runs (services.runtime.tuning)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from services.cli import main
from services.runtime.tuning import THRESHOLDS, tune_gc


@pytest.fixture
def restored_thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*before)


@pytest.mark.usefixtures("restored_thresholds")
def test_the_cli_tunes_the_collector_before_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["deal", "--variant", "punto_banco", "--cards", "9H 2C KD 3S"]) == 0  # any command
    capsys.readouterr()
    assert gc.get_threshold() == THRESHOLDS


@pytest.mark.usefixtures("restored_thresholds")
def test_tuning_is_idempotent_and_young_collections_are_rarer() -> None:
    tune_gc()
    tune_gc()
    assert gc.get_threshold() == THRESHOLDS
    assert THRESHOLDS[0] > 700  # the default it replaces
