"""Honest verdicts on real files: ``clean`` only for a complete, authentic log; an empty or foreign source
is an error (exit 2, one line); a log cut off is ``incomplete``; deleted alerts are found; one edit is
one root finding; replay never writes to the SQLite file it reads; ``keys public`` for regulators."""

from __future__ import annotations

import hashlib
import io
import json
import os
import sqlite3
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from services.cli import main
from services.core import topics
from services.core.envelope import canonical, request, sha256_hex
from services.runtime.compose import Composition
from services.runtime.keyring import demo_keyring, load_keyring
from services.runtime.replay import read_db
from services.simulation.simulator import DEFAULT_TABLES, Session
from tests.helpers.keys import demo_keyring_file
from tests.helpers.membus import MemBus

CLI = [sys.executable, "-m", "services.cli"]
PUBLIC: list[Path] = []
"""The demo public keyring file, supplied to every replay below (their subject is the verdict)."""


@pytest.fixture(scope="module", autouse=True)
def _public_keyring(tmp_path_factory: pytest.TempPathFactory) -> None:
    path = tmp_path_factory.mktemp("keys") / "demo-public.json"
    path.write_text(json.dumps(demo_keyring().public_document()), encoding="utf-8")
    PUBLIC[:] = [path]


def _run(*args: str, **env: str) -> tuple[int, str, str]:
    """``casino-ledger ARGS`` in this process with a clean ``CASINO_*`` environment plus ``env``; the
    demo public keyring supplied (``CASINO_PUBLIC_KEYRING``) unless ``env`` says otherwise."""
    saved = dict(os.environ)
    for k in [k for k in os.environ if k.startswith("CASINO_")]:
        del os.environ[k]
    os.environ.update({"CI": "1", "LOG_LEVEL": "ERROR", "CASINO_PUBLIC_KEYRING": str(PUBLIC[0]), **env})
    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = main(list(args))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return code, out.getvalue(), err.getvalue()


def _one_line_error(code: int, err: str) -> None:
    assert code == 2
    assert err.startswith("casino-ledger: error: ") and err.count("\n") == 1 and "Traceback" not in err


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real demo log: 3 tables, 12 coups each (the demo's monitor raises a few alerts)."""
    db = tmp_path_factory.mktemp("verdicts") / "demo.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CASINO_")} | {"CI": "1"}
    env["CASINO_KEYRING"] = str(demo_keyring_file(db.parent))  # replays below use the demo public key
    done = subprocess.run([*CLI, "demo", "--db", str(db), "--coups", "12", "--tables", "3", "--quiet"],
                          env=env, capture_output=True, timeout=180, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return db


@pytest.fixture(scope="module")
def records(demo_db: Path) -> list[dict[str, Any]]:
    """The demo log's records as dicts, in log order."""
    return [json.loads(raw) for raw in read_db(demo_db)]


def _jsonl(path: Path, recs: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(canonical(r) + b"\n" for r in recs))
    return path


def _report(path: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    code, out, _ = _run("replay", "--jsonl", str(path), "--json", *extra)
    return code, json.loads(out)


def test_the_demo_log_is_clean(demo_db: Path) -> None:
    """The untouched demo log replays ``clean`` with exit 0 (so every other verdict below is earned)."""
    code, out, _ = _run("replay", "--db", str(demo_db), "--json")
    assert code == 0 and json.loads(out)["verdict"] == "clean"


def test_replay_never_writes_to_the_sqlite_file(demo_db: Path) -> None:
    """A replay (report, HTML and one coup) leaves the log file's bytes unchanged and creates nothing
    beside it."""
    before = hashlib.sha256(demo_db.read_bytes()).hexdigest()
    beside = sorted(p.name for p in demo_db.parent.iterdir())
    assert _run("replay", "--db", str(demo_db))[0] == 0
    assert _run("export", "--db", str(demo_db), "--out", str(demo_db.parent.parent / "x.jsonl"))[0] == 0
    assert hashlib.sha256(demo_db.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in demo_db.parent.iterdir()) == beside


def test_an_empty_jsonl_is_an_error(tmp_path: Path) -> None:
    """An empty export is not a clean ledger: exit 2 with one line."""
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"\n\n")
    code, out, err = _run("replay", "--jsonl", str(empty))
    _one_line_error(code, err)
    assert "no records" in err and out == ""


def test_a_foreign_jsonl_is_an_error(tmp_path: Path) -> None:
    """A JSONL file of something else (no envelope in it) is an error, not a list of findings."""
    other = tmp_path / "other.jsonl"
    other.write_text('{"user": 1}\n{"user": 2}\n')
    code, _, err = _run("replay", "--jsonl", str(other))
    _one_line_error(code, err)
    assert "not a log of this system" in err


@pytest.mark.parametrize("wal", [False, True])
def test_an_unrelated_sqlite_file_is_refused_and_left_untouched(tmp_path: Path, wal: bool) -> None:
    """Another program's SQLite file is an error (exit 2, one line); its bytes, schema and journal mode
    stay as they were: replay creates no table in it and does not switch it to WAL."""
    db = tmp_path / "other.db"
    conn = sqlite3.connect(db)
    if wal:
        conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO users (name) VALUES ('ada')")
    conn.commit()
    conn.close()
    before = db.read_bytes()
    code, _, err = _run("replay", "--db", str(db))
    _one_line_error(code, err)
    assert "not a casino-ledger log" in err
    assert db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]


