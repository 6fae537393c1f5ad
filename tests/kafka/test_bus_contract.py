"""The bus contract (:mod:`tests.helpers.bus_contract`) on the Kafka bus: one settlement worker process on
Tansu, shared by the tests of the class (each uses accounts of its own)."""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from services.core import topics
from services.runtime.kafka.bus import KafkaBus, Workers, quick_settings
from services.runtime.kafka.worker import ensure_topics
from services.runtime.settings import Settings
from tests.helpers.bus_contract import AdvanceContract, BusContract, DurableContract, RawContract

pytestmark = pytest.mark.kafka

SERVICES = ("settlement",)
"""The wallet requests' stage is all the contract needs: one worker process instead of four."""


@pytest.fixture(scope="module")
def workers(kafka_broker: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workers]:
    """The settlement worker on fresh topics, for the module."""
    settings = quick_settings(
        Settings(bootstrap_servers=kafka_broker, topic_prefix=f"b{uuid.uuid4().hex[:10]}.", partitions=3,
                 demo_mode=True),
        env={},
    )  # fmt: skip
    asyncio.run(ensure_topics(settings, list(topics.ALL_TOPICS)))
    workers = Workers(settings, tmp_path_factory.mktemp("bus-workers"), services=SERVICES)
    workers.start()
    try:
        yield workers
    finally:
        status = workers.stop()
        assert status == {"settlement": 0}, workers.log("settlement")[-3000:]


@pytest.fixture(scope="module")
def shared_bus(workers: Workers) -> Iterator[KafkaBus]:
    """One bus over the worker, for the module."""
    with KafkaBus(workers.settings, SERVICES, workers=workers) as bus:
        yield bus


class TestKafkaBus(BusContract, AdvanceContract, RawContract, DurableContract):
    @pytest.fixture
    def bus(self, shared_bus: KafkaBus) -> KafkaBus:
        return shared_bus

    def write_raw(self, bus: KafkaBus, topic: str, key: str, raw: bytes) -> None:
        bus.publish_raw([(topic, key.encode(), raw)])

    @contextmanager
    def reopened(self, bus: KafkaBus) -> Iterator[KafkaBus]:
        # the worker stops (SIGKILL: no goodbye commit) and starts again from its group's committed
        # offsets; the second bus reads the topics from the start
        assert bus.workers is not None
        assert bus.workers.kill("settlement") == -signal.SIGKILL
        bus.workers.start()
        with KafkaBus(bus.settings, SERVICES, workers=bus.workers) as again:
            yield again
