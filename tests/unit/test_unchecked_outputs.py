"""Outputs built without validation (:func:`services.core.contract.unchecked`) are what validation
would make of the same values: the same model, the same dump, the same field order."""

from __future__ import annotations

from typing import Any

import pytest

import services.settlement.processor as settlement_mod
from services.app.simulator import DEFAULT_TABLES, Session
from services.core.contract import Payload, PayoutIssued, dump_payload, unchecked
from services.core.envelope import request
from services.core.processor import initial_state, step
from services.settlement.processor import WalletStage
from tests.helpers.membus import MemBus

AT = "2026-11-23T17:00:00.000Z"
BUILT = {
    "PayoutIssued", "Posting", "FundsDeposited", "FundsWithdrawn", "StakeReserved", "StakeRefunded",
    "PayoutApplied", "BetPlaced",
}  # fmt: skip
"""Every payload settlement builds unchecked."""


def _checked(seen: set[str]) -> Any:
    def build(model: type[Payload], /, **fields: Any) -> Payload:
        made = unchecked(model, **fields)
        valid = model.model_validate(fields)
        assert made == valid, model.__name__
        assert dump_payload(made) == dump_payload(valid), model.__name__
        assert list(made.__dict__) == list(valid.__dict__), model.__name__
        assert made.model_fields_set == valid.model_fields_set, model.__name__
        seen.add(model.__name__)
        return made

    return build


def _wallet_requests() -> list[Any]:
    """A deposit, a bet, a withdrawal and a refund on one wallet: the transfers a session may lack."""
    w, t = "acct-unchecked", "T-unchecked"
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


def test_every_unchecked_output_is_what_validation_makes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over seeded sessions of every house-banked and player-banked variant, and a wallet's deposit,
    bet, withdrawal and refund, each payload settlement builds unchecked equals the validated one."""
    seen: set[str] = set()
    monkeypatch.setattr(settlement_mod, "unchecked", _checked(seen))
    for first in range(0, len(DEFAULT_TABLES), 2):
        tables = [DEFAULT_TABLES[first], DEFAULT_TABLES[(first + 1) % len(DEFAULT_TABLES)]]
        Session(MemBus(), seed=first).run(tables, 2)
    stage = WalletStage()
    state = initial_state(stage)
    for record in _wallet_requests():
        out = step(stage, state, record)
        assert out and out[0].type != "DeadLetter", out
    assert seen == BUILT


def test_an_unchecked_payout_that_breaks_the_contract_is_refused_by_its_reader() -> None:
    """What is built unchecked is still validated where it is read: a payout whose postings do not
    balance is refused as an input (the wallet stage's validation, :func:`payload_of`)."""
    bad = unchecked(
        PayoutIssued, payout_id="payout/b1", bet_id="b1", account_id="a", table_id="t", coup_id="c",
        spot="player", stake_minor=100, result="win", win_minor=100, commission_minor=0,
        credit_minor=200, currency="EUR", postings=(),
    )  # fmt: skip
    with pytest.raises(ValueError, match="credit"):
        PayoutIssued.model_validate(dump_payload(bad))
