"""The hash of a record computed from its own bytes (the replay's and step's fast path) agrees with
the canonical re-serialisation, for authenticated records too, and never accepts altered bytes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from services.core import topics
from services.core.envelope import Envelope, hash_of_bytes, request
from services.core.trust import Principal, PrincipalKey, authenticate

KEY = PrincipalKey(Principal.CASHIER, "cashier-0000abcd", bytes(range(32)))


def _deposit(amount: int) -> Envelope:
    return request("Deposit", topics.WALLET_REQUESTS, "player:1",
                   {"account_id": "player:1", "amount_minor": amount, "currency": "EUR"},
                   event_id=f"d-{amount}", occurred_at="2026-11-22T20:00:00.000Z",
                   producer="cashier")  # fmt: skip


@given(st.integers(0, 10**12))
def test_an_authenticated_record_hashes_from_its_bytes_as_it_was_sealed(amount: int) -> None:
    """A signed record's canonical bytes, with ``auth`` and ``hash`` cut out, hash to its ``hash``
    (the fast path hits: before this, records with ``auth`` always took the slow path in replay)."""
    env = authenticate(_deposit(amount), KEY)
    assert hash_of_bytes(env.to_json(), env) == env.hash == env.expected_hash()


def test_an_auth_whose_key_id_json_escapes_takes_the_slow_path_or_agrees() -> None:
    """A key id with a quote (escaped in canonical JSON) never makes the fast path accept other bytes:
    it answers the true hash or ``None`` (the caller then re-serialises)."""
    env = _deposit(5).model_copy(update={"auth": {"key_id": 'a"b', "mac": "00"}})
    assert hash_of_bytes(env.to_json(), env) in (None, env.expected_hash())


def test_altered_bytes_never_hash_to_the_recorded_hash() -> None:
    """Changing one digit of the amount in the bytes changes the computed hash."""
    env = authenticate(_deposit(1234), KEY)
    raw = env.to_json().replace(b'"amount_minor":1234', b'"amount_minor":1235')
    assert hash_of_bytes(raw, env) != env.hash


@given(st.integers(0, 10**12))
def test_an_unauthenticated_record_hashes_from_its_bytes(amount: int) -> None:
    """Without ``auth`` only the ``hash`` member is cut out, and the pieces hash to the sealed hash."""
    env = _deposit(amount)
    assert hash_of_bytes(env.to_json(), env) == env.hash == env.expected_hash()


def test_an_auth_of_another_shape_is_cut_out_canonically() -> None:
    """An ``auth`` with other members than ``key_id`` and ``mac`` is matched by its canonical JSON."""
    env = _deposit(7).model_copy(update={"auth": {"key_id": "k", "mac": "00", "v": "2"}})
    assert hash_of_bytes(env.to_json(), env) == env.expected_hash()
    assert hash_of_bytes(env.to_json().replace(b'"v":"2"', b'"v":"3"'), env) is None


def test_bytes_without_the_hash_member_are_not_the_canonical_form() -> None:
    """Bytes that lack the ``hash`` member are answered ``None`` (the caller re-serialises), never a
    hash computed from something else."""
    env = authenticate(_deposit(9), KEY)
    raw = env.to_json()
    moved = raw.replace(b',"hash":"' + env.hash.encode() + b'"', b"")
    assert hash_of_bytes(moved, env) is None
