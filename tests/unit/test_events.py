"""The event contract: typed payloads, refusals of malformed ones, upcasting, topics, hash stability."""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from functools import cache
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from services.audit.processor import Audit
from services.core import contract as events
from services.core import topics
from services.core.baccarat.variants import VARIANTS
from services.core.contract import (
    PAYLOADS,
    SCHEMA_VERSIONS,
    TOPIC_OF_TYPE,
    UPCASTERS,
    dump_payload,
    payload_as,
    payload_of,
    reasons,
    to_draft,
    validate_payload,
)
from services.core.envelope import Draft, Envelope, canonical, parse_record, request, seal, sha256_hex
from services.core.errors import DomainError
from services.core.processor import Processor, dead_letter, initial_state, step
from services.core.reasons import FindingReason, Reason, RefusalReason
from services.simulation.simulator import DEFAULT_TABLES, Session
from tests.helpers.membus import MemBus

AT = "2026-11-22T21:04:05.123Z"
D1 = "a" * 64
D2 = "0123456789abcdef" * 4
POSTINGS = [
    {"account": "table:T1:escrow", "amount_minor": -1950},
    {"account": "player:001", "amount_minor": 1950},
]
BET = {
    "bet_id": "b-1",
    "account_id": "player:001",
    "table_id": "T1",
    "coup_id": "T1/S1/1",
    "spot": "banker",
    "stake_minor": 1000,
    "currency": "EUR",
}
TRANSFER = {
    "transfer_id": "t-1",
    "account_id": "player:001",
    "amount_minor": 5000,
    "currency": "EUR",
    "postings": [
        {"account": "cage:EUR", "amount_minor": -5000},
        {"account": "player:001", "amount_minor": 5000},
    ],
    "balance_before_minor": 0,
    "balance_after_minor": 5000,
}
STAKE = {
    **TRANSFER,
    "amount_minor": 1000,
    "balance_before_minor": 5000,
    "balance_after_minor": 4000,
    "postings": [
        {"account": "player:001", "amount_minor": -1000},
        {"account": "table:T1:escrow", "amount_minor": 1000},
    ],
}
REFUSAL = {
    "transfer_id": "stake/b-1",
    "account_id": "player:001",
    "request": "PlaceBet",
    "reason": "insufficient_funds",
    "detail": None,
    "bet_id": "b-1",
    "table_id": "T1",
    "amount_minor": 1000,
    "currency": "EUR",
}
PAY = {"pays": [1, 1], "commission_bps": 0, "commission_rounding": "floor", "levy_step_minor": None}

