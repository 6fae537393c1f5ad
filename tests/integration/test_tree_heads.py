"""Attacks on audit's signed tree heads, written as an attacker would: from the file format alone (SHA-256
over canonical JSON, the hash chain, RFC 6962 and Ed25519 re-done here with hashlib and cryptography, not
with the code under test), on an authentic demo log made with its own fresh keyring.

Someone with write access to the log but no secret deletes a chain, cuts a chain's tail or splices in a
foreign chain, re-chaining every hash: the replay is never ``clean`` and names the chain touched. A
regulator holding a tree head (``heads``) fails a truncated, rolled back or forked log with ``--expect``.
An attacker who also rewrites the public keyring beside the log, under the genuine key id, gets no
``clean`` from a replay without ``--keys``, and a finding with them.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.cli import main

Rec = dict[str, Any]
CLI = [sys.executable, "-m", "services.cli"]
CHAINED = ("casino.wallet.events", "casino.table.events", "casino.audit.findings", "casino.monitor.alerts")
"""The chained topics, as the event contract lists them (docs/event-contract.md)."""
SLOW = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _rehash(rec: Rec) -> Rec:
    """The hash a forger computes: SHA-256 of the envelope without ``hash`` and ``auth``."""
    rec["hash"] = hashlib.sha256(
        _canonical({k: v for k, v in rec.items() if k not in ("hash", "auth")})
    ).hexdigest()
    return rec


def _rechain(recs: list[Rec]) -> list[Rec]:
    """Every chained stream renumbered from 0 and re-linked, every hash recomputed: no gap, no break."""
    heads: dict[tuple[str, str], tuple[int, str]] = {}
    out = []
    for original in recs:
        r = json.loads(json.dumps(original))
        if r["topic"] in CHAINED and r.get("seq") is not None:
            head = heads.get((r["topic"], r["key"]))
            r["seq"], r["prev_hash"] = (0, None) if head is None else (head[0] + 1, head[1])
            _rehash(r)
            heads[(r["topic"], r["key"])] = (r["seq"], r["hash"])
        out.append(r)
    return out


def _jsonl(path: Path, recs: list[Rec]) -> Path:
    path.write_bytes(b"".join(_canonical(r) + b"\n" for r in recs))
    return path


def _run(*args: str) -> tuple[int, str, str]:
    """``casino-ledger ARGS`` in this process, no ``CASINO_*`` setting (the keys, if any, on the line)."""
    saved = dict(os.environ)
    for k in [k for k in os.environ if k.startswith("CASINO_")]:
        del os.environ[k]
    os.environ.update({"CI": "1", "LOG_LEVEL": "ERROR"})
    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = main(list(args))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return code, out.getvalue(), err.getvalue()


def _replay(path: Path, public: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    code, out, err = _run("replay", "--jsonl", str(path), "--json", "--keys", str(public), *extra)
    assert out, err
    return code, json.loads(out)


def _names(report: dict[str, Any], key: str) -> bool:
    """Whether some finding of ``report`` names ``key`` (as its table/key or in its subject)."""
    return any(
        f.get("table_id") == key or (f.get("subject") or {}).get("key") == key for f in report["findings"]
    )


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An authentic demo log: 3 tables, 8 coups each, its own fresh keyring (and its public half), with at
    least one monitor alert (a chained topic audit's tree heads claim after its findings).

    The alerts are the demo's late bets, drawn by the session's generator, whose draws follow the shoes
    the fresh keyring shuffles: a keyring whose 24 coups draw none happens (CI met one), so a log
    without an alert is made again with another fresh keyring."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CASINO_")} | {
        "CI": "1",
        "LOG_LEVEL": "ERROR",
    }
    for attempt in range(8):
        db = tmp_path_factory.mktemp(f"trees{attempt}") / "demo.db"
        done = subprocess.run([*CLI, "demo", "--db", str(db), "--coups", "8", "--tables", "3", "--quiet"],
                              env=env, capture_output=True, timeout=300, check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr.decode()[-2000:]
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            (alerts,) = conn.execute(
                "SELECT count(*) FROM records WHERE json_extract(body, '$.topic') = 'casino.monitor.alerts'"
            ).fetchone()
        if alerts:
            return db
    raise AssertionError("eight fresh keyrings, no demo log with a monitor alert")


@pytest.fixture(scope="module")
def public(demo_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The genuine public keyring, as the regulator holds it (a copy away from the log)."""
    path = tmp_path_factory.mktemp("regulator") / "public-keyring.json"
    shutil.copy(f"{demo_db}.public-keyring.json", path)
    return path


