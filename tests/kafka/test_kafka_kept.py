"""Kept entries on Kafka (issue #31, docs/adr/0010-kafka-kept-entries.md): the wallet stage's transfer
ids live in the settlement worker's local store and, one record each, in its changelog, not in its
snapshots; a worker on another machine (an empty data directory) and a worker whose store is behind the
changelog (another machine applied records meanwhile) both still know every transfer id applied."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from services.core import topics
from services.core.boundary import own_namespace
from services.core.envelope import Envelope, request
from services.core.trust import Principal, authenticate
from services.runtime.kafka.bus import Workers, quick_settings
from services.runtime.kafka.topic_io import aconsume_raw, aproduce
from services.runtime.kafka.worker import ensure_topics
from services.runtime.keyring import demo_keyring
from services.runtime.settings import Settings

pytestmark = pytest.mark.kafka

WAIT_S = 120.0
"""Upper bound on any wait for the worker (a safety net against a hang, not a timing assertion)."""
ACCOUNT = "player:001"


def deposit(n: int, transfer: str, amount: int) -> Envelope:
    """Cashier deposit ``n`` into :data:`ACCOUNT` under transfer id ``transfer``."""
    env = request(
        "Deposit", topics.WALLET_REQUESTS, ACCOUNT,
        {"account_id": ACCOUNT, "amount_minor": amount, "currency": "EUR",
         "transfer_id": f"{own_namespace(Principal.CASHIER.value)}{transfer}"},
        event_id=f"kept-{n}", occurred_at=f"2030-01-01T00:00:{n:02d}.000Z", producer=Principal.CASHIER.value,
    )  # fmt: skip
    return authenticate(env, demo_keyring().key(Principal.CASHIER))


async def answers(settings: Settings, count: int) -> list[dict[str, Any]]:
    """Settlement's answers to the test's deposits, once there are ``count`` (in offset order)."""
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while True:
        raw = await aconsume_raw(settings, [topics.WALLET_EVENTS])
        found = [json.loads(r.value or b"") for r in sorted(raw, key=lambda r: (r.partition, r.offset))]
        found = [f for f in found if str(f.get("causation_id", "")).startswith("kept-")]
        if len(found) >= count:
            return found
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"timed out waiting for {count} answers: {found}")
        await asyncio.sleep(0.3)


def run(workers: Workers, settings: Settings, records: list[Envelope], count: int) -> list[dict[str, Any]]:
    """Send ``records``, run settlement on ``workers``' data directory until ``count`` answers, stop it."""
    asyncio.run(aproduce(settings, records))
    workers.start()
    try:
        return asyncio.run(answers(settings, count))
    finally:
        assert workers.stop() == {"settlement": 0}, workers.log("settlement")[-3000:]


def test_transfer_ids_survive_a_restart_on_another_machine_and_on_a_store_behind(
    kafka_broker: str, tmp_path: Path
) -> None:
    settings = quick_settings(
        Settings(bootstrap_servers=kafka_broker, topic_prefix=f"k{uuid.uuid4().hex[:10]}.", partitions=2,
                 demo_mode=True, log_level="INFO"),
        env={},
    )  # fmt: skip
    asyncio.run(ensure_topics(settings, list(topics.ALL_TOPICS)))
    here = Workers(settings, tmp_path / "here", services=("settlement",))
    there = Workers(settings, tmp_path / "there", services=("settlement",))
    run(here, settings, [deposit(0, "t0", 100), deposit(1, "t1", 200)], 2)
    run(there, settings, [deposit(2, "t0", 150), deposit(3, "t3", 300)], 4)  # an empty data directory
    found = run(here, settings, [deposit(4, "t3", 350), deposit(5, "t1", 250), deposit(6, "t4", 400)], 7)

    assert [(f["causation_id"], f["type"]) for f in found] == [
        ("kept-0", "FundsDeposited"), ("kept-1", "FundsDeposited"),
        ("kept-2", "TransferRefused"), ("kept-3", "FundsDeposited"),
        ("kept-4", "TransferRefused"), ("kept-5", "TransferRefused"), ("kept-6", "FundsDeposited"),
    ]  # fmt: skip
    assert {f["payload"]["reason"] for f in found if f["type"] == "TransferRefused"} == {
        "transfer_id_conflict"
    }
    assert [f["payload"]["balance_after_minor"] for f in found if f["type"] == "FundsDeposited"] == [
        100, 300, 600, 1000,
    ]  # fmt: skip
    for workers in (there, here):  # each took the wallet stage's state from the changelog at least once
        assert '"source": "changelog", "stage": "settlement.wallet"' in workers.log("settlement")