SAMPLES: dict[str, dict[str, Any]] = {
    "Deposit": {"account_id": "player:001", "amount_minor": 5000, "currency": "EUR", "transfer_id": None},
    "Withdraw": {"account_id": "player:001", "amount_minor": 100, "currency": "EUR", "transfer_id": "w-1"},
    "PlaceBet": dict(BET),
    "PayoutIssued": {
        "payout_id": "payout/b-1",
        "bet_id": "b-1",
        "account_id": "player:001",
        "table_id": "T1",
        "coup_id": "T1/S1/1",
        "spot": "banker",
        "stake_minor": 1000,
        "result": "win",
        "win_minor": 1000,
        "commission_minor": 50,
        "credit_minor": 1950,
        "currency": "EUR",
        "postings": [*POSTINGS[:1], {"account": "table:T1:house", "amount_minor": 0}, *POSTINGS[1:]],
    },
    "BetRefundDue": {
        "refund_id": "refund/b-1",
        "bet_id": "b-1",
        "account_id": "player:001",
        "table_id": "T1",
        "coup_id": "T1/S1/1",
        "stake_minor": 1000,
        "currency": "EUR",
        "reason": "betting_closed",
    },
    "FundsDeposited": dict(TRANSFER),
    "FundsWithdrawn": {
        **TRANSFER,
        "balance_before_minor": 5000,
        "balance_after_minor": 0,
        "postings": [
            {"account": "player:001", "amount_minor": -5000},
            {"account": "cage:EUR", "amount_minor": 5000},
        ],
    },
    "StakeReserved": {**STAKE, "bet_id": "b-1", "table_id": "T1", "coup_id": "T1/S1/1", "spot": "banker"},
    "PayoutApplied": {
        **TRANSFER,
        "amount_minor": 1950,
        "balance_before_minor": 4000,
        "balance_after_minor": 5950,
        "postings": POSTINGS,
        "bet_id": "b-1",
        "table_id": "T1",
        "coup_id": "T1/S1/1",
        "payout_id": "payout/b-1",
        "result": "win",
    },
    "StakeRefunded": {
        **TRANSFER,
        "amount_minor": 1000,
        "balance_before_minor": 4000,
        "balance_after_minor": 5000,
        "postings": [
            {"account": "table:T1:escrow", "amount_minor": -1000},
            {"account": "player:001", "amount_minor": 1000},
        ],
        "bet_id": "b-1",
        "table_id": "T1",
        "reason": "betting_closed",
    },
    "BetRejected": dict(REFUSAL),
    "WithdrawalRejected": {**REFUSAL, "request": "Withdraw", "bet_id": None, "table_id": None},
    "TransferRefused": {
        **REFUSAL,
        "request": "Deposit",
        "reason": "transfer_id_conflict",
        "bet_id": None,
        "table_id": None,
        "amount_minor": None,
        "currency": None,
        "detail": "the same transfer id was used with different content",
    },
    "SeamlessCallAnswered": {
        "transaction_id": "debit/b-1",
        "account_id": "player:001",
        "attempt": 2,
        "status": "ok",
        "balance_minor": 4900,
        "http_status": 200,
        "elapsed_ms": 12,
        "detail": None,
    },
    "SeamlessCallRequested": {
        "transaction_id": "rollback/b-1",
        "call": "rollback",
        "account_id": "player:001",
        "round_id": "c-1",
        "bet_id": "b-1",
        "table_id": "T1",
        "amount_minor": 100,
        "currency": "EUR",
        "reference_transaction_id": "debit/b-1",
        "attempt": 0,
        "delay_ms": 0,
        "request": "BetRefundDue",
    },
    "OperatorBalanceSynced": {
        "transfer_id": "sync/debit/b-1/0",
        "account_id": "player:001",
        "amount_minor": 5000,
        "currency": "EUR",
        "postings": [
            {"account": "operator:EUR", "amount_minor": -5000},
            {"account": "player:001", "amount_minor": 5000},
        ],
        "balance_before_minor": 0,
        "balance_after_minor": 5000,
        "transaction_id": "debit/b-1",
    },
    "OpenTable": {
        "table_id": "T1",
        "variant": "punto_banco",
        "currency": "EUR",
        "decks": 8,
        "tie_pays": 9,
        "commission_bps": 500,
        "commission_rounding": "floor",
        "punters": None,
        "limits": {"banker": {"min_minor": 1000, "max_minor": 500000}},
        "options": {"levy_step_minor": 10},
        "operator": "pit-boss:7",
    },
    "OpenShoe": {"table_id": "T1", "shoe_id": "T1-S1", "mode": "rng", "seed_hex": D1},
    "OpenBetting": {"table_id": "T1"},
    "BetPlaced": dict(BET),
    "CloseBetting": {"table_id": "T1"},
    "DealCoup": {"table_id": "T1"},
    "CardRead": {"table_id": "T1", "card": "10H", "shoe_id": "T1-S1"},
    "Decision": {
        "table_id": "T1",
        "coup_id": "T1/S1/1",
        "hand": "player",
        "choice": "draw",
        "decided_by": "player:001",
    },
    "CloseShoe": {"table_id": "T1"},
    "TableOpened": {
        "table_id": "T1",
        "variant": "punto_banco",
        "rules_version": "2026.1",
        "decks": 8,
        "currency": "EUR",
        "paytable": {
            "banker": {**PAY, "commission_bps": 500},
            "tie": {**PAY, "pays": [8, 1], "commission_rounding": None},
            "bank": {**PAY, "levy_step_minor": 10, "graded": {"natural": [1, 1]}},
        },
        "limits": {"banker": {"min_minor": 1000, "max_minor": 500000}},
        "config": {
            "variant": "punto_banco",
            "decks": 8,
            "tie_pays": 8,
            "commission_bps": 500,
            "commission_rounding": "floor",
            "punters": 0,
            "options": {"note": "x", "steps": [1, 2]},
        },
        "spots": ["player", "banker", "tie"],
    },
    "ShoeOpened": {
        "table_id": "T1",
        "shoe_id": "T1-S1",
        "mode": "rng",
        "commitment": D1,
        "algorithm": "sha256-ctr/rejection/fisher-yates/v1",
        "cards": 416,
        "decks": 8,
        "burned": 3,
        "first_position": 3,
        "stop_position": 400,
    },
    "BettingOpened": {"table_id": "T1", "shoe_id": "T1-S1", "coup_id": "T1/S1/1", "coup_number": 1},
    "BetAccepted": dict(BET),
    "BetRefused": {**BET, "reason": "betting_closed", "detail": "no betting window is open"},
    "BettingClosed": {"table_id": "T1", "coup_id": "T1/S1/1", "bet_ids": ["b-1", "b-2"]},
    "CardDealt": {
        "table_id": "T1",
        "shoe_id": "T1-S1",
        "coup_id": "T1/S1/1",
        "hand": "player",
        "card": "9S",
        "shoe_position": 3,
    },
    "DecisionRequested": {
        "table_id": "T1",
        "coup_id": "T1/S1/1",
        "hand": "player",
        "options": ["draw", "stand"],
        "cell": "5",
    },
    "DecisionMade": {
        "table_id": "T1",
        "coup_id": "T1/S1/1",
        "hand": "player",
        "choice": "stand",
        "decided_by": "strategy:always_stand",
    },
    "CoupResolved": {
        "table_id": "T1",
        "shoe_id": "T1-S1",
        "coup_id": "T1/S1/1",
        "coup_number": 1,
        "variant": "punto_banco",
        "rules_version": "2026.1",
        "hands": {
            "player": {"cards": ["9S", "KH"], "total": 9},
            "banker": {"cards": ["2D", "3C"], "total": 5},
        },
        "outcome": "player",
        "natural": True,
        "versus": {},
        "events": [],
        "decisions": [],
        "bet_ids": ["b-1"],
        "started_at": "2026-11-22T21:04:00.000Z",
        "ended_at": AT,
        "shoe_position_end": 7,
        "stop_card_reached": False,
    },
    "CommandRefused": {
        "table_id": "T1",
        "command_id": "cmd-1",
        "command": "OpenBetting",
        "reason": "no_shoe",
        "detail": "open a shoe before betting",
    },
    "ShoeClosed": {
        "table_id": "T1",
        "shoe_id": "T1-S1",
        "mode": "rng",
        "seed_hex": D1,
        "commitment": D2,
        "cards_dealt": 80,
        "coups": 16,
    },
    "AuditFinding": {
        "reason": "payout_mismatch",
        "severity": "critical",
        "table_id": "T1",
        "subject": {"event_id": "e-1", "bet_id": "b-1", "seq": None},
        "expected": {"credit_minor": 1950},
        "recorded": {"credit_minor": 2050},
        "detail": "Übertrag ✓",
    },
    "AnomalyDetected": {
        "detector": "win_streak",
        "category": "statistical_outlier",
        "severity": "warning",
        "table_id": "T1",
        "subject": {"bet_ids": ["b-1", "b-2"], "account_id": "player:001"},
        "observed": {"streak": 12, "probability": "1/4096"},
        "threshold": {"streak": 11},
        "detail": "12 wins",
        "honest_probability": "0.000244",
    },
    "CageDeposit": {
        "cage_id": "cage",
        "account_id": "acc:smurf-1",
        "deposit_id": "e-2",
        "amount_minor": 980_000,
        "currency": "EUR",
    },
    "WorkAlert": {
        "alert_id": "e-9",
        "action": "close",
        "by": "analyst-1a2b3c4d",
        "note": "cleared: a regular",
    },
    "AlertCaseChanged": {
        "alert_id": "e-9",
        "action": "assign",
        "by": "analyst-1a2b3c4d",
        "status_before": "closed",
        "status": "closed",
        "assignee": "analyst:rosa",
        "refused": "step_not_allowed",
    },
    "AuditCheckpoint": {
        "table_id": "T1",
        "rounds": 50,
        "table_digest": D1,
        "chain_heads": {"casino.table.events|T1": {"seq": 812, "hash": D2}},
        "findings": 0,
        "alerts": {"count": 2, "head": D1},
        "tree": {
            "n": 1,
            "size": 2,
            "root": D2,
            "heads": {"casino.table.events": {"T1": [812, D2]}, "casino.audit.findings": {"T1": [3, None]}},
        },
        "signature": "abcd",
        "key_id": "audit-2026",
        "algorithm": "ed25519",
    },
    "DeadLetter": {
        "source_topic": "casino.wallet.requests",
        "reason": "invalid_payload",
        "detail": "stake_minor: 10.5",
        "original": '{"type":"PlaceBet"}',
        "original_event_id": "e-9",
    },
    "HeadsAttested": {
        "writer": "settlement.wallet",
        "heads": [{"topic": "casino.wallet.events", "key": "acct-1", "seq": 4, "hash": D1}],
        "seal": "idle",
        "dead_letters": [D1],
    },
}
"""One valid payload per type, every field written out (so that dumping it gives it back exactly)."""


