"""One contract for the simulator's buses (:class:`services.simulation.simulator.Bus`), asserted once here and
run against each bus by a subclass that gives the ``bus`` fixture: the in-memory bus
(``tests/unit/test_bus_contract.py``), the embedded bus (``tests/integration/test_bus_contract.py``) and
the Kafka bus (``tests/kafka/test_bus_contract.py``).

:class:`BusContract` is what every bus does; :class:`AdvanceContract` what a bus with ``advance()`` adds;
:class:`RawContract` what a bus that carries bytes does with bytes that are no envelope;
:class:`DurableContract` what a bus over a durable log does when it is opened again.
Every test uses accounts of its own, so that a bus may be shared by the tests of a class (Kafka).
"""

from __future__ import annotations

import uuid
from contextlib import AbstractContextManager
from typing import Any

from services.core import topics
from services.core.envelope import Envelope, name_id, request
from services.core.trust import Principal, authenticate
from services.runtime.keyring import demo_keyring

CASHIER = demo_keyring().key(Principal.CASHIER)


def account() -> str:
    """A fresh wallet account id."""
    return f"bus-{uuid.uuid4().hex[:12]}"


def deposit(account_id: str, n: int) -> Envelope:
    """The ``n``-th deposit (``n`` x 10.00) into ``account_id``, as the cashier: same ``n``, same record."""
    env = request(
        "Deposit", topics.WALLET_REQUESTS, account_id,
        {"account_id": account_id, "amount_minor": 1_000 * n, "currency": "EUR"},
        event_id=name_id("bus-contract", account_id, str(n)), occurred_at=f"2026-01-01T00:00:{n:02d}.000Z",
        producer=Principal.CASHIER.value,
    )  # fmt: skip
    return authenticate(env, CASHIER)


def ids(records: list[Envelope]) -> list[str]:
    """The records' event ids, in order."""
    return [e.event_id for e in records]


def causes(records: list[Envelope]) -> list[str | None]:
    """The event ids the records answer, in order."""
    return [e.causation_id for e in records]


class BusContract:
    """publish / drain / read / wait, as the simulator relies on them."""

    def test_read_returns_each_record_of_a_key_once_in_the_order_published(self, bus: Any) -> None:
        a, b = account(), account()
        bus.publish([deposit(a, 1), deposit(b, 1), deposit(a, 2)])
        bus.publish([deposit(b, 2), deposit(a, 3)])
        bus.drain()
        assert ids(bus.read(topics.WALLET_REQUESTS, a)) == ids([deposit(a, n) for n in (1, 2, 3)])
        assert ids(bus.read(topics.WALLET_REQUESTS, b)) == ids([deposit(b, n) for n in (1, 2)])
        assert bus.read(topics.WALLET_REQUESTS, a) == []
        bus.publish([deposit(a, 4)])
        bus.drain()
        assert ids(bus.read(topics.WALLET_REQUESTS, a)) == [deposit(a, 4).event_id]

    def test_drain_returns_once_the_processors_answered_every_request(self, bus: Any) -> None:
        a = account()
        bus.publish([deposit(a, 1), deposit(a, 2)])
        bus.drain()
        answers = bus.read(topics.WALLET_EVENTS, a)
        assert [e.type for e in answers] == ["FundsDeposited", "FundsDeposited"]
        assert causes(answers) == ids([deposit(a, 1), deposit(a, 2)])
        assert [e.payload["balance_after_minor"] for e in answers] == [1_000, 3_000]

    def test_a_request_published_twice_is_answered_once(self, bus: Any) -> None:
        a = account()
        bus.publish([deposit(a, 1)])
        bus.drain()
        bus.publish([deposit(a, 1)])
        bus.drain()
        assert causes(bus.read(topics.WALLET_EVENTS, a)) == [deposit(a, 1).event_id]

    def test_wait_returns_the_first_record_of_a_key_that_matches_once_written(self, bus: Any) -> None:
        a = account()
        bus.publish([deposit(a, 1), deposit(a, 2)])
        second = bus.wait(topics.WALLET_EVENTS, a, lambda e: e.causation_id == deposit(a, 2).event_id)
        assert (second.type, second.payload["balance_after_minor"]) == ("FundsDeposited", 3_000)
        first = bus.wait(topics.WALLET_EVENTS, a, lambda e: e.type == "FundsDeposited")
        assert first.causation_id == deposit(a, 1).event_id

    def test_wait_consumes_nothing_that_read_returns(self, bus: Any) -> None:
        a = account()
        bus.publish([deposit(a, 1)])
        answer = bus.wait(topics.WALLET_EVENTS, a, lambda e: e.type == "FundsDeposited")
        bus.drain()
        assert ids(bus.read(topics.WALLET_EVENTS, a)) == [answer.event_id]
        assert bus.wait(topics.WALLET_EVENTS, a, lambda e: e.type == "FundsDeposited") == answer


class AdvanceContract:
    """``advance(envelopes)``: publish, then let the stages a table waits for run (observers may lag)."""

    def test_advance_publishes_and_lets_the_wallet_stage_answer(self, bus: Any) -> None:
        a = account()
        bus.advance([deposit(a, 1)])
        assert causes(bus.read(topics.WALLET_EVENTS, a)) == [deposit(a, 1).event_id]
        bus.advance()
        bus.drain()
        assert bus.read(topics.WALLET_EVENTS, a) == []


class RawContract:
    """Bytes that are no envelope reach every consumer of their topic as one dead letter each."""

    def write_raw(self, bus: Any, topic: str, key: str, raw: bytes) -> None:
        """Append ``raw`` to ``topic`` under ``key`` as an outside writer would."""
        raise NotImplementedError

    def test_bytes_that_are_no_envelope_become_one_dead_letter_per_consumer(self, bus: Any) -> None:
        bus.read(topics.DEADLETTER, topics.WALLET_REQUESTS)  # what earlier tests left
        junk = f"not an envelope {uuid.uuid4().hex}"
        a = account()
        self.write_raw(bus, topics.WALLET_REQUESTS, a, junk.encode())
        bus.publish([deposit(a, 1)])
        bus.drain()
        dead = bus.read(topics.DEADLETTER, topics.WALLET_REQUESTS)
        assert {d.payload["original"] for d in dead} == {junk}
        assert {d.payload["reason"] for d in dead} == {"undecodable"}
        producers = [d.producer for d in dead]
        assert "settlement" in producers and len(set(producers)) == len(producers)
        assert causes(bus.read(topics.WALLET_EVENTS, a)) == [deposit(a, 1).event_id]  # play goes on


class DurableContract:
    """A bus opened again on the same log resumes every consumer where it stopped."""

    def reopened(self, bus: Any) -> AbstractContextManager[Any]:
        """A new bus on ``bus``'s log (``bus`` is not used after)."""
        raise NotImplementedError

    def test_a_reopened_bus_answers_every_request_exactly_once(self, bus: Any) -> None:
        a = account()
        bus.publish([deposit(a, 1)])
        bus.drain()
        with self.reopened(bus) as again:
            again.publish([deposit(a, 2)])
            again.drain()
            answers = again.read(topics.WALLET_EVENTS, a)
        assert causes(answers) == ids([deposit(a, 1), deposit(a, 2)])
        assert [e.payload["balance_after_minor"] for e in answers] == [1_000, 3_000]
