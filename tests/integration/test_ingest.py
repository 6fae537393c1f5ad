"""`casino-ledger ingest` (docs/integration.md): outside writers' records into a real SQLite log, with and
without `--as`, then the pipeline; a JSON summary; nothing half-written on a bad line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from services.cli import main
from services.core import topics
from services.core.envelope import parse_record, request
from services.runtime.embedded.store import EmbeddedLog
from services.runtime.keyring import new_keyring, save_keyring


@pytest.fixture(autouse=True)
def keyring(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private keyring named by CASINO_KEYRING, outside demo mode."""
    path = save_keyring(new_keyring(), tmp_path / "ring.json")
    monkeypatch.setenv("CASINO_KEYRING", str(path))
    monkeypatch.delenv("CASINO_DEMO_MODE", raising=False)
    return path


def _deposit(account: str, amount: int, **extra: Any) -> dict[str, Any]:
    payload = {"account_id": account, "amount_minor": amount, "currency": "EUR"}
    return {"type": "Deposit", "key": account, "payload": payload, **extra}


def _ingest(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, db: Path, lines: list[Any], *flags: str
) -> tuple[int, dict[str, Any] | None, str]:
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    code = main(["ingest", "--db", str(db), *flags, str(src)])
    out, err = capsys.readouterr()
    return code, (json.loads(out.splitlines()[-1]) if out.strip() else None), err


def _balances(db: Path) -> dict[str, int]:
    with EmbeddedLog(db, readonly=True) as log:
        out: dict[str, int] = {}
        for _o, topic, key, raw in log.iter_all():
            env = parse_record(raw)
            if topic == topics.WALLET_EVENTS and "balance_after_minor" in env.payload:
                out[key] = env.payload["balance_after_minor"]
        return out


def test_a_cashier_day_goes_in_as_the_cashier_once(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """With `--as cashier` deposits are applied; ingesting the same file again appends nothing new."""
    db = tmp_path / "log.db"
    lines = [_deposit("player:001", 10_000), _deposit("player:002", 2_500), _deposit("player:001", 1)]
    code, summary, _ = _ingest(capsys, tmp_path, db, lines, "--as", "cashier")
    assert code == 0 and summary is not None
    assert (summary["lines"], summary["appended"], summary["refused"]) == (3, 3, 0)
    assert _balances(db) == {"player:001": 10_001, "player:002": 2_500}
    code, summary, _ = _ingest(capsys, tmp_path, db, lines, "--as", "cashier")
    assert code == 0 and summary is not None and summary["appended"] == 0
    assert _balances(db) == {"player:001": 10_001, "player:002": 2_500}


def test_without_as_lines_go_in_as_an_outsider_and_are_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Without `--as` the records are appended as given and refused as unauthenticated: no money moves."""
    db = tmp_path / "log.db"
    code, summary, _ = _ingest(capsys, tmp_path, db, [_deposit("player:001", 10_000)])
    assert code == 0 and summary is not None
    assert (summary["appended"], summary["refused"], summary["dead_lettered"]) == (
        1,
        1,
        {"unauthenticated": 1},
    )
    assert _balances(db) == {}


def test_each_line_picks_its_principal_and_the_policy_judges(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A line's "as" picks among the `--as` principals: a terminal's deposit is not permitted, a cashier's
    deposit keyed to another player's account is a key mismatch, a full envelope goes in as given."""
    db = tmp_path / "log.db"
    full = request("Deposit", topics.WALLET_REQUESTS, "player:003", _deposit("player:003", 700)["payload"],
                   event_id="full-1", occurred_at="2026-11-23T01:00:00.000Z", producer="cashier")  # fmt: skip
    lines = [
        _deposit("player:001", 100, **{"as": "terminal"}),
        {**_deposit("player:002", 100), "key": "player:001", "event_id": "mismatch-1"},
        json.loads(full.to_json()),
    ]
    code, summary, _ = _ingest(capsys, tmp_path, db, lines, "--as", "cashier", "--as", "terminal")
    assert code == 0 and summary is not None
    assert summary["dead_lettered"] == {"key_mismatch": 1, "not_permitted": 1}
    assert summary["refused"] == 2 and "mismatch-1" in summary["refused_ids"]
    assert _balances(db) == {"player:003": 700}


BAD_LINES = [
    ("not JSON", "{nope"),
    ("a principal not given", _deposit("player:001", 1, **{"as": "operator"})),
    ("an unknown type", {"type": "Mint", "key": "player:001", "payload": {}}),
    ("an unknown field", {**_deposit("player:001", 1), "amount": 5}),
    ("a broken envelope", {"event_id": "x", "hash": "y"}),
]


@pytest.mark.parametrize(("case", "bad"), BAD_LINES, ids=[b[0] for b in BAD_LINES])
def test_an_unreadable_line_writes_nothing_and_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, case: str, bad: Any
) -> None:
    """One unreadable line among good ones: exit 2, one error line naming it, and nothing in the log."""
    db = tmp_path / "log.db"
    code, summary, err = _ingest(capsys, tmp_path, db, [_deposit("player:001", 5), bad], "--as", "cashier")
    assert code == 2 and err.count("\n") == 1 and "line 2" in err, case
    assert summary is not None and summary["appended"] == 0
    assert not db.exists() or EmbeddedLog(db, readonly=True).count() == 0


def test_ingest_needs_a_keyring(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without CASINO_KEYRING (and outside demo mode) ingest refuses in one line, exit 2."""
    monkeypatch.delenv("CASINO_KEYRING")
    code, _, err = _ingest(
        capsys, tmp_path, tmp_path / "log.db", [_deposit("player:001", 5)], "--as", "cashier"
    )
    assert code == 2 and "CASINO_KEYRING" in err and err.count("\n") == 1
