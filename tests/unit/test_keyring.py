"""The keyring file and the composition root's choice of keys (docs/trust.md): 0600, validated, never
shown, and the public demo keys refused outside demo and test mode."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from services.cli import main
from services.core.trust import Principal
from services.runtime.compose import Composition
from services.runtime.keyring import (
    FORMAT,
    KeyringError,
    demo_keyring,
    load_keyring,
    new_keyring,
    parse_keyring,
    save_keyring,
)
from services.runtime.settings import Settings


def test_a_saved_keyring_loads_back_with_mode_0600_and_keeps_foreign_fields(tmp_path: Path) -> None:
    """Saving writes mode 0600; loading gives the same keys; fields it does not own (api_keys) survive."""
    ring = new_keyring({"api_keys": [{"key_id": "k1", "role": "auditor", "hash": "sha256:00"}], "note": "x"})
    path = save_keyring(ring, tmp_path / "ring.json")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again = load_keyring(path)
    assert again.keys == ring.keys and set(again.keys) == set(Principal)
    assert again.extra == {
        "api_keys": [{"key_id": "k1", "role": "auditor", "hash": "sha256:00"}],
        "note": "x",
    }
    save_keyring(again, tmp_path / "copy.json")
    assert json.loads((tmp_path / "copy.json").read_text()) == json.loads(path.read_text())


def test_new_keyrings_are_fresh_and_shaped_as_agreed() -> None:
    """Each principal gets ``<name>-<8 hex>`` and 32 random bytes; two keyrings share no secret."""
    a, b = new_keyring(), new_keyring()
    for p in Principal:
        assert a.key(p).key_id.startswith(f"{p.value}-") and len(a.key(p).key_id) == len(p.value) + 9
        assert len(a.key(p).secret) == 32 and a.key(p).secret != b.key(p).secret
    assert a.to_json()["format"] == FORMAT


def _valid() -> dict[str, Any]:
    return new_keyring().to_json()


BAD = [
    ("not an object", lambda d: [d], "not a JSON object"),
    ("wrong format", lambda d: {**d, "format": "x"}, "format is 'x'"),
    ("principals missing", lambda d: {k: v for k, v in d.items() if k != "principals"}, "'principals'"),
    ("a principal missing from an older keyring", lambda d: _older({**d, "principals": {
        k: v for k, v in d["principals"].items() if k != "shoe"}}), "principal 'shoe' is missing"),
    ("a signing seed missing", lambda d: _set(d, "shoe", "signing_seed_hex", None), "principals.shoe has no"),
    ("a signing seed too short", lambda d: _set(d, "shoe", "signing_seed_hex", "ab"), "must hold 32 bytes"),
    ("an unknown principal", lambda d: {**d, "principals": {**d["principals"], "mallory": {}}}, "mallory"),
    ("secret not hex", lambda d: _set(d, "dealer", "secret_hex", "zz" * 32), "principals.dealer.secret_hex"),
    ("secret too short", lambda d: _set(d, "audit", "secret_hex", "ab" * 8), "at least 16 bytes"),
    ("key id empty", lambda d: _set(d, "cashier", "key_id", ""), "principals.cashier.key_id"),
    ("two principals, one key id", lambda d: _set(d, "shoe", "key_id", d["principals"]["dealer"]["key_id"]),
     "share a key id"),
]  # fmt: skip


def _set(d: dict[str, Any], who: str, field: str, value: str | None) -> dict[str, Any]:
    entry = {**d["principals"][who], field: value}
    principals = {**d["principals"], who: {k: v for k, v in entry.items() if v is not None}}
    return {**d, "principals": principals}


def _older(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` as a keyring made before each principal had its own Ed25519 seed."""
    principals = {
        p: {k: v for k, v in e.items() if k != "signing_seed_hex"} for p, e in d["principals"].items()
    }
    return {k: v for k, v in {**d, "principals": principals}.items() if k != "checkpoint_seed_hex"}