@pytest.fixture(scope="module")
def records(demo_db: Path) -> list[Rec]:
    """The log's records, in log order (read with sqlite3, as anyone could)."""
    with sqlite3.connect(f"file:{demo_db}?mode=ro", uri=True) as conn:
        return [json.loads(b) for (b,) in conn.execute('SELECT body FROM records ORDER BY "offset"')]


def _trees(records: list[Rec]) -> list[tuple[int, Rec]]:
    return [
        (i, r) for i, r in enumerate(records) if r["type"] == "AuditCheckpoint" and "tree" in r["payload"]
    ]


@pytest.fixture(scope="module")
def covered(records: list[Rec]) -> list[tuple[str, str]]:
    """Chains whose last record a signed tree head claims (a tail past every tree head is not audit's
    to vouch for: the writers' own signed heads are)."""
    last: dict[tuple[str, str], int] = {}
    for r in records:
        if r["topic"] in CHAINED and r.get("seq") is not None:
            last[(r["topic"], r["key"])] = r["seq"]
    claimed: dict[tuple[str, str], int] = {}
    for _, cp in _trees(records):
        for topic, chains in cp["payload"]["tree"]["heads"].items():
            for key, (seq, _) in chains.items():
                claimed[(topic, key)] = max(seq, claimed.get((topic, key), -1))
    return sorted(c for c, s in claimed.items() if last.get(c) == s)


def test_the_authentic_log_is_clean_and_every_chain_is_under_a_signed_tree_head(
    records: list[Rec], public: Path, tmp_path: Path, covered: list[tuple[str, str]]
) -> None:
    """The untouched log (re-chained by the attacker's own code: it changes nothing) replays ``clean``;
    the tree heads' roots are RFC 6962 roots of the heads listed; every chain but audit's very last
    checkpoint is claimed to its end."""
    assert _rechain(records) == records
    code, report = _replay(_jsonl(tmp_path / "same.jsonl", records), public)
    assert (code, report["verdict"]) == (0, "clean"), report["findings"][:3]
    trees = report["checkpoints"]["tree_heads"]
    assert trees["signed"] == len(_trees(records)) == report["checkpoints"]["verified"] > 0
    for _, cp in _trees(records):
        tree = cp["payload"]["tree"]
        leaves = [_canonical([t, k, s, h]) for t, chains in sorted(tree["heads"].items())
                  for k, (s, h) in sorted(chains.items())]  # fmt: skip
        assert (tree["size"], tree["root"]) == (len(leaves), _mth(leaves).hex())
    chains = {(r["topic"], r["key"]) for r in records if r["topic"] in CHAINED}
    assert len(chains - set(covered)) <= 1  # the findings chain of the table whose checkpoint is last


def _mth(data: list[bytes]) -> bytes:
    """RFC 6962 §2.1, written from the RFC."""
    if not data:
        return hashlib.sha256(b"").digest()
    if len(data) == 1:
        return hashlib.sha256(b"\x00" + data[0]).digest()
    k = 1 << (len(data) - 1).bit_length() - 1
    return hashlib.sha256(b"\x01" + _mth(data[:k]) + _mth(data[k:])).digest()


@SLOW
@given(st.data())
def test_a_deleted_chain_is_found_and_named(
    records: list[Rec], public: Path, tmp_path: Path, covered: list[tuple[str, str]], data: st.DataObject
) -> None:
    """Every record of one chain deleted (what is left re-chained): never ``clean``, a finding names it."""
    topic, key = data.draw(st.sampled_from(covered), label="chain")
    kept = _rechain([r for r in records if (r["topic"], r["key"]) != (topic, key)])
    code, report = _replay(_jsonl(tmp_path / "deleted.jsonl", kept), public)
    assert code == 1 and report["verdict"] != "clean"
    assert _names(report, key), [f["reason"] for f in report["findings"]]


