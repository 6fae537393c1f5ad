"""``casino-ledger replay`` on a real demo log: reports, scope, one round in full, determinism."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from services.audit.replay import iso_instant
from services.cli import main
from services.runtime.replay import read_db

CLI = [sys.executable, "-m", "services.cli"]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CASINO_AUDIT")}
    return env | {"LOG_LEVEL": "ERROR", "CI": "1"} | extra


@dataclass
class Done:
    """What one command did."""

    returncode: int
    stdout: bytes
    stderr: bytes


def _run(*args: str, **env: str) -> Done:
    """``casino-ledger ARGS`` in this process (the CLI's own ``main``), with ``env`` as the environment."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(_env(**env))
    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = main(list(args))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return Done(code, out.getvalue().encode(), err.getvalue().encode())


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real demo log: 3 tables (one player-banked, with decisions), 10 coups each."""
    db = tmp_path_factory.mktemp("replay") / "demo.db"
    cmd = [*CLI, "demo", "--db", str(db), "--coups", "10", "--tables", "3", "--quiet"]
    done = subprocess.run(cmd, env=_env(), capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return db


@pytest.fixture(scope="module")
def records(demo_db: Path) -> list[dict[str, Any]]:
    """The log's records as dicts, in log order."""
    return [json.loads(raw) for raw in read_db(demo_db)]


def test_clean_log_exits_0_with_identical_reports_from_db_and_jsonl(demo_db: Path, tmp_path: Path) -> None:
    """Replaying the log twice, and its JSONL export, prints byte-identical JSON; exit status 0."""
    export = tmp_path / "log.jsonl"
    assert _run("export", "--db", str(demo_db), "--out", str(export)).returncode == 0
    first, second = (
        _run("replay", "--db", str(demo_db), "--json", "--keys", f"{demo_db}.public-keyring.json"),
        _run("replay", "--db", str(demo_db), "--json", "--keys", f"{demo_db}.public-keyring.json"),
    )
    # the public keyring is supplied (a keyring only found beside the log proves nothing: test_tree_heads)
    from_jsonl = _run("replay", "--jsonl", str(export), "--json", "--keys", f"{demo_db}.public-keyring.json")
    assert first.returncode == second.returncode == from_jsonl.returncode == 0, first.stderr.decode()
    assert first.stdout == second.stdout == from_jsonl.stdout
    report = json.loads(first.stdout)
    assert report["verdict"] == "clean" and report["checkpoints"]["verified"] >= 3
    assert list(report)[:3] == ["verdict", "digest", "scope"]


def test_html_report_is_deterministic_and_self_contained(
    demo_db: Path, tmp_path: Path, records: list[Any]
) -> None:
    """``--html`` writes the same page twice (at one ``SOURCE_DATE_EPOCH``), one row per table and shoe,
    with no external asset: every link stays inside the page."""
    pages = []
    for name in ("a.html", "b.html"):
        public = f"{demo_db}.public-keyring.json"
        done = _run("replay", "--db", str(demo_db), "--html", str(tmp_path / name),
                    SOURCE_DATE_EPOCH="1700000000", CASINO_PUBLIC_KEYRING=public)  # fmt: skip
        assert done.returncode == 0
        pages.append((tmp_path / name).read_bytes())
    assert pages[0] == pages[1]
    page = pages[0].decode()
    for r in records:
        if r["type"] in ("TableOpened", "ShoeOpened"):
            assert f"<td>{r['payload'].get('shoe_id', r['key'])}</td>" in page
    assert "src=" not in page and "<script" not in page
    assert "2023-11-14 22:13:20 UTC" in page
    assert page.count('href="') == page.count('href="#') > 0


def test_coup_prints_one_round_in_full(demo_db: Path, records: list[dict[str, Any]]) -> None:
    """``--coup ID`` prints every card with hand and shoe position, decisions with who made them, bets,
    payouts with postings, totals, outcome, times, variant and rules version — as the log holds them."""
    decided = [r for r in records if r["type"] == "DecisionMade"]
    first = next(r for r in records if r["type"] == "CoupResolved")
    coup_id = (decided[0] if decided else first)["payload"]["coup_id"]
    done = _run("replay", "--db", str(demo_db), "--coup", coup_id, "--json")
    assert done.returncode == 0, done.stderr.decode()
    got = json.loads(done.stdout)
    mine = [r for r in records if r["payload"].get("coup_id") == coup_id]
    resolved = next(r["payload"] for r in mine if r["type"] == "CoupResolved")
    cards = [(r["payload"]["hand"], r["payload"]["card"], r["payload"]["shoe_position"], r["event_id"])
             for r in mine if r["type"] == "CardDealt"]  # fmt: skip
    assert [(c["hand"], c["card"], c["shoe_position"], c["event_id"]) for c in got["cards"]] == cards
    assert [(d["hand"], d["choice"], d["decided_by"]) for d in got["decisions"]] == [
        (r["payload"]["hand"], r["payload"]["choice"], r["payload"]["decided_by"])
        for r in mine if r["type"] == "DecisionMade"
    ]  # fmt: skip
    for name in ("variant", "rules_version", "started_at", "ended_at", "outcome", "hands", "natural"):
        assert got[name] == resolved[name], name
    assert got["recomputed"]["outcome"] == resolved["outcome"]
    payouts = {r["payload"]["bet_id"]: r["payload"] for r in mine if r["type"] == "PayoutIssued"}
    assert {p["bet_id"]: p["postings"] for p in got["payouts"]} == {
        b: p["postings"] for b, p in payouts.items()
    }
    assert sorted(b["bet_id"] for b in got["bets"]) == sorted(resolved["bet_ids"])
    assert got["totals"]["credit_minor"] == sum(p["credit_minor"] for p in payouts.values())
    assert got["verdict"] == "clean"


def test_unknown_coup_is_an_input_error(demo_db: Path) -> None:
    """``--coup`` with an id the log does not hold exits 2 with one line on stderr."""
    done = _run("replay", "--db", str(demo_db), "--coup", "no-such-coup")
    assert done.returncode == 2 and b"no coup" in done.stderr and done.stdout == b""


def test_table_and_time_range_limit_the_report(demo_db: Path, records: list[dict[str, Any]]) -> None:
    """``--table`` and ``--since/--until`` count only the coups of that table resolved in the range."""
    resolved = [r for r in records if r["type"] == "CoupResolved"]
    table = resolved[0]["key"]
    times = sorted(r["occurred_at"] for r in resolved if r["key"] == table)
    since, until = times[2], times[-3]
    done = _run("replay", "--db", str(demo_db), "--json", "--table", table, "--since", since,
                "--until", until, "--keys", f"{demo_db}.public-keyring.json")  # fmt: skip
    assert done.returncode == 0
    report = json.loads(done.stdout)
    assert report["scope"] == {"tables": [table], "since": iso_instant(since), "until": iso_instant(until)}
    assert report["coups"] == sum(1 for t in times if since <= t < until)
    assert [t["table_id"] for t in report["tables"]] == [table]
    assert report["tables"][0]["coups"] == report["coups"]


def test_bad_time_is_an_input_error(demo_db: Path) -> None:
    """A ``--since`` that is not ISO 8601 exits 2."""
    assert _run("replay", "--db", str(demo_db), "--since", "yesterday").returncode == 2


def test_checkpoints_verify_with_the_public_keyring_only(demo_db: Path, tmp_path: Path) -> None:
    """With a public keyring that lacks the demo's keys nothing in the log is attested (incomplete, exit
    1); with the writers' keys but another audit key the demo's checkpoints fail; the public keyring a
    regulator gets from ``keys public`` (no secret in it) makes the replay clean again."""
    from services.core.signing import SigningKey, public_keyring  # noqa: PLC0415

    bad_audit = {"audit-0badc0de": SigningKey("x", bytes(32)).public_hex()}
    other = tmp_path / "other.json"
    other.write_text(json.dumps(public_keyring(bad_audit)))
    failing = _run("replay", "--db", str(demo_db), "--json", "--keys", str(other))
    assert failing.returncode == 1
    report = json.loads(failing.stdout)
    assert report["verdict"] == "incomplete" and not report["findings"]
    assert any("no valid signature" in why for why in report["attestation"]["incomplete"])
    demo = tmp_path / "demo-public.json"
    assert _run("keys", "public", "--in", f"{demo_db}.keyring.json", "--out", str(demo)).returncode == 0
    assert "secret" not in demo.read_text()
    wrong_checkpoints = tmp_path / "wrong-checkpoints.json"
    wrong_checkpoints.write_text(json.dumps({**json.loads(demo.read_text()), "ed25519": bad_audit}))
    failing = _run("replay", "--db", str(demo_db), "--json", "--keys", str(wrong_checkpoints))
    reasons = {f["reason"] for f in json.loads(failing.stdout)["findings"]}
    assert failing.returncode == 1 and reasons == {"checkpoint_signature_invalid"}
    assert _run("replay", "--db", str(demo_db), "--json", CASINO_PUBLIC_KEYRING=str(demo)).returncode == 0
