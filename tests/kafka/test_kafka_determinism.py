"""The same seeded session twice on Kafka (four worker processes each, fresh topics): the same records.

The simulator is event driven (``Session.event_driven``: each step waits for its own records with
``KafkaBus.wait``); audit and monitor catch up on their own. Every stream the dealer, settlement and
monitor write holds the same records in the same order run after run. Audit's checkpoints are compared
by count and rounds only: what one claims about the monitor's alerts is what audit had read of them
when the round completed, which on Kafka depends on how its input partitions interleave (the replay
checks each claim against the log).
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from pathlib import Path

import pytest

from services.core import topics
from services.core.envelope import Envelope
from services.runtime.kafka.bus import quick_settings, running
from services.runtime.replay import replay
from services.runtime.settings import Settings
from services.simulation.simulator import Session, demo_tables

pytestmark = pytest.mark.kafka

TABLES = 2
COUPS = 3


def play(broker: str, logs: Path) -> list[Envelope]:
    """The seeded session on fresh topics; every record afterwards."""
    prefix = f"d{uuid.uuid4().hex[:10]}."
    base = Settings(bootstrap_servers=broker, topic_prefix=prefix, partitions=3, demo_mode=True)
    with running(quick_settings(base, env={}), logs) as bus:
        Session(bus, seed=12).run(demo_tables(TABLES), COUPS)
        return bus.consume_all()


def streams(records: list[Envelope]) -> dict[tuple[str, str], list[str]]:
    """Each (topic, key) stream's record hashes in order, audit's findings stream and the writers'
    signed heads (they follow the batches, which on Kafka follow the fetches) left out. The deposits
    handed to the monitor's cage stage are compared as a set: the account stage writes them from every
    wallet-events partition onto the one cage key, so their order is how those partitions interleave."""
    out: dict[tuple[str, str], list[str]] = defaultdict(list)
    for env in records:
        if env.topic not in (topics.AUDIT_FINDINGS, topics.ATTEST):
            out[(env.topic, env.key)].append(env.hash)
    return {k: sorted(v) if k[0] == topics.CAGE else v for k, v in out.items()}


def test_the_same_session_gives_the_same_kafka_log(kafka_broker: str, tmp_path: Path) -> None:
    """Twice the same seeded session: the same streams, checkpoints and digest."""
    first, second = play(kafka_broker, tmp_path / "first"), play(kafka_broker, tmp_path / "second")
    assert streams(first) == streams(second)
    assert sum(e.type == "BetAccepted" for e in first) > TABLES * COUPS

    def checkpoints(run: list[Envelope]) -> list[tuple[str, int]]:
        return sorted((e.key, int(e.payload["rounds"])) for e in run if e.type == "AuditCheckpoint")

    assert checkpoints(first) == checkpoints(second) != []
    one, two = replay(first), replay(second)
    assert one.clean and two.clean
    assert one.digest == two.digest
