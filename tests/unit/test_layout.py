"""The core's layout: every module imports on its own (no import circle), and money knows no game."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "services" / "core"


def _modules() -> list[str]:
    out = []
    for path in sorted(CORE.rglob("*.py")):
        parts = path.relative_to(CORE.parents[1]).with_suffix("").parts
        out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def test_every_core_module_imports_first() -> None:
    """Each core module imports in a fresh interpreter as the first one: a circle would fail one of them
    (engine -> payouts -> money -> engine did, when money was imported first)."""
    script = (
        "import importlib, subprocess, sys\n"
        "failed = []\n"
        "for name in sys.argv[1:]:\n"
        "    r = subprocess.run([sys.executable, '-c', f'import {name}'], capture_output=True, text=True)\n"
        "    if r.returncode:\n"
        "        failed.append((name, r.stderr.strip().splitlines()[-1]))\n"
        "print(failed)\n"
        "sys.exit(1 if failed else 0)\n"
    )
    command = [sys.executable, "-c", script, *_modules()]
    run = subprocess.run(command, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout


def test_the_ledger_imports_no_game() -> None:
    """Money, accounts, wagers and postings depend on nothing of the baccarat engine (one direction)."""
    source = (CORE / "ledger.py").read_text(encoding="utf-8")
    assert "services.core.baccarat" not in source
