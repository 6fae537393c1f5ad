"""The back office's commands: apikey new, project, statement, report."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import stat
from pathlib import Path

import pytest

from services.cli import main
from tests.backoffice.folds import fold, records
from tests.backoffice.test_api import copy_log


@pytest.fixture
def log(demo_log: Path, tmp_path: Path) -> Path:
    """A copy of the demo log (its read model is then made beside the copy)."""
    return copy_log(demo_log, tmp_path / "log.db")


def test_apikey_new_prints_the_key_once_and_keeps_only_its_hash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The key goes to stdout; the file keeps every field it had, gains the key's sha256 only, stays 0600."""
    ring = tmp_path / "keyring.json"
    principals = {"backoffice": {"key_id": "backoffice-12345678", "secret_hex": "ab" * 32}}
    ring.write_text(json.dumps({"format": "casino-ledger/keyring-1", "principals": principals, "extra": [1]}))
    assert main(["apikey", "new", "--role", "cashier", "--keyring", str(ring)]) == 0
    key = capsys.readouterr().out.strip()
    data = json.loads(ring.read_text())
    assert data["principals"] == principals and data["extra"] == [1]
    (entry,) = data["api_keys"]
    assert entry["role"] == "cashier" and key.startswith(f"clk_{entry['key_id']}_")
    assert entry["hash"] == "sha256:" + hashlib.sha256(key.encode()).hexdigest()
    assert key not in ring.read_text()
    assert stat.S_IMODE(ring.stat().st_mode) == 0o600


def test_apikey_new_without_a_keyring_fails_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No --keyring and no CASINO_KEYRING: exit 2 and one line on stderr."""
    monkeypatch.delenv("CASINO_KEYRING", raising=False)
    assert main(["apikey", "new", "--role", "admin"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_statement_csv_to_stdout_equals_the_fold(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`statement --format csv --out -` prints the account's lines with the balances the postings fold to."""
    _, lines = fold(log)
    assert main(["statement", "--db", str(log), "--account", "player:002", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["transfer_id"], int(r["amount_minor"]), int(r["balance_after_minor"])) for r in rows] == lines[
        "player:002"
    ]


def test_report_json_and_csv_files(log: Path, tmp_path: Path) -> None:
    """`report` writes one line per table (JSON or CSV, to a file); handles sum to the accepted stakes."""
    out_json, out_csv = tmp_path / "r.json", tmp_path / "r.csv"
    assert main(["report", "--db", str(log), "--out", str(out_json)]) == 0
    assert main(["report", "--db", str(log), "--format", "csv", "--out", str(out_csv)]) == 0
    reports = json.loads(out_json.read_text())
    stakes = sum(r["payload"]["stake_minor"] for r in records(log) if r["type"] == "BetAccepted")
    assert sum(r["handle_minor"] for r in reports) == stakes
    rows = list(csv.DictReader(io.StringIO(out_csv.read_text())))
    assert [r["table_id"] for r in rows] == [r["table_id"] for r in reports]
    assert main(["report", "--db", str(log), "--shifts", "--out", str(out_json)]) == 0
    assert sum(r["handle_minor"] for r in json.loads(out_json.read_text())) == stakes


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "--db", "{log}", "--day", "22/11/2026"],
        ["report", "--db", "{log}", "--table", "no-such-table"],
        ["statement", "--db", "{log}", "--account", "nobody"],
        ["statement", "--db", "{log}", "--account", "player:001", "--since", "soon"],
        ["statement", "--db", "/nonexistent/log.db", "--account", "player:001"],
        ["serve", "--db", "/nonexistent/log.db"],
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    argv: list[str], log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bad arguments: exit 2, one line on stderr, nothing on stdout."""
    assert main([a.replace("{log}", str(log)) for a in argv]) == 2
    out = capsys.readouterr()
    assert out.out == "" and len(out.err.strip().splitlines()) == 1


def test_demo_ends_by_saying_how_to_open_the_page_and_the_api(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The demo's last lines name the apikey and serve commands for its log (each alone on its line,
    on the log's own keyring), the page and the API."""
    db = tmp_path / "demo.db"
    assert main(["demo", "--db", str(db), "--tables", "1", "--coups", "2", "--seed", "5"]) == 0
    title, key, serve, after = capsys.readouterr().out.strip().splitlines()[-4:]
    assert title.startswith("back office")
    assert key.strip().endswith(f"apikey new --role admin --keyring {db}.keyring.json")
    assert serve.strip().endswith(f"serve --db {db} --keyring {db}.keyring.json")
    assert "http://127.0.0.1:8000/" in after and "/docs" in after