def _env(type_: str, payload: Mapping[str, Any], version: int = 1) -> Envelope:
    body = {
        "event_id": "e-1",
        "type": type_,
        "schema_version": version,
        "topic": TOPIC_OF_TYPE[type_],
        "key": "k",
        "seq": None,
        "occurred_at": AT,
        "causation_id": None,
        "causation_hash": None,
        "correlation_id": "e-1",
        "producer": "test",
        "prev_hash": None,
        "payload": dict(payload),
    }
    return Envelope(**body, hash=sha256_hex(canonical(body)))


def test_every_type_has_a_sample() -> None:
    """The samples cover the registry exactly, so each type below is exercised."""
    assert set(SAMPLES) == set(PAYLOADS)


@pytest.mark.parametrize("type_", list(SAMPLES))
def test_round_trip(type_: str) -> None:
    """A valid payload validates, dumps back to the same dict, and its canonical bytes survive JSON."""
    model = payload_of(_env(type_, SAMPLES[type_]))
    assert type(model) is PAYLOADS[type_]
    dumped = dump_payload(model)
    assert dumped == SAMPLES[type_]
    again = dump_payload(validate_payload(type_, json.loads(canonical(dumped))))
    assert canonical(again) == canonical(dumped)


BAD: list[tuple[str, str, Any]] = [
    ("PlaceBet", "an unknown field", {"stake": 5}),
    ("PlaceBet", "a float for money", {"stake_minor": 1000.0}),
    ("PlaceBet", "a fractional amount", {"stake_minor": 10.5}),
    ("PlaceBet", "a bool for money", {"stake_minor": True}),
    ("PlaceBet", "a numeric string for money", {"stake_minor": "1000"}),
    ("PlaceBet", "a zero stake", {"stake_minor": 0}),
    ("PlaceBet", "a lower-case currency", {"currency": "eur"}),
    ("PlaceBet", "a spot that is not snake case", {"spot": "Banker"}),
    ("PlaceBet", "an empty id", {"bet_id": ""}),
    ("PlaceBet", "a missing field", {"account_id": None}),
    ("Deposit", "a negative deposit", {"amount_minor": -5}),
    (
        "FundsDeposited",
        "unbalanced postings",
        {"postings": [{"account": "player:001", "amount_minor": 5000}]},
    ),
    ("FundsDeposited", "no postings", {"postings": []}),
    (
        "FundsDeposited",
        "a float posting",
        {
            "postings": [
                {"account": "cage:EUR", "amount_minor": -5000.0},
                {"account": "player:001", "amount_minor": 5000.0},
            ]
        },
    ),
    (
        "FundsDeposited",
        "an unknown field in a posting",
        {
            "postings": [
                {"account": "cage:EUR", "amount_minor": -5000, "memo": "x"},
                {"account": "player:001", "amount_minor": 5000},
            ]
        },
    ),
    ("FundsDeposited", "a balance that does not follow the postings", {"balance_after_minor": 5001}),
    ("FundsDeposited", "an amount that is not the balance move", {"amount_minor": 4000}),
    ("PayoutIssued", "unbalanced postings", {"postings": POSTINGS[:1]}),
    ("PayoutIssued", "a credit the postings do not pay", {"credit_minor": 2000}),
    ("PayoutIssued", "an unknown result", {"result": "jackpot"}),
    ("PayoutApplied", "unbalanced postings", {"postings": POSTINGS[1:]}),
    ("BetRefused", "an unknown reason code", {"reason": "because"}),
    ("AuditFinding", "an unknown finding code", {"reason": "looks_odd"}),
    ("AuditFinding", "a float inside free JSON", {"expected": {"credit_minor": 19.5}}),
    ("AuditCheckpoint", "a signature without its key id", {"key_id": None}),
    ("CardDealt", "a card that does not exist", {"card": "1X"}),
    ("CardDealt", "a non-canonical card", {"card": "10H"}),
    ("CardDealt", "a float shoe position", {"shoe_position": 3.0}),
    ("DecisionMade", "a choice that is not draw or stand", {"choice": "maybe"}),
    ("CoupResolved", "a total above nine", {"hands": {"player": {"cards": ["9S"], "total": 10}}}),
    ("CoupResolved", "a bet id twice", {"bet_ids": ["b-1", "b-1"]}),
    ("CoupResolved", "a clock-less timestamp", {"ended_at": "yesterday"}),
    ("BettingClosed", "a bet id twice", {"bet_ids": ["b-1", "b-1"]}),
    ("OpenShoe", "a smart shoe with a seed", {"mode": "smart"}),
    ("OpenShoe", "a seed that is not 256 bits of hex", {"seed_hex": "abc"}),
    ("ShoeOpened", "an rng shoe without a commitment", {"commitment": None}),
    ("OpenTable", "limits upside down", {"limits": {"banker": {"min_minor": 10, "max_minor": 9}}}),
    ("TableOpened", "a float in a paytable", {"paytable": {"tie": {"pays": [8.0, 1]}}}),
    ("TableOpened", "a float in paytable parameters", {"paytable": {"tie": {"pays": [8, 1], "x": 0.5}}}),
    ("TableOpened", "a zero denominator", {"paytable": {"tie": {"pays": [8, 0]}}}),
    ("DeadLetter", "a reason that is no code", {"reason": "oops"}),
    ("WorkAlert", "a close without its note", {"note": None}),
    ("WorkAlert", "a blank note", {"note": "  "}),
    ("WorkAlert", "an assignee on a close", {"assignee": "analyst:rosa"}),
    ("WorkAlert", "an action that is no step", {"action": "delete"}),
    ("AlertCaseChanged", "a status that is no status", {"status": "gone"}),
]


