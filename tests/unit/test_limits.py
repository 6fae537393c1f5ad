"""Nothing is unbounded (issue #8, docs/trust.md): amount ceilings in settlement and the dealer, and the
sizes of records, strings and collections in the event contract."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from services.core import topics
from services.core.contract import (
    BETS_MAX,
    ITEMS_MAX,
    JSON_MAX_CHARS,
    JSON_MAX_DEPTH,
    JSON_MAX_NODES,
    validate_payload,
)
from services.core.envelope import ENVELOPE_MAX_CHARS, RECORD_MAX_BYTES, name_id, parse_record, request
from services.core.limits import AMOUNT_MAX_MINOR, BALANCE_MAX_MINOR
from services.core.processor import ORIGINAL_MAX_CHARS, dead_letter, initial_state, step
from services.dealer.processor import Dealer
from services.runtime.settings import Settings
from services.settlement.wallet_stage import WalletStage

AT = "2026-11-22T20:00:00.000Z"


def wallet_request(type_: str, n: int, payload: dict[str, Any], account: str = "player:001") -> Any:
    """A wallet request for ``account``."""
    body = {"account_id": account, "currency": "EUR", **payload}
    event_id = name_id("limits", type_, str(n))
    topic = topics.WALLET_REQUESTS
    return request(type_, topic, account, body, event_id=event_id, occurred_at=AT, producer="cashier")


@pytest.mark.parametrize(
    ("type_", "field", "extra"),
    [
        ("Deposit", "amount_minor", {}),
        ("Withdraw", "amount_minor", {}),
        ("PlaceBet", "stake_minor", {"bet_id": "b-1", "table_id": "T1", "spot": "banker"}),
    ],
)
def test_an_amount_over_the_ceiling_is_refused_and_moves_nothing(
    type_: str, field: str, extra: dict[str, Any]
) -> None:
    """A stake, deposit or withdrawal one minor unit over the ceiling is refused with ``amount_too_large``
    and the balance stays; exactly at the ceiling it goes through (funded first where it must be)."""
    ceiling = 1_000_000
    stage = WalletStage(amount_max_minor=ceiling)
    state = initial_state(stage)
    step(stage, state, wallet_request("Deposit", 0, {"amount_minor": ceiling}))
    before = dict(state.inner.balances)
    out = step(stage, state, wallet_request(type_, 1, {field: ceiling + 1, **extra}))
    assert [e.payload["reason"] for e in out] == ["amount_too_large"]
    assert dict(state.inner.balances) == before
    out = step(stage, state, wallet_request(type_, 2, {field: ceiling, **extra}))
    assert out and "reason" not in out[0].payload
    assert dict(state.inner.balances) != before


def test_a_deposit_past_the_largest_balance_is_refused() -> None:
    """Deposits that would take a wallet past 2**53 - 1 are refused: JSON readers keep balances exact."""
    stage = WalletStage(amount_max_minor=BALANCE_MAX_MINOR)
    state = initial_state(stage)
    step(stage, state, wallet_request("Deposit", 0, {"amount_minor": BALANCE_MAX_MINOR - 5}))
    out = step(stage, state, wallet_request("Deposit", 1, {"amount_minor": 6}))
    assert [(e.type, e.payload["reason"]) for e in out] == [("TransferRefused", "amount_too_large")]
    assert state.inner.balances["player:001"] == BALANCE_MAX_MINOR - 5
    step(stage, state, wallet_request("Deposit", 2, {"amount_minor": 5}))
    assert state.inner.balances["player:001"] == BALANCE_MAX_MINOR


def _table_commands(dealer: Dealer) -> Any:
    state = initial_state(dealer)
    for n, (type_, payload) in enumerate([
        ("OpenTable", {"variant": "punto_banco", "currency": "EUR"}),
        ("OpenShoe", {"shoe_id": "S1", "mode": "rng", "seed_hex": "ab" * 32}),
        ("OpenBetting", {}),
    ]):  # fmt: skip
        body = {"table_id": "T1", **payload}
        event_id = name_id("limits", "t", str(n))
        step(dealer, state, request(type_, topics.TABLE_INBOX, "T1", body, event_id=event_id, occurred_at=AT,
                                    producer="operator"))  # fmt: skip
    return state


@pytest.mark.parametrize(("stake", "accepted"), [(5_000, True), (5_001, False)])
def test_the_dealer_refuses_a_stake_over_its_ceiling(stake: int, accepted: bool) -> None:
    """A ``BetPlaced`` above the dealer's ceiling (a table with no limit on the spot) is refused with
    ``amount_too_large`` — settlement then refunds it; at the ceiling it is accepted."""
    dealer = Dealer(amount_max_minor=5_000, allow_seed_hex=True)
    state = _table_commands(dealer)
    bet = request("BetPlaced", topics.TABLE_INBOX, "T1", {
        "bet_id": "b-1", "account_id": "player:001", "table_id": "T1", "spot": "banker",
        "stake_minor": stake, "currency": "EUR",
    }, event_id=name_id("limits", "bet", str(stake)), occurred_at=AT, producer="settlement")  # fmt: skip
    out = step(dealer, state, bet)
    assert [e.type for e in out] == (["BetAccepted"] if accepted else ["BetRefused"])
    if not accepted:
        assert out[0].payload["reason"] == "amount_too_large"


@pytest.mark.parametrize("bad", [0, -1, BALANCE_MAX_MINOR + 1])
def test_the_ceiling_setting_is_validated(bad: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``CASINO_AMOUNT_MAX_MINOR`` is 1 to 2**53 - 1 (default one billion in major units); the processors
    refuse a ceiling outside that range too."""
    assert Settings().amount_max_minor == AMOUNT_MAX_MINOR
    monkeypatch.setenv("CASINO_AMOUNT_MAX_MINOR", "12345")
    assert Settings().amount_max_minor == 12345
    monkeypatch.setenv("CASINO_AMOUNT_MAX_MINOR", str(bad))
    with pytest.raises(ValidationError):
        Settings()
    with pytest.raises(ValueError, match="amount_max_minor"):
        WalletStage(amount_max_minor=bad)
    with pytest.raises(ValueError, match="amount_max_minor"):
        Dealer(amount_max_minor=bad)


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = {"k": value}
    return value


