"""Audit reads each recorded payload once, typed: the model its handlers take, or why it is invalid."""

from __future__ import annotations

from services.audit.processor import _HANDLERS, _ON, Audit, read_recorded
from services.core import topics
from services.core.contract import PAYLOADS, BetAccepted
from services.core.envelope import Envelope, request

BET = {"bet_id": "b1", "account_id": "player:1", "table_id": "T1", "coup_id": "T1/S1/1", "spot": "player",
       "stake_minor": 500, "currency": "EUR"}  # fmt: skip


def _record(payload: dict[str, object], type_: str = "BetAccepted") -> Envelope:
    at = "2026-01-01T00:00:00.000Z"
    return request(type_, topics.TABLE_EVENTS, "T1", payload, event_id="e1", occurred_at=at, producer="d")


def test_a_valid_payload_is_read_typed_and_tolerantly() -> None:
    payload, broken = read_recorded(_record({**BET, "added_later": 1}))
    assert broken is None
    assert isinstance(payload, BetAccepted) and payload.stake_minor == 500 and payload.bet_id == "b1"


def test_an_invalid_payload_gives_its_reason_and_no_model() -> None:
    payload, broken = read_recorded(_record({**BET, "stake_minor": "500"}))
    assert payload is None and broken is not None and broken.startswith("stake_minor:")


def test_a_type_outside_the_contract_is_neither() -> None:
    assert read_recorded(_record({}, "SomethingElse")) == (None, None)


def test_the_state_says_whether_the_last_record_broke_the_contract() -> None:
    audit = Audit(signing=None)
    state = audit.initial()
    audit.handle(state, _record({**BET, "stake_minor": 1.5}))
    assert state.invalid
    audit.handle(state, _record(BET))
    assert not state.invalid and "b1" in state.coups["T1/S1/1"].bets


def test_every_audit_handler_is_registered_under_its_model_type() -> None:
    """Audit's handlers are keyed by payload model; each model's name is the contract type it reads
    (a handler under a name the registry does not hold would never run)."""
    for model, handler in _ON.items():
        assert PAYLOADS[model.__name__] is model
        assert _HANDLERS[model.__name__] is handler
