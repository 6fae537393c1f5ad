"""Signed payloads: HMAC-SHA256 over canonical JSON, with a key id (tamper evidence, issue 5).

A signed payload carries three extra fields: ``key_id`` (which key signed it), ``algorithm``
(:data:`ALGORITHM`) and ``signature`` (lower-case hex HMAC-SHA256). The MAC covers the canonical JSON
(:func:`services.core.envelope.canonical`) of the payload *without* ``signature`` — so ``key_id`` and
``algorithm`` are covered too and cannot be swapped without breaking it. Verification compares in
constant time and answers with a reason, never an exception, so a replay can report what was wrong.

Keys are pure data handed in by the shell (which reads them from configuration); this module never
reads the environment, a clock or a random source. :data:`DEMO_KEY` is public on purpose: it lets the
demo and the tests sign and verify with nothing configured, and proves nothing against a forger who
has read this file. Production sets ``CASINO_AUDIT_HMAC_KEY`` / ``CASINO_AUDIT_KEY_ID``.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from services.core.envelope import canonical

ALGORITHM: Final = "hmac-sha256"
"""The only algorithm this module signs with; a payload naming another one does not verify."""

SIGNATURE_FIELDS: Final = ("key_id", "algorithm", "signature")
"""The fields :func:`sign` adds to a payload."""

DEMO_KEY_ID: Final = "demo-2026"
"""Key id of :data:`DEMO_KEY`."""

DEMO_KEY: Final = hashlib.sha256(b"casino-ledger public demo audit key - not a secret").digest()
"""The documented demo key (32 bytes): public, used when no key is configured. Never for production."""


@dataclass(frozen=True, slots=True)
class SigningKey:
    """A secret key and its id. ``repr`` hides the secret so it never reaches a log line."""

    key_id: str
    secret: bytes

    def __post_init__(self) -> None:
        if not self.key_id or len(self.secret) < 16:
            raise ValueError("a signing key needs an id and at least 16 bytes of secret")

    def __repr__(self) -> str:
        return f"SigningKey(key_id={self.key_id!r}, secret=<{len(self.secret)} bytes>)"


DEMO_SIGNING_KEY: Final = SigningKey(DEMO_KEY_ID, DEMO_KEY)
""":data:`DEMO_KEY` with its id."""


def mac(payload: Mapping[str, Any], secret: bytes) -> str:
    """HMAC-SHA256 (hex) of the canonical JSON of ``payload`` without its ``signature`` field."""
    body = {k: v for k, v in payload.items() if k != "signature"}
    return hmac.new(secret, canonical(body), hashlib.sha256).hexdigest()


def sign(payload: Mapping[str, Any], key: SigningKey) -> dict[str, Any]:
    """``payload`` with ``key_id``, ``algorithm`` and ``signature`` set (any old values replaced)."""
    body = {k: v for k, v in payload.items() if k not in SIGNATURE_FIELDS}
    body["key_id"] = key.key_id
    body["algorithm"] = ALGORITHM
    body["signature"] = mac(body, key.secret)
    return body


def verify(payload: Mapping[str, Any], keys: Mapping[str, bytes]) -> str | None:
    """``None`` when ``payload`` is signed by one of ``keys`` (by key id), else why not, as a short
    reason: ``unsigned``, ``unknown_algorithm``, ``unknown_key_id`` or ``bad_signature``."""
    signature = payload.get("signature")
    if not isinstance(signature, str) or not signature:
        return "unsigned"
    if payload.get("algorithm") != ALGORITHM:
        return "unknown_algorithm"
    secret = keys.get(str(payload.get("key_id")))
    if secret is None:
        return "unknown_key_id"
    if not hmac.compare_digest(mac(payload, secret), signature):
        return "bad_signature"
    return None
