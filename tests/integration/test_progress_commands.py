"""replay, export, ingest and project say how far they are on stderr when they run long (issue #30);
stdout stays what scripts read."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from services.cli import main
from services.runtime import progress
from services.runtime.keyring import new_keyring, save_keyring

CLI = [sys.executable, "-m", "services.cli"]


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small demo log (2 tables, 8 coups each)."""
    db = tmp_path_factory.mktemp("progress") / "demo.db"
    done = subprocess.run([*CLI, "demo", "--db", str(db), "--coups", "8", "--tables", "2", "--quiet"],
                          capture_output=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return db


def _tenths(err: str, command: str, unit: str) -> list[int]:
    found = re.findall(rf"^{re.escape(command)}: ([\d,]+) of ([\d,]+) {unit}, ", err, re.M)
    assert found, err
    assert len({total for _, total in found}) == 1
    done = [int(n.replace(",", "")) for n, _ in found]
    assert done == sorted(done) and done[-1] == int(found[-1][1].replace(",", ""))
    return done


@pytest.fixture
def at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """No quiet moment: the lines a long run would print come from this short one."""
    monkeypatch.setattr(progress, "QUIET_S", 0.0)
    monkeypatch.setenv("CI", "1")


@pytest.mark.usefixtures("at_once")
def test_replay_and_export_count_records_on_stderr(demo_db: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """replay --db: a line per tenth of the log's records; export: the same, the summary on stdout."""
    main(["replay", "--db", str(demo_db), "--json"])
    out, err = capsys.readouterr()
    assert json.loads(out)["records"] == _tenths(err, "replay", "records")[-1]
    assert main(["export", "--db", str(demo_db), "--out", str(tmp_path / "x.jsonl")]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["exported"] == _tenths(err, "export", "records")[-1]


@pytest.mark.usefixtures("at_once")
def test_project_rebuild_counts_offsets(demo_db: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """project --rebuild: a line per tenth of the log's offsets projected, up to the log's head."""
    db = tmp_path / "copy.db"
    shutil.copy(demo_db, db)
    shutil.copy(f"{demo_db}.keyring.json", f"{db}.keyring.json")
    assert main(["project", "--db", str(db), "--rebuild"]) == 0
    _out, err = capsys.readouterr()
    with sqlite3.connect(db) as conn:
        head = conn.execute('SELECT max("offset") FROM records').fetchone()[0]
    assert _tenths(err, "project --rebuild", "records projected")[-1] == head


@pytest.mark.usefixtures("at_once")
def test_ingest_counts_lines_and_the_pipeline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """ingest FILE: lines checked per tenth, then the pipeline's count; the summary alone on stdout."""
    monkeypatch.setenv("CASINO_KEYRING", str(save_keyring(new_keyring(), tmp_path / "ring.json")))
    monkeypatch.delenv("CASINO_DEMO_MODE", raising=False)
    lines = [json.dumps({"type": "Deposit", "key": f"acct-{i}",
                         "payload": {"account_id": f"acct-{i}", "amount_minor": 100, "currency": "EUR"}})
             for i in range(20)]  # fmt: skip
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(lines) + "\n")
    code = main(["ingest", "--db", str(tmp_path / "log.db"), "--as", "cashier", str(src)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["lines"] == 20
    assert _tenths(err, "ingest", "lines checked")[-1] == 20
    assert re.search(r"^ingest: [\d,]+ records through the pipeline, ", err, re.M), err
