"""The bus contract (:mod:`tests.helpers.bus_contract`) on the in-memory bus."""

from __future__ import annotations

import pytest

from services.runtime.compose import Composition
from services.runtime.memory import MemoryBus
from tests.helpers.bus_contract import BusContract


class TestMemoryBus(BusContract):
    @pytest.fixture
    def bus(self) -> MemoryBus:
        return MemoryBus(Composition.demo().processors())
