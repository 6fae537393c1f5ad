"""An event-driven bus whose timing is a seeded coin: records of different keys are processed in any
order, as on Kafka (one order per key only), and every wait lets a random number of steps run first.

The dealer and both settlement stages run (from the composition root, demo mode on the public demo
keyring); audit and monitor, which no table or wallet waits for, do not. Two buses with different seeds
are two timings of the same pipeline: a simulator whose log depends on timing writes two logs.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from services.core.envelope import Envelope
from services.core.processor import Processor, ProcessorState, initial_state, step
from services.runtime.compose import Composition

STAGES = ("dealer", "settlement.payout", "settlement.wallet")


class ShuffledBus:
    """``event_driven`` like the Kafka bus: :meth:`wait` runs the pipeline only as far as a record
    needs, one record of a random (processor, topic, key) stream at a time, after ``0..delay`` random
    steps."""

    event_driven = True

    def __init__(self, seed: int, delay: int = 8) -> None:
        self.rng = random.Random(seed)
        self.delay = delay
        self.procs: list[tuple[Processor[Any], ProcessorState[Any]]] = [
            (p, initial_state(p)) for name, p in Composition.demo().pipeline() if name in STAGES
        ]
        self.log: list[Envelope] = []
        self.streams: dict[tuple[str, str], list[Envelope]] = {}
        self.cursors: dict[tuple[int, str, str], int] = {}
        self.read_at: dict[tuple[str, str], int] = {}
        self.steps = 0

    def publish(self, envelopes: list[Envelope]) -> None:
        """Append outside records."""
        for env in envelopes:
            self._append(env)

    def _append(self, env: Envelope) -> None:
        self.log.append(env)
        self.streams.setdefault((env.topic, env.key), []).append(env)

    def _ready(self) -> list[tuple[int, str, str]]:
        return [
            (i, topic, key)
            for i, (proc, _) in enumerate(self.procs)
            for (topic, key), records in self.streams.items()
            if topic in proc.inputs and self.cursors.get((i, topic, key), 0) < len(records)
        ]

    def _step(self) -> bool:
        ready = self._ready()
        if not ready:
            return False
        i, topic, key = self.rng.choice(ready)
        at = self.cursors.get((i, topic, key), 0)
        self.cursors[(i, topic, key)] = at + 1
        proc, state = self.procs[i]
        for out in step(proc, state, self.streams[(topic, key)][at]):
            self._append(out)
        self.steps += 1
        return True

    def drain(self) -> None:
        """Run every stage until none has anything left to read."""
        while self._step():
            pass

    def wait(self, topic: str, key: str, match: Callable[[Envelope], bool]) -> Envelope:
        """The first record on ``topic`` under ``key`` that ``match`` accepts, once written."""
        for _ in range(self.rng.randint(0, self.delay)):
            self._step()
        while True:
            for env in self.streams.get((topic, key), ()):
                if match(env):
                    return env
            if not self._step():
                raise LookupError(f"no such record on {topic} under {key}, and the stages are idle")

    def read(self, topic: str, key: str) -> list[Envelope]:
        """The records on ``topic`` under ``key`` not yet returned by an earlier call."""
        records = self.streams.get((topic, key), [])
        start = self.read_at.get((topic, key), 0)
        self.read_at[(topic, key)] = len(records)
        return records[start:]
