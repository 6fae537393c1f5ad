"""A worker started as ``python -m services.cli.worker`` (how the bus, the tests and the benches
start them) tunes the garbage collector as ``casino-ledger worker`` does (services/runtime/tuning.py)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from services.cli import worker
from services.runtime.tuning import THRESHOLDS


@pytest.fixture
def default_gc() -> Iterator[None]:
    """CPython's default thresholds for the test, the process's own afterwards."""
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        yield
    finally:
        gc.set_threshold(*before)


@pytest.mark.usefixtures("default_gc")
def test_the_module_entry_point_sets_the_gc_thresholds() -> None:
    """Before, only the ``casino-ledger`` console script set them: the bus's workers kept (700, 10, 10)."""
    with pytest.raises(SystemExit):
        worker.main(["no-such-service", "--broker", "127.0.0.1:9"])
    assert gc.get_threshold() == THRESHOLDS
