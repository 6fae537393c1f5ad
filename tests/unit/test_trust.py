"""Trust at the input (docs/trust.md): record authentication, the policy table, and its enforcement in
step."""

from __future__ import annotations

import hmac
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.core import topics
from services.core.envelope import Envelope, canonical, hash_of_bytes, parse_record, request, sha256_hex
from services.core.errors import Reason
from services.core.processor import ProcessorState, initial_state, step
from services.core.trust import (
    POLICY,
    Guard,
    Principal,
    PrincipalKey,
    Refusal,
    authenticate,
    authorize,
    by_key_id,
    mac,
    verify,
)
from services.runtime.compose import Composition
from services.runtime.keyring import demo_keyring
from services.settlement.wallet_stage import WalletStage, WalletState

RING = demo_keyring()
KEYS = RING.by_key_id()
T = "2026-11-22T20:00:00.000Z"


def _req(type_: str, key: str, payload: dict[str, Any], event_id: str = "e1") -> Envelope:
    topic = topics.TABLE_INBOX if type_ in _INBOX else topics.WALLET_REQUESTS
    return request(type_, topic, key, payload, event_id=event_id, occurred_at=T, producer="x")


_INBOX = {"OpenTable", "OpenShoe", "OpenBetting", "CloseBetting", "DealCoup", "CardRead", "Decision",
          "CloseShoe", "BetPlaced"}  # fmt: skip


def _deposit(
    account: str = "player:001", amount: int = 10_000, key: str | None = None, **kw: Any
) -> Envelope:
    payload = {"account_id": account, "amount_minor": amount, "currency": "EUR"}
    return _req("Deposit", key or account, payload, **kw)


def test_an_unauthenticated_record_serializes_exactly_as_before() -> None:
    """Without auth the bytes hold no ``auth`` member and the hash covers the same body as it always did."""
    env = _deposit()
    data = json.loads(env.to_json())
    assert "auth" not in data
    assert env.to_json() == canonical({k: v for k, v in env.model_dump().items() if k != "auth"})
    assert env.hash == sha256_hex(canonical({k: v for k, v in data.items() if k != "hash"}))


def test_auth_is_outside_the_hash_and_verifies_under_the_writer_key() -> None:
    """Authenticating keeps the hash; the record verifies as its principal and round-trips its bytes."""
    env = _deposit()
    signed = authenticate(env, RING.key(Principal.CASHIER))
    assert signed.hash == env.hash == signed.expected_hash()
    assert signed.auth is not None and signed.auth["key_id"] == "cashier-demo0000"
    assert set(signed.auth) == {"key_id", "mac"} and len(signed.auth["mac"]) == 64
    assert verify(signed, KEYS) == RING.key(Principal.CASHIER)
    assert Envelope.model_validate_json(signed.to_json()) == signed


def _other_key() -> PrincipalKey:
    return PrincipalKey(Principal.CASHIER, "cashier-demo0000", b"x" * 32)


FORGERIES = [
    ("no auth", lambda e: e, "the record carries no auth"),
    ("auth with a third field",
     lambda e: e.model_copy(update={"auth": {"key_id": "a", "mac": "b", "c": "d"}}),
     "auth is not {key_id, mac} or {key_id, sig}"),
    ("unknown key id", lambda e: e.model_copy(update={"auth": {"key_id": "cashier-x", "mac": "00"}}),
     "unknown key id 'cashier-x'"),
    ("content edited after signing",
     lambda e: authenticate(e, RING.key("cashier")).model_copy(
         update={"payload": {**e.payload, "amount_minor": 9}}),
     "the hash does not match the record's content"),
    ("signed with another secret under the cashier's key id", lambda e: authenticate(e, _other_key()),
     "the MAC does not verify under cashier-demo0000"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "forge", "detail"), FORGERIES, ids=[f[0] for f in FORGERIES])
def test_forgeries_are_unauthenticated(case: str, forge: Any, detail: str) -> None:
    """Each way of faking or bending auth is refused as ``unauthenticated`` with a sentence saying why."""
    found = verify(forge(_deposit()), KEYS)
    assert found == Refusal(Reason.UNAUTHENTICATED, detail), case