@pytest.mark.parametrize(("type_", "what", "change"), BAD, ids=[f"{t}: {w}" for t, w, _ in BAD])
def test_malformed_payload_is_refused(type_: str, what: str, change: dict[str, Any]) -> None:
    """A payload with one defect is refused; a tolerant read refuses it too unless the defect sits in a field
    it drops as unknown."""
    bad = {**SAMPLES[type_], **change}
    with pytest.raises(ValidationError):
        validate_payload(type_, bad)
    if "unknown field" not in what and "paytable parameters" not in what:
        with pytest.raises(ValidationError):
            validate_payload(type_, bad, tolerant=True)


def test_tolerant_reading_ignores_unknown_fields_at_every_level() -> None:
    """A newer producer's extra fields are dropped by a tolerant read, at the top and in nested models."""
    newer = {**SAMPLES["PayoutIssued"], "loyalty_points": 7}
    newer["postings"] = [{**p, "memo": "from v1.1"} for p in newer["postings"]]
    with pytest.raises(ValidationError):
        validate_payload("PayoutIssued", newer)
    model = payload_of(_env("PayoutIssued", newer), tolerant=True)
    assert dump_payload(model) == SAMPLES["PayoutIssued"]


def test_paytable_entries_keep_variant_parameters() -> None:
    """A variant's own paytable parameters survive a strict read (typed JSON); a tolerant read drops them."""
    model = validate_payload("TableOpened", SAMPLES["TableOpened"])
    assert dump_payload(model)["paytable"]["bank"]["graded"] == {"natural": [1, 1]}
    tolerant = validate_payload("TableOpened", SAMPLES["TableOpened"], tolerant=True)
    assert "graded" not in dump_payload(tolerant)["paytable"]["bank"]


