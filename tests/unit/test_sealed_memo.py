"""The memo of sealed records (:class:`services.core.trust.Sealed`): a record whose bytes are exactly the
bytes this process sealed is admitted without verifying it again; any other bytes are verified in full;
audit never asks the memo."""

from __future__ import annotations

from typing import Any

import pytest

from services.core import topics, trust
from services.core.envelope import Envelope, parse_record
from services.core.processor import Processor, initial_state, step_encoded
from services.core.trust import Guard, Principal, Sealed, authenticate, by_key_id
from services.runtime.compose import Composition
from services.runtime.keyring import demo_keyring
from tests.helpers.spies import count_verify

RING = demo_keyring()
T = "2026-11-22T20:00:00.000Z"


def _open_table() -> Envelope:
    from services.core.envelope import request  # noqa: PLC0415

    payload = {"table_id": "T1", "variant": "punto_banco", "currency": "EUR"}
    env = request("OpenTable", topics.TABLE_INBOX, "T1", payload, event_id="open-1", occurred_at=T,
                  producer="operator")  # fmt: skip
    return authenticate(env, RING.key(Principal.OPERATOR))


def _sealed_by_dealer(memo: Sealed) -> tuple[Envelope, bytes]:
    """The dealer's ``TableOpened`` (its bytes as sealed), sealed through ``memo``."""
    dealer = Composition.demo().dealer()
    out = step_encoded(dealer, initial_state(dealer), _open_table(), _open_table().to_json(), memo)
    (opened,) = [(e, b) for e, b in out if e.type == "TableOpened"]
    return opened


def _read(reader: Processor[Any], raw: bytes, memo: Sealed | None) -> list[tuple[Envelope, bytes]]:
    return step_encoded(reader, initial_state(reader), parse_record(raw), raw, memo)


def test_every_output_is_kept_with_its_bytes_and_signer() -> None:
    """Sealing through a memo keeps each output's exact bytes and the key of the processor that signed."""
    memo = Sealed()
    env, raw = _sealed_by_dealer(memo)
    assert raw == env.to_json()
    assert memo.key_of(env.event_id, raw) == RING.key(Principal.DEALER)
    assert memo.key_of(env.event_id, raw[:-1] + b" ") is None
    assert memo.key_of("another id", raw) is None


@pytest.mark.parametrize("stage", ["settlement.payout", "monitor"])
def test_a_record_read_back_as_sealed_is_admitted_without_verifying_it(
    stage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dealer's output read by settlement or the monitor, its bytes as sealed: no verification, the
    record applied as a verified one is (same outputs, same bytes, same state)."""
    memo = Sealed()
    env, raw = _sealed_by_dealer(memo)
    reader = {p.stage_name(): p for p in Composition.demo().processors()}[stage]
    full = step_encoded(reader, state := initial_state(reader), parse_record(raw), raw)
    seen = count_verify(monkeypatch)
    memoised = step_encoded(reader, state_memo := initial_state(reader), parse_record(raw), raw, memo)
    assert seen == []
    assert memoised == full and env.event_id in state_memo.applied
    assert state_memo.inner == state.inner and state_memo.heads == state.heads


def _tampered(raw: bytes) -> bytes:
    """``raw`` with one byte of its payload changed (still a record that decodes)."""
    at = raw.index(b'"variant":"punto_banco"') + len(b'"variant":"punto_banc')
    assert raw[at : at + 1] == b"o"
    return raw[:at] + b"O" + raw[at + 1 :]


def test_a_tampered_byte_in_a_sealed_record_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A record under a sealed record's id with one byte changed is verified in full and refused as
    ``unauthenticated``: a dead letter, nothing applied."""
    memo = Sealed()
    env, raw = _sealed_by_dealer(memo)
    forged = _tampered(raw)
    assert parse_record(forged).event_id == env.event_id
    reader = Composition.demo().payout_stage()
    seen = count_verify(monkeypatch)
    state = initial_state(reader)
    (dead,) = step_encoded(reader, state, parse_record(forged), forged, memo)
    assert seen == [env.event_id]
    assert dead[0].type == "DeadLetter" and dead[0].payload["reason"] == "unauthenticated"
    assert env.event_id not in state.applied


def test_bytes_not_sealed_here_are_verified(monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty memo (another process sealed the record) admits nothing by itself: verified in full."""
    env, raw = _sealed_by_dealer(Sealed())
    seen = count_verify(monkeypatch)
    _read(Composition.demo().monitor(), raw, Sealed())
    assert seen == [env.event_id]


def test_audit_never_asks_the_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    """Audit verifies a record sealed in this process as any other (its independence: docs/trust.md),
    and a guard asked to admit without checking the hash ignores the memo."""
    memo = Sealed()
    env, raw = _sealed_by_dealer(memo)
    seen = count_verify(monkeypatch)
    _read(Composition.demo().audit(), raw, memo)
    assert seen == [env.event_id]
    guard = RING.guard(Principal.SETTLEMENT)
    assert guard.admit(parse_record(raw), check_hash=False, raw=raw, sealed=memo) is None
    assert seen == [env.event_id, env.event_id]


def test_a_memo_hit_under_a_key_the_guard_does_not_know_is_refused() -> None:
    """The memo says which key signed; a guard that does not hold that key (under that id) refuses the
    record as it would without the memo."""
    memo = Sealed()
    _env, raw = _sealed_by_dealer(memo)
    own = RING.key(Principal.SETTLEMENT)
    for keys in ([own], [own, trust.PrincipalKey(Principal.DEALER, "dealer-demo0000", b"y" * 32)]):
        refusal = Guard(by_key_id(keys), own).admit(parse_record(raw), raw=raw, sealed=memo)
        assert refusal is not None and refusal.reason == "unauthenticated"


def test_a_memo_hit_is_still_authorized() -> None:
    """Sealed by the dealer, the bytes carry the dealer's authority only: the same bytes remembered as
    sealed by a principal the policy does not allow on that topic are refused ``not_permitted``."""
    memo = Sealed()
    env, raw = _sealed_by_dealer(Sealed())
    memo.add(env.event_id, raw, RING.key(Principal.MONITOR))
    refusal = RING.guard(Principal.SETTLEMENT).admit(parse_record(raw), raw=raw, sealed=memo)
    assert refusal is not None and refusal.reason == "not_permitted"


def test_the_memo_forgets_its_oldest_records_first() -> None:
    """Bounded: past ``kept`` records the oldest is forgotten (a full verification, never a refusal)."""
    memo = Sealed(kept=2)
    key = RING.key(Principal.DEALER)
    for n in range(3):
        memo.add(f"e{n}", b"%d" % n, key)
    assert len(memo) == 2
    assert memo.key_of("e0", b"0") is None and memo.key_of("e2", b"2") == key


def test_a_memo_for_some_topics_keeps_only_outputs_to_them() -> None:
    """A Kafka worker reads back few of the topics it writes: what goes elsewhere is not kept."""
    memo = Sealed(topics=frozenset({topics.WALLET_REQUESTS}))
    key = RING.key(Principal.SETTLEMENT)
    memo.add("payout", b"1", key, topics.WALLET_REQUESTS)
    memo.add("credit", b"2", key, topics.WALLET_EVENTS)
    assert memo.key_of("payout", b"1") == key
    assert memo.key_of("credit", b"2") is None and len(memo) == 1