@pytest.mark.parametrize(("case", "spoil", "named"), BAD, ids=[b[0] for b in BAD])
def test_a_bad_keyring_is_refused_naming_the_field_never_a_secret(case: str, spoil: Any, named: str) -> None:
    """Each malformed keyring raises a one-line error naming what is wrong and no secret of the file."""
    data = _valid()
    with pytest.raises(KeyringError) as caught:
        parse_keyring(spoil(data), "keyring k.json")
    message = str(caught.value)
    assert named in message and "\n" not in message, case
    assert not any(e["secret_hex"] in message for e in data["principals"].values())


def test_files_that_cannot_be_keyrings(tmp_path: Path) -> None:
    """A missing file, bytes that are not JSON, and an existing file to create are one-line errors."""
    with pytest.raises(KeyringError, match="no such file"):
        load_keyring(tmp_path / "none.json")
    (tmp_path / "junk.json").write_bytes(b"\xff\x00")
    with pytest.raises(KeyringError, match="cannot be read"):
        load_keyring(tmp_path / "junk.json")
    with pytest.raises(KeyringError, match="already exists"):
        save_keyring(new_keyring(), tmp_path / "junk.json")


def test_the_public_demo_keyring_runs_only_in_demo_mode(tmp_path: Path) -> None:
    """The demo keyring (from a constant in the source) is refused outside demo/test mode, loudly, from a
    file too; no keyring at all is refused outside demo mode; a private keyring runs."""
    demo_file = save_keyring(demo_keyring(), tmp_path / "demo.json")
    with pytest.raises(KeyringError, match="public demo keys"):
        Composition.from_settings(Settings(keyring=demo_file))
    with pytest.raises(KeyringError, match="CASINO_KEYRING"):
        Composition.from_settings(Settings())
    assert Composition.from_settings(Settings(keyring=demo_file, demo_mode=True)).demo_mode
    private = save_keyring(new_keyring(), tmp_path / "private.json")
    made = Composition.from_settings(Settings(keyring=private))
    assert not made.demo_mode and not made.keyring.is_demo and made.keyring.keys == load_keyring(private).keys


def test_every_processor_is_guarded_by_its_own_principal() -> None:
    """The composition root gives each processor the guard of the principal it writes as, and the dealer
    its secret as shoe key, with inbox seeds only in demo mode."""
    ring = new_keyring()
    made = Composition(ring)
    names = [(name, p.guard.own.principal.value if p.guard else None) for name, p in made.pipeline()]
    assert names == [
        ("dealer", "dealer"), ("settlement.payout", "settlement"), ("settlement.wallet", "settlement"),
        ("audit", "audit"), ("monitor", "monitor"), ("monitor.accounts", "monitor"),
        ("monitor.cage", "monitor"), ("monitor.casework", "monitor"),
    ]  # fmt: skip
    dealer = made.dealer()
    assert dealer.shoe_key == ring.key(Principal.DEALER).secret and not dealer.allow_seed_hex
    assert Composition.demo(ring).dealer().allow_seed_hex


def test_keys_new_writes_a_private_keyring_and_never_overwrites(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`keys new --out FILE` writes a loadable 0600 keyring and prints no secret; a second run on the same
    file is refused with one line and exit 2."""
    out = tmp_path / "ring.json"
    assert main(["keys", "new", "--out", str(out)]) == 0
    printed = "".join(capsys.readouterr())
    ring = load_keyring(out)
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert not any(k.secret.hex() in printed for k in ring.keys.values())
    assert main(["keys", "new", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "already exists" in err


def test_a_worker_on_the_demo_keyring_outside_demo_mode_exits_2(tmp_path: Path) -> None:
    """A Kafka worker refuses to start on the public demo keys (one line, exit 2) before any broker."""
    demo_file = save_keyring(demo_keyring(), tmp_path / "demo.json")
    env = {**os.environ, "CASINO_KEYRING": str(demo_file), "CASINO_BOOTSTRAP_SERVERS": "127.0.0.1:1"}
    env.pop("CASINO_DEMO_MODE", None)
    done = subprocess.run([sys.executable, "-m", "services.cli", "worker", "dealer"], env=env,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "public demo keys" in done.stderr
