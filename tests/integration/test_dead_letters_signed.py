"""Issue 28: every dead letter is covered by its writer's signed heads, not only those an alert names.
A dead letter is unchained, so each writer's next ``HeadsAttested`` names the hash of every dead letter
it wrote since its last one (``dead_letters``). A malformed record's dead letter (``undecodable``,
``invalid_payload``), which raises no alert, is then a signed fact: an attacker with write access and no
secret who deletes or changes one leaves a signed head naming a record the log does not hold
(``attested_head_missing``, or ``hash_mismatch`` where the changed record keeps its hash), and one who
copies one in again is a ``duplicate_event``. A dead letter of an outsider's own making, never signed, is
unattested noise: it changes no verdict.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.audit.replay.attested import writer_keys
from services.core import topics
from services.core.envelope import request
from services.runtime.compose import Composition
from services.runtime.embedded.bus import EmbeddedBus
from services.runtime.embedded.store import EmbeddedLog
from services.runtime.keyring import new_keyring
from services.runtime.replay import read_db, replay
from services.simulation.simulator import DEFAULT_TABLES, Session
from tests.integration.test_tamper_hypothesis import Rec, canonical, content_hash, rechain

AT = "2026-11-22T21:00:00.000Z"


class Malformed:
    """An authentic log in which a deposit written to the table inbox (``invalid_payload``) and bytes
    that are no record (``undecodable``) were dead-lettered, sealed; and the public keys."""

    def __init__(self, tmp: Path) -> None:
        ring = new_keyring()
        db = tmp / "log.db"
        bus = EmbeddedBus(db, Composition.demo(ring).pipeline(), event_driven=True)
        try:
            Session(bus, seed=5, keyring=ring).run(list(DEFAULT_TABLES[:1]), 2)
        finally:
            bus.close()
        stray = request(
            "Deposit", topics.WALLET_REQUESTS, "player:001",
            {"account_id": "player:001", "amount_minor": 100, "currency": "EUR"},
            event_id="33333333-3333-4333-8333-333333333333", occurred_at=AT, producer="cashier",
        )  # fmt: skip
        with EmbeddedLog(db) as log:  # an envelope on another topic than its own, and no record at all
            log.append_raw(topics.TABLE_INBOX, DEFAULT_TABLES[0].table_id, stray.to_json())
            log.append_raw(topics.WALLET_REQUESTS, "player:001", b"not json")
        bus = EmbeddedBus(db, Composition.demo(ring).pipeline(), event_driven=True)
        try:
            bus.drain()
        finally:
            bus.close()
        self.records: list[Rec] = [json.loads(raw) for raw in read_db(db) if raw != b"not json"]
        self.junk = [raw for raw in read_db(db) if raw == b"not json"]
        public = ring.public_document()
        self.keys, self.writers = public["ed25519"], writer_keys(public)

    def dead(self) -> list[int]:
        """Positions of the dead letters."""
        return [i for i, r in enumerate(self.records) if r["topic"] == topics.DEADLETTER]

    def verdict(self, recs: list[Rec] | list[bytes]) -> tuple[str, set[str], int]:
        """The regulator's verdict, the reasons of its findings, and how many records are unattested."""
        raws = [r if isinstance(r, bytes) else canonical(r) for r in recs]
        report = replay([*raws, *self.junk], keys=self.keys, writers=self.writers, ordered=True)
        reasons = {str(f.get("reason")) for f in report.to_dict().get("findings", [])}
        return report.verdict, reasons, report.attestation["unattested"]["count"]


@pytest.fixture(scope="module")
def malformed(tmp_path_factory: pytest.TempPathFactory) -> Malformed:
    return Malformed(tmp_path_factory.mktemp("malformed"))


def test_every_dead_letter_is_named_by_a_signed_head_and_the_log_is_clean(malformed: Malformed) -> None:
    """Dead letters of both reasons, none named by an alert, each named by a signed head; clean, and
    the only unattested records are the stray deposit and the junk line themselves."""
    dead = [malformed.records[i] for i in malformed.dead()]
    assert {r["payload"]["reason"] for r in dead} >= {"undecodable", "invalid_payload"}
    alerted = {r.get("causation_hash") for r in malformed.records if r["topic"] == topics.MONITOR_ALERTS}
    assert not alerted & {r["hash"] for r in dead}
    heads = [r["payload"] for r in malformed.records if r["topic"] == topics.ATTEST]
    named = {h for p in heads for h in p.get("dead_letters", [])}
    assert {r["hash"] for r in dead} <= named
    assert malformed.verdict(malformed.records) == ("clean", set(), 2)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_dead_letter_deleted_changed_or_copied_in_again_is_a_finding(
    malformed: Malformed, data: st.DataObject
) -> None:
    """Delete one dead letter, change its detail (its hash recomputed or left as it was), or copy it in
    again elsewhere: ``findings``, naming what was touched."""
    recs = malformed.records
    i = data.draw(st.sampled_from(malformed.dead()))
    kind = data.draw(st.sampled_from(["delete", "change", "change_rehashed", "copy"]))
    if kind == "delete":
        forged, want = recs[:i] + recs[i + 1 :], "attested_head_missing"
    elif kind == "copy":
        at = data.draw(st.integers(0, len(recs)))
        forged, want = [*recs[:at], recs[i], *recs[at:]], "duplicate_event"
    else:
        forged = copy.deepcopy(recs)
        forged[i]["payload"]["detail"] = data.draw(st.sampled_from(["nothing to see", "ok", ""]))
        if kind == "change_rehashed":
            forged, want = rechain(forged), "attested_head_missing"
        else:
            want = "hash_mismatch"
    verdict, reasons, _ = malformed.verdict(forged)
    assert verdict == "findings" and want in reasons, (kind, i, reasons)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_an_outsiders_dead_letter_never_changes_the_verdict(
    malformed: Malformed, data: st.DataObject
) -> None:
    """A dead letter an outsider writes (a copy of a real one under a new id, or one of its own), anywhere:
    unattested noise, the log still ``clean``."""
    recs = malformed.records
    noise = copy.deepcopy(recs[data.draw(st.sampled_from(malformed.dead()))])
    noise["event_id"] = "forged-dead-letter"
    reasons = ["undecodable", "invalid_payload", "unknown_type"]
    noise["payload"]["reason"] = data.draw(st.sampled_from(reasons))
    noise["hash"] = content_hash(noise)
    at = data.draw(st.integers(0, len(recs)))
    assert malformed.verdict([*recs[:at], noise, *recs[at:]]) == ("clean", set(), 3)