@given(st.binary(min_size=16, max_size=64), st.text(min_size=1, max_size=20))
def test_a_mac_under_any_other_secret_never_verifies(secret: bytes, key_id: str) -> None:
    """Whatever secret a forger holds, a record signed with it under a real key id is refused."""
    forged = authenticate(_deposit(), PrincipalKey(Principal.CASHIER, "cashier-demo0000", secret))
    assert isinstance(verify(forged, KEYS), Refusal)
    stranger = authenticate(_deposit(), PrincipalKey(Principal.CASHIER, key_id, secret))
    assert isinstance(verify(stranger, KEYS), Refusal)


# who may write what: straight from docs/trust.md and issue #8
P = Principal
POLICY_CASES = [
    (topics.WALLET_REQUESTS, "PayoutIssued", {P.SETTLEMENT}),
    (topics.WALLET_REQUESTS, "BetRefundDue", {P.SETTLEMENT}),
    (topics.TABLE_INBOX, "BetPlaced", {P.SETTLEMENT}),
    (topics.WALLET_REQUESTS, "Deposit", {P.CASHIER, P.BACKOFFICE}),
    (topics.WALLET_REQUESTS, "Withdraw", {P.CASHIER, P.BACKOFFICE}),
    (topics.WALLET_REQUESTS, "PlaceBet", {P.TERMINAL, P.BACKOFFICE}),
    *[(topics.TABLE_INBOX, t, {P.OPERATOR}) for t in
      ("OpenTable", "OpenShoe", "OpenBetting", "CloseBetting", "DealCoup", "CloseShoe")],
    (topics.TABLE_INBOX, "Decision", {P.OPERATOR, P.TERMINAL}),
    (topics.TABLE_INBOX, "CardRead", {P.SHOE}),
    *[(topics.TABLE_EVENTS, t, {P.DEALER})
      for t in ("TableOpened", "ShoeOpened", "CardDealt", "CoupResolved")],
    *[(topics.WALLET_EVENTS, t, {P.SETTLEMENT})
      for t in ("FundsDeposited", "PayoutApplied", "StakeReserved")],
    (topics.AUDIT_FINDINGS, "AuditFinding", {P.AUDIT}),
    (topics.AUDIT_FINDINGS, "AuditCheckpoint", {P.AUDIT}),
    (topics.MONITOR_ALERTS, "AnomalyDetected", {P.MONITOR}),
    (topics.DEADLETTER, "DeadLetter", {P.DEALER, P.SETTLEMENT, P.AUDIT, P.MONITOR}),
    (topics.TABLE_INBOX, "Deposit", set()),  # a type off its topic: nobody
    (topics.WALLET_REQUESTS, "NoSuchType", set()),
]  # fmt: skip


@pytest.mark.parametrize(
    ("topic", "type_", "allowed"), POLICY_CASES, ids=[f"{c[0]}:{c[1]}" for c in POLICY_CASES]
)
def test_the_policy_table(topic: str, type_: str, allowed: set[Principal]) -> None:
    """Exactly the listed principals may write each type on each topic; every other one is not permitted."""
    assert POLICY.get((topic, type_), frozenset()) == allowed
    key = "player:001" if topic == topics.WALLET_REQUESTS else "T1"
    field = {"casino.wallet.requests": "account_id", "casino.table.inbox": "table_id"}.get(topic, "x")
    for principal in Principal:
        # a decision's maker: a terminal names the seated player, the operator decides as the dealer
        by = {"decided_by": "dealer" if principal is Principal.OPERATOR else "player:001"}
        payload = {field: key, **(by if type_ == "Decision" else {})}
        env = request(type_, topic, key, payload, event_id="e", occurred_at=T, producer="x")
        refusal = authorize(env, principal)
        assert (refusal is None) == (principal in allowed), principal
        if refusal is not None:
            assert refusal.reason == "not_permitted"


KEY_CASES = [
    ("Deposit", "player:001", {"account_id": "player:002", "amount_minor": 1, "currency": "EUR"}, P.CASHIER),
    ("Withdraw", "player:001", {"account_id": "player:002", "amount_minor": 1, "currency": "EUR"}, P.CASHIER),
    ("PlaceBet", "player:001", {"account_id": "player:002"}, P.TERMINAL),
    ("Deposit", "player:001", {"amount_minor": 1, "currency": "EUR"}, P.CASHIER),
    ("OpenBetting", "T1", {"table_id": "T2"}, P.OPERATOR),
    ("CardRead", "T1", {"table_id": "T2", "card": "9S"}, P.SHOE),
]


