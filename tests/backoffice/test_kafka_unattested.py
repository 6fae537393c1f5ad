"""Issue 28 on Kafka: an outsider with no key who can produce to the topics appends forged money straight
to ``casino.wallet.events`` — a 1,000,000.00 deposit for a new account, a deposit and a withdrawal
chained onto a real player's wallet chain (seq and ``prev_hash`` continued, hashes recomputed) — and the
read model that ``project --kafka --follow`` keeps, and the API over it, show exactly the genuine
balances: only records a signed head of their writer covers move money. Deposits made through the API
after the forgeries are applied, and the forgeries, once a seal written after the follower read them
says they can never be attested, are passed over: no partition stays blocked.

The forger is :func:`tests.backoffice.test_unattested.forge` (the record format alone).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from services.core import topics
from services.integrations.backoffice import schema as s
from services.integrations.backoffice.schema import make_engine
from services.runtime.kafka.topic_io import aproduce_raw
from tests.backoffice.conftest import wait_until
from tests.backoffice.kafka_runtime import _PROJECTED, _projected, kafka_back_office, kafka_server
from tests.backoffice.test_unattested import MILLION, forge

pytestmark = pytest.mark.kafka

OUTSIDER = "player:999"


def _balances(read_url: str) -> dict[str, int]:
    engine = make_engine(read_url)
    try:
        with engine.connect() as c:
            return {str(r[0]): int(r[1]) for r in c.execute(select(s.accounts.c.account_id,
                                                                   s.accounts.c.balance_minor))}  # fmt: skip
    finally:
        engine.dispose()


def _produce(settings: Any, forged: list[dict[str, Any]]) -> None:
    body = [(r["topic"], r["key"].encode(), json.dumps(r, sort_keys=True, separators=(",", ":")).encode())
            for r in forged]  # fmt: skip
    asyncio.run(aproduce_raw(settings, body))


def test_an_outsiders_forged_money_on_kafka_moves_no_balance(kafka_broker: str, tmp_path: Path) -> None:
    """Forged deposits and a withdrawal produced to the topics: no balance moves in the read model nor
    in the API (the outsider's account is unknown), then a genuine deposit is applied on top of the
    genuine balance and every forgery has been read and passed over."""
    with kafka_back_office(kafka_broker, tmp_path) as bo:
        recs = bo.records()
        wallets = [r for r in recs if r["topic"] == topics.WALLET_EVENTS and r["key"].startswith("player:")]
        real = wallets[-1]["key"]
        before = _balances(bo.read_url)
        assert before[real] > 0 and OUTSIDER not in before
        forged = [
            forge(recs, "deposit", OUTSIDER, MILLION, 1, "none"),
            forge(recs, "deposit", real, MILLION, 2, "mallory"),
            forge(recs, "withdrawal", real, before[real], 3, "none"),
        ]
        _produce(bo.settings, forged)
        h = {"Authorization": f"Bearer {bo.keys['cashier']}"}
        with kafka_server(bo) as url:
            assert httpx.get(f"{url}/v1/accounts/{OUTSIDER}/balance", headers=h).status_code == 404
            body = {"account_id": real, "amount_minor": 4_200, "currency": "EUR"}
            r = httpx.post(f"{url}/v1/cashier/deposits", json=body, headers={**h, "Idempotency-Key": "after"},
                           timeout=60)  # fmt: skip
            assert r.status_code == 201, r.text

            def balance() -> Any:
                return httpx.get(f"{url}/v1/accounts/{real}/balance", headers=h, timeout=30).json()

            wait_until(lambda: balance().get("balance_minor") == before[real] + 4_200, 120)
            # a second deposit, made once the first is applied: its writer's seal is written after the
            # follower read the forgeries, so they can never be attested and are passed over
            r = httpx.post(f"{url}/v1/cashier/deposits", json=body, headers={**h, "Idempotency-Key": "later"},
                           timeout=60)  # fmt: skip
            assert r.status_code == 201, r.text
            wait_until(lambda: balance().get("balance_minor") == before[real] + 8_400, 120)
            wanted = len([r for r in bo.records() if r["topic"] in _PROJECTED])
            wait_until(lambda: _projected(bo.read_url) >= wanted, 60)
            assert httpx.get(f"{url}/v1/accounts/{OUTSIDER}/balance", headers=h).status_code == 404
        after = _balances(bo.read_url)
        moved = {a: after.get(a, 0) - before.get(a, 0) for a in set(before) | set(after)}
        assert {a: d for a, d in moved.items() if d} == {real: 8_400, "cage:EUR": -8_400}
