"""The keyring file (docs/trust.md): one secret per principal, read and written here and nowhere else.

Format (JSON, mode 0600)::

    {"format": "casino-ledger/keyring-1",
     "principals": {"<name>": {"key_id": "<name>-<8 hex>", "secret_hex": "<64 hex>",
                               "signing_seed_hex": "<64 hex>"}, ...},
     "checkpoint_seed_hex": "<64 hex>",
     "api_keys": [{"key_id": "...", "role": "...", "hash": "sha256:<hex>"}]}

``secret_hex`` is the principal's MAC secret; ``signing_seed_hex`` its own Ed25519 key (it signs its chain
heads: :mod:`services.core.attest`); ``checkpoint_seed_hex`` audit's checkpoint key. A keyring made
before those existed has neither: both are then derived from the MAC secrets as before
(:func:`~services.core.trust.derived_signing_seed`, :func:`~services.core.signing.signing_key_from_secret`).

A full keyring has an entry for every :class:`~services.core.trust.Principal`. A **key file** of one
principal (``keys new --split DIR``: :func:`split_keyring`) holds that principal's entry only; a
service's holds, besides its own, the other principals' MAC secrets marked ``"verify_only": true`` (to
check the records it reads), never their Ed25519 seeds; only audit's holds ``checkpoint_seed_hex``.
Asking a keyring for a key it does not hold is a :class:`KeyringError` naming what is missing. Fields
this module does not own (``api_keys``, anything added later) are kept as they are when the file is
saved again.

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

from services.core.signing import KEY_CONTEXT, SigningKey, public_keyring
from services.core.trust import (
    DEMO_KEYRING_SEED,
    SERVICES,
    Guard,
    Principal,
    PrincipalKey,
    by_key_id,
    derived_signing_seed,
    key_fingerprint,
)

FORMAT: Final = "casino-ledger/keyring-1"
"""The ``format`` of a keyring file."""


SECRET_BYTES: Final = 32
"""Bytes of secret per principal in a new keyring."""


class KeyringError(ValueError):
    """A keyring that cannot be used: missing, unreadable, malformed or public. The message names the
    file and the field, never a secret."""


@dataclass(frozen=True, slots=True)
class Keyring:
    """The principals' keys (all of them, or one principal's key file). ``checkpoint_seed``: audit's
    checkpoint key when the file holds it (``None``: derived from audit's secret, in an older keyring,
    or absent from a key file that is not audit's). ``extra``: the file's other top-level fields."""

    keys: Mapping[Principal, PrincipalKey]
    extra: Mapping[str, Any] = field(default_factory=dict)
    checkpoint_seed: bytes | None = None
    derived: bool = True
    """Whether the Ed25519 keys are derived from the MAC secrets (an older keyring, the demo's): then
    whoever holds audit's secret holds its checkpoint key."""
    where: str = "keyring"

    def key(self, principal: Principal | str) -> PrincipalKey:
        """The key of ``principal``; :class:`KeyringError` when this keyring does not hold it."""
        key = self.keys.get(Principal(principal))
        if key is None:
            raise KeyringError(f"{self.where}: holds no key of principal {Principal(principal).value!r}")
        return key

    def signing_key(self, principal: Principal | str) -> PrincipalKey:
        """The key of ``principal`` with its Ed25519 seed (to sign heads); :class:`KeyringError` without."""
        key = self.key(principal)
        if not key.can_sign:
            raise KeyringError(
                f"{self.where}: holds {key.principal.value}'s MAC secret only, not its signing key"
            )
        return key

    def checkpoint_key(self) -> SigningKey:
        """Audit's checkpoint key; :class:`KeyringError` when this keyring does not hold it."""
        audit = self.keys.get(Principal.AUDIT)
        if self.checkpoint_seed is not None and audit is not None:
            return SigningKey(audit.key_id, self.checkpoint_seed)
        if self.derived and audit is not None and audit.can_sign:
            return SigningKey(audit.key_id, hmac.digest(audit.secret, KEY_CONTEXT, "sha256"))
        raise KeyringError(f"{self.where}: holds no checkpoint key (only audit's key file does)")

    def public_document(self) -> dict[str, Any]:
        """The public keyring: audit's checkpoint key under ``ed25519`` and, under ``principals``, each
        principal's key id, Ed25519 public key and fingerprint (SHA-256 of the raw public key)."""
        doc = (
            public_keyring({})
            if not self._has_checkpoint()
            else public_keyring({self.checkpoint_key().key_id: self.checkpoint_key().public_hex()})
        )
        doc["principals"] = {
            p.value: {"key_id": k.key_id, "ed25519": pub, "fingerprint": key_fingerprint(pub)}
            for p, k in sorted(self.keys.items())
            if (pub := k.public_hex) is not None
        }
        return doc

    def _has_checkpoint(self) -> bool:
        try:
            self.checkpoint_key()
        except KeyringError:
            return False
        return True

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
        principals: dict[str, Any] = {}
        for p, k in sorted(self.keys.items()):
            entry: dict[str, Any] = {"key_id": k.key_id, "secret_hex": k.secret.hex()}
            if not self.derived:
                if k.signing_seed is not None:
                    entry["signing_seed_hex"] = k.signing_seed.hex()
                else:
                    entry["verify_only"] = True
            principals[p.value] = entry
        out = {**self.extra, "format": FORMAT, "principals": principals}
        if self.checkpoint_seed is not None:
            out["checkpoint_seed_hex"] = self.checkpoint_seed.hex()
        return out

    def __repr__(self) -> str:
        return f"Keyring({len(self.keys)} principals)"


def new_keyring(extra: Mapping[str, Any] | None = None) -> Keyring:
    """A keyring with a fresh random MAC secret, Ed25519 seed and key id for every principal, and a
    fresh checkpoint key for audit (none of them derived from another)."""
    keys = {
        p: PrincipalKey(
            p, f"{p.value}-{secrets.token_hex(4)}", secrets.token_bytes(SECRET_BYTES), secrets.token_bytes(32)
        )
        for p in Principal
    }
    return Keyring(keys, dict(extra or {"api_keys": []}), secrets.token_bytes(32), derived=False)


def demo_keyring() -> Keyring:
    """The public demo keyring, derived from :data:`DEMO_KEYRING_SEED` (demo and test mode only)."""
    keys = {}
    for p in Principal:
        secret = hmac.digest(DEMO_KEYRING_SEED, p.value.encode(), "sha256")
        keys[p] = PrincipalKey(p, f"{p.value}-demo0000", secret, derived_signing_seed(secret))
    return Keyring(keys, {"api_keys": []})


def split_keyring(keyring: Keyring) -> dict[Principal, Keyring]:
    """One key file per principal (see the module docstring): an outside writer's holds its own entry
    only; a service's also the others' MAC secrets (verify only); audit's also the checkpoint key.
    Refused for a keyring whose Ed25519 keys are derived from its MAC secrets (a service's file would
    then hold every key): make a new one."""
    if keyring.derived:
        raise KeyringError(
            f"{keyring.where}: its signing keys are derived from its MAC secrets, so it cannot "
            "be split: make a new keyring with `keys new --split DIR`"
        )
    files: dict[Principal, Keyring] = {}
    for p, own in keyring.keys.items():
        keys = {p: own}
        if p in SERVICES:
            keys.update({q: PrincipalKey(q, k.key_id, k.secret) for q, k in keyring.keys.items() if q != p})
        seed = keyring.checkpoint_seed if p is Principal.AUDIT else None
        files[p] = Keyring(keys, {"api_keys": []} if p is Principal.BACKOFFICE else {}, seed, derived=False)
    return files


def parse_keyring(data: object, where: str = "keyring", *, partial: bool = False) -> Keyring:
    """Validate a keyring's JSON form; :class:`KeyringError` names what is wrong (never a secret).
    ``partial``: an older keyring may lack principals too (what ``keys public`` reads needs audit's)."""
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
    derived = not any(isinstance(e, dict) and ("signing_seed_hex" in e or "verify_only" in e)
                      for e in principals.values()) and "checkpoint_seed_hex" not in data  # fmt: skip
    keys: dict[Principal, PrincipalKey] = {}
    for p in Principal:
        entry = principals.get(p.value)
        if entry is None and (partial or not derived):
            continue  # a key file: this principal's key is not in it
        if not isinstance(entry, dict):
            raise KeyringError(f"{where}: principal {p.value!r} is missing")
        keys[p] = _principal_key(p, entry, where, derived=derived)
    if not keys:
        raise KeyringError(f"{where}: holds no principal's key")
    ids = [k.key_id for k in keys.values()]
    if len(set(ids)) != len(ids):
        raise KeyringError(f"{where}: two principals share a key id")
    checkpoint = _seed(data.get("checkpoint_seed_hex"), f"{where}: checkpoint_seed_hex")
    extra = {k: v for k, v in data.items() if k not in ("format", "principals", "checkpoint_seed_hex")}
    return Keyring(keys, extra, checkpoint, derived=derived, where=where)


def _seed(value: object, what: str) -> bytes | None:
    if value is None:
        return None
    try:
        seed = bytes.fromhex(value) if isinstance(value, str) else b""
    except ValueError:
        raise KeyringError(f"{what} is not hex") from None
    if len(seed) != 32:
        raise KeyringError(f"{what} must hold 32 bytes")
    return seed


def _principal_key(p: Principal, entry: Mapping[str, Any], where: str, *, derived: bool) -> PrincipalKey:
    key_id, secret_hex = entry.get("key_id"), entry.get("secret_hex")
    if not isinstance(key_id, str) or not key_id.strip() or len(key_id) > 128:
        raise KeyringError(f"{where}: principals.{p.value}.key_id is not a key id")
    try:
        secret = bytes.fromhex(secret_hex) if isinstance(secret_hex, str) else b""
    except ValueError:
        raise KeyringError(f"{where}: principals.{p.value}.secret_hex is not hex") from None
    if len(secret) < 16:
        raise KeyringError(f"{where}: principals.{p.value}.secret_hex must hold at least 16 bytes")
    if derived:
        seed: bytes | None = derived_signing_seed(secret)
    elif entry.get("verify_only") is True:
        seed = None
    else:
        seed = _seed(entry.get("signing_seed_hex"), f"{where}: principals.{p.value}.signing_seed_hex")
        if seed is None:
            raise KeyringError(f"{where}: principals.{p.value} has no signing_seed_hex")
    return PrincipalKey(p, key_id, secret, seed)


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


PUBLIC_FILE: Final = "public-keyring.json"
"""The public keyring ``keys new --split DIR`` writes beside the key files."""


def save_split(keyring: Keyring, directory: str | Path) -> list[Path]:
    """:func:`split_keyring` into ``directory`` (created 0700 if missing): ``<principal>.json`` each, mode
    0600, never overwritten, and :data:`PUBLIC_FILE` (0644). Returns the paths written."""
    d = Path(directory)
    try:
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise KeyringError(f"key directory {d}: cannot be made ({exc.strerror})") from None
    files = split_keyring(keyring)
    taken = [str(d / f"{p.value}.json") for p in files if (d / f"{p.value}.json").exists()]
    if taken or (d / PUBLIC_FILE).exists():
        raise KeyringError(f"key directory {d}: already holds key files (not overwritten)")
    written = [save_keyring(ring, d / f"{p.value}.json") for p, ring in sorted(files.items())]
    public = d / PUBLIC_FILE
    public.write_text(
        json.dumps(keyring.public_document(), indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    os.chmod(public, 0o644)  # public on purpose
    return [*written, public]


def require_private(keyring: Keyring, *, demo_mode: bool, where: str = "keyring") -> Keyring:
    """``keyring`` unless it holds a public demo secret outside demo/test mode (:class:`KeyringError`)."""
    if not demo_mode and keyring.is_demo:
        raise KeyringError(f"{where}: holds the public demo keys, refused outside demo and test mode")
    return keyring


def fingerprint(keyring: Keyring) -> str:
    """A short public fingerprint of the key ids (for log lines: which keyring, never its secrets)."""
    ids = ",".join(sorted(k.key_id for k in keyring.keys.values()))
    return hashlib.sha256(ids.encode()).hexdigest()[:12]