@pytest.mark.parametrize(("type_", "key", "payload", "who"), KEY_CASES)
def test_a_key_that_disagrees_with_the_payload_is_refused(
    type_: str, key: str, payload: dict[str, Any], who: Principal
) -> None:
    """A request keyed to one account (or table) whose payload names another (or none) is ``key_mismatch``."""
    refusal = authorize(_req(type_, key, payload), who)
    assert refusal is not None and refusal.reason == "key_mismatch"
    agreeing = {
        **payload,
        "account_id" if _req(type_, key, {}).topic == topics.WALLET_REQUESTS else "table_id": key,
    }
    assert authorize(_req(type_, key, agreeing), who) is None


def test_keys_never_show_their_secret() -> None:
    """A key's and a guard's repr name the key id, never the secret."""
    key = RING.key(Principal.DEALER)
    shown = repr(key) + repr(RING.guard(Principal.DEALER)) + repr(RING)
    assert key.secret.hex() not in shown and str(key.secret) not in shown
    assert "dealer-demo0000" in shown


# --- enforcement in step ----------------------------------------------------------------------------


def _wallet() -> tuple[WalletStage, ProcessorState[WalletState]]:
    stage = Composition.demo().wallet_stage()
    return stage, initial_state(stage)


def test_step_refuses_before_handle_and_does_not_count_the_record_applied() -> None:
    """A forged deposit becomes a dead letter, moves no money and is not applied: the real record under
    the same id, arriving next, is applied in full (a forgery cannot squat an id)."""
    stage, state = _wallet()
    forged = _deposit(amount=800_000_00)
    out = step(stage, state, forged)
    assert [(e.type, e.payload["reason"], e.payload["original_event_id"]) for e in out] == [
        ("DeadLetter", "unauthenticated", "e1")
    ]
    assert state.inner == WalletState() and "e1" not in state.applied and state.heads == {}
    real = authenticate(_deposit(amount=10_000), RING.key(Principal.CASHIER))
    (applied,) = step(stage, state, real)
    assert applied.type == "FundsDeposited" and applied.payload["balance_after_minor"] == 10_000
    assert applied.event_id != out[0].event_id
    assert "e1" in state.applied and step(stage, state, real) == []


def test_refusals_by_principal_and_key_in_step() -> None:
    """A cashier's payout is ``not_permitted``; a cashier's deposit keyed to another player is
    ``key_mismatch``; neither changes a balance."""
    stage, state = _wallet()
    payout = {"payout_id": "p1", "bet_id": "b1", "account_id": "player:001", "table_id": "T1",
              "coup_id": "c1",
              "spot": "player", "stake_minor": 0, "result": "win", "win_minor": 0, "commission_minor": 0,
              "credit_minor": 800_000, "currency": "EUR",
              "postings": [{"account": "player:002", "amount_minor": -800_000},
                           {"account": "player:001", "amount_minor": 800_000}]}  # fmt: skip
    as_cashier = authenticate(_req("PayoutIssued", "player:001", payout), RING.key(P.CASHIER))
    mismatched = authenticate(
        _deposit(account="player:002", key="player:001", event_id="e2"), RING.key(P.CASHIER)
    )
    reasons = [step(stage, state, e)[0].payload["reason"] for e in (as_cashier, mismatched)]
    assert reasons == ["not_permitted", "key_mismatch"]
    assert state.inner == WalletState()


def test_outputs_are_signed_by_the_processor_key() -> None:
    """What a guarded processor writes verifies as its own principal (so the next consumer admits it)."""
    stage, state = _wallet()
    (out,) = step(stage, state, authenticate(_deposit(), RING.key(P.CASHIER)))
    key = verify(out, KEYS)
    assert isinstance(key, PrincipalKey) and key.principal == P.SETTLEMENT
    assert authorize(out, key.principal) is None


