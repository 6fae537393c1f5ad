"""The Tansu broker fixture: a real Kafka-protocol broker (memory storage) on a free loopback port."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.broker import tansu


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``127.0.0.1:PORT`` of a Tansu broker started for the test session (stopped at its end)."""
    with tansu(Path(tmp_path_factory.mktemp("tansu")) / "tansu.log") as bootstrap:
        yield bootstrap