def test_a_file_that_is_not_sqlite_is_an_error(tmp_path: Path) -> None:
    """``--db`` on a text file is an error naming the file, in one line."""
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    code, _, err = _run("replay", "--db", str(text))
    _one_line_error(code, err)
    assert "not a SQLite file" in err and text.read_text() == "hello\n"


def test_an_unknown_table_is_an_error(demo_db: Path) -> None:
    """``--table`` naming a table the log never opened is an error, not an empty clean report."""
    code, _, err = _run("replay", "--db", str(demo_db), "--table", "T99-nowhere")
    _one_line_error(code, err)
    assert "T99-nowhere" in err


def test_a_log_cut_in_the_middle_of_payouts_is_incomplete(
    records: list[dict[str, Any]], tmp_path: Path
) -> None:
    """A log that stops after the first of a coup's payouts is ``incomplete`` (exit 1): what follows its
    writers' last signed heads is an unattested tail (named, not applied), and the report says where
    the log stops."""
    payouts = [i for i, r in enumerate(records) if r["type"] == "PayoutIssued"]
    coup_of = {i: records[i]["payload"]["coup_id"] for i in payouts}
    cut = next(i for i in payouts if sum(1 for j in payouts if coup_of[j] == coup_of[i]) >= 2)
    code, report = _report(_jsonl(tmp_path / "cut.jsonl", records[: cut + 1]))
    assert code == 1 and report["verdict"] == "incomplete" and report["findings_total"] == 0
    signed = report["attestation"]
    assert signed["incomplete"] and signed["unattested"]["count"] >= 1
    assert coup_of[cut] in {i["coup_id"] for i in report["open_items"]} or signed["tail"]["count"] >= 1
    assert report["ends_at"]["event_id"] == records[cut]["event_id"]
    code, text, _ = _run("replay", "--jsonl", str(tmp_path / "cut.jsonl"))
    assert f"the log stops at record {cut}" in text and "verdict: incomplete" in text


def test_a_log_without_its_alerts_is_not_clean(records: list[dict[str, Any]], tmp_path: Path) -> None:
    """Deleting every monitor alert leaves no gap in any chain, but the signed checkpoints counted the
    alerts: the replay reports it (and the digest changes)."""
    alerts = [r for r in records if r["topic"] == topics.MONITOR_ALERTS]
    assert alerts, "the demo raised no alert: nothing to delete"
    code, full = _report(_jsonl(tmp_path / "full.jsonl", records))
    code, report = _report(_jsonl(tmp_path / "no-alerts.jsonl", [r for r in records if r not in alerts]))
    assert code == 1 and report["verdict"] == "findings"
    mismatched = [f for f in report["findings"] if f["reason"] == "checkpoint_mismatch"]
    assert mismatched and all("alerts" in f["subject"]["fields"] for f in mismatched)
    assert {f["table_id"] for f in mismatched} == {a["key"] for a in alerts}
    assert report["digest"] != full["digest"]