@SLOW
@given(st.data())
def test_a_cut_tail_is_found_and_named(
    records: list[Rec], public: Path, tmp_path: Path, covered: list[tuple[str, str]], data: st.DataObject
) -> None:
    """The last 1..5 records of one chain deleted: never ``clean``, a finding names the chain."""
    topic, key = data.draw(st.sampled_from(covered), label="chain")
    mine = [i for i, r in enumerate(records) if (r["topic"], r["key"]) == (topic, key)]
    cut = set(mine[-data.draw(st.integers(1, min(5, len(mine))), label="cut") :])
    kept = _rechain([r for i, r in enumerate(records) if i not in cut])
    code, report = _replay(_jsonl(tmp_path / "cut.jsonl", kept), public)
    assert code == 1 and report["verdict"] != "clean"
    assert _names(report, key), [f["reason"] for f in report["findings"]]


def _reach(records: list[Rec]) -> int:
    """The furthest record the last tree head claims (audit had read everything before it)."""
    _, last = _trees(records)[-1]
    where = {(r["topic"], r["key"], r.get("seq")): i for i, r in enumerate(records)}
    heads = last["payload"]["tree"]["heads"]
    return max(where[(t, k, s)] for t, chains in heads.items() for k, (s, _) in chains.items())


@SLOW
@given(st.data())
def test_a_spliced_foreign_chain_is_found_and_named(
    records: list[Rec], public: Path, tmp_path: Path, data: st.DataObject
) -> None:
    """A copy of a real table's or wallet's chain under an invented key, with fresh ids, spliced in
    before audit's last tree head and re-chained: never taken as a fact. Either a finding names the
    invented key, or (no writer's signed head covers it: docs/trust.md) every copied record is counted
    unattested and the invented key is in no table, balance or finding of a verdict about the rest."""
    sources = sorted({(r["topic"], r["key"]) for r in records
                      if r["topic"] in ("casino.table.events", "casino.wallet.events")})  # fmt: skip
    topic, key = data.draw(st.sampled_from(sources), label="copied")
    invented = "T99-invented" if topic == "casino.table.events" else "player:999"
    copy = []
    for r in records:
        if (r["topic"], r["key"]) == (topic, key):
            text = json.dumps(r).replace(json.dumps(key), json.dumps(invented))
            forged = json.loads(text)
            forged["event_id"] = hashlib.sha256(f"forged/{r['event_id']}".encode()).hexdigest()[:32]
            copy.append(forged)
    at = data.draw(st.integers(0, _reach(records) - 1), label="position")
    spliced = _rechain(records[:at] + copy + records[at:])
    code, report = _replay(_jsonl(tmp_path / "spliced.jsonl", spliced), public)
    if report["verdict"] == "clean":
        assert code == 0 and report["attestation"]["unattested"]["count"] >= len(copy)
        assert invented not in json.dumps(report.get("tables")), "an unattested chain counted as a table"
        assert invented not in json.dumps(report.get("balances", {})), "unattested money counted"
    else:
        assert code == 1 and _names(report, invented), [f["reason"] for f in report["findings"]]


