"""The bus contract (:mod:`tests.helpers.bus_contract`) on the embedded bus (SQLite)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from services.runtime.compose import demo_pipeline
from services.runtime.embedded.bus import EmbeddedBus
from tests.helpers.bus_contract import AdvanceContract, BusContract, DurableContract, RawContract


class TestEmbeddedBus(BusContract, AdvanceContract, RawContract, DurableContract):
    @pytest.fixture
    def bus(self, tmp_path: Path) -> Iterator[EmbeddedBus]:
        bus = EmbeddedBus(tmp_path / "log.db", demo_pipeline())
        yield bus
        bus.close()

    def write_raw(self, bus: EmbeddedBus, topic: str, key: str, raw: bytes) -> None:
        bus.log.append_raw(topic, key, raw)

    @contextmanager
    def reopened(self, bus: EmbeddedBus) -> Iterator[EmbeddedBus]:
        bus.close()
        again = EmbeddedBus(bus.log.path, demo_pipeline())
        try:
            yield again
        finally:
            again.close()
