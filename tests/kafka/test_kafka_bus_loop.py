"""The Kafka bus's event loop runs in a thread of its own (:mod:`services.runtime.kafka.bus`): what it
publishes goes out at once, not at its next call, and its waiter reads the topics waited on all the
time, not only during a wait."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from services.core import topics
from services.runtime import intake
from services.runtime.kafka.bus import DrainTimeout, KafkaBus, quick_settings
from services.runtime.kafka.topic_io import aconsume_all
from services.runtime.kafka.worker import ensure_topics
from services.runtime.settings import Settings
from tests.helpers.bus_contract import account, deposit

pytestmark = pytest.mark.kafka

DEADLINE_S = 30.0
"""How long a check polls before it gives up: a bound on a hang, not a timing assertion."""


@pytest.fixture
def bus(kafka_broker: str) -> Iterator[KafkaBus]:
    """A bus on fresh topics, no worker: what it publishes stays as it is."""
    settings = quick_settings(
        Settings(bootstrap_servers=kafka_broker, topic_prefix=f"l{uuid.uuid4().hex[:10]}.", partitions=3),
        env={},
    )
    asyncio.run(ensure_topics(settings, list(topics.ALL_TOPICS)))
    with KafkaBus(settings, ()) as made:
        yield made


def _until(check: object) -> bool:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def test_a_publish_reaches_the_log_without_another_call_of_the_bus(bus: KafkaBus) -> None:
    """Before, the sends waited in the producer until the bus's next call ran its loop."""
    sent = deposit(account(), 1)
    bus.publish([sent])

    def on_the_log() -> bool:
        records = asyncio.run(aconsume_all(bus.settings, [topics.WALLET_REQUESTS]))
        return any(e.event_id == sent.event_id for e in records)

    assert _until(on_the_log)


def test_a_record_published_between_waits_is_read_before_it_is_waited_for(bus: KafkaBus) -> None:
    """Once a topic is waited on, the waiter keeps reading it: a later record is found by its wait from
    what was read already (before, each wait fetched it then)."""
    first, second = deposit(account(), 1), deposit(account(), 2)
    bus.publish([first])
    assert bus.wait(topics.WALLET_REQUESTS, first.key, lambda e: True).event_id == first.event_id
    bus.publish([second])
    assert _until(lambda: bool(bus._waited.get((topics.WALLET_REQUESTS, second.key))))
    found = bus.wait(topics.WALLET_REQUESTS, second.key, lambda e: True, timeout_s=0)
    assert found.event_id == second.event_id


def test_a_match_that_raises_fails_its_wait_and_not_the_waiter(bus: KafkaBus) -> None:
    """The error of a wait's match, met by the waiter's task, reaches that wait's caller; later waits
    are still answered (before, the task died and every later wait raised the same error)."""
    first, second, third = deposit(account(), 1), deposit(account(), 2), deposit(account(), 3)
    bus.publish([first])
    bus.wait(topics.WALLET_REQUESTS, first.key, lambda e: True)  # the waiter now reads the topic

    def broken(env: object) -> bool:
        raise ValueError("a broken match")

    with ThreadPoolExecutor(1) as pool:  # the wait is pending before its record comes
        waiting = pool.submit(bus.wait, topics.WALLET_REQUESTS, second.key, broken)
        assert _until(lambda: bool(bus._waiters.get((topics.WALLET_REQUESTS, second.key))))
        bus.publish([second])
        with pytest.raises(ValueError, match="a broken match"):
            waiting.result(timeout=DEADLINE_S)
    bus.publish([third])
    assert bus.wait(topics.WALLET_REQUESTS, third.key, lambda e: True).event_id == third.event_id


class _HeldProducer:
    """A producer whose sends are acknowledged only when the test says so (on the bus's loop)."""

    def __init__(self) -> None:
        self.sent: list[bytes | None] = []
        self.acks: list[asyncio.Future[None]] = []

    async def send(self, topic: str, value: bytes, key: bytes | None = None) -> asyncio.Future[None]:
        ack: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.sent.append(value)
        self.acks.append(ack)
        return ack


def _settle_loop(bus: KafkaBus) -> None:
    """Let the bus's loop run what is ready (a chained send, a done callback) before looking."""
    for _ in range(3):
        bus._run(asyncio.sleep(0))


def test_publish_waits_for_no_acknowledgement_and_sends_in_order(bus: KafkaBus) -> None:
    """``publish`` returns while earlier publishes are unacknowledged (it used to wait for the last
    one's acknowledgements: 1.6 ms a publish); a publish's records go out only once every earlier
    publish's are acknowledged; a failed send fails the publishes after it unsent and is raised by the
    bus's next call."""
    real, held = bus._producer, _HeldProducer()
    bus._producer = held
    try:
        a = account()
        first, second, third = deposit(a, 1), deposit(a, 2), deposit(a, 3)
        with ThreadPoolExecutor(1) as pool:  # the first is never acknowledged by itself: this used to hang
            pool.submit(lambda: [bus.publish([e]) for e in (first, second, third)]).result(DEADLINE_S)
        assert _until(lambda: len(held.sent) == 1)
        _settle_loop(bus)
        assert held.sent == [intake.encode(first)], "sent before the publish ahead was acknowledged"
        bus._loop.call_soon_threadsafe(held.acks[0].set_result, None)
        assert _until(lambda: len(held.sent) == 2)
        _settle_loop(bus)
        assert held.sent[1:] == [intake.encode(second)]
        bus._loop.call_soon_threadsafe(held.acks[1].set_exception, RuntimeError("broker gone"))
        assert _until(lambda: bus._send_failure is not None)
        _settle_loop(bus)
        assert len(held.sent) == 2, "the publish after a failed one was sent"
        with pytest.raises(RuntimeError, match="broker gone"):
            bus.publish([deposit(a, 4)])
        with pytest.raises(RuntimeError, match="broker gone"):
            bus.read(topics.WALLET_REQUESTS, a)
    finally:
        bus._producer = real


def test_a_wait_looks_at_each_record_read_already_once(bus: KafkaBus) -> None:
    """A wait matches every record read under its key once, not once on the caller's thread and again
    on the loop's: on the speed table every table event is waited for under one key."""
    key = account()
    sent = [deposit(key, n) for n in range(1, 6)]
    bus.publish(sent)
    bus.wait(topics.WALLET_REQUESTS, key, lambda e: e.event_id == sent[-1].event_id)
    looked: list[str] = []

    def never(env: object) -> bool:
        looked.append(getattr(env, "event_id", ""))
        return False

    with pytest.raises(DrainTimeout):
        bus.wait(topics.WALLET_REQUESTS, key, never, timeout_s=0.2)
    assert sorted(looked) == sorted(e.event_id for e in sent)