def test_models_are_frozen() -> None:
    """A payload cannot be changed after validation."""
    model = validate_payload("PlaceBet", SAMPLES["PlaceBet"])
    with pytest.raises(ValidationError):
        model.stake_minor = 1  # type: ignore[attr-defined]


# --- upcasting ----------------------------------------------------------------------------------

V0_DECISION = {"table_id": "T1", "coup_id": "T1/S1/1", "hand": "player", "choice": "draw"}


def test_decision_made_v0_is_upcast() -> None:
    """A v0 DecisionMade (no decided_by) reads as v1 with decided_by 'unknown', the dealer's own default."""
    model = payload_as(_env("DecisionMade", V0_DECISION, version=0), events.DecisionMade)
    assert model.decided_by == "unknown"
    assert dump_payload(model) == {**V0_DECISION, "decided_by": "unknown"}


def test_decision_made_v0_with_a_maker_keeps_it() -> None:
    """The upcaster only fills what v0 lacked: a maker that is there is kept."""
    model = payload_as(
        _env("DecisionMade", {**V0_DECISION, "decided_by": "banker"}, version=0), events.DecisionMade
    )
    assert model.decided_by == "banker"


def test_v1_without_the_v1_field_is_refused() -> None:
    """Upcasting applies only to old versions: a v1 record missing decided_by is malformed."""
    with pytest.raises(ValidationError):
        payload_of(_env("DecisionMade", V0_DECISION, version=1))


