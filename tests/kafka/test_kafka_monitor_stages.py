"""The monitor's casework and cage stages on a real broker (issue #29): settlement's and the monitor's
workers as processes on three partitions.

* An analyst's ``WorkAlert`` on ``casino.monitor.casework`` is answered by the monitor's casework stage
  with a chained ``AlertCaseChanged`` naming it; a step the case does not allow is answered ``refused``;
  a request signed by anyone but the back office gets no answer (a dead letter).
* Deposits of eight accounts, each just under the reporting threshold twice, land on three partitions of
  the wallet events (keyed by account); the account stage hands each to the cage stage under the one cage
  key, which raises ``cage_structuring`` naming the accounts.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.core import topics
from services.core.envelope import Envelope, request
from services.core.trust import Principal, authenticate
from services.monitor.accounts import CAGE
from services.runtime.kafka.bus import KafkaBus, Workers, quick_settings
from services.runtime.kafka.worker import ensure_topics
from services.runtime.keyring import demo_keyring
from services.runtime.settings import Settings

pytestmark = pytest.mark.kafka

SERVICES = ("settlement", "monitor")
RING = demo_keyring()


@pytest.fixture
def bus(kafka_broker: str, tmp_path: Path) -> Iterator[KafkaBus]:
    """Settlement and the monitor as worker processes on fresh topics, and a bus over them."""
    settings = quick_settings(
        Settings(bootstrap_servers=kafka_broker, topic_prefix=f"m{uuid.uuid4().hex[:10]}.", partitions=3,
                 demo_mode=True, log_level="INFO"),
        env={},
    )  # fmt: skip
    asyncio.run(ensure_topics(settings, list(topics.ALL_TOPICS)))
    workers = Workers(settings, tmp_path / "workers", services=SERVICES)
    workers.start()
    try:
        with KafkaBus(settings, SERVICES, workers=workers) as made:
            yield made
    finally:
        status = workers.stop()
        bad = {name: code for name, code in status.items() if code != 0}
        assert not bad, "\n".join(f"{n} exited {c}:\n{workers.log(n)[-3000:]}" for n, c in bad.items())


def signed(type_: str, topic: str, key: str, payload: dict[str, Any], n: int, as_: Principal) -> Envelope:
    env = request(type_, topic, key, payload, event_id=f"req-{uuid.uuid4().hex[:8]}-{n}",
                  occurred_at=f"2026-11-28T21:00:{n % 60:02d}.000Z", producer=as_.value)  # fmt: skip
    return authenticate(env, RING.key(as_))


def work(alert_id: str, action: str, n: int, as_: Principal = Principal.BACKOFFICE, **more: str) -> Envelope:
    payload = {"alert_id": alert_id, "action": action, "by": "analyst-1", **more}
    return signed("WorkAlert", topics.CASEWORK, alert_id, payload, n, as_)


def answer(bus: KafkaBus, asked: Envelope) -> Envelope:
    """The casework stage's answer to ``asked`` (the fact naming it as its cause)."""

    def names(e: Envelope) -> bool:
        return e.type == "AlertCaseChanged" and e.causation_hash == asked.hash

    return bus.wait(topics.MONITOR_ALERTS, asked.key, names, 60)


def test_casework_steps_are_answered_by_the_monitor_worker(bus: KafkaBus) -> None:
    """acknowledge → answered ``acknowledged``; acknowledge again → ``refused``; a close signed by a
    terminal → no answer; close with a note → ``closed``: three chained facts, in the order asked."""
    alert_id = f"alert-{uuid.uuid4().hex[:8]}"
    first = work(alert_id, "acknowledge", 1)
    bus.publish([first])
    got = answer(bus, first)
    assert got.payload["status_before"] == "open" and got.payload["status"] == "acknowledged"
    assert got.key == alert_id and got.producer == "monitor" and got.seq is not None
    again = work(alert_id, "acknowledge", 2)
    forged = work(alert_id, "close", 3, Principal.TERMINAL, note="forged")
    close = work(alert_id, "close", 4, note="a regular: cleared")
    bus.publish([again, forged, close])
    refused, closed = answer(bus, again), answer(bus, close)
    assert refused.payload["refused"] == "step_not_allowed" and refused.payload["status"] == "acknowledged"
    assert closed.payload["status_before"] == "acknowledged" and closed.payload["status"] == "closed"
    assert closed.payload["note"] == "a regular: cleared"
    facts = [e for e in bus.consume_all() if e.type == "AlertCaseChanged" and e.key == alert_id]
    assert [e.causation_hash for e in facts] == [first.hash, again.hash, close.hash]
    assert [e.seq for e in facts] == sorted(e.seq for e in facts if e.seq is not None)


def test_structuring_across_accounts_on_three_partitions_is_one_cage_alert(bus: KafkaBus) -> None:
    """Sixteen deposits of 9,800 by eight accounts (two each: the per-account rule stays silent) among
    round ones, on three partitions: one ``cage_structuring`` alert under the cage key, naming smurfs
    only (in whatever order the partitions were read, every deposit in the band is theirs)."""
    run = uuid.uuid4().hex[:6]
    smurfs = [f"acc:smurf-{run}-{i}" for i in range(8)]
    records = []
    for r in range(2):
        for i, account in enumerate(smurfs):
            honest = f"acc:regular-{run}-{r}-{i}"
            for who, amount in ((account, 980_000), (honest, 200_000)):
                payload = {"account_id": who, "amount_minor": amount, "currency": "EUR"}
                records.append(signed("Deposit", topics.WALLET_REQUESTS, who, payload, len(records),
                                      Principal.CASHIER))  # fmt: skip
    bus.publish(records)
    found = bus.wait(topics.MONITOR_ALERTS, CAGE,
                     lambda e: e.type == "AnomalyDetected" and e.payload["detector"] == "cage_structuring",
                     90)  # fmt: skip
    named = set(found.payload["account_ids"])
    assert named <= set(smurfs) and len(named) >= 3
    assert found.producer == "monitor" and found.payload["severity"] == "warning"
    handed = [e for e in bus.consume_all() if e.topic == topics.CAGE]
    assert {e.key for e in handed} == {CAGE} and len(handed) >= 16