@pytest.fixture(scope="module")
def pinned(demo_db: Path, public: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tree head the regulator pinned: ``heads`` on the authentic log, with the genuine keys."""
    code, out, err = _run("heads", "--db", str(demo_db), "--keys", str(public))
    assert code == 0, err
    path = tmp_path_factory.mktemp("pinned") / "heads.json"
    path.write_text(out, encoding="utf-8")
    return path


def test_heads_names_the_latest_tree_head_with_its_fingerprint(
    pinned: Path, public: Path, records: list[Rec]
) -> None:
    """``heads`` prints the highest-numbered tree head, its checkpoint and the SHA-256 of the signing
    key's public key; the authentic log extends it (``--expect``: clean, exit 0)."""
    doc = json.loads(pinned.read_text())
    last = max((cp for _, cp in _trees(records)), key=lambda cp: cp["payload"]["tree"]["n"])
    assert doc["checkpoint"]["event_id"] == last["event_id"] and doc["verified"] is True
    assert doc["tree_head"]["root"] == last["payload"]["tree"]["root"] == doc["signed"]["tree"]["root"]
    key_hex = json.loads(public.read_text())["ed25519"][doc["key_id"]]
    assert doc["fingerprint"] == "sha256:" + hashlib.sha256(bytes.fromhex(key_hex)).hexdigest()
    code, report = _replay(_jsonl(pinned.parent / "same.jsonl", records), public, "--expect", str(pinned))
    assert (code, report["verdict"]) == (0, "clean"), report["findings"][:3]


@SLOW
@given(st.data())
def test_expect_fails_a_truncated_or_rolled_back_log(
    records: list[Rec], public: Path, pinned: Path, tmp_path: Path, data: st.DataObject
) -> None:
    """Any prefix that ends before the pinned tree head's checkpoint, alone or with another
    continuation written after it (a restored backup played on): ``heads_not_extended``, exit 1."""
    pin = json.loads(pinned.read_text())["checkpoint"]["event_id"]
    end = next(i for i, r in enumerate(records) if r["event_id"] == pin)
    cut = data.draw(st.integers(1, end), label="cut")
    log = records[:cut]
    if data.draw(st.booleans(), label="played on"):
        replayed = json.loads(json.dumps(records[cut:]))
        for r in replayed:
            r["event_id"] = hashlib.sha256(f"again/{r['event_id']}".encode()).hexdigest()[:32]
        log = _rechain(log + replayed[: len(replayed) // 2])
    code, report = _replay(_jsonl(tmp_path / "rolled.jsonl", log), public, "--expect", str(pinned))
    assert code == 1
    assert "heads_not_extended" in {f["reason"] for f in report["findings"]}


@SLOW
@given(st.data())
def test_expect_fails_a_forked_log(
    records: list[Rec], public: Path, pinned: Path, tmp_path: Path, data: st.DataObject
) -> None:
    """One wallet record under the pinned heads changed (its amounts shifted alike, so it stays a valid
    transfer) and every chain re-linked: a fork of the pinned history, found with ``--expect``."""
    doc = json.loads(pinned.read_text())
    wallets = doc["signed"]["tree"]["heads"]["casino.wallet.events"]
    pinned_records = [
        i
        for i, r in enumerate(records)
        if r["topic"] == "casino.wallet.events" and r["seq"] <= wallets.get(r["key"], [-1])[0]
    ]
    at = data.draw(st.sampled_from(pinned_records), label="record")
    forked = json.loads(json.dumps(records))
    forked[at]["occurred_at"] = forked[at]["occurred_at"][:-4] + "999Z"
    code, report = _replay(
        _jsonl(tmp_path / "forked.jsonl", _rechain(forked)), public, "--expect", str(pinned)
    )
    assert code == 1 and report["verdict"] == "findings"
    key = forked[at]["key"]
    assert any(
        f["reason"] == "heads_not_extended" and f["subject"].get("key") == key for f in report["findings"]
    )


def _resign(payload: dict[str, Any], key: Ed25519PrivateKey) -> None:
    body = {k: v for k, v in payload.items() if k != "signature"}
    payload["signature"] = key.sign(_canonical(body)).hex()


def test_a_keyring_beside_the_log_rewritten_by_the_attacker(
    demo_db: Path, records: list[Rec], public: Path, tmp_path: Path
) -> None:
    """The attacker edits a deposit, re-chains, recomputes every tree head and re-signs every checkpoint
    with a key of their own, which they write into the keyring beside the log under the genuine key id.
    Without ``--keys`` the replay is not ``clean`` and says the keys were not supplied; with the genuine
    keys every checkpoint fails; the fingerprint the report prints is the attacker's."""
    forged = json.loads(json.dumps(records))
    at = next(i for i, r in enumerate(forged) if r["type"] == "FundsDeposited")
    forged[at]["occurred_at"] = forged[at]["occurred_at"][:-4] + "999Z"
    forged = _rechain(forged)
    now = {(r["topic"], r["key"], r["seq"]): r["hash"] for r in forged if r["topic"] in CHAINED}
    attacker = Ed25519PrivateKey.generate()
    for r in forged:
        if r["type"] == "AuditCheckpoint":
            tree = r["payload"]["tree"]
            for topic, chains in tree["heads"].items():
                for key, (seq, digest) in chains.items():
                    chains[key] = [seq, None if digest is None else now.get((topic, key, seq), digest)]
            leaves = [_canonical([t, k, s, h]) for t, chains in sorted(tree["heads"].items())
                      for k, (s, h) in sorted(chains.items())]  # fmt: skip
            tree["root"] = _mth(leaves).hex()
            _resign(r["payload"], attacker)
    forged = _rechain(forged)
    db = tmp_path / "forged.db"
    shutil.copy(demo_db, db)
    with sqlite3.connect(db) as conn:
        offsets = [o for (o,) in conn.execute('SELECT "offset" FROM records ORDER BY "offset"')]
        conn.executemany('UPDATE records SET body = ? WHERE "offset" = ?',
                         [(_canonical(r), o) for r, o in zip(forged, offsets, strict=True)])  # fmt: skip
    genuine = json.loads(public.read_text())
    key_id = next(iter(genuine["ed25519"]))
    mine = attacker.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()
    Path(f"{db}.public-keyring.json").write_text(json.dumps({**genuine, "ed25519": {key_id: mine}}))

    code, out, _ = _run("replay", "--db", str(db))
    # never plain clean: the keys were not supplied (and the writers' signed heads, not re-signed by
    # this attacker, no longer cover the edited chain)
    assert code == 1 and "verdict: clean\n" not in out
    assert "NOT SUPPLIED INDEPENDENTLY" in out
    assert "sha256:" + hashlib.sha256(bytes.fromhex(mine)).hexdigest() in out
    code, out, _ = _run("replay", "--db", str(db), "--json")
    assert json.loads(out)["verdict"] != "clean"
    code, out, _ = _run("replay", "--db", str(db), "--json", "--keys", str(public))
    report = json.loads(out)
    assert code == 1 and report["verdict"] == "findings"
    assert {f["reason"] for f in report["findings"]} >= {"checkpoint_signature_invalid"}
    assert report["checkpoints"]["verified"] == 0


def test_every_checkpoint_removed_is_never_clean(records: list[Rec], public: Path, tmp_path: Path) -> None:
    """Every checkpoint deleted and the findings chains re-linked: no signed tree head verifies, the
    replay says so and its verdict is not ``clean``; checkpoints verified: 0."""
    kept = _rechain([r for r in records if r["type"] != "AuditCheckpoint"])
    code, report = _replay(_jsonl(tmp_path / "none.jsonl", kept), public)
    assert code == 1 and report["verdict"] != "clean"
    assert report["checkpoints"]["verified"] == 0 and report["checkpoints"]["tree_heads"]["unproven"] is True
    code, text, _ = _run("replay", "--jsonl", str(tmp_path / "none.jsonl"), "--keys", str(public))
    assert "tree heads: none verifies: nothing in this log is proven" in text


def test_a_log_read_topic_by_topic_is_not_taken_for_a_splice(
    records: list[Rec], public: Path, tmp_path: Path
) -> None:
    """The authentic log exported topic by topic (as a Kafka log is read) and replayed as a JSONL file:
    a tree head claiming records not read yet shows it is not in written order, so chains that come
    early only by that order are no splice: ``clean``."""
    order = ["casino.wallet.requests", "casino.wallet.events", "casino.table.inbox", "casino.table.events",
             "casino.audit.findings", "casino.monitor.alerts", "casino.monitor.cage",
             "casino.monitor.casework", "casino.deadletter", "casino.attest"]  # fmt: skip
    by_topic = sorted(records, key=lambda r: order.index(r["topic"]))
    assert any(r["topic"] == "casino.monitor.alerts" for r in records)  # claimed after the findings
    code, report = _replay(_jsonl(tmp_path / "by-topic.jsonl", by_topic), public)
    assert (code, report["verdict"]) == (0, "clean"), report["findings"][:3]


def test_a_tree_head_moved_before_what_it_claims_in_a_sqlite_log(
    demo_db: Path, records: list[Rec], public: Path, tmp_path: Path
) -> None:
    """In a SQLite log, whose order is the order of writing, audit's first tree head moved to the top
    (its own chain unbroken; it would switch the splice check off in a file read another way) is a
    finding: ``tree_head_invalid``, records moved. The same order in a JSONL file is only read so."""
    first, _ = _trees(records)[0]
    moved = [records[first], *records[:first], *records[first + 1 :]]
    db = tmp_path / "moved.db"
    shutil.copy(demo_db, db)
    with sqlite3.connect(db) as conn:
        offsets = [o for (o,) in conn.execute('SELECT "offset" FROM records ORDER BY "offset"')]
        conn.executemany('UPDATE records SET body = ? WHERE "offset" = ?',
                         [(_canonical(r), o) for r, o in zip(moved, offsets, strict=True)])  # fmt: skip
    code, out, _ = _run("replay", "--db", str(db), "--json", "--keys", str(public))
    report = json.loads(out)
    assert code == 1 and "tree_head_invalid" in {f["reason"] for f in report["findings"]}
    code, report = _replay(_jsonl(tmp_path / "moved.jsonl", moved), public)
    assert "tree_head_invalid" not in {f["reason"] for f in report["findings"]}
