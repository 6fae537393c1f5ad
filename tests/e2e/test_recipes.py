"""Recipes are tests (issue #30): every ``sh`` block of the README and of the runbook runs as printed,
one after the other in a fresh folder, with ``set -e`` (a command that fails fails the recipe), unless
the line before it says what it needs that the suite has not (a Kafka or Kubernetes cluster), or why
the suite does not run it.

Two things differ from a reader's shell, both said here: the folder has a ``.venv`` that links to the
suite's own virtualenv (``make`` makes it in a clone), and ``serve``'s port 8000 is replaced by a free
one, so that two runs on one machine do not meet."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.backoffice.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(
    r"(?:^[ \t]*<!-- recipe: (?P<why>[^>]*?) -->\n)?^(?P<indent>[ \t]*)```sh\n(?P<body>.*?)^(?P=indent)```",
    re.S | re.M,
)
NOT_RUN = ("needs a Kafka cluster", "needs a Kubernetes cluster", "not run by the suite")
"""What a recipe's marker may say (anything else is a typo that would hide a recipe)."""
DOCS = ("README.md", "docs/operations.md")


def recipes(doc: str) -> list[tuple[str | None, str]]:
    """The ``sh`` blocks of ``doc``, each as (the marker's reason or ``None``, the commands)."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    out = []
    for m in BLOCK.finditer(text):
        indent = m.group("indent")
        body = "".join(line.removeprefix(indent) for line in m.group("body").splitlines(keepends=True))
        out.append((m.group("why"), body))
    return out


@pytest.mark.parametrize("doc", DOCS)
def test_every_block_is_run_or_says_why_not(doc: str) -> None:
    """Each block is run by the suite or marked with one of the known reasons; most of them run."""
    found = recipes(doc)
    assert found, doc
    text = (ROOT / doc).read_text(encoding="utf-8")
    assert text.count("```sh") == len(found), "a block the pattern missed"
    for why, _body in found:
        assert why is None or why.startswith(NOT_RUN), why
    assert sum(why is None for why, _ in found) >= 2


def _sandbox(tmp_path: Path) -> dict[str, str]:
    venv = Path(sys.executable).parent.parent
    (tmp_path / ".venv").symlink_to(venv, target_is_directory=True)
    keep = {k: v for k, v in os.environ.items() if not k.startswith("CASINO_")}
    return {**keep, "PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path), "LOG_LEVEL": "WARNING"}


def _run(body: str, cwd: Path, env: dict[str, str]) -> None:
    port = str(free_port())
    script = body.replace("--port 8000", f"--port {port}").replace("127.0.0.1:8000", f"127.0.0.1:{port}")
    done = subprocess.run(["/bin/bash", "-e", "-c", script], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600, check=False)  # fmt: skip
    said = f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, f"{body}\n--- exit {done.returncode}\n{said}"


def test_the_readme_recipes_run_as_printed(tmp_path: Path) -> None:
    """The README's jobs, in order, in a fresh folder: play, replay as a regulator, ingest, serve and
    command it, the table report."""
    env = _sandbox(tmp_path)
    for why, body in recipes("README.md"):
        if why is None:
            _run(body, tmp_path, env)
    assert (tmp_path / "report.html").is_file() and (tmp_path / "admin.key").is_file()


def test_the_runbook_recipes_run_as_printed(tmp_path: Path) -> None:
    """The runbook's procedures on a log like the one they name (``var/casino.db``, the demo's seed),
    in order: rotate keys, replay a period (with the public keyring), rebuild the read model."""
    env = _sandbox(tmp_path)
    setup = ".venv/bin/casino-ledger demo --db var/casino.db --tables 2 --coups 3 --seed 2026 > /dev/null"
    _run(setup, tmp_path, env)
    ran = 0
    for why, body in recipes("docs/operations.md"):
        if why is None:
            _run(body, tmp_path, env)
            ran += 1
    assert ran >= 3
    assert '"verdict": "clean"' in (tmp_path / "report.json").read_text(encoding="utf-8")