def test_one_edited_payout_is_one_root_finding(records: list[dict[str, Any]], tmp_path: Path) -> None:
    """Editing one ``PayoutIssued`` gives one root cause (the payout, with its event id, expected and
    recorded values and an explanation that the record was changed); everything else it causes —
    the hash, later checkpoints of its table — is listed beneath it, and no other table is named."""
    i = next(
        i for i, r in enumerate(records) if r["type"] == "PayoutIssued" and r["payload"]["result"] == "win"
    )
    edited = json.loads(json.dumps(records))
    payout = edited[i]["payload"]  # a consistent edit (the contract holds), not re-hashed
    payout["credit_minor"] += 100
    payout["win_minor"] += 100
    for row in payout["postings"]:
        if row["account"] == payout["account_id"]:
            row["amount_minor"] += 100
        elif row["account"].endswith(":house"):
            row["amount_minor"] -= 100
    code, report = _report(_jsonl(tmp_path / "edited.jsonl", edited))
    assert code == 1 and report["root_findings"] == 1
    group = report["groups"][0]
    root = group["root"]
    assert root["reason"] == "payout_mismatch" and root["subject"]["event_id"] == records[i]["event_id"]
    was = records[i]["payload"]
    assert root["expected"] == {"credit_minor": was["credit_minor"], "win_minor": was["win_minor"]}
    now = {"credit_minor": was["credit_minor"] + 100, "win_minor": was["win_minor"] + 100}
    assert root["recorded"] == now
    assert "changed after it was written" in root["explanation"]
    assert "hash_mismatch" in {c["reason"] for c in group["consequences"]}
    assert len(group["consequences"]) == report["findings_total"] - 1
    assert {f["table_id"] for f in report["findings"]} <= {records[i]["payload"]["table_id"]}


def test_refused_records_are_counted_without_making_the_log_unclean(
    records: list[dict[str, Any]], tmp_path: Path
) -> None:
    """Dead letters of records refused by authentication are reported by reason with their ids, and the
    verdict stays ``clean``: a forgery turned away is an attempt, not a breach."""
    at = "2026-11-22T21:00:00.000Z"
    forged = request("PayoutIssued", topics.WALLET_REQUESTS, "player:001", {"bet_id": "x"}, event_id="f-1",
                     occurred_at=at, producer="terminal")  # fmt: skip
    letters = []
    for n, reason in enumerate(("unauthenticated", "unauthenticated", "not_permitted")):
        body = {"event_id": f"dl-{n}", "type": "DeadLetter", "schema_version": 1, "topic": topics.DEADLETTER,
                "key": topics.WALLET_REQUESTS, "seq": None, "occurred_at": "2026-11-22T21:00:00.000Z",
                "causation_id": forged.event_id, "causation_hash": forged.hash, "correlation_id": None,
                "producer": "settlement", "prev_hash": None,
                "payload": {"source_topic": topics.WALLET_REQUESTS, "reason": reason, "detail": "no",
                            "original": forged.to_json().decode(),
                            "original_event_id": forged.event_id}}  # fmt: skip
        letters.append(body | {"hash": sha256_hex(canonical(body))})
    code, report = _report(_jsonl(tmp_path / "refused.jsonl", [*records, *letters]))
    assert report["verdict"] == "clean" and code == 0, report["groups"][:2]
    assert report["refused"]["unauthenticated"]["count"] == 2
    assert report["refused"]["not_permitted"] == {"count": 1, "ids": [forged.event_id]}


def _keyring(path: Path, key_id: str, secret: bytes) -> Path:
    """A keyring of the older format (keys derived from the MAC secrets): the demo's, but for audit."""
    doc = demo_keyring().to_json()
    doc["principals"]["audit"] = {"key_id": key_id, "secret_hex": secret.hex()}
    path.write_text(json.dumps(doc))
    return path


