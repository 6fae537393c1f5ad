"""Per-principal Ed25519 keys, split key files and signed heads (docs/trust.md, issue 28)."""

from __future__ import annotations

import hashlib
import json
import stat
from pathlib import Path

import pytest

from services.cli import main
from services.core import attest, topics
from services.core.envelope import Draft, Envelope, seal_encoded
from services.core.errors import Reason
from services.core.trust import Guard, Principal, authorize, verify, verify_signature
from services.runtime.compose import Composition
from services.runtime.keyring import KeyringError, load_keyring, new_keyring, parse_keyring


def _event(
    topic: str, key: str, seq: int, type_: str = "CardDealt", at: str = "2026-11-22T20:00:00.000Z"
) -> Envelope:
    from services.core.envelope import ChainHead  # noqa: PLC0415

    head = ChainHead(seq - 1, "ab" * 32) if seq else None
    env, _ = seal_encoded(Draft(type_, topic, key, {"n": seq}), event_id=f"e-{key}-{seq}", occurred_at=at,
                          producer="dealer", cause=None, head=head)  # fmt: skip
    return env


def test_keys_new_split_writes_one_file_per_principal_with_its_own_secrets_only(tmp_path: Path) -> None:
    """Each key file is 0600 and holds its principal's seed only; a service's holds the others' MAC
    secrets marked verify-only; only audit's holds the checkpoint key; the public keyring lists every
    principal's public key with its fingerprint, SHA-256 of the raw key."""
    d = tmp_path / "keys"
    assert main(["keys", "new", "--split", str(d)]) == 0
    public = json.loads((d / "public-keyring.json").read_text())
    assert set(public["principals"]) == {p.value for p in Principal}
    for p in Principal:
        path = d / f"{p.value}.json"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        doc = json.loads(path.read_text())
        own = doc["principals"][p.value]
        assert "signing_seed_hex" in own
        others = {q: e for q, e in doc["principals"].items() if q != p.value}
        assert all(e.get("verify_only") is True and "signing_seed_hex" not in e for e in others.values())
        assert bool(others) == (p.value in {"dealer", "settlement", "audit", "monitor"})
        assert ("checkpoint_seed_hex" in doc) == (p is Principal.AUDIT)
        ring = load_keyring(path)
        entry = public["principals"][p.value]
        assert ring.key(p).public_hex == entry["ed25519"]
        assert entry["fingerprint"] == hashlib.sha256(bytes.fromhex(entry["ed25519"])).hexdigest()
    audit = load_keyring(d / "audit.json")
    assert {audit.checkpoint_key().key_id: audit.checkpoint_key().public_hex()} == public["ed25519"]
    assert main(["keys", "new", "--split", str(d)]) == 2  # never overwritten


def test_a_key_file_runs_its_own_service_and_no_other(tmp_path: Path) -> None:
    """The dealer's key file builds the dealer; asking it for audit (its checkpoint key) or for a
    terminal's signing key is a one-line KeyringError naming what is missing."""
    assert main(["keys", "new", "--split", str(tmp_path)]) == 0
    dealer = Composition(load_keyring(tmp_path / "dealer.json"))
    assert dealer.dealer().guard is not None
    with pytest.raises(KeyringError, match="checkpoint key") as caught:
        dealer.audit()
    assert "\n" not in str(caught.value)
    with pytest.raises(KeyringError, match="MAC secret only"):
        dealer.keyring.signing_key(Principal.TERMINAL)
    with pytest.raises(KeyringError, match="no key of principal 'dealer'"):
        Composition(load_keyring(tmp_path / "terminal.json")).dealer()


def test_an_older_keyring_still_loads_with_keys_derived_from_its_secrets() -> None:
    """A keyring written before per-principal seeds loads; its seeds and checkpoint key are derived,
    so the same file gives the same public keys every time."""
    doc = new_keyring().to_json()
    entries = {
        p: {"key_id": e["key_id"], "secret_hex": e["secret_hex"]} for p, e in doc["principals"].items()
    }
    old = {"format": doc["format"], "api_keys": [], "principals": entries}
    a, b = parse_keyring(old), parse_keyring(json.loads(json.dumps(old)))
    assert a.derived and a.public_document() == b.public_document()
    assert a.key(Principal.DEALER).can_sign


