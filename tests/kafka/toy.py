"""A toy processor for the Kafka runtime tests: a running total of deposits per account, with milestones.

Its outputs depend on the whole per-key history (the total), so a state rebuilt wrongly after a restart
shows up as different bytes; it sometimes writes two outputs for one input, and refuses what it does
not know with a ``DomainError`` (dead-lettered by ``step``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from services.core import topics
from services.core.envelope import Draft, Envelope, request
from services.core.errors import DomainError, Reason
from services.core.processor import Processor

Totals = Mapping[str, int]


class Toy(Processor[Totals]):
    """``Deposit`` on wallet requests → ``Added {n, total}`` (+ ``Milestone`` per ten) on wallet events."""

    name: ClassVar[str] = "toy"
    inputs: ClassVar[tuple[str, ...]] = (topics.WALLET_REQUESTS,)
    outputs: ClassVar[tuple[str, ...]] = (topics.WALLET_EVENTS,)

    def initial(self) -> Totals:
        """No key has a total yet."""
        return {}

    def handle(self, state: Totals, record: Envelope) -> tuple[Totals, list[Draft]]:
        """Add ``n`` to the key's total; a milestone each time the total passes a multiple of ten."""
        if record.type != "Deposit":
            raise DomainError(Reason.UNKNOWN_TYPE, f"toy does not handle {record.type!r}")
        n = record.payload["amount_minor"]
        before = state.get(record.key, 0)
        total = before + n
        drafts = [Draft("Added", topics.WALLET_EVENTS, record.key, {"n": n, "total": total})]
        if total // 10 > before // 10:
            drafts.append(Draft("Milestone", topics.WALLET_EVENTS, record.key, {"tens": total // 10}))
        return {**state, record.key: total}, drafts


def make_toy() -> Toy:
    """The factory the worker's ``--factory tests.kafka.toy:make_toy`` hook calls."""
    return Toy()


def add(key: str, i: int, n: int, type_: str = "Deposit") -> Envelope:
    """The ``i``-th request of the test: a deposit of ``n`` into account ``key``."""
    return request(
        type_,
        topics.WALLET_REQUESTS,
        key,
        {"account_id": key, "amount_minor": n, "currency": "EUR"},
        event_id=f"req-{key}-{i}",
        occurred_at=f"2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}.000Z",
        producer="test",
    )