OPEN_TABLE = {"table_id": "T1", "variant": "punto_banco", "currency": "EUR"}


@pytest.mark.parametrize(
    ("payload", "needle"),
    [
        ({**OPEN_TABLE, "options": {"deep": _nested(JSON_MAX_DEPTH)}}, "nests at most"),
        ({**OPEN_TABLE, "options": {"deep": _nested(50_000)}}, "nests at most"),
        ({**OPEN_TABLE, "options": {"many": list(range(JSON_MAX_NODES))}}, "at most"),
        ({**OPEN_TABLE, "options": {"long": "x" * (JSON_MAX_CHARS + 1)}}, "characters"),
        ({**OPEN_TABLE, "options": {"k" * (JSON_MAX_CHARS + 1): 1}}, "characters"),
        ({**OPEN_TABLE, "options": {f"o{i}": i for i in range(ITEMS_MAX + 1)}}, "options"),
        (
            {
                **OPEN_TABLE,
                "limits": {f"s{i}": {"min_minor": 1, "max_minor": 2} for i in range(ITEMS_MAX + 1)},
            },
            "limits",
        ),
        ({**OPEN_TABLE, "table_id": "T" * 257}, "table_id"),
        ({**OPEN_TABLE, "operator": "o" * 257}, "operator"),
    ],
    ids=[
        "deep",
        "very-deep",
        "many-nodes",
        "long-string",
        "long-key",
        "many-options",
        "many-limits",
        "long-table-id",
        "long-operator",
    ],
)
def test_oversized_payloads_are_refused_with_a_clear_error(payload: dict[str, Any], needle: str) -> None:
    """Free-form options nested, numerous or long beyond the limits, too many limits, overlong ids: a
    validation error that says which bound was crossed (the record then becomes a dead letter)."""
    with pytest.raises(ValidationError) as caught:
        validate_payload("OpenTable", payload)
    assert needle in str(caught.value)


def test_payloads_at_the_limits_are_accepted() -> None:
    """Exactly at each bound the payload is valid: the limits refuse only what crosses them."""
    payload = {**OPEN_TABLE, "table_id": "T" * 256,
               "options": {"deep": _nested(JSON_MAX_DEPTH - 2), "s": "x" * JSON_MAX_CHARS}}  # fmt: skip
    assert validate_payload("OpenTable", payload)
    ids = [f"b{i}" for i in range(BETS_MAX)]
    assert validate_payload("BettingClosed", {"table_id": "T1", "coup_id": "c", "bet_ids": ids})
    with pytest.raises(ValidationError, match="bet_ids"):
        validate_payload("BettingClosed", {"table_id": "T1", "coup_id": "c", "bet_ids": [*ids, "one-more"]})


def test_records_and_envelope_fields_are_bounded() -> None:
    """A record over 1 MiB, or an envelope field beyond its length, is undecodable (``ValueError``)."""
    env = request("OpenBetting", topics.TABLE_INBOX, "T1", {"table_id": "T1"}, event_id="e-1", occurred_at=AT,
                  producer="operator")  # fmt: skip
    data = json.loads(env.to_json())
    padded = json.dumps({**data, "payload": {"table_id": "T1", "pad": "x" * RECORD_MAX_BYTES}}).encode()
    with pytest.raises(ValueError, match="at most"):
        parse_record(padded)
    for name, most in ENVELOPE_MAX_CHARS.items():
        if name in ("hash", "prev_hash", "causation_hash"):
            continue
        with pytest.raises(ValueError, match=name):
            parse_record(json.dumps({**data, name: "x" * (most + 1)}))


def test_a_dead_letter_of_a_huge_record_is_itself_a_readable_record() -> None:
    """A dead letter quotes at most ``ORIGINAL_MAX_CHARS`` of its original (control characters, which
    JSON escapes six-fold, included) and says so; its own record stays under the size limit."""
    raw = ("\x01" * (RECORD_MAX_BYTES + 10)).encode()
    draft = dead_letter(None, raw, "undecodable", "too big", topics.TABLE_INBOX)
    assert len(draft.payload["original"]) == ORIGINAL_MAX_CHARS
    assert "cut to" in draft.payload["detail"]
    env = request("DeadLetter", topics.DEADLETTER, topics.TABLE_INBOX, draft.payload, event_id="d-1",
                  occurred_at=AT, producer="dealer")  # fmt: skip
    assert len(env.to_json()) < RECORD_MAX_BYTES
    assert parse_record(env.to_json()) == env
