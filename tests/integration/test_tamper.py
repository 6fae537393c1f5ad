"""Tampered copies of a real demo log (SQLite, written by ``casino-ledger demo``): each edit is found,
located by the ids it concerns, with a reason code."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from services.audit.processor import CHECKPOINT_EVERY
from services.audit.replay import Report
from services.core.cards import CARD_POINTS
from services.core.envelope import canonical, sha256_hex
from services.core.signing import DEMO_KEY_ID, DEMO_PUBLIC_KEYS
from services.runtime.replay import read_db, replay
from tests.helpers.keys import demo_keyring_file

Rec = dict[str, Any]
CLI = [sys.executable, "-m", "services.cli"]
KEYS = dict(DEMO_PUBLIC_KEYS)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CASINO_AUDIT")}
    return env | {"LOG_LEVEL": "ERROR", "CI": "1"}


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real demo log: 3 tables, 14 coups each, through the CLI on the embedded SQLite runtime."""
    db = tmp_path_factory.mktemp("tamper") / "demo.db"
    cmd = [*CLI, "demo", "--db", str(db), "--coups", "14", "--tables", "3", "--quiet"]
    env = _env() | {"CASINO_KEYRING": str(demo_keyring_file(db.parent))}  # checkpoints on the demo key
    done = subprocess.run(cmd, env=env, capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return db


@pytest.fixture(scope="module")
def records(demo_db: Path) -> list[Rec]:
    """The demo log's records, in log order, as dicts."""
    return [json.loads(raw) for raw in read_db(demo_db)]


def _replay(recs: list[Rec]) -> Report:
    return replay([canonical(r) for r in recs], keys=KEYS, checkpoint_every=CHECKPOINT_EVERY)


def _reseal(rec: Rec) -> Rec:
    """The hash a careful forger computes: over the envelope without ``hash`` and ``auth`` (the MAC
    over it cannot be redone without the writer's secret; a replay holds no secrets to check it)."""
    body = {k: v for k, v in rec.items() if k not in ("hash", "auth")}
    return {**rec, "hash": sha256_hex(canonical(body))}


def _rehash_chain(recs: list[Rec], start: int) -> list[Rec]:
    """Re-seal ``recs[start]`` and re-link every later record of its topic and key (a careful forger)."""
    out = list(recs)
    topic, key = out[start]["topic"], out[start]["key"]
    prev = None
    for i in range(start, len(out)):
        if out[i]["topic"] != topic or out[i]["key"] != key:
            continue
        if prev is not None:
            out[i] = {**out[i], "prev_hash": prev}
        out[i] = _reseal(out[i])
        prev = out[i]["hash"]
    return out


def _find(recs: list[Rec], pred: Callable[[Rec], bool]) -> int:
    return next(i for i, r in enumerate(recs) if pred(r))


def _with_payload(rec: Rec, **changes: Any) -> Rec:
    return {**rec, "payload": {**rec["payload"], **changes}}


def _banker_third_card(recs: list[Rec]) -> int:
    """The index of the first ``CardDealt`` that is the third card of a banker's hand."""
    banker_cards: dict[str, int] = {}
    for i, r in enumerate(recs):
        if r["type"] == "CardDealt" and r["payload"]["hand"] == "banker":
            coup = r["payload"]["coup_id"]
            banker_cards[coup] = banker_cards.get(coup, 0) + 1
            if banker_cards[coup] == 3:
                return i
    raise AssertionError("no banker drew a third card in the demo log")


def _other_card(card: str) -> str:
    """A card of another point value (so the hand's total changes too)."""
    return next(c for c in ("9S", "5H", "2D") if CARD_POINTS[c] != CARD_POINTS[card])


def _ids(report: Report, reason: str) -> set[str]:
    out: set[str] = set()
    for f in report.findings:
        if f["reason"] == reason:
            s = f["subject"]
            out.update(str(s[k]) for k in ("event_id", "bet_id", "coup_id", "shoe_id", "table_id") if k in s)
            out.update(s.get("event_ids") or [])
    return out


# --- the tampering, one function each: (tampered records, {reason: ids that finding must name}) -------


def card_changed(recs: list[Rec]) -> tuple[list[Rec], dict[str, set[str]]]:
    """A dealt card changed, nothing re-hashed."""
    i = _find(recs, lambda r: r["type"] == "CardDealt")
    out = list(recs)
    out[i] = _with_payload(recs[i], card=_other_card(recs[i]["payload"]["card"]))
    return out, {"hash_mismatch": {recs[i]["event_id"]}}


def card_changed_chain_rehashed(recs: list[Rec]) -> tuple[list[Rec], dict[str, set[str]]]:
    """A dealt card changed and the whole table chain re-hashed: the shoe, the engine and the
    checkpoint each catch it. The card is a banker's third card (the last a coup deals, so the changed
    coup still has the cards the tableau asks for and the engine recomputes other hands)."""
    i = _banker_third_card(recs)
    p = recs[i]["payload"]
    out = list(recs)
    out[i] = _with_payload(recs[i], card=_other_card(p["card"]))
    out = _rehash_chain(out, i)
    return out, {
        "card_mismatch": {recs[i]["event_id"], p["coup_id"]},
        "outcome_mismatch": {p["coup_id"]},
        "checkpoint_mismatch": {p["table_id"]},
    }


def event_deleted(recs: list[Rec]) -> tuple[list[Rec], dict[str, set[str]]]:
    """A dealer event deleted: the next one on its key names the gap."""
    i = _find(recs, lambda r: r["type"] == "BettingClosed")
    nxt = _find(recs[i + 1 :], lambda r: (r["topic"], r["key"]) == (recs[i]["topic"], recs[i]["key"]))
    return [*recs[:i], *recs[i + 1 :]], {"seq_gap": {recs[i + 1 + nxt]["event_id"]}}


def events_swapped(recs: list[Rec]) -> tuple[list[Rec], dict[str, set[str]]]:
    """Two consecutive events of one table stream swapped in the log."""
    i = _find(recs, lambda r: r["type"] == "CardDealt")
    j = i + 1 + _find(recs[i + 1 :], lambda r: (r["topic"], r["key"]) == (recs[i]["topic"], recs[i]["key"]))
    out = list(recs)
    out[i], out[j] = recs[j], recs[i]
    return out, {"seq_reordered": {recs[i]["event_id"], recs[j]["event_id"]}}


def payout_inflated(recs: list[Rec]) -> tuple[list[Rec], dict[str, set[str]]]:
    """A winning payout raised by 100, its postings kept balanced and the record re-hashed."""
    i = _find(recs, lambda r: r["type"] == "PayoutIssued" and r["payload"]["result"] == "win")
    p = recs[i]["payload"]
    rows = [dict(r) for r in p["postings"]]
    for r in rows:
        r["amount_minor"] += 100 if r["account"] == p["account_id"] else 0
    next(r for r in rows if r["account"] != p["account_id"] and r["amount_minor"] < 0)["amount_minor"] -= 100
    out = list(recs)
    changes = {"win_minor": p["win_minor"] + 100, "credit_minor": p["credit_minor"] + 100, "postings": rows}
    out[i] = _reseal(_with_payload(recs[i], **changes))
    return out, {"payout_mismatch": {recs[i]["event_id"], p["bet_id"], p["coup_id"]}}


def commission_changed(recs: list[Rec]) -> tuple[list[Rec], dict[str, set[str]]]:
    """A commission lowered by one cent (credit raised to match, postings balanced), re-hashed."""
    i = _find(recs, lambda r: r["type"] == "PayoutIssued" and r["payload"]["commission_minor"] > 0)
    p = recs[i]["payload"]
    rows = [dict(r) for r in p["postings"]]
    for r in rows:
        if r["account"] == p["account_id"]:
            r["amount_minor"] += 1
        elif r["amount_minor"] > 0 and r["account"] != p["account_id"]:
            r["amount_minor"] -= 1
            break
    changes = {
        "commission_minor": p["commission_minor"] - 1,
        "credit_minor": p["credit_minor"] + 1,
        "postings": rows,
    }
    out = list(recs)
    out[i] = _reseal(_with_payload(recs[i], **changes))
    return out, {"commission_mismatch": {recs[i]["event_id"], p["bet_id"], p["coup_id"]}}


def shoe_commitment_changed(recs: list[Rec]) -> tuple[list[Rec], dict[str, set[str]]]:
    """A shoe committed to another order (commitment edited, chain re-hashed)."""
    i = _find(recs, lambda r: r["type"] == "ShoeOpened")
    shoe_id = recs[i]["payload"]["shoe_id"]
    closed = _find(recs, lambda r: r["type"] == "ShoeClosed" and r["payload"]["shoe_id"] == shoe_id)
    out = list(recs)
    out[i] = _with_payload(recs[i], commitment=sha256_hex(b"another order"))
    out = _rehash_chain(out, i)
    return out, {"shoe_commitment_mismatch": {recs[closed]["event_id"], shoe_id}}


def checkpoint_forged(recs: list[Rec]) -> tuple[list[Rec], dict[str, set[str]]]:
    """A checkpoint's digest rewritten (its audit chain re-hashed): the signature no longer verifies."""
    i = _find(recs, lambda r: r["type"] == "AuditCheckpoint")
    out = list(recs)
    out[i] = _with_payload(recs[i], table_digest=sha256_hex(b"forged"))
    out = _rehash_chain(out, i)
    return out, {
        "checkpoint_signature_invalid": {recs[i]["event_id"]},
        "checkpoint_mismatch": {recs[i]["event_id"]},
    }


def checkpoint_deleted(recs: list[Rec]) -> tuple[list[Rec], dict[str, set[str]]]:
    """A checkpoint deleted (the last record of its audit stream, so no seq gap shows)."""
    i = max(i for i, r in enumerate(recs) if r["type"] == "AuditCheckpoint")
    return [*recs[:i], *recs[i + 1 :]], {"checkpoint_missing": {recs[i]["payload"]["table_id"]}}


CASES = [
    card_changed, card_changed_chain_rehashed, event_deleted, events_swapped, payout_inflated,
    commission_changed, shoe_commitment_changed, checkpoint_forged, checkpoint_deleted,
]  # fmt: skip


def test_the_untampered_log_is_clean_and_checkpointed(records: list[Rec]) -> None:
    """The demo log as written replays clean, with every (signed) checkpoint verified."""
    report = _replay(records)
    assert report.clean, report.to_dict()["findings"]
    written = sum(1 for r in records if r["type"] == "AuditCheckpoint")
    assert written >= 3 and report.checkpoints["verified"] == written
    assert report.checkpoints["signed_by"] == {DEMO_KEY_ID: written}
    per_table: dict[str, int] = {}
    for r in records:
        if r["type"] == "AuditCheckpoint":
            per_table[r["key"]] = per_table.get(r["key"], 0) + 1
    assert report.checkpoints["signed_tables"] == {DEMO_KEY_ID: per_table}


@pytest.mark.parametrize("tamper", CASES, ids=[c.__name__ for c in CASES])
def test_tampering_is_found_and_located(records: list[Rec], tamper: Callable[..., Any]) -> None:
    """Each tampering gives its reason code, naming the event, bet, coup or shoe ids concerned."""
    tampered, want = tamper(records)
    report = _replay(tampered)
    assert not report.clean
    for reason, ids in want.items():
        assert ids <= _ids(report, reason), (reason, report.to_dict()["findings"])


def test_rehashed_forgery_leaves_the_chains_valid(records: list[Rec]) -> None:
    """The careful forger's chain itself checks out: only the content checks (shoe, engine, checkpoint)
    catch it, so those are what the test above relies on."""
    tampered, _ = card_changed_chain_rehashed(records)
    reasons = {f["reason"] for f in _replay(tampered).findings}
    assert not reasons & {"hash_mismatch", "chain_broken", "seq_gap", "seq_duplicate", "seq_reordered"}


def test_cli_replay_of_a_tampered_sqlite_copy_exits_1(demo_db: Path, tmp_path: Path) -> None:
    """``replay --db COPY --json`` on a copy with a card edited in place exits 1 and names its event."""
    copy = tmp_path / "copy.db"
    shutil.copy(demo_db, copy)
    con = sqlite3.connect(copy)
    offset, body = con.execute(
        'SELECT "offset", body FROM records WHERE type = \'CardDealt\' ORDER BY "offset" LIMIT 1'
    ).fetchone()
    rec = json.loads(body)
    rec["payload"]["card"] = _other_card(rec["payload"]["card"])
    con.execute('UPDATE records SET body = ? WHERE "offset" = ?', (canonical(rec), offset))
    con.commit()
    con.close()
    done = subprocess.run([*CLI, "replay", "--db", str(copy), "--json"], env=_env(), capture_output=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 1, done.stderr.decode()[-2000:]
    report = json.loads(done.stdout)
    assert report["verdict"] == "findings"
    hits = [f for f in report["findings"] if f["reason"] == "hash_mismatch"]
    assert [f["subject"]["event_id"] for f in hits] == [rec["event_id"]]


def test_cli_replay_of_a_tampered_jsonl_export_exits_1(records: list[Rec], tmp_path: Path) -> None:
    """The same through a JSONL export: an inflated payout, exit status 1, the bet id in the finding."""
    tampered, want = payout_inflated(records)
    path = tmp_path / "tampered.jsonl"
    path.write_bytes(b"".join(canonical(r) + b"\n" for r in tampered))
    done = subprocess.run([*CLI, "replay", "--jsonl", str(path), "--json"], env=_env(), capture_output=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 1
    found = json.loads(done.stdout)["findings"]
    assert want["payout_mismatch"] <= {v for f in found for v in f["subject"].values() if isinstance(v, str)}