def test_upcasters_run_in_version_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a v2 in place, a v0 record goes through the v0→v1 then the v1→v2 upcaster, in that order."""
    seen: list[str] = []

    def v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
        seen.append(data["decided_by"])
        return {**data, "decided_by": data["decided_by"].upper()}

    monkeypatch.setitem(SCHEMA_VERSIONS, "DecisionMade", 2)  # type: ignore[arg-type]
    monkeypatch.setitem(UPCASTERS, ("DecisionMade", 1), v1_to_v2)
    model = payload_as(_env("DecisionMade", V0_DECISION, version=0), events.DecisionMade)
    assert seen == ["unknown"]
    assert model.decided_by == "UNKNOWN"


@pytest.mark.parametrize(
    ("type_", "version", "reason"),
    [
        ("DecisionMade", 2, Reason.UNSUPPORTED_VERSION),
        ("CardDealt", 0, Reason.UNSUPPORTED_VERSION),
        ("CardFlipped", 1, Reason.UNKNOWN_TYPE),
    ],
)
def test_unreadable_versions_and_types_are_refused(type_: str, version: int, reason: Reason) -> None:
    """A version newer than the code, a version with no upcaster path, an unknown type: a coded refusal."""
    with pytest.raises(DomainError) as err:
        validate_payload(type_, SAMPLES.get(type_, {}), version=version)
    assert err.value.reason is reason


def test_every_upcaster_targets_a_known_older_version() -> None:
    """Each registered upcaster starts below its type's current version."""
    assert UPCASTERS
    for type_, version in UPCASTERS:
        assert type_ in PAYLOADS and 0 <= version < SCHEMA_VERSIONS[type_]


# --- topics, reason codes, drafts ---------------------------------------------------------------

DESIGN_TOPICS = [
    (topics.WALLET_REQUESTS, "Deposit, Withdraw, PlaceBet, PayoutIssued, BetRefundDue"),
    (
        topics.WALLET_EVENTS,
        "FundsDeposited, FundsWithdrawn, BetRejected, StakeReserved, PayoutApplied, StakeRefunded",
    ),
    (
        topics.TABLE_INBOX,
        "OpenTable, OpenShoe, OpenBetting, CloseBetting, DealCoup, CardRead, Decision, CloseShoe, BetPlaced",
    ),
    (
        topics.TABLE_EVENTS,
        "TableOpened, ShoeOpened, BetAccepted, BetRefused, BettingClosed, CardDealt, "
        "DecisionMade, CoupResolved, ShoeClosed",
    ),
    (topics.AUDIT_FINDINGS, "AuditFinding, AuditCheckpoint"),
    (topics.MONITOR_ALERTS, "AnomalyDetected, AlertCaseChanged"),
    (topics.CASEWORK, "WorkAlert"),
    (topics.CAGE, "CageDeposit"),
    (topics.DEADLETTER, "DeadLetter"),
]


@pytest.mark.parametrize(("topic", "holds"), DESIGN_TOPICS)
def test_design_topic_table(topic: str, holds: str) -> None:
    """Each type docs/event-contract.md's topic table names goes to that topic (anomalies: the monitor's own
    stream)."""
    for name in holds.split(", "):
        assert TOPIC_OF_TYPE[name] == topic, name


