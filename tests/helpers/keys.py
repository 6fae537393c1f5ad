"""Keyring files for tests that replay a log with the public demo checkpoint key (their subject is the
replay's verdicts, not key secrecy: the keyring tests cover that)."""

from __future__ import annotations

from pathlib import Path

from services.runtime.keyring import demo_keyring, save_keyring


def demo_keyring_file(directory: Path) -> Path:
    """The public demo keyring written to ``directory/demo-keyring.json`` (``CASINO_KEYRING`` for a
    demo in demo mode: its audit then signs with the public demo checkpoint key)."""
    path = directory / "demo-keyring.json"
    if not path.exists():
        save_keyring(demo_keyring(), path)
    return path
