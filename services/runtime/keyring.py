"""The keyring file (docs/trust.md): one secret per principal, read and written here and nowhere else.

Format (JSON, mode 0600)::

    {"format": "casino-ledger/keyring-1",
     "principals": {"<name>": {"key_id": "<name>-<8 hex>", "secret_hex": "<64 hex>"}, ...},
     "api_keys": [{"key_id": "...", "role": "...", "hash": "sha256:<hex>"}]}

Every :class:`~services.core.trust.Principal` has an entry. Fields this module does not own
(``api_keys``, anything added later) are kept as they are when the file is saved again.

``CASINO_KEYRING`` names the file for every command and worker (:class:`Settings.keyring`). The
**public demo keyring** (:func:`demo_keyring`) is derived from :data:`DEMO_KEYRING_SEED`, a constant in
this source: it proves nothing against anyone who has read it, so it exists for demo and test mode
only and :func:`require_private` refuses it anywhere else. Errors name the file and the field, never a
secret.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from services.core.trust import DEMO_KEYRING_SEED, Guard, Principal, PrincipalKey, by_key_id

FORMAT: Final = "casino-ledger/keyring-1"
"""The ``format`` of a keyring file."""


SECRET_BYTES: Final = 32
"""Bytes of secret per principal in a new keyring."""


class KeyringError(ValueError):
    """A keyring that cannot be used: missing, unreadable, malformed or public. The message names the
    file and the field, never a secret."""


@dataclass(frozen=True, slots=True)
class Keyring:
    """Every principal's key. ``extra``: the file's other top-level fields, kept when saving."""

    keys: Mapping[Principal, PrincipalKey]
    extra: Mapping[str, Any] = field(default_factory=dict)

    def key(self, principal: Principal | str) -> PrincipalKey:
        """The key of ``principal``."""
        return self.keys[Principal(principal)]

    def by_key_id(self) -> dict[str, PrincipalKey]:
        """Every key, by key id (what a consumer verifies ``auth`` against)."""
        return by_key_id(self.keys.values())

    def guard(self, principal: Principal | str) -> Guard:
        """The :class:`~services.core.trust.Guard` of a processor running as ``principal``."""
        return Guard(self.by_key_id(), self.key(principal))

    @property
    def is_demo(self) -> bool:
        """Whether any key is the public demo keyring's (a secret that is in the source)."""
        demo = demo_keyring()
        return any(
            hmac.compare_digest(k.secret, demo.keys[p].secret) for p, k in self.keys.items() if p in demo.keys
        )

    def to_json(self) -> dict[str, Any]:
        """The file's JSON form (secrets included: only :func:`save_keyring` writes it)."""
        principals = {
            p.value: {"key_id": k.key_id, "secret_hex": k.secret.hex()} for p, k in sorted(self.keys.items())
        }
        return {**self.extra, "format": FORMAT, "principals": principals}

    def __repr__(self) -> str:
        return f"Keyring({len(self.keys)} principals)"


def new_keyring(extra: Mapping[str, Any] | None = None) -> Keyring:
    """A keyring with a fresh random secret and key id for every principal."""
    keys = {
        p: PrincipalKey(p, f"{p.value}-{secrets.token_hex(4)}", secrets.token_bytes(SECRET_BYTES))
        for p in Principal
    }
    return Keyring(keys, dict(extra or {"api_keys": []}))


def demo_keyring() -> Keyring:
    """The public demo keyring, derived from :data:`DEMO_KEYRING_SEED` (demo and test mode only)."""
    keys = {
        p: PrincipalKey(p, f"{p.value}-demo0000", hmac.digest(DEMO_KEYRING_SEED, p.value.encode(), "sha256"))
        for p in Principal
    }
    return Keyring(keys, {"api_keys": []})


def parse_keyring(data: object, where: str = "keyring") -> Keyring:
    """Validate a keyring's JSON form; :class:`KeyringError` names what is wrong (never a secret)."""
    if not isinstance(data, dict):
        raise KeyringError(f"{where}: not a JSON object")
    if data.get("format") != FORMAT:
        raise KeyringError(f"{where}: format is {str(data.get('format'))[:60]!r}, expected {FORMAT!r}")
    principals = data.get("principals")
    if not isinstance(principals, dict):
        raise KeyringError(f"{where}: 'principals' is not an object")
    unknown = sorted(set(principals) - {p.value for p in Principal})
    if unknown:
        raise KeyringError(f"{where}: unknown principal(s) {', '.join(map(str, unknown))[:200]}")
    keys: dict[Principal, PrincipalKey] = {}
    for p in Principal:
        entry = principals.get(p.value)
        if not isinstance(entry, dict):
            raise KeyringError(f"{where}: principal {p.value!r} is missing")
        key_id, secret_hex = entry.get("key_id"), entry.get("secret_hex")
        if not isinstance(key_id, str) or not key_id.strip() or len(key_id) > 128:
            raise KeyringError(f"{where}: principals.{p.value}.key_id is not a key id")
        try:
            secret = bytes.fromhex(secret_hex) if isinstance(secret_hex, str) else b""
        except ValueError:
            raise KeyringError(f"{where}: principals.{p.value}.secret_hex is not hex") from None
        if len(secret) < 16:
            raise KeyringError(f"{where}: principals.{p.value}.secret_hex must hold at least 16 bytes")
        keys[p] = PrincipalKey(p, key_id, secret)
    ids = [k.key_id for k in keys.values()]
    if len(set(ids)) != len(ids):
        raise KeyringError(f"{where}: two principals share a key id")
    extra = {k: v for k, v in data.items() if k not in ("format", "principals")}
    return Keyring(keys, extra)


def load_keyring(path: str | Path) -> Keyring:
    """Read and validate the keyring at ``path``; :class:`KeyringError` when it cannot be used."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise KeyringError(f"keyring {p}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise KeyringError(f"keyring {p}: cannot be read ({type(exc).__name__})") from None
    try:
        data = json.loads(text)
    except ValueError:
        raise KeyringError(f"keyring {p}: not JSON") from None
    return parse_keyring(data, f"keyring {p}")


def save_keyring(keyring: Keyring, path: str | Path, *, overwrite: bool = False) -> Path:
    """Write ``keyring`` to ``path`` with mode 0600 (created so; never readable by others, not even
    for a moment). Refuses an existing file unless ``overwrite``."""
    p = Path(path)
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if overwrite else os.O_EXCL)
    try:
        fd = os.open(p, flags, 0o600)
    except FileExistsError:
        raise KeyringError(f"keyring {p}: already exists (not overwritten)") from None
    except OSError as exc:
        raise KeyringError(f"keyring {p}: cannot be written ({exc.strerror})") from None
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        os.fchmod(out.fileno(), 0o600)
        json.dump(keyring.to_json(), out, indent=2, sort_keys=True)
        out.write("\n")
    return p


def require_private(keyring: Keyring, *, demo_mode: bool, where: str = "keyring") -> Keyring:
    """``keyring`` unless it holds a public demo secret outside demo/test mode (:class:`KeyringError`)."""
    if not demo_mode and keyring.is_demo:
        raise KeyringError(f"{where}: holds the public demo keys, refused outside demo and test mode")
    return keyring


def fingerprint(keyring: Keyring) -> str:
    """A short public fingerprint of the key ids (for log lines: which keyring, never its secrets)."""
    ids = ",".join(sorted(k.key_id for k in keyring.keys.values()))
    return hashlib.sha256(ids.encode()).hexdigest()[:12]