def test_every_topic_is_known() -> None:
    """Every type goes to one of the reference topics."""
    assert set(TOPIC_OF_TYPE.values()) == set(topics.ALL_TOPICS)
    assert set(TOPIC_OF_TYPE) == set(PAYLOADS)


def test_refusal_codes_are_reason_codes() -> None:
    """Every business refusal code is also a core Reason code: one vocabulary, no synonyms."""
    assert {r.value for r in RefusalReason} <= {r.value for r in Reason}


def test_reason_enums_are_documented() -> None:
    """Each refusal, finding and replay code has a docstring in the vocabulary's source (its meaning is
    written down)."""
    source = inspect.getsource(reasons)
    for member in [*RefusalReason, *FindingReason, *reasons.ReplayReason]:
        line = f'{member.name} = "{member.value}"\n    """'
        assert line in source, member


@pytest.mark.parametrize(
    ("type_", "chained"), [("CardDealt", True), ("PayoutIssued", False), ("DeadLetter", False)]
)
def test_to_draft_puts_a_payload_on_its_topic(type_: str, chained: bool) -> None:
    """A draft goes to the type's topic, chained exactly on event streams, carrying the dumped payload."""
    model = validate_payload(type_, SAMPLES[type_])
    draft = to_draft(model, "k")
    assert (draft.type, draft.topic, draft.chained) == (type_, TOPIC_OF_TYPE[type_], chained)
    assert dict(draft.payload) == SAMPLES[type_]


def test_dead_letter_of_the_processor_matches_the_model() -> None:
    """The DeadLetter the processor step writes for a malformed record validates against the model."""

    class Strict(Processor[None]):
        name = "strict"
        inputs = (topics.WALLET_REQUESTS,)

        def initial(self) -> None:
            return None

        def handle(self, state: None, record: Envelope) -> tuple[None, list[Draft]]:
            validate_payload(record.type, record.payload)
            return state, []

    rec = request(
        "PlaceBet",
        topics.WALLET_REQUESTS,
        "player:001",
        {**BET, "stake_minor": 10.5},
        event_id="e-7",
        occurred_at=AT,
        producer="terminal",
    )
    out = step(Strict(), initial_state(Strict()), rec)
    assert [e.type for e in out] == ["DeadLetter"]
    letter = payload_as(out[0], events.DeadLetter)
    assert (letter.reason, letter.original_event_id) == (Reason.INVALID_PAYLOAD, "e-7")
    raw = dead_letter(None, b'{"not json', "undecodable", "bad bytes", topics.TABLE_INBOX)
    assert validate_payload("DeadLetter", raw.payload).original == '{"not json'  # type: ignore[attr-defined]


# --- what the processors really write -----------------------------------------------------------


MODEL_WRITERS = {"dealer", "settlement"}
"""The processors whose every output is made from a contract model (``to_draft``); the monitor is one
too, but a session of twenty coups raises no alert."""


def _contains(big: Any, small: Any) -> bool:
    """``small`` is ``big`` with perhaps fewer keys in its dicts (defaults the dump adds)."""
    if isinstance(small, dict):
        return isinstance(big, dict) and all(k in big and _contains(big[k], v) for k, v in small.items())
    if isinstance(small, list):
        return isinstance(big, list) and len(big) == len(small) and all(map(_contains, big, small))
    return type(big) is type(small) and big == small


@cache
def _played(variant: str) -> tuple[Envelope, ...]:
    bus = MemBus()
    Session(bus, seed=11).run([t for t in DEFAULT_TABLES if t.variant == variant], 20)
    return tuple(bus.log)


def _registered() -> list[str]:
    return [t.variant for t in DEFAULT_TABLES if t.variant in VARIANTS]


@pytest.mark.parametrize("variant", _registered())
def test_every_record_of_a_session_fits_the_contract(variant: str) -> None:
    """Every record a simulated session writes validates strictly and loses nothing when dumped; what a
    processor that makes its outputs from models writes is exactly its model's dump."""
    log = _played(variant)
    assert {"TableOpened", "CoupResolved", "PayoutIssued", "PayoutApplied"} <= {e.type for e in log}
    assert {e.producer for e in log} >= MODEL_WRITERS
    for env in log:
        model = payload_of(env)
        if env.producer in MODEL_WRITERS:
            assert dump_payload(model) == env.payload, (env.type, env.payload)
        else:  # a client's request may leave optional fields out
            assert _contains(dump_payload(model), env.payload), (env.type, env.payload)


