"""The in-memory runtime: the pure processors over a Python list, in log order (no bytes, no SQLite, no
broker).

``monitor-eval`` plays its sessions on it, and the unit tests of the processors use it
(``tests/helpers/membus.py``); it keeps the simulator's bus protocol as the embedded and the Kafka buses
do (one contract test class for the three, ``tests/helpers/bus_contract.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from services.core import attest, topics
from services.core.envelope import Envelope
from services.core.processor import Processor, ProcessorState, initial_state, step


class MemoryBus:
    """``processors`` over one list: :meth:`drain` steps each, in the order given, through every record
    it has not seen yet, until none has anything left to read."""

    def __init__(self, processors: Iterable[Processor[Any]]) -> None:
        self.log: list[Envelope] = []
        self.procs: list[tuple[Processor[Any], ProcessorState[Any]]] = [
            (p, initial_state(p)) for p in processors
        ]
        self.offsets = [0] * len(self.procs)
        self.cursors: dict[tuple[str, str], int] = {}
        self.chains: dict[str, attest.AttestChain] = {}
        self.attested: dict[str, dict[tuple[str, str], Any]] = {}
        self.latest = ""
        """The latest ``occurred_at`` of the records before :attr:`latest_upto` (kept as the log grows, so
        a seal does not read the whole log again: a long session's drains would cost its square)."""
        self.latest_upto = 0

    def seal(self) -> None:
        """Each processor's signed heads (:mod:`services.core.attest`): the chains it advanced since its
        last attestation, in one record sealed ``idle`` (what :meth:`drain` ends with: this bus has no
        batches, each drain runs until idle)."""
        if not self.log:
            return
        tail = (e.occurred_at for e in self.log[self.latest_upto :])
        at = self.latest = max(self.latest, max(tail, default=self.latest))
        self.latest_upto = len(self.log)
        for proc, state in self.procs:
            if proc.guard is None:
                continue
            writer = proc.writer or proc.stage_name()
            chain = self.chains.setdefault(writer, attest.AttestChain(writer))
            done = self.attested.setdefault(writer, {})
            heads = {k: h for k, h in state.heads.items() if k[0] != topics.ATTEST and done.get(k) != h}
            if heads:
                self.log.extend(
                    e for e, _ in attest.attestation(chain, heads, proc.guard, occurred_at=at, seal="idle")
                )
                done.update(heads)

    def publish(self, envelopes: list[Envelope]) -> None:
        """Append outside records."""
        self.log.extend(envelopes)

    def drain(self) -> None:
        """Run every processor until none has anything left to read, then :meth:`seal`."""
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
        self.seal()

    def read(self, topic: str, key: str) -> list[Envelope]:
        """The records on ``topic`` under ``key`` not yet returned by an earlier call."""
        start = self.cursors.get((topic, key), 0)
        self.cursors[(topic, key)] = len(self.log)
        return [e for e in self.log[start:] if e.topic == topic and e.key == key]

    event_driven = False
    """The simulator drains this bus between its steps: waiting on it runs the pipeline first."""

    def wait(self, topic: str, key: str, match: Callable[[Envelope], bool]) -> Envelope:
        """The first record on ``topic`` under ``key`` that ``match`` accepts, once the processors have
        run until idle (:class:`LookupError` if there is none then: nothing would write it)."""
        self.drain()
        for env in self.log:
            if env.topic == topic and env.key == key and match(env):
                return env
        raise LookupError(f"no such record on {topic} under {key}, and the processors are idle")

    def of_type(self, type_: str) -> list[Envelope]:
        """Every record of one type, in log order."""
        return [e for e in self.log if e.type == type_]
