"""Issue 28: the dead letters a regulator is told about are covered by signatures. A record refused at the
input is dead-lettered, and the monitor's ``refused_record`` alert names that dead letter as its cause
(``causation_hash``); the alert is a chained, signed fact (the monitor's signed heads, audit's tree head).
So an attacker with write access and no secret who deletes the dead letter leaves a signed fact whose
cause is gone (``cause_missing``); deleting the alert too, re-chained, breaks the monitor's signed chain.
Either way the verdict is no longer ``clean``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.audit.replay.attested import writer_keys
from services.core import topics
from services.core.envelope import request
from services.runtime.compose import Composition
from services.runtime.embedded.bus import EmbeddedBus
from services.runtime.keyring import new_keyring
from services.runtime.replay import read_db, replay
from services.simulation.simulator import DEFAULT_TABLES, Session
from tests.integration.test_tamper_hypothesis import Rec, canonical, rechain


class Refused:
    """An authentic log in which an outsider's deposit (no key) was refused, and the public keys."""

    def __init__(self, tmp: Path) -> None:
        ring = new_keyring()
        bus = EmbeddedBus(tmp / "log.db", Composition.demo(ring).pipeline(), event_driven=True)
        try:
            Session(bus, seed=5, keyring=ring).run(list(DEFAULT_TABLES[:1]), 2)
            forged = request(
                "Deposit", topics.WALLET_REQUESTS, "player:001",
                {"account_id": "player:001", "amount_minor": 100_000_000, "currency": "EUR"},
                event_id="22222222-2222-4222-8222-222222222222", occurred_at="2026-11-22T21:00:00.000Z",
                producer="cashier",
            )  # fmt: skip
            bus.publish([forged])
            bus.drain()
        finally:
            bus.close()
        self.records: list[Rec] = [json.loads(raw) for raw in read_db(tmp / "log.db")]
        public = ring.public_document()
        self.keys, self.writers = public["ed25519"], writer_keys(public)

    def verdict(self, recs: list[Rec]) -> tuple[str, set[str]]:
        report = replay([canonical(r) for r in recs], keys=self.keys, writers=self.writers, ordered=True)
        return report.verdict, {str(f.get("reason")) for f in report.to_dict().get("findings", [])}


@pytest.fixture(scope="module")
def refused(tmp_path_factory: pytest.TempPathFactory) -> Refused:
    return Refused(tmp_path_factory.mktemp("refused"))


def test_the_refusal_is_dead_lettered_and_alerted_and_the_log_is_clean(refused: Refused) -> None:
    """The outsider's deposit is a dead letter, the monitor's alert names it as its cause, and the
    authentic log with both replays clean."""
    dead = [r for r in refused.records if r["topic"] == topics.DEADLETTER]
    alerts = [r for r in refused.records if r["topic"] == topics.MONITOR_ALERTS]
    assert any(r["payload"]["original_event_id"] == "22222222-2222-4222-8222-222222222222" for r in dead)
    assert {r["hash"] for r in dead} & {a["causation_hash"] for a in alerts}
    assert refused.verdict(refused.records) == ("clean", set())


def test_a_deleted_dead_letter_is_a_finding(refused: Refused) -> None:
    """The dead letter an alert names, deleted: ``cause_missing``."""
    causes = {a["causation_hash"] for a in refused.records if a["topic"] == topics.MONITOR_ALERTS}
    cut = [r for r in refused.records if not (r["topic"] == topics.DEADLETTER and r["hash"] in causes)]
    assert len(cut) < len(refused.records)
    verdict, reasons = refused.verdict(cut)
    assert verdict == "findings" and "cause_missing" in reasons


def test_a_deleted_dead_letter_and_its_alert_rechained_is_a_finding(refused: Refused) -> None:
    """The dead letter and the alert naming it deleted, every chain re-linked and re-hashed with no
    secret: the monitor's signed heads no longer reach their records."""
    causes = {a["causation_hash"] for a in refused.records if a["topic"] == topics.MONITOR_ALERTS}
    cut = [
        r for r in refused.records
        if not (r["topic"] == topics.DEADLETTER and r["hash"] in causes)
        and not (r["topic"] == topics.MONITOR_ALERTS and r["causation_hash"] in causes)
    ]  # fmt: skip
    verdict, reasons = refused.verdict(rechain(cut))
    assert verdict != "clean", reasons
    assert verdict == "findings", reasons
