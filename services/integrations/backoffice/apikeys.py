"""Bearer API keys with roles, kept hashed in the keyring file's ``api_keys`` list (COMMON interface):

``{"format": "casino-ledger/keyring-1", "principals": {…}, "api_keys": [{"key_id", "role", "hash"}]}``

A key is ``clk_<key_id>_<43 url-safe characters>`` (256 random bits); only ``sha256:<hex>`` of the whole
key is stored, so a stolen keyring file gives no usable API key. ``casino-ledger apikey new`` prints a
new key once. Editing the file keeps every field this module does not own (``principals``, …), writes
it atomically and leaves it mode 0600.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROLES = ("analyst", "auditor", "cashier", "operator", "terminal", "admin")
"""Every role an API key may have."""

KEYRING_FORMAT = "casino-ledger/keyring-1"
KEYRING_ENV = "CASINO_KEYRING"
"""Environment variable naming the keyring file when ``--keyring`` is not given."""


class KeyringError(Exception):
    """The keyring file cannot be read or is not a keyring."""


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A known API key: its public id and role (never the key itself)."""

    key_id: str
    role: str


def hash_key(key: str) -> str:
    """The stored form of ``key``: ``sha256:<hex>``."""
    return "sha256:" + hashlib.sha256(key.encode("utf-8")).hexdigest()


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {"format": KEYRING_FORMAT, "principals": {}, "api_keys": []}
    except (OSError, ValueError) as exc:
        raise KeyringError(f"cannot read keyring {path}: {type(exc).__name__}") from None
    if not isinstance(data, dict) or not isinstance(data.get("api_keys", []), list):
        raise KeyringError(f"{path} is not a casino-ledger keyring")
    return data


def _write(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)
        f.write("\n")
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def new_key(path: str | Path, role: str) -> tuple[str, ApiKey]:
    """Create an API key with ``role``, store its hash in the keyring at ``path`` (created when missing)
    and return (the key, to be shown once, its :class:`ApiKey`)."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r} (known: {', '.join(ROLES)})")
    p = Path(path)
    data = _read(p)
    key_id = f"{role}-{secrets.token_hex(4)}"
    key = f"clk_{key_id}_{secrets.token_urlsafe(32)}"
    data.setdefault("format", KEYRING_FORMAT)
    data.setdefault("api_keys", []).append({"key_id": key_id, "role": role, "hash": hash_key(key)})
    _write(p, data)
    return key, ApiKey(key_id, role)


def load_api_keys(path: str | Path | None) -> dict[str, ApiKey]:
    """The keyring's API keys by stored hash (empty without a file)."""
    if path is None:
        return {}
    p = Path(path)
    if not p.exists():
        raise KeyringError(f"no keyring at {p}")
    out: dict[str, ApiKey] = {}
    for entry in _read(p).get("api_keys", []):
        if not isinstance(entry, dict):
            continue
        digest, role, key_id = entry.get("hash"), entry.get("role"), entry.get("key_id")
        if isinstance(digest, str) and role in ROLES and isinstance(key_id, str):
            out[digest] = ApiKey(key_id, str(role))
    return out


def revoke_key(path: str | Path, key_id: str) -> ApiKey | None:
    """Remove the API key ``key_id`` from the keyring at ``path`` (written atomically): the revoked key,
    or ``None`` when there was none. A running ``serve`` refuses it on its next request
    (:class:`LiveKeys`)."""
    p = Path(path)
    if not p.exists():
        raise KeyringError(f"no keyring at {p}")
    data = _read(p)
    entries = data.get("api_keys", [])
    gone = [e for e in entries if isinstance(e, dict) and e.get("key_id") == key_id]
    if not gone:
        return None
    data["api_keys"] = [e for e in entries if not (isinstance(e, dict) and e.get("key_id") == key_id)]
    _write(p, data)
    return ApiKey(key_id, str(gone[0].get("role")))


class LiveKeys:
    """The API keys of the keyring at ``path`` as they are now: each :meth:`current` looks at the file
    (one ``stat``) and reads it again when it changed (its inode, size or modification time: a key added
    or revoked is written by an atomic replace, a new inode), so a revoked key is refused on its next
    request without restarting ``serve``. A keyring that is gone or unreadable holds no key (fails
    closed: every request is then refused)."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int] | None = None
        self._keys: dict[str, ApiKey] = load_api_keys(self.path)  # a missing file at start: one line, exit 2
        self._seen = self._signature()

    def _signature(self) -> tuple[int, int, int] | None:
        if self.path is None:
            return None
        try:
            st = self.path.stat()
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def current(self) -> dict[str, ApiKey]:
        """The keys by stored hash, re-read when the file changed since the last look."""
        if self.path is None:
            return self._keys
        signature = self._signature()
        if signature == self._seen:
            return self._keys
        with self._lock:
            try:
                keys = load_api_keys(self.path) if signature is not None else {}
            except KeyringError:
                keys = {}
            self._keys, self._seen = keys, signature
            return keys


def verify(keys: dict[str, ApiKey], presented: str) -> ApiKey | None:
    """The :class:`ApiKey` whose hash matches ``presented``, compared in constant time."""
    digest = hash_key(presented)
    found = None
    for stored, api_key in keys.items():
        if hmac.compare_digest(stored, digest):
            found = api_key
    return found
