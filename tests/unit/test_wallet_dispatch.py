"""The wallet stage tells its requests apart by their exact contract class: each of the five kinds is
applied as its own kind (its transfer id, amount, direction and event), and a payload of any other
contract type is refused as ``unknown_type`` without touching a wallet."""

from __future__ import annotations

from typing import Any

import pytest

from services.core import topics
from services.core.contract import BetPlaced, payload_of
from services.core.envelope import Envelope, request
from services.core.errors import DomainError, Reason
from services.settlement.wallet_stage import REQUESTS, WalletStage, amount_of, transfer_id

AT = "2026-11-24T06:00:00.000Z"
ACCOUNT = "acct-dispatch"
BET = {"bet_id": "b1", "table_id": "T1", "coup_id": "T1/S1/1", "currency": "EUR"}
ROWS: list[tuple[str, dict[str, Any], str, int, str, int]] = [
    ("Deposit", {"account_id": ACCOUNT, "amount_minor": 10_000, "currency": "EUR", "transfer_id": "dep-1"},
     "dep-1", 10_000, "FundsDeposited", 10_000),
    ("PlaceBet", {**BET, "account_id": ACCOUNT, "spot": "banker", "stake_minor": 1_000},
     "stake/b1", 1_000, "StakeReserved", 9_000),
    ("PayoutIssued", {**BET, "payout_id": "payout/b1", "account_id": ACCOUNT, "spot": "banker",
                      "stake_minor": 1_000, "result": "win", "win_minor": 1_000, "commission_minor": 50,
                      "credit_minor": 1_950,
                      "postings": [{"account": "table:T1:escrow", "amount_minor": -1_000},
                                   {"account": ACCOUNT, "amount_minor": 1_950},
                                   {"account": "table:T1:commission", "amount_minor": 50},
                                   {"account": "table:T1:house", "amount_minor": -1_000}]},
     "payout/b1", 1_950, "PayoutApplied", 10_950),
    ("BetRefundDue", {**BET, "bet_id": "b2", "refund_id": "refund/b2", "account_id": ACCOUNT,
                      "stake_minor": 500, "reason": "betting_closed"},
     "refund/b2", 500, "StakeRefunded", 11_450),
    ("Withdraw", {"account_id": ACCOUNT, "amount_minor": 450, "currency": "EUR"},
     "withdraw/e4", 450, "FundsWithdrawn", 11_000),
]  # fmt: skip


def test_each_kind_of_request_is_applied_as_its_kind() -> None:
    """In turn, on one wallet: each request's transfer id, amount, event and balance after."""
    stage = WalletStage()
    state = stage.initial()
    assert set(REQUESTS) == {type(payload_of(_rec(n, row[0], row[1]))) for n, row in enumerate(ROWS)}
    for n, (kind, data, tid, amount, event, after) in enumerate(ROWS):
        rec = _rec(n, kind, data)
        payload: Any = payload_of(rec)
        assert (transfer_id(payload, rec.event_id), amount_of(payload)) == (tid, amount), kind
        state, events = stage.react(state, rec, payload)
        assert events[0].payload.model.__name__ == event, kind  # type: ignore[union-attr]
        assert state.balances[ACCOUNT] == after, kind
        assert [e.key for e in events] == [ACCOUNT, "T1"][: 2 if kind == "PlaceBet" else 1]


def test_a_payload_of_another_contract_type_is_refused_untouched() -> None:
    """A ``BetPlaced`` (a contract type, not a wallet request) is ``unknown_type``; no wallet moves."""
    stage = WalletStage()
    state = stage.initial()
    placed = BetPlaced(account_id=ACCOUNT, spot="banker", stake_minor=100, **BET)
    rec = request("BetPlaced", topics.WALLET_REQUESTS, ACCOUNT, placed.model_dump(), event_id="e9",
                  occurred_at=AT, producer="terminal")  # fmt: skip
    with pytest.raises(DomainError) as info:
        stage.react(state, rec, placed)
    assert info.value.reason is Reason.UNKNOWN_TYPE
    assert not state.balances and not state.transfers


def _rec(n: int, kind: str, payload: dict[str, Any]) -> Envelope:
    return request(kind, topics.WALLET_REQUESTS, ACCOUNT, payload, event_id=f"e{n}", occurred_at=AT,
                   producer="terminal")  # fmt: skip
