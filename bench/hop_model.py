"""The session's critical path in hops: the seeded session on a timing model of the Kafka pipeline.

Every stage a table or a wallet waits for (dealer, settlement's payout and wallet stages) answers a record
exactly one *hop* after it is on the log; the simulator and its publishes take no time. The session's
length on this model is the number of dependent hops on its critical path: what the Kafka session
would take if every hop took one unit and nothing else did. Dividing the Kafka session's seconds by it
gives the time a hop costs in the session (broker, worker, waiter and the simulator's own share), to
compare with ``python -m bench kafka``'s single hop (``BENCH_KAFKA_PARTS=hop``). The model writes the log
every other bus writes (the schedule decides it, not the timing): :func:`critical_path` checks that its
table chains are those of the in-memory bus in lockstep.

Measured on the session of ``bench session`` (3 tables x 10 coups, seed 2026): 144 hops when each
payout was waited for as the wallet's ``PayoutApplied`` (two hops after the coup's resolution), 123
with settlement's ``PayoutIssued`` (one hop); the default demo session (7 x 60): 2,252 and 1,898.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import Any

from services.core import topics
from services.core.envelope import Envelope
from services.core.processor import Processor, ProcessorState, initial_state, step
from services.runtime.compose import Composition
from services.simulation.simulator import Session, demo_tables
from tests.helpers.membus import MemBus

STAGES = ("dealer", "settlement.payout", "settlement.wallet")
"""The stages a table or a wallet waits for (audit and monitor are waited for only at the end)."""


class HopBus:
    """An event-driven bus on which each stage answers a record one hop after it is on the log."""

    event_driven = True

    def __init__(self) -> None:
        self.procs: list[tuple[Processor[Any], ProcessorState[Any]]] = [
            (p, initial_state(p)) for name, p in Composition.demo().pipeline() if name in STAGES
        ]
        self.now = 0
        self.due: list[tuple[int, int, Envelope]] = []  # (hop it is on the log, order, record)
        self.order = itertools.count()
        self.streams: dict[tuple[str, str], list[tuple[int, Envelope]]] = {}
        self.log: list[Envelope] = []

    def publish(self, envelopes: list[Envelope]) -> None:
        """On the log now."""
        for env in envelopes:
            heapq.heappush(self.due, (self.now, next(self.order), env))

    def _next(self) -> None:
        """Put the next record on the log (in time order); each stage's answers come one hop later."""
        at, _, env = heapq.heappop(self.due)
        self.log.append(env)
        self.streams.setdefault((env.topic, env.key), []).append((at, env))
        for proc, state in self.procs:
            if env.topic in proc.inputs:
                for out in step(proc, state, env):
                    heapq.heappush(self.due, (at + 1, next(self.order), out))

    def wait(self, topic: str, key: str, match: Callable[[Envelope], bool]) -> Envelope:
        """The first record on ``topic`` under ``key`` that ``match`` accepts; the clock moves to it."""
        while True:
            for at, env in self.streams.get((topic, key), ()):
                if match(env):
                    self.now = max(self.now, at)
                    return env
            if not self.due:
                raise LookupError(f"no such record on {topic} under {key}, and the stages are idle")
            self._next()

    def drain(self) -> None:
        """Put everything on the log (the clock stays: nothing waits for it)."""
        while self.due:
            self._next()

    def read(self, topic: str, key: str) -> list[Envelope]:
        """Not used by an event-driven session."""
        raise NotImplementedError


def _chains(records: list[Envelope]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for env in records:
        if env.topic == topics.TABLE_EVENTS:
            out.setdefault(env.key, []).append(env.hash)
    return out


def critical_path(tables: int, coups: int, seed: int) -> int:
    """Hops on the critical path of the seeded session (:class:`HopBus`), checked to write the table
    chains of the in-memory bus in lockstep."""
    bus = HopBus()
    Session(bus, seed=seed).run(demo_tables(tables), coups)
    mem = MemBus()
    Session(mem, seed=seed, lockstep=True).run(demo_tables(tables), coups)
    if _chains(bus.log) != _chains(mem.log):
        raise AssertionError("the hop model wrote other table chains than the in-memory bus")
    return bus.now
