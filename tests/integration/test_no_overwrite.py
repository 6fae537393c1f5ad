"""No command writes over the log, its WAL or shared-memory file, or a keyring (issue #28): ``replay
--html``, ``replay --coup --html``, ``statement --out``, ``report --out``, ``export --out`` and ``keys
public --out`` naming one of them say so in one line on stderr, exit 2 and write nothing."""

from __future__ import annotations

import hashlib
import io
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from services.cli import main

TARGETS = ["{db}", "{db}-wal", "{db}-shm", "{db}.keyring.json", "{db}.public-keyring.json", "{ring}"]
COMMANDS = [
    "replay --db {db} --html {out}",
    "replay --db {db} --coup none --html {out}",
    "statement --db {db} --account player:001 --out {out}",
    "report --db {db} --format csv --out {out}",
    "export --db {db} --out {out}",
]


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """A demo log whose WAL and shared-memory files exist (a reader holds it open), its keyrings, and a
    keyring kept elsewhere that ``CASINO_KEYRING`` names."""
    where = tmp_path_factory.mktemp("overwrite")
    db = where / "demo.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CASINO_")} | {"CI": "1"}
    subprocess.run([sys.executable, "-m", "services.cli", "demo", "--tables", "2", "--coups", "3", "--db",
                    str(db)], check=True, env=env, capture_output=True)  # fmt: skip
    ring = where / "elsewhere.keyring.json"
    ring.write_bytes((where / "demo.db.keyring.json").read_bytes())
    holder = sqlite3.connect(db)  # keeps -wal and -shm in place, as a running pipeline does
    holder.execute("PRAGMA journal_mode=WAL")
    holder.execute("SELECT count(*) FROM sqlite_master").fetchall()
    try:
        yield db, ring
    finally:
        holder.close()


def _state(where: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(where.iterdir()) if p.is_file()
            and not p.name.endswith("-shm")}  # fmt: skip


def _run(argv: list[str], ring: Path) -> tuple[int, str, str]:
    saved = dict(os.environ)
    for k in [k for k in os.environ if k.startswith("CASINO_")]:
        del os.environ[k]
    os.environ.update({"CI": "1", "LOG_LEVEL": "ERROR", "CASINO_KEYRING": str(ring)})
    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = main(argv)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("command", COMMANDS)
def test_no_command_writes_over_the_log_its_wal_or_a_keyring(
    log: tuple[Path, Path], command: str, target: str
) -> None:
    """Each writing option naming the log, its ``-wal`` or ``-shm``, the keyrings beside it or the one
    ``CASINO_KEYRING`` names: exit 2, one line on stderr, every file as it was (the ``-shm`` file, which
    SQLite itself rewrites, by its size)."""
    db, ring = log
    out = target.format(db=db, ring=ring)
    shm = Path(f"{db}-shm").stat().st_size
    before = _state(db.parent)
    code, _, err = _run(command.format(db=db, out=out).split(), ring)
    assert code == 2, err
    assert err.startswith("casino-ledger: error: ") and err.count("\n") == 1, err
    assert _state(db.parent) == before
    assert Path(f"{db}-shm").stat().st_size == shm


@pytest.mark.parametrize("target", ["{db}", "{db}-wal", "{ring}", "{db}.keyring.json"])
def test_keys_public_writes_over_neither_a_secret_keyring_nor_the_log(
    log: tuple[Path, Path], target: str
) -> None:
    """``keys public --out`` merges into a public keyring, but never replaces the secret keyring it reads,
    another secret keyring, or the log."""
    db, ring = log
    before = _state(db.parent)
    code, _, err = _run(["keys", "public", "--in", str(ring), "--out", target.format(db=db, ring=ring)], ring)
    assert code == 2 and err.count("\n") == 1, err
    assert _state(db.parent) == before


def test_a_file_of_ones_own_is_still_written(log: tuple[Path, Path], tmp_path: Path) -> None:
    """The rule takes nothing away: a new file, or one that is neither a log nor a keyring, is written."""
    db, ring = log
    mine = tmp_path / "report.html"
    mine.write_text("an old report", encoding="utf-8")
    code, _, err = _run(["replay", "--db", str(db), "--html", str(mine)], ring)
    assert code in (0, 1), err
    assert mine.read_text(encoding="utf-8").lstrip().lower().startswith("<!doctype html")


def test_keys_public_merges_into_the_public_keyring_it_wrote_before(
    log: tuple[Path, Path], tmp_path: Path
) -> None:
    """A public keyring lists every principal's public key (a ``principals`` section, as a secret
    keyring has): ``keys public`` run twice onto the same file still merges into it (the runbook's
    recipe run a second day), and a secret keyring is still never its target."""
    _, ring = log
    public = tmp_path / "public-keyring.json"
    for _ in range(2):
        code, _, err = _run(["keys", "public", "--in", str(ring), "--out", str(public)], ring)
        assert code == 0, err
    assert '"principals"' in public.read_text(encoding="utf-8")
    assert "secret" not in public.read_text(encoding="utf-8")
