"""Issue #8's attacks on a real broker, with dealer, settlement, audit and monitor as four worker
processes on a private keyring (production mode): each forgery is refused with its reason and an
alert, every balance ends exactly as in the embedded run without forgeries, and play goes on."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.core import topics
from services.core.envelope import Envelope, parse_record
from services.runtime.compose import Composition
from services.runtime.embedded.bus import EmbeddedBus
from services.runtime.kafka.bus import KafkaBus, Workers, quick_settings
from services.runtime.kafka.worker import ensure_topics
from services.runtime.keyring import Keyring, new_keyring, save_keyring
from services.runtime.settings import Settings
from tests.helpers import attacks

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def ring_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Keyring, Path]:
    """A private keyring, saved for the workers (``CASINO_KEYRING``)."""
    ring = new_keyring()
    return ring, save_keyring(ring, tmp_path_factory.mktemp("ring") / "keyring.json")


@pytest.fixture(scope="module")
def reference(ring_file: tuple[Keyring, Path], tmp_path_factory: pytest.TempPathFactory) -> list[Envelope]:
    """The scenario without forgeries on the embedded log, same keyring."""
    ring, _ = ring_file
    bus = EmbeddedBus(tmp_path_factory.mktemp("ref") / "log.db", Composition(ring).pipeline())
    try:
        attacks.play(bus, ring, [])
        return [parse_record(raw) for *_, raw in bus.log.iter_all()]
    finally:
        bus.close()


@pytest.fixture(scope="module")
def attacked(
    kafka_broker: str, ring_file: tuple[Keyring, Path], reference: list[Envelope],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[list[attacks.Attack], list[Envelope]]]:  # fmt: skip
    """The scenario with the forgeries, through the four workers (run once for the module)."""
    ring, path = ring_file
    base = Settings(bootstrap_servers=kafka_broker, topic_prefix=f"a{uuid.uuid4().hex[:10]}.", partitions=3,
                    keyring=path, demo_mode=False)  # fmt: skip
    settings = quick_settings(base, env={})
    asyncio.run(ensure_topics(settings, list(topics.ALL_TOPICS)))
    workers = Workers(settings, tmp_path_factory.mktemp("workers"))
    workers.start()
    made = attacks.attacks(ring, reference)
    try:
        with KafkaBus(settings, workers=workers) as bus:
            attacks.play(bus, ring, [a.record for a in made])
            records = bus.consume_all()
        yield made, records
    finally:
        status = workers.stop()
        bad = {name: code for name, code in status.items() if code != 0}
        assert not bad, "\n".join(f"{n} exited {c}:\n{workers.log(n)[-3000:]}" for n, c in bad.items())


def test_forgeries_are_refused_and_alerted_and_money_is_untouched_on_kafka(
    attacked: tuple[list[attacks.Attack], list[Envelope]], reference: list[Envelope]
) -> None:
    """Every forgery is dead-lettered with its reason and alerted once; every wallet ends at the embedded
    reference's balance to the minor unit; the squatted payout is applied to its real owner exactly once;
    the refused inbox seed and the coups after the attack play as in the reference."""
    made, records = attacked
    expected = {a.record.event_id: a.reason for a in made}
    assert attacks.refusals(records) == expected
    assert attacks.alerts(records) == expected
    assert attacks.balances(records) == attacks.balances(reference)
    per_payout = Counter(str(e.payload["payout_id"]) for e in records if e.type == "PayoutApplied")
    assert per_payout == Counter(str(e.payload["payout_id"]) for e in reference if e.type == "PayoutApplied")
    assert set(per_payout.values()) == {1}

    def coups(log: list[Envelope]) -> list[tuple[object, ...]]:  # bets reach the dealer in any order
        return [(p["coup_id"], p["outcome"], p["hands"], sorted(p["bet_ids"]))
                for p in (e.payload for e in log if e.type == "CoupResolved")]  # fmt: skip

    assert coups(records) == coups(reference) and len(coups(records)) == 4
    refused = [e.payload["reason"] for e in records if e.type == "CommandRefused"]
    assert refused == ["seed_not_allowed"]
