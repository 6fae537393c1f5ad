"""``casino-ledger keys public --in KEYRING --out PUBLIC``: the public half of a keyring (docs/trust.md).

A regulator verifies audit's Ed25519 checkpoints with this file and nothing else. It holds, per key
id, the public key derived from the audit principal's secret (:mod:`services.core.signing`):
``{"format": "casino-ledger/public-keyring-1", "ed25519": {"<key_id>": "<public key hex>"}}``.
When ``--out`` already is a public keyring, its keys are kept (retired audit keys stay verifiable, so
a ten-year-old log still verifies after a key rotation); the file gets the new key added.

Reads the keyring JSON itself (format ``casino-ledger/keyring-1``); prints one JSON line naming the key
ids written, never a secret. Bad input: one line on stderr, exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from services.runtime.outputs import PUBLIC_KEYRING, WouldOverwrite, check_output

KEYRING_FORMAT = "casino-ledger/keyring-1"


class KeyringError(Exception):
    """A keyring or public keyring file that cannot be used (the message is one line, no secret)."""


def audit_secret(doc: Any) -> tuple[str, bytes]:
    """The audit principal's key id and secret from a keyring document."""
    if not isinstance(doc, dict) or doc.get("format") != KEYRING_FORMAT:
        raise KeyringError(f"not a keyring (format {KEYRING_FORMAT!r} expected)")
    audit = (doc.get("principals") or {}).get("audit")
    if not isinstance(audit, dict):
        raise KeyringError("the keyring has no audit principal")
    key_id, secret_hex = audit.get("key_id"), audit.get("secret_hex")
    if not isinstance(key_id, str) or not key_id:
        raise KeyringError("the audit principal has no key_id")
    try:
        secret = bytes.fromhex(str(secret_hex))
    except ValueError:
        raise KeyringError("the audit principal's secret_hex is not hex") from None
    if len(secret) < 16:
        raise KeyringError("the audit principal's secret is shorter than 16 bytes")
    return key_id, secret


def public_keys(keyring: Any, existing: Any = None) -> dict[str, Any]:
    """The public keyring document: the audit key of ``keyring`` plus the keys of ``existing`` (an
    earlier public keyring document, or ``None``)."""
    from services.core.signing import parse_public_keyring, public_keyring, signing_key_from_secret  # noqa: PLC0415

    key_id, secret = audit_secret(keyring)
    keys = parse_public_keyring(existing) if existing is not None else {}
    public = signing_key_from_secret(key_id, secret).public_hex()
    if keys.get(key_id, public) != public:
        raise KeyringError(f"key id {key_id} already names another public key in the output file")
    keys[key_id] = public
    return public_keyring(keys)


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise KeyringError(f"cannot read the {what} {path}: {exc.strerror}") from None
    except ValueError:
        raise KeyringError(f"the {what} {path} is not JSON") from None


def keys_public_main(args: argparse.Namespace) -> int:
    """Write the public keyring; print ``{"out", "key_ids"}``."""
    out = Path(args.out)
    try:  # a public keyring is merged into; the keyring read, a secret one or a log never written over
        check_output(
            out, "--out", extra=[args.keyring_in], allow=frozenset({PUBLIC_KEYRING}), environment=False
        )
        keyring = _read_json(Path(args.keyring_in), "keyring")
        existing = _read_json(out, "public keyring") if out.exists() else None
        doc = public_keys(keyring, existing)
    except (KeyringError, ValueError, WouldOverwrite) as exc:
        print(f"casino-ledger: error: {exc}", file=sys.stderr)  # noqa: T201
        return 2
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.chmod(tmp, 0o644)  # public on purpose
    tmp.replace(out)
    print(json.dumps({"out": str(out), "key_ids": sorted(doc["ed25519"])}))  # noqa: T201
    return 0
