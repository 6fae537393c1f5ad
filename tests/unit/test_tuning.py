"""The CLI sets the collector's thresholds before any command runs, and the embedded runner pauses it
around each batch (services.runtime.tuning)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.cli import main
from services.core import topics
from services.core.envelope import Draft, Envelope, request
from services.core.processor import Processor
from services.runtime.embedded.runner import Runner
from services.runtime.embedded.store import EmbeddedLog
from services.runtime.tuning import THRESHOLDS, gc_paused, tune_gc


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


class _Raised(Exception):
    pass


def test_the_collector_is_paused_for_the_body_and_enabled_again_even_after_an_error() -> None:
    """``gc_paused``: disabled inside, enabled after, whether the body returned or raised; nested, only
    the outermost enables it again; a collector disabled by someone else stays disabled."""
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner one found it paused: leaves it so
    assert gc.isenabled()
    with pytest.raises(_Raised), gc_paused():
        raise _Raised
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_runner_batch_runs_with_the_collector_paused_and_enables_it_even_when_it_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The embedded runner's batch (``Runner.step_batch``) runs paused; a batch that raised leaves the
    collector enabled."""
    seen: list[bool] = []

    class Probe(Processor[int]):
        name = "probe"
        inputs = (topics.TABLE_INBOX,)
        validates_inputs = False

        def initial(self) -> int:
            return 0

        def handle(self, state: int, record: Envelope) -> tuple[int, list[Draft]]:
            seen.append(gc.isenabled())
            return state + 1, []

    with EmbeddedLog(tmp_path / "log.db") as log:
        payload = {"table_id": "T1", "variant": "punto_banco", "currency": "EUR"}
        log.append([request("OpenTable", topics.TABLE_INBOX, "T1", payload, event_id="e1",
                            occurred_at="2026-01-01T00:00:00.000Z", producer="operator")])  # fmt: skip
        runner = Runner(log, Probe())
        assert runner.step_batch().records == 1
        assert seen == [False] and gc.isenabled()

        def failing(limit: int) -> object:
            assert not gc.isenabled()
            raise _Raised

        monkeypatch.setattr(runner, "_apply_batch", failing)
        with pytest.raises(_Raised):
            runner.step_batch()
        assert gc.isenabled()