def test_an_attestation_verifies_with_the_public_key_only_and_names_every_advanced_head() -> None:
    """The batch's attestation names the last head of each chain it advanced, is chained on the writer's
    key, and its signature over its hash verifies with the writer's public key alone."""
    ring = new_keyring()
    guard = ring.guard(Principal.DEALER)
    chain = attest.AttestChain("dealer")
    outs = [
        _event(topics.TABLE_EVENTS, "T1", 0),
        _event(topics.TABLE_EVENTS, "T1", 1),
        _event(topics.TABLE_EVENTS, "T2", 0),
    ]
    [(env, raw)] = attest.attest_batch(chain, outs, guard)
    assert Envelope.model_validate_json(raw) == env and env.seq == 0 and env.prev_hash is None
    assert [(h["key"], h["seq"], h["hash"]) for h in env.payload["heads"]] == [
        ("T1", 1, outs[1].hash),
        ("T2", 0, outs[2].hash),
    ]
    public = ring.key(Principal.DEALER).public_hex
    assert public is not None and verify_signature(public, env.hash, env.auth["sig"])  # type: ignore[index]
    assert env.expected_hash() == env.hash
    assert not verify_signature(ring.key(Principal.SETTLEMENT).public_hex or "", env.hash, env.auth["sig"])  # type: ignore[index]
    [(second, _)] = attest.attest_batch(chain, [_event(topics.TABLE_EVENTS, "T1", 2)], guard)
    assert (second.seq, second.prev_hash) == (1, env.hash)
    assert attest.attest_batch(chain, [], guard) == []


def test_seals_at_shoe_close_day_end_and_idle() -> None:
    """A batch that closed a shoe is sealed; a batch of a later day follows an empty day seal; the idle
    seal comes once after the last attestation and not again."""
    guard = new_keyring().guard(Principal.DEALER)
    chain = attest.AttestChain("dealer")
    assert attest.seal(chain, guard) == []  # nothing attested: nothing to seal
    [(first, _)] = attest.attest_batch(chain, [_event(topics.TABLE_EVENTS, "T1", 0)], guard)
    assert first.payload["seal"] is None and not chain.sealed
    next_day = _event(topics.TABLE_EVENTS, "T1", 1, at="2026-11-23T06:00:00.000Z")
    day, batch = attest.attest_batch(chain, [next_day], guard)
    assert (day[0].payload["seal"], day[0].payload["heads"], day[0].occurred_at) == (
        "day_closed",
        [],
        first.occurred_at,
    )
    assert batch[0].payload["seal"] is None and batch[0].prev_hash == day[0].hash
    [(shoe, _)] = attest.attest_batch(chain, [_event(topics.TABLE_EVENTS, "T1", 2, "ShoeClosed")], guard)
    assert shoe.payload["seal"] == "shoe_closed" and attest.seal(chain, guard) == []
    attest.attest_batch(chain, [_event(topics.TABLE_EVENTS, "T1", 3)], guard)
    [(idle, _)] = attest.seal(chain, guard)
    assert idle.payload == {"writer": "dealer", "heads": [], "seal": "idle", "dead_letters": []}
    assert attest.seal(chain, guard) == []


def test_only_the_writer_may_attest_its_heads() -> None:
    """A signed head verifies through the guard like any record; the policy lets a principal attest
    only its own writers' heads (the dealer may not attest settlement's)."""
    ring = new_keyring()
    guard = ring.guard(Principal.DEALER)
    [(env, _)] = attest.attest_batch(
        attest.AttestChain("dealer"), [_event(topics.TABLE_EVENTS, "T1", 0)], guard
    )
    key = verify(env, Guard(ring.by_key_id(), ring.key(Principal.AUDIT)).keys)
    assert not isinstance(key, tuple) and key.principal is Principal.DEALER
    assert authorize(env, Principal.DEALER) is None
    [(forged, _)] = attest.attest_batch(
        attest.AttestChain("settlement.wallet"), [_event(topics.TABLE_EVENTS, "T1", 0)], guard
    )
    refusal = authorize(forged, Principal.DEALER)
    assert refusal is not None and refusal.reason is Reason.NOT_PERMITTED
    tampered = env.model_copy(update={"auth": {"key_id": env.auth["key_id"], "sig": "00" * 64}})  # type: ignore[index]
    assert isinstance(verify(tampered, ring.by_key_id()), tuple)


def test_a_batch_names_the_dead_letters_it_wrote_even_without_a_chain() -> None:
    """Dead letters are unchained: the attestation names each one's hash, in the order written, and a
    batch of dead letters alone is attested too."""
    guard = new_keyring().guard(Principal.DEALER)
    chain = attest.AttestChain("dealer")
    dead = [
        seal_encoded(Draft("DeadLetter", topics.DEADLETTER, topics.TABLE_INBOX, {"n": n}, chained=False),
                     event_id=f"d-{n}", occurred_at="2026-11-22T20:00:00.000Z", producer="dealer",
                     cause=None, head=None)[0]
        for n in range(2)
    ]  # fmt: skip
    [(only, _)] = attest.attest_batch(chain, dead, guard)
    assert only.payload["heads"] == [] and only.payload["dead_letters"] == [d.hash for d in dead]
    assert attest.attest_batch(chain, [], guard) == []
