"""Outputs settlement writes without a model (:class:`services.core.contract.Written`) are what the
validated model dumps: the same dict, keys in the model's order; and their readers still validate
them."""

from __future__ import annotations

from typing import Any

import pytest

import services.dealer.processor as dealer_mod
import services.settlement.payout_stage as payout_mod
import services.settlement.wallet_stage as wallet_mod
from services.core.contract import (
    FLAT,
    PAYLOADS,
    CardDealt,
    Payload,
    PayoutIssued,
    Written,
    dump_payload,
    to_draft,
    trusted,
)
from services.core.envelope import request
from services.core.processor import initial_state, step
from services.settlement.wallet_stage import WalletStage
from services.simulation.simulator import DEFAULT_TABLES, Session
from tests.helpers.membus import MemBus

AT = "2026-11-23T17:00:00.000Z"
WRITTEN = {
    "PayoutIssued", "FundsDeposited", "FundsWithdrawn", "StakeReserved", "StakeRefunded", "PayoutApplied",
    "BetPlaced",
}  # fmt: skip
"""Every payload settlement writes without a model."""


def _checked(seen: set[str]) -> Any:
    def written(model: type[Payload], data: dict[str, Any]) -> Written:
        type_ = model.__name__
        assert PAYLOADS[type_] is model
        dumped = dump_payload(model.model_validate(data))
        assert data == dumped, type_
        assert list(data) == list(dumped), type_  # the model's field order
        assert [type(v) for v in data.values()] == [type(v) for v in dumped.values()], type_  # JSON types
        assert [list(p) for p in data.get("postings", ())] == [list(p) for p in dumped.get("postings", ())]
        seen.add(type_)
        return Written(model, data)

    return written


def _wallet_requests() -> list[Any]:
    """A deposit, a bet, a withdrawal and a refund on one wallet: the transfers a session may lack."""
    w, t = "acct-written", "T-written"
    rows = [
        ("Deposit", {"account_id": w, "amount_minor": 5_000, "currency": "EUR"}),
        ("PlaceBet", {"account_id": w, "bet_id": "b1", "table_id": t, "coup_id": "c1", "spot": "player",
                      "stake_minor": 1_000, "currency": "EUR"}),
        ("Withdraw", {"account_id": w, "amount_minor": 500, "currency": "EUR"}),
        ("BetRefundDue", {"refund_id": "refund/b1", "bet_id": "b1", "account_id": w, "table_id": t,
                          "coup_id": "c1", "stake_minor": 1_000, "currency": "EUR",
                          "reason": "betting_closed"}),
    ]  # fmt: skip
    return [
        request(k, "casino.wallet.requests", w, p, event_id=f"req-{n}", occurred_at=AT, producer="cashier")
        for n, (k, p) in enumerate(rows)
    ]


def test_every_written_output_is_what_the_validated_model_dumps(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over seeded sessions of every variant, and a wallet's deposit, bet, withdrawal and refund, each
    payload settlement writes without a model equals the validated model's dump, key order included."""
    seen: set[str] = set()
    monkeypatch.setattr(payout_mod, "Written", _checked(seen))
    monkeypatch.setattr(wallet_mod, "Written", _checked(seen))
    for first in range(0, len(DEFAULT_TABLES), 2):
        tables = [DEFAULT_TABLES[first], DEFAULT_TABLES[(first + 1) % len(DEFAULT_TABLES)]]
        Session(MemBus(), seed=first).run(tables, 2)
    stage = WalletStage()
    state = initial_state(stage)
    for record in _wallet_requests():
        out = step(stage, state, record)
        assert out and out[0].type != "DeadLetter", out
    assert seen == WRITTEN


def test_a_written_payout_that_breaks_the_contract_is_refused_by_its_reader() -> None:
    """What is written without a model is still validated where it is read: a payout whose postings
    do not credit what it says is refused as an input (the wallet stage's validation)."""
    bad = Written(PayoutIssued, {
        "payout_id": "payout/b1", "bet_id": "b1", "account_id": "a", "table_id": "t", "coup_id": "c",
        "spot": "player", "stake_minor": 100, "result": "win", "win_minor": 100, "commission_minor": 0,
        "credit_minor": 200, "currency": "EUR", "postings": [],
    })  # fmt: skip
    draft = to_draft(bad, "a")
    record = request(draft.type, draft.topic, "a", draft.payload, event_id="e-bad", occurred_at=AT,
                     producer="settlement")  # fmt: skip
    stage = WalletStage()
    (out,) = step(stage, initial_state(stage), record)
    assert out.type == "DeadLetter" and out.payload["reason"] == "invalid_payload"
    assert "credit" in out.payload["detail"]


class NoSuchEvent(Payload):
    """A payload model the contract does not register."""


def test_a_written_payload_of_no_contract_type_is_refused() -> None:
    """``to_draft`` takes a written payload only of a type the contract has."""
    with pytest.raises(Exception, match="not an event payload"):
        to_draft(Written(NoSuchEvent, {}), "k")


def test_the_flat_payloads_hold_only_strings_and_integers() -> None:
    """Every field of a :data:`FLAT` class is a string or an integer, so the dict it holds is its JSON
    dump (what ``to_draft`` copies instead of serialising)."""
    for model in FLAT:
        for name, info in model.model_fields.items():
            assert info.annotation in (str, int), (model.__name__, name, info.annotation)


def test_every_trusted_dealer_output_is_what_the_validated_model_dumps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Over seeded sessions of every variant, each bet accepted and card dealt the dealer builds without
    validation (:func:`trusted`) validates, and dumps to the very dict it holds: same keys, order, types;
    and ``to_draft`` writes that dict."""
    seen: set[str] = set()
    real = dealer_mod.trusted

    def checked(model: type[Payload], data: dict[str, Any]) -> Any:
        built = real(model, data)
        dumped = dump_payload(model.model_validate(data))
        assert list(dumped.items()) == list(data.items()), model.__name__
        assert [type(v) for v in data.values()] == [type(v) for v in dumped.values()], model.__name__
        assert to_draft(built, "k").payload == dumped
        seen.add(model.__name__)
        return built

    monkeypatch.setattr(dealer_mod, "trusted", checked)
    for first in range(len(DEFAULT_TABLES)):
        Session(MemBus(), seed=first).run([DEFAULT_TABLES[first]], 2)
    assert seen == {"BetAccepted", "CardDealt"}


def test_a_validated_flat_payload_drafts_as_its_dump() -> None:
    """A flat payload built with validation drafts the same dict pydantic's serializer gives."""
    dealt = CardDealt(
        table_id="T1", shoe_id="S1", coup_id="T1/S1/1", hand="player", card="9S", shoe_position=7
    )
    assert to_draft(dealt, "T1").payload == dealt.model_dump(mode="json")


def test_only_a_flat_payload_is_built_trusted() -> None:
    """``trusted`` refuses a class outside :data:`FLAT` (its dump may differ from the dict it holds)."""
    with pytest.raises(AssertionError, match="not a flat payload"):
        trusted(PayoutIssued, {})
