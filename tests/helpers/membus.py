"""An in-memory log for unit tests of the pure processors (the SQLite log is tested on its own)."""

from __future__ import annotations

from services.core.envelope import Envelope
from services.core.processor import Processor, ProcessorState, initial_state, step
from services.runtime.compose import Composition


class MemBus:
    """Runs dealer, settlement (both stages), audit and monitor (from the composition root: demo mode
    on the public demo keyring by default) over a Python list, in log order."""

    def __init__(self, composition: Composition | None = None) -> None:
        self.log: list[Envelope] = []
        self.procs: list[tuple[Processor[object], ProcessorState[object]]] = []
        for p in (composition or Composition.demo()).processors():
            self.procs.append((p, initial_state(p)))  # type: ignore[arg-type]
        self.offsets = [0] * len(self.procs)
        self.cursors: dict[tuple[str, str], int] = {}

    def publish(self, envelopes: list[Envelope]) -> None:
        """Append outside records."""
        self.log.extend(envelopes)

    def settle(self) -> None:
        """Run every processor until none has anything left to read."""
        moved = True
        while moved:
            moved = False
            for i, (proc, state) in enumerate(self.procs):
                while self.offsets[i] < len(self.log):
                    rec = self.log[self.offsets[i]]
                    self.offsets[i] += 1
                    moved = True
                    if rec.topic in proc.inputs:
                        self.log.extend(step(proc, state, rec))

    def read(self, topic: str, key: str) -> list[Envelope]:
        """Records on (topic, key) since the last call."""
        start = self.cursors.get((topic, key), 0)
        self.cursors[(topic, key)] = len(self.log)
        return [e for e in self.log[start:] if e.topic == topic and e.key == key]

    def of_type(self, type_: str) -> list[Envelope]:
        """Every record of one type, in log order."""
        return [e for e in self.log if e.type == type_]
