"""Where a record stands while the log grows (``Attested.standing``, the read model's gate): pending until
a signed head of its writer covers it (fact) or a seal leaves it out for good (never). A writer's own
``day_closed`` or ``shoe_closed`` seal speaks for that writer only; an ``idle`` seal, written when the
whole pipeline went idle with every writer's heads in the same transaction, for its principal's other
writers too."""

from __future__ import annotations

import json

from services.audit.replay.attested import Standing, Survey, writer_keys
from services.core import topics
from services.core.attest import AttestChain, Seal, attestation
from services.core.envelope import ChainHead
from services.core.trust import Principal
from services.runtime.keyring import demo_keyring

RING = demo_keyring()
KEYS = writer_keys(RING.public_document())
ALERT = "a" * 64
AT = "2026-11-22T20:00:00.000Z"


def chained(topic: str, key: str, seq: int, h: str) -> bytes:
    rec = {"event_id": f"{key}-{seq}", "hash": h, "key": key, "prev_hash": None, "seq": seq, "topic": topic,
           "type": "AnomalyDetected"}  # fmt: skip
    return json.dumps(rec, sort_keys=True, separators=(",", ":")).encode()


def signed(
    writer: str, principal: Principal, heads: dict[tuple[str, str], ChainHead], seal: Seal | None
) -> bytes:
    chain = AttestChain(writer)
    ((_, raw),) = attestation(chain, heads, RING.guard(principal), occurred_at=AT, seal=seal)
    return raw


def standing_after(*records: bytes) -> Standing:
    """The standing of the first record once ``records`` (the first one at position 1) were surveyed."""
    survey = Survey(KEYS)
    for n, raw in enumerate(records, start=1):
        survey.add(raw, n)
    first = json.loads(records[0])
    attested = survey.finish()
    return attested.standing(
        first["topic"], first["key"], first.get("seq"), first["hash"], first["event_id"], 1
    )


NEW_ALERT = chained(topics.MONITOR_ALERTS, "player:007", 0, ALERT)


def test_a_record_no_head_covers_is_pending() -> None:
    """Written, not yet attested: pending."""
    assert standing_after(NEW_ALERT) is Standing.PENDING


def test_the_head_of_its_writer_makes_it_a_fact() -> None:
    """A signed head naming it: a fact."""
    head = {(topics.MONITOR_ALERTS, "player:007"): ChainHead(0, ALERT)}
    assert (
        standing_after(NEW_ALERT, signed("monitor.accounts", Principal.MONITOR, head, None)) is Standing.FACT
    )


def test_another_writers_day_seal_leaves_a_new_chain_pending() -> None:
    """The table monitor's ``day_closed`` seal says nothing of what the account monitor wrote (it may
    flush later): a new alert chain stays pending, not never."""
    day = signed("monitor", Principal.MONITOR, {}, "day_closed")
    assert standing_after(NEW_ALERT, day) is Standing.PENDING


def test_an_idle_seal_after_it_leaves_it_out() -> None:
    """The pipeline went idle after it and no head covers it: never (outsider noise)."""
    assert standing_after(NEW_ALERT, signed("monitor", Principal.MONITOR, {}, "idle")) is Standing.NEVER


def test_a_chain_that_moved_past_it_under_signature_leaves_it_out() -> None:
    """Another record holds its place under a signed head: never."""
    head = {(topics.MONITOR_ALERTS, "player:007"): ChainHead(0, "b" * 64)}
    assert (
        standing_after(NEW_ALERT, signed("monitor.accounts", Principal.MONITOR, head, None)) is Standing.NEVER
    )


def test_a_head_signed_with_another_principals_key_covers_nothing() -> None:
    """Settlement's key cannot cover the monitor's stream."""
    head = {(topics.MONITOR_ALERTS, "player:007"): ChainHead(0, ALERT)}
    assert standing_after(NEW_ALERT, signed("settlement.wallet", Principal.SETTLEMENT, head, None)) is (
        Standing.PENDING
    )
    assert standing_after(NEW_ALERT, signed("settlement.wallet", Principal.SETTLEMENT, head, "idle")) is (
        Standing.PENDING
    )


REQUEST = (
    b'{"causation_hash":"' + b"c" * 64 + b'","event_id":"req-1","hash":"' + b"d" * 64
    + b'","key":"player:001","payload":{},"seq":null,"topic":"casino.wallet.requests","type":"PayoutIssued"}'
)  # fmt: skip


def test_a_request_nothing_consumed_is_pending_until_its_consumer_goes_idle() -> None:
    """A payout request no fact names: pending; once settlement's writer sealed idle after it (it read
    it and made nothing of it), never."""
    assert standing_after(REQUEST) is Standing.PENDING
    assert standing_after(REQUEST, signed("settlement.wallet", Principal.SETTLEMENT, {}, "idle")) is (
        Standing.NEVER
    )
    assert standing_after(REQUEST, signed("dealer", Principal.DEALER, {}, "idle")) is Standing.PENDING
