"""Signed checkpoints: Ed25519 over canonical JSON, with a key id (docs/trust.md).

A signed payload carries three extra fields: ``key_id`` (which key signed it), ``algorithm``
(:data:`ALGORITHM`) and ``signature`` (lower-case hex, 64 bytes). The signature covers the canonical
JSON (:func:`services.core.envelope.canonical`) of the payload *without* ``signature`` — so ``key_id``
and ``algorithm`` are covered too and cannot be swapped without breaking it. Ed25519 signatures are
deterministic (RFC 8032): the same payload and key give the same bytes, so replays stay byte-identical.

A regulator verifies with the *public* keyring only (``casino-ledger keys public``): it proves that the
holder of audit's secret wrote the checkpoint, and lets nobody else write one.

**Keys.** Audit's private key is derived from the audit principal's keyring secret:
``Ed25519PrivateKey.from_private_bytes(HMAC-SHA256(secret, b"casino-ledger/ed25519-checkpoints"))``
under the principal's ``key_id`` (:func:`signing_key_from_secret`). Keys are pure data handed in by the
shell; this module never reads the environment, a clock or a random source.

**Demo key (public on purpose).** :data:`DEMO_SIGNING_KEY` is derived from :data:`DEMO_AUDIT_SECRET`,
which is in this file: it lets the demo and the tests sign and verify with nothing configured, and
proves nothing against a forger who has read this file. Production passes the keyring's audit key.

**Legacy.** Checkpoints of the earlier HMAC-SHA256 scheme (``algorithm: "hmac-sha256"``) cannot be
verified without the casino's secret; they are reported as ``unknown_algorithm``.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from services.core.envelope import canonical
from services.core.trust import DEMO_KEYRING_SEED

ALGORITHM: Final = "ed25519"
"""The only algorithm this module signs with; a payload naming another one does not verify."""

SIGNATURE_FIELDS: Final = ("key_id", "algorithm", "signature")
"""The fields :func:`sign` adds to a payload."""

KEY_CONTEXT: Final = b"casino-ledger/ed25519-checkpoints"
"""The HMAC message that turns the audit principal's secret into its Ed25519 private key."""

PUBLIC_KEYRING_FORMAT: Final = "casino-ledger/public-keyring-1"
"""The ``format`` of a public keyring file (``{"format": ..., "ed25519": {key_id: public hex}}``)."""

DEMO_KEY_ID: Final = "audit-demo0000"
"""Key id of the public demo key: the audit principal's in the public demo keyring (a real keyring's
look like ``audit-<8 hex>``)."""

DEMO_AUDIT_SECRET: Final = hmac.digest(DEMO_KEYRING_SEED, b"audit", "sha256")
"""DEMO AND TESTS ONLY: the audit principal's secret in the public demo keyring
(:data:`services.core.trust.DEMO_KEYRING_SEED`), from which the demo checkpoint key is derived, so
that a pipeline on the demo keyring and a processor built with no key sign alike."""


@dataclass(frozen=True, slots=True)
class SigningKey:
    """A checkpoint signing key: its id and its 32-byte Ed25519 private seed. ``repr`` hides the seed."""

    key_id: str
    seed: bytes

    def __post_init__(self) -> None:
        if not self.key_id or len(self.seed) != 32:
            raise ValueError("a signing key needs an id and a 32-byte Ed25519 seed")

    def __repr__(self) -> str:
        return f"SigningKey(key_id={self.key_id!r}, seed=<hidden>)"

    def private(self) -> Ed25519PrivateKey:
        """The Ed25519 private key."""
        return Ed25519PrivateKey.from_private_bytes(self.seed)

    def public_hex(self) -> str:
        """The raw 32-byte public key, hex."""
        return self.private().public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()


def signing_key_from_secret(key_id: str, secret: bytes) -> SigningKey:
    """Audit's checkpoint key from the audit principal's keyring secret (derivation: module docstring)."""
    return SigningKey(key_id, hmac.new(secret, KEY_CONTEXT, hashlib.sha256).digest())


DEMO_SIGNING_KEY: Final = signing_key_from_secret(DEMO_KEY_ID, DEMO_AUDIT_SECRET)
"""DEMO AND TESTS ONLY: the checkpoint key derived from :data:`DEMO_AUDIT_SECRET`."""

DEMO_PUBLIC_KEYS: Final[Mapping[str, str]] = {DEMO_KEY_ID: DEMO_SIGNING_KEY.public_hex()}
"""DEMO AND TESTS ONLY: the public keyring that verifies :data:`DEMO_SIGNING_KEY`."""


def _body(payload: Mapping[str, Any]) -> bytes:
    return canonical({k: v for k, v in payload.items() if k != "signature"})


def sign(payload: Mapping[str, Any], key: SigningKey) -> dict[str, Any]:
    """``payload`` with ``key_id``, ``algorithm`` and ``signature`` set (any old values replaced)."""
    body = {k: v for k, v in payload.items() if k not in SIGNATURE_FIELDS}
    body["key_id"] = key.key_id
    body["algorithm"] = ALGORITHM
    body["signature"] = key.private().sign(_body(body)).hex()
    return body


def verify(payload: Mapping[str, Any], public_keys: Mapping[str, str]) -> str | None:
    """``None`` when ``payload`` is signed by one of ``public_keys`` (key id → public key hex), else why
    not: ``unsigned``, ``unknown_algorithm``, ``unknown_key_id`` or ``bad_signature``."""
    signature = payload.get("signature")
    if not isinstance(signature, str) or not signature:
        return "unsigned"
    if payload.get("algorithm") != ALGORITHM:
        return "unknown_algorithm"
    public_hex = public_keys.get(str(payload.get("key_id")))
    if public_hex is None:
        return "unknown_key_id"
    try:
        public = Ed25519PublicKey.from_public_bytes(bytes.fromhex(public_hex))
        public.verify(bytes.fromhex(signature), _body(payload))
    except (InvalidSignature, ValueError):
        return "bad_signature"
    return None


def public_keyring(keys: Mapping[str, str]) -> dict[str, Any]:
    """The public keyring document for ``keys`` (key id → public key hex), keys sorted."""
    return {"format": PUBLIC_KEYRING_FORMAT, "ed25519": dict(sorted(keys.items()))}


def parse_public_keyring(doc: Any) -> dict[str, str]:
    """Key id → public key hex from a public keyring document; ``ValueError`` saying what is wrong."""
    if not isinstance(doc, dict) or doc.get("format") != PUBLIC_KEYRING_FORMAT:
        raise ValueError(f"not a public keyring (format {PUBLIC_KEYRING_FORMAT!r} expected)")
    keys = doc.get("ed25519")
    if not isinstance(keys, dict) or not keys:
        raise ValueError("the public keyring holds no ed25519 key")
    out: dict[str, str] = {}
    for key_id, public_hex in keys.items():
        if not isinstance(public_hex, str) or len(public_hex) != 64:
            raise ValueError(f"key {key_id!r}: a public key is 64 hex digits")
        bytes.fromhex(public_hex)
        out[str(key_id)] = public_hex
    return out


def fingerprint(public_hex: str) -> str:
    """A public key's fingerprint: ``sha256:`` and the SHA-256 (hex) of its raw 32 bytes. Reports print it
    beside the key id, so a regulator compares it with the one the casino published: a key id is only a
    name, and anyone can write a keyring that gives a genuine id another key."""
    return "sha256:" + hashlib.sha256(bytes.fromhex(public_hex)).hexdigest()
