"""``casino-ledger keys public --in KEYRING --out PUBLIC``: the public half of a keyring (docs/trust.md).

A regulator verifies with this file and nothing else: audit's Ed25519 checkpoint key, per key id, under
``ed25519``, and every principal's Ed25519 key (what it signs its chain heads with) under
``principals``, with its fingerprint (SHA-256 of the raw public key, hex)::

    {"format": "casino-ledger/public-keyring-1", "ed25519": {"<audit key_id>": "<public hex>"},
     "principals": {"<name>": {"key_id": "...", "ed25519": "<public hex>", "fingerprint": "<hex>"}}}

When ``--out`` already is a public keyring, its checkpoint keys are kept (retired audit keys stay
verifiable, so a ten-year-old log still verifies after a key rotation), and so are its writer keys of
other key ids (under ``retired``); the file gets the new keys added.

Prints one JSON line naming the key ids written, never a secret. Bad input: one line on stderr, exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from services.core.signing import parse_public_keyring
from services.runtime.keyring import KeyringError, parse_keyring
from services.runtime.outputs import PUBLIC_KEYRING, WouldOverwrite, check_output


def public_keys(keyring: Any, existing: Any = None) -> dict[str, Any]:
    """The public keyring document of ``keyring`` (its JSON document) plus the keys of ``existing`` (an
    earlier public keyring document, or ``None``)."""
    ring = parse_keyring(keyring, partial=True)
    doc = ring.public_document()
    if existing is not None:
        old = parse_public_keyring(existing)
        for key_id, public in doc["ed25519"].items():
            if old.get(key_id, public) != public:
                raise KeyringError(f"key id {key_id} already names another public key in the output file")
        doc["ed25519"] = dict(sorted({**old, **doc["ed25519"]}.items()))
        retired = dict(existing.get("retired") or {}) if isinstance(existing, dict) else {}
        for name, entry in (existing.get("principals") or {}).items() if isinstance(existing, dict) else ():
            mine = doc["principals"].get(name)
            if isinstance(entry, dict) and (mine is None or mine["key_id"] != entry.get("key_id")):
                retired[str(entry.get("key_id"))] = {**entry, "principal": name}
        if retired:
            doc["retired"] = dict(sorted(retired.items()))
    if not doc["ed25519"]:
        raise KeyringError("the keyring holds no checkpoint key (use audit's key file or the full keyring)")
    return doc


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