def test_audit_findings_on_a_tampered_log_fit_the_contract() -> None:
    """The findings audit raises over a tampered log (edited payout, deleted card) validate strictly."""
    log = list(_played("punto_banco"))
    i = next(i for i, e in enumerate(log) if e.type == "PayoutIssued" and e.payload["result"] == "win")
    log[i] = Envelope(**(log[i].model_dump() | {"payload": {**log[i].payload, "credit_minor": 1}}))
    del log[next(i for i, e in enumerate(log) if e.type == "CardDealt")]
    audit = Audit()
    state = initial_state(audit)
    found = [
        o for e in log if e.topic in audit.inputs for o in step(audit, state, e) if o.type == "AuditFinding"
    ]
    reasons = {payload_as(f, events.AuditFinding).reason for f in found}
    assert {FindingReason.HASH_MISMATCH, FindingReason.SEQ_GAP} <= reasons


# --- canonical JSON and hashes ------------------------------------------------------------------

NO_SPACE = ("Zs", "Zl", "Zp", "Cc", "Cs")
ids = st.text(
    st.characters(min_codepoint=33, max_codepoint=0x2FFF, blacklist_categories=NO_SPACE), max_size=12
)
ids = ids.filter(bool)
minor = st.integers(min_value=0, max_value=10**15)


@st.composite
def transfers(draw: st.DrawFn) -> events.Payload:
    """A FundsDeposited with random balanced postings over several accounts."""
    account, amount, before = draw(ids), draw(minor), draw(minor)
    others = draw(st.lists(st.tuples(ids.filter(lambda a: a != account), minor), max_size=4))
    rest = -amount - sum(m for _, m in others)
    rows = [(account, amount), *others, ("cage:EUR", rest)]
    postings = [{"account": a, "amount_minor": m} for a, m in rows]
    data = {
        "transfer_id": draw(ids),
        "account_id": account,
        "amount_minor": amount,
        "currency": "EUR",
        "postings": postings,
        "balance_before_minor": before,
        "balance_after_minor": before + amount,
    }
    return validate_payload("FundsDeposited", data)


@st.composite
def coups(draw: st.DrawFn) -> events.Payload:
    """A CoupResolved with random hands, bets and free text."""
    card = st.sampled_from([r + s for r in "A23456789TJQK" for s in "SHDC"])
    hand = st.fixed_dictionaries(
        {"cards": st.lists(card, min_size=2, max_size=3), "total": st.integers(0, 9)}
    )
    names = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)
    data = {
        **SAMPLES["CoupResolved"],
        "coup_id": draw(ids),
        "hands": draw(st.dictionaries(names, hand, min_size=2, max_size=4)),
        "outcome": draw(names),
        "natural": draw(st.booleans()),
        "events": draw(st.lists(names, max_size=3)),
        "bet_ids": draw(st.lists(ids, unique=True, max_size=8)),
        "shoe_position_end": draw(minor),
    }
    return validate_payload("CoupResolved", data)


@settings(max_examples=150, deadline=None)
@given(st.one_of(transfers(), coups()))
def test_canonical_json_round_trip_and_hash_stability(model: events.Payload) -> None:
    """Dump → canonical JSON → parse → dump is byte-identical, and sealing the payload twice or re-reading
    the sealed record from its bytes gives the same hash."""
    data = dump_payload(model)
    raw = canonical(data)
    assert canonical(dump_payload(validate_payload(type(model).__name__, json.loads(raw)))) == raw
    cause = _env("Deposit", SAMPLES["Deposit"])
    sealed = [
        seal(to_draft(model, "k"), event_id="x", occurred_at=AT, producer="t", cause=cause, head=None)
        for _ in range(2)
    ]
    assert sealed[0].hash == sealed[1].hash == sealed[0].expected_hash()
    back = parse_record(sealed[0].to_json())
    assert back.hash == back.expected_hash() == sealed[0].hash
    assert payload_of(back) == model