def test_keys_public_lets_a_regulator_verify_without_secrets(tmp_path: Path) -> None:
    """``keys public`` writes only public keys (no secret of any principal); a log audited with the
    keyring's audit key replays clean against it, names the key id that signed, and fails against an
    older public keyring; a second keyring's key is added beside the first one."""
    secret = bytes(range(32))
    ring = _keyring(tmp_path / "keyring.json", "audit-1a2b3c4d", secret)
    public = tmp_path / "public.json"
    code, out, _ = _run("keys", "public", "--in", str(ring), "--out", str(public))
    assert code == 0 and json.loads(out)["key_ids"] == ["audit-1a2b3c4d"]
    text = public.read_text()
    doc = json.loads(text)
    assert doc["format"] == "casino-ledger/public-keyring-1" and list(doc["ed25519"]) == ["audit-1a2b3c4d"]
    assert secret.hex() not in text and "secret" not in text
    assert {p: e["key_id"] for p, e in doc["principals"].items()} == {
        p: "audit-1a2b3c4d" if p == "audit" else f"{p}-demo0000"
        for p in demo_keyring().to_json()["principals"]
    }
    bus = MemBus(Composition.demo(load_keyring(ring)))
    Session(bus, seed=9).run(list(DEFAULT_TABLES[:1]), 12)
    bus.seal()
    log = tmp_path / "log.jsonl"
    log.write_bytes(b"".join(e.to_json() + b"\n" for e in bus.log))
    written = sum(1 for e in bus.log if e.type == "AuditCheckpoint")
    code, report = _report(log, "--keys", str(public))
    assert code == 0 and written >= 1 and report["checkpoints"]["signed_by"] == {"audit-1a2b3c4d": written}
    code, report = _report(log)  # the demo public keys only: audit's heads and checkpoints do not verify
    assert code == 1 and report["verdict"] != "clean"
    assert report["attestation"]["invalid_signatures"]["count"] >= 1
    ring2 = _keyring(tmp_path / "keyring2.json", "audit-99999999", bytes(range(1, 33)))
    assert _run("keys", "public", "--in", str(ring2), "--out", str(public))[0] == 0
    assert sorted(json.loads(public.read_text())["ed25519"]) == ["audit-1a2b3c4d", "audit-99999999"]
    code, report = _report(log, "--keys", str(public))
    assert code == 0


@pytest.mark.parametrize(
    ("content", "why"),
    [("not json", "not JSON"), ('{"format": "other"}', "format is 'other'"),
     ('{"format": "casino-ledger/keyring-1", "principals": {}}', "holds no principal's key")],
)  # fmt: skip
def test_keys_public_refuses_a_bad_keyring_in_one_line(tmp_path: Path, content: str, why: str) -> None:
    """A keyring that cannot be read is one line on stderr, exit 2, and no output file."""
    ring = tmp_path / "ring.json"
    ring.write_text(content)
    code, _, err = _run("keys", "public", "--in", str(ring), "--out", str(tmp_path / "p.json"))
    _one_line_error(code, err)
    assert why in err and not (tmp_path / "p.json").exists()


def test_the_demo_verifies_its_own_audit_whatever_the_replay_keyring_says(tmp_path: Path) -> None:
    """The demo's verdict uses the key its own audit signed with: a stray public keyring or the retired
    HMAC variable in the environment does not make it fail its own audit."""
    stray = tmp_path / "stray.json"
    stray.write_text(
        json.dumps({"format": "casino-ledger/public-keyring-1", "ed25519": {"audit-x": "00" * 32}})
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("CASINO_")}
    env |= {"CI": "1", "CASINO_PUBLIC_KEYRING": str(stray), "CASINO_AUDIT_HMAC_KEY": "11" * 32}
    done = subprocess.run([*CLI, "demo", "--db", str(tmp_path / "d.db"), "--coups", "3", "--tables", "1"],
                          env=env, capture_output=True, text=True, timeout=180, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout[-1500:] + done.stderr[-1500:]
    assert "audit verdict: clean" in done.stdout