def test_a_guard_built_from_keys_admits_only_what_it_knows() -> None:
    """A guard with a keyring that lacks the writer's key id refuses the record as ``unauthenticated``."""
    own = RING.key(P.SETTLEMENT)
    guard = Guard(by_key_id([own]), own)
    refusal = guard.admit(authenticate(_deposit(), RING.key(P.CASHIER)))
    assert refusal is not None and refusal.reason == "unauthenticated"


# --- the monitor's alert on a refused record ---------------------------------------------------------


def _dead_letter_of(stage_name: str, record: Envelope) -> Envelope:
    made = {p.stage_name(): p for p in Composition.demo().processors()}[stage_name]
    (dead,) = step(made, initial_state(made), record)
    return dead


@pytest.mark.parametrize(
    ("stage_name", "record", "alerts"),
    [
        ("settlement.wallet", _deposit(), 1),  # refused by the primary consumer: one alert
        ("audit", _deposit(), 0),  # the same refusal by another reader of the topic: none
        ("settlement.wallet", authenticate(_deposit(amount=0), RING.key(P.CASHIER)), 0),  # not a refusal
    ],
)
def test_the_monitor_alerts_once_per_refused_record(stage_name: str, record: Envelope, alerts: int) -> None:
    """A dead letter of a record refused at the input by its topic's primary consumer raises one
    ``refused_record`` alert naming the record; other dead letters raise none."""
    dead = _dead_letter_of(stage_name, record)
    monitor = Composition.demo().monitor()
    out = step(monitor, initial_state(monitor), dead)
    assert len(out) == alerts
    for alert in out:
        assert alert.type == "AnomalyDetected" and alert.key == topics.WALLET_REQUESTS
        p = alert.payload
        assert (p["detector"], p["category"], p["severity"]) == ("refused_record", "trust", "warning")
        assert p["subject"]["event_ids"] == [record.event_id] and p["subject"]["type"] == "Deposit"
        assert p["observed"] == {"reason": "unauthenticated"}


def test_the_hash_check_from_the_raw_bytes_agrees_with_the_full_one() -> None:
    """Over a record's canonical bytes the hash is cut out of the bytes; edited bytes still fail and
    bytes in another form fall back to re-serialising: the answer is the same either way."""
    signed = authenticate(_deposit(), RING.key(P.CASHIER))
    for env in (signed, _deposit()):
        assert hash_of_bytes(env.to_json(), env) == env.hash
    edited = signed.to_json().replace(b'"amount_minor":10000', b'"amount_minor":99999')
    forged = parse_record(edited)
    assert verify(forged, KEYS, raw=edited) == Refusal(
        Reason.UNAUTHENTICATED, "the hash does not match the record's content"
    )
    pretty = json.dumps(json.loads(signed.to_json()), indent=1).encode()
    assert hash_of_bytes(pretty, signed) is None
    assert verify(parse_record(pretty), KEYS, raw=pretty) == RING.key(P.CASHIER)


@given(st.binary(min_size=16, max_size=100), st.lists(st.text(max_size=80), min_size=1, max_size=4))
def test_a_key_macs_what_the_mac_function_does(secret: bytes, hashes: list[str]) -> None:
    """A key's own MAC (its keyed HMAC copied per record) is :func:`mac` under its secret, call after
    call, for secrets shorter and longer than SHA-256's block: the keyed state is never consumed by a
    record."""
    key = PrincipalKey(Principal.CASHIER, "cashier-demo0000", secret)
    for record_hash in hashes + hashes:
        assert key.mac(record_hash) == mac(secret, record_hash)


@pytest.mark.parametrize("length", [16, 63, 64, 65, 200])
def test_a_key_macs_as_hmac_does_at_every_secret_length_around_the_block(length: int) -> None:
    """A secret of SHA-256's block size or longer (hashed first, RFC 2104) MACs as :func:`hmac.digest`
    does."""
    secret = bytes(range(7, 7 + length % 250)) + bytes(max(0, length - 250))
    key = PrincipalKey(Principal.CASHIER, "cashier-demo0000", secret)
    record_hash = "ab" * 32
    assert key.mac(record_hash) == hmac.digest(secret, record_hash.encode(), "sha256").hex()
