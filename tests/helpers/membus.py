"""An in-memory log for unit tests of the pure processors (the SQLite log is tested on its own)."""

from __future__ import annotations

from services.runtime.compose import Composition
from services.runtime.memory import MemoryBus


class MemBus(MemoryBus):
    """Runs dealer, settlement (both stages), audit and monitor (from the composition root: demo mode
    on the public demo keyring by default) over a Python list, in log order."""

    def __init__(self, composition: Composition | None = None) -> None:
        super().__init__((composition or Composition.demo()).processors())
