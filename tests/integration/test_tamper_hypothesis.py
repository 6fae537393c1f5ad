"""The tamper suite (issue 28): an attacker with write access to the log file but no secret edits an
authentic embedded log — inserts, deletes, changes an amount, splices a record from another log, cuts
the tail, re-signs with a keyring of its own — and re-chains it so that every hash and ``prev_hash``
holds again. A regulator holding only the casino's public keys must never call such a log ``clean``.
And the reverse: an outsider's records (no key, or a wrong one) beside an authentic log never change
its verdict, its digest or a balance.

The attacker is modelled from the file format alone (docs/event-contract.md): canonical JSON, SHA-256
over the envelope without ``hash`` and ``auth``, ``seq``/``prev_hash`` per topic and key. Nothing here
calls the code under test to forge; the log is made by the real pipeline and judged by the real replay.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.audit.replay import Report, onepass
from services.audit.replay.attested import writer_keys
from services.audit.replay.onepass import replay_one_pass, replay_surveyed
from services.runtime.compose import Composition
from services.runtime.embedded.bus import EmbeddedBus
from services.runtime.keyring import new_keyring
from services.runtime.replay import read_db, replay
from services.simulation.simulator import DEFAULT_TABLES, Session

Rec = dict[str, Any]


# --- the attacker's tools: the file format, nothing else ---------------------------------------


def canonical(obj: Any) -> bytes:
    """RFC 8785 for float-free JSON, as docs/event-contract.md defines it."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def content_hash(rec: Rec) -> str:
    """SHA-256 over the envelope without ``hash`` and ``auth``."""
    return hashlib.sha256(canonical({k: v for k, v in rec.items() if k not in ("hash", "auth")})).hexdigest()


def rechain(recs: list[Rec]) -> list[Rec]:
    """Every chained stream renumbered and relinked in log order, every hash recomputed, and every
    ``causation_hash`` that named a changed record made to name its new hash: what a forger with write
    access and no secret can do so that the log is consistent again."""
    out: list[Rec] = []
    heads: dict[tuple[str, str], tuple[int, str]] = {}
    renamed: dict[str, str] = {}
    for original in recs:
        rec = copy.deepcopy(original)
        if rec.get("causation_hash") in renamed:
            rec["causation_hash"] = renamed[rec["causation_hash"]]
        if rec.get("seq") is not None:
            chain = (rec["topic"], rec["key"])
            seq, prev = heads.get(chain, (-1, None))
            rec["seq"], rec["prev_hash"] = seq + 1, prev
        old, rec["hash"] = rec["hash"], content_hash(rec)
        if old != rec["hash"]:
            renamed[old] = rec["hash"]
        if rec.get("seq") is not None:
            heads[(rec["topic"], rec["key"])] = (rec["seq"], rec["hash"])
        out.append(rec)
    return out


ATTACKER = Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"mallory").digest())


def resign(recs: list[Rec]) -> list[Rec]:
    """The attestations rewritten to name the chains as they now stand and signed with the attacker's
    own key under the genuine key ids (then re-chained again)."""
    heads: dict[tuple[str, str], tuple[int, str]] = {}
    out = []
    for original in recs:
        rec = original
        if rec["topic"] == "casino.attest":
            rec = copy.deepcopy(rec)
            named = [{"topic": t, "key": k, "seq": s, "hash": h} for (t, k), (s, h) in sorted(heads.items())]
            rec["payload"]["heads"] = named
            heads.clear()
        elif rec.get("seq") is not None:
            heads[(rec["topic"], rec["key"])] = (rec["seq"], rec["hash"])
        out.append(rec)
    out = rechain(out)
    for rec in out:
        if rec["topic"] == "casino.attest":
            rec["auth"] = {"key_id": rec["auth"]["key_id"], "sig": ATTACKER.sign(rec["hash"].encode()).hex()}
    return out


# --- the authentic logs ------------------------------------------------------------------------


class Log:
    """An authentic log (its records as dicts, in log order) and the public keys a regulator holds."""

    def __init__(self, tmp: Path, seed: int, tables: int, coups: int) -> None:
        ring = new_keyring()
        composition = Composition.demo(ring)
        bus = EmbeddedBus(tmp / "log.db", composition.pipeline(), event_driven=True)
        try:
            Session(bus, seed=seed, keyring=ring).run(list(DEFAULT_TABLES[:tables]), coups)
        finally:
            bus.close()
        self.records: list[Rec] = [json.loads(raw) for raw in read_db(tmp / "log.db")]
        public = ring.public_document()
        self.checkpoint_keys: dict[str, str] = public["ed25519"]
        self.writers = writer_keys(public)

    def replay(self, recs: list[Rec] | list[bytes]) -> Report:
        """The regulator's replay of ``recs`` with the genuine public keys."""
        raws = [r if isinstance(r, bytes) else canonical(r) for r in recs]
        return replay(raws, keys=self.checkpoint_keys, writers=self.writers)


@pytest.fixture(scope="module")
def authentic(tmp_path_factory: pytest.TempPathFactory) -> Log:
    """One table, three coups, through the real pipeline on a fresh keyring."""
    return Log(tmp_path_factory.mktemp("authentic"), seed=5, tables=1, coups=3)


@pytest.fixture(scope="module")
def foreign(tmp_path_factory: pytest.TempPathFactory) -> Log:
    """Another casino's log (other keys, other seed): what a splice takes records from."""
    return Log(tmp_path_factory.mktemp("foreign"), seed=11, tables=1, coups=2)


def test_the_authentic_log_replays_clean_and_sealed(authentic: Log) -> None:
    """Without any edit: clean, every writer sealed, nothing unattested."""
    report = authentic.replay(authentic.records)
    assert report.verdict == "clean", report.attestation
    assert report.attestation["unattested"]["count"] == 0
    assert all(w["sealed"] for w in report.attestation["writers"].values())
    assert report.attestation["signed_heads"] >= 3
    assert (
        rechain(authentic.records) == authentic.records
    )  # the attacker's tool is faithful: no edit, no change
    assert authentic.replay(resign(authentic.records)).verdict == "incomplete"  # its own key proves nothing


def _facts(recs: list[Rec]) -> list[int]:
    """Positions of the records the ledger rests on, from the file format: chained records, signed
    heads, and the requests a chained record names as its cause."""
    causes = {r.get("causation_hash") for r in recs if r.get("seq") is not None}
    return [i for i, r in enumerate(recs) if r.get("seq") is not None or r["hash"] in causes]


def _amounts(rec: Rec) -> list[str]:
    return [k for k, v in rec["payload"].items() if k.endswith("_minor") and type(v) is int]


Edit = Callable[[list[Rec]], list[Rec]]


@st.composite
def edits(draw: st.DrawFn, authentic: Log, foreign: Log) -> tuple[str, Edit]:
    """One edit an attacker with write access makes (its name for the failure message)."""
    recs = authentic.records
    facts = _facts(recs)
    kind = draw(st.sampled_from(["insert", "delete", "change", "splice", "cut"]))
    if kind == "delete":
        i = draw(st.sampled_from(facts))
        return f"delete {i} ({recs[i]['type']})", lambda rs: rs[:i] + rs[i + 1 :]
    if kind == "change":
        money = [i for i in facts if _amounts(recs[i])]
        i = draw(st.sampled_from(money))
        field = draw(st.sampled_from(_amounts(recs[i])))
        delta = draw(st.integers(1, 10**9))

        def change(rs: list[Rec]) -> list[Rec]:
            rs = copy.deepcopy(rs)
            rs[i]["payload"][field] += delta
            return rs

        return f"change {field} of {i} ({recs[i]['type']}) by {delta}", change
    if kind == "cut":
        k = draw(st.integers(1, len(recs) - 1))
        return f"cut after {k}", lambda rs: rs[:k]
    chained = [i for i in facts if recs[i].get("seq") is not None and recs[i]["topic"] != "casino.attest"]
    at = draw(st.sampled_from(chained))
    target = recs[at]
    if kind == "insert":  # a copy of a record of the same chain, under a new id, placed before one of it
        donor = copy.deepcopy(
            recs[draw(st.sampled_from([i for i in chained if recs[i]["key"] == target["key"]]))]
        )
    else:  # splice: a record of another casino's log, moved onto this chain
        pool = [r for r in foreign.records if r["topic"] == target["topic"] and r.get("seq") is not None]
        donor = copy.deepcopy(draw(st.sampled_from(pool)))
    donor.update(key=target["key"], topic=target["topic"])
    donor["event_id"] = f"{kind}-{at}-{donor['event_id']}"
    return f"{kind} {donor['type']} before {at} ({target['type']})", lambda rs: [*rs[:at], donor, *rs[at:]]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), re_sign=st.booleans())
def test_no_edit_re_chained_with_no_secret_replays_clean(
    authentic: Log, foreign: Log, data: st.DataObject, re_sign: bool
) -> None:
    """Whatever one edit, re-chained so every hash and link holds, and optionally every signed head
    rewritten to name the new chains and signed with the attacker's own key: never ``clean``."""
    name, edit = data.draw(edits(authentic, foreign))
    forged = rechain(edit(authentic.records))
    if re_sign:
        forged = resign(forged)
    report = authentic.replay(forged)
    assert report.verdict != "clean", (name, re_sign)


def test_a_whole_log_signed_by_another_keyring_is_never_clean(authentic: Log, foreign: Log) -> None:
    """Another casino's authentic log, judged with this casino's public keys: nothing verifies."""
    report = authentic.replay(foreign.records)
    assert report.verdict == "incomplete"
    assert report.attestation["signed_heads"] == 0
    assert any("no valid signature" in why for why in report.attestation["incomplete"])


def _noise(draw: st.DrawFn, recs: list[Rec]) -> bytes:
    """One record an outsider appends: no auth, a made-up MAC or signature, or no record at all."""
    wallet = [r for r in recs if r["topic"] == "casino.wallet.events"]
    kind = draw(st.sampled_from(["new_account", "extend_chain", "place_bet", "reused_id", "junk", "attest"]))
    base = copy.deepcopy(draw(st.sampled_from(wallet)))
    auth = draw(st.sampled_from([None, {"key_id": base["auth"]["key_id"], "mac": "00" * 32}]))
    if kind == "junk":
        return draw(st.sampled_from([b"not json", b"{}", b'{"type":"PlaceBet"}', b"[1,2]"]))
    if kind == "new_account":  # a forged 1,000,000.00 deposit opening an account's chain
        base.update(key="mallory", seq=0, prev_hash=None, type="FundsDeposited", event_id="forged-new")
        base["payload"] = {**base["payload"], "account_id": "mallory", "amount_minor": 100_000_000}
    elif kind == "extend_chain":  # a forged record linked after the real head of a player's chain
        same = [r for r in wallet if r["key"] == base["key"]]
        base.update(seq=same[-1]["seq"] + 1, prev_hash=same[-1]["hash"], event_id="forged-next")
    elif kind == "place_bet":
        base.update(topic="casino.wallet.requests", seq=None, prev_hash=None, type="PlaceBet", event_id="x1")
    elif kind == "reused_id":  # another record under a used id (a copy of the record itself is not
        # noise: a log holding one record twice is a ``duplicate_event``, test_dead_letters_signed.py)
        victim = draw(st.sampled_from([r for r in recs if r["event_id"] != base["event_id"]]))
        base["event_id"] = victim["event_id"]
    else:  # a signed head with a signature of the attacker's own
        heads = [r for r in recs if r["topic"] == "casino.attest"]
        base = copy.deepcopy(heads[-1])
        base.update(seq=base["seq"] + 1, prev_hash=base["hash"], event_id="forged-head")
        base["payload"] = {**base["payload"], "heads": [], "seal": "idle"}
        auth = {"key_id": base["auth"]["key_id"], "sig": ATTACKER.sign(b"x").hex()}
    base["hash"] = content_hash(base)
    if auth is None:
        base.pop("auth", None)
    else:
        base["auth"] = auth
    return canonical(base)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_outsider_noise_never_changes_the_verdict_or_a_balance(authentic: Log, data: st.DataObject) -> None:
    """Records appended anywhere by someone without a key leave the authentic log ``clean``, with the
    same digest and the same tables; each is counted as unattested."""
    recs = [canonical(r) for r in authentic.records]
    noise = data.draw(st.lists(st.builds(lambda: None), min_size=1, max_size=4))
    noisy = list(recs)
    for _ in noise:
        at = data.draw(st.integers(0, len(noisy)))
        noisy.insert(at, _noise(data.draw, authentic.records))
    clean, report = authentic.replay(recs), authentic.replay(noisy)
    assert report.verdict == "clean", report.attestation
    assert (report.digest, report.tables) == (clean.digest, clean.tables)
    assert report.attestation["unattested"]["count"] == len(noise)


# --- the replay in one pass gives the two-pass replay's report --------------------------------


def _both(authentic: Log, recs: list[Rec] | list[bytes]) -> tuple[str, str]:
    """The report of the replay in one pass and of the same replay in two passes (the survey of the
    whole log first, :func:`services.audit.replay.onepass.replay_surveyed`), as JSON."""
    raws = [r if isinstance(r, bytes) else canonical(r) for r in recs]
    options: dict[str, Any] = {"keys": authentic.checkpoint_keys, "checkpoint_every": 50}
    one = replay_one_pass(lambda: raws, authentic.writers, **options)
    two = replay_surveyed(lambda: raws, authentic.writers, **options)
    return one.to_json(), two.to_json()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), re_sign=st.booleans())
def test_one_pass_reports_as_two_passes_on_forged_logs(
    authentic: Log, foreign: Log, data: st.DataObject, re_sign: bool
) -> None:
    """Whatever the edit (re-chained, re-signed or not), the one pass's report is byte for byte the
    two-pass replay's: an answer it gave early that the whole log contradicts sends it to two passes."""
    name, edit = data.draw(edits(authentic, foreign))
    forged = rechain(edit(authentic.records))
    one, two = _both(authentic, resign(forged) if re_sign else forged)
    assert one == two, (name, re_sign)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_one_pass_reports_as_two_passes_with_outsider_noise(authentic: Log, data: st.DataObject) -> None:
    """Outsider noise anywhere (held back, then counted as unattested in log order): the same report."""
    noisy = [canonical(r) for r in authentic.records]
    for _ in range(data.draw(st.integers(1, 5))):
        noisy.insert(data.draw(st.integers(0, len(noisy))), _noise(data.draw, authentic.records))
    one, two = _both(authentic, noisy)
    assert one == two


def test_one_pass_holds_back_only_while_it_must(authentic: Log, monkeypatch: pytest.MonkeyPatch) -> None:
    """An authentic log is replayed in one pass (never in two), and a log whose records wait for more
    than :data:`HOLD_MAX` at once is replayed in two passes with the same report."""
    raws = [canonical(r) for r in authentic.records]
    two_passes: list[int] = []
    surveyed = onepass.replay_surveyed
    monkeypatch.setattr(onepass, "replay_surveyed", lambda *a, **k: two_passes.append(1) or surveyed(*a, **k))
    one = replay(raws, keys=authentic.checkpoint_keys, writers=authentic.writers).to_json()
    assert two_passes == []
    monkeypatch.setattr(onepass, "HOLD_MAX", 3)
    assert replay(raws, keys=authentic.checkpoint_keys, writers=authentic.writers).to_json() == one
    assert two_passes == [1]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_copy_of_an_authentic_record_is_a_duplicate_never_applied_twice(
    authentic: Log, data: st.DataObject
) -> None:
    """A record the log already holds, copied in again at or after its place (its auth kept, stripped or
    made up): ``findings`` with one ``duplicate_event`` naming it — a log holding one record twice is not
    as it was written, and a regulator sees it — while nothing is applied twice: the tables' figures are
    the authentic log's. (Unlike noise under a new id or a used id with other content: those are counted.
    A copy placed before records that precede it in its chain is taken in the original's place: still
    ``findings``, but the chain's figures move; closing note of 2026-11-29.)"""
    recs = [canonical(r) for r in authentic.records]
    index = data.draw(st.integers(0, len(recs) - 1))
    victim = copy.deepcopy(authentic.records[index])
    auth = data.draw(st.sampled_from(["kept", "stripped", "made_up"]))
    if auth == "stripped":
        victim.pop("auth", None)
    elif auth == "made_up" and "auth" in victim:
        victim["auth"] = {"key_id": victim["auth"].get("key_id", "x"), "mac": "00" * 32}
    at = data.draw(st.integers(index, len(recs)))
    report = authentic.replay([*recs[:at], canonical(victim), *recs[at:]])
    assert report.verdict == "findings"
    duplicates = [f for f in report.findings if f["reason"] == "duplicate_event"]
    assert [f["subject"]["event_id"] for f in duplicates] == [victim["event_id"]]

    def figures(tables: dict[str, Any]) -> dict[str, Any]:  # each table's figures but its findings count
        return {t: {k: v for k, v in row.items() if k != "findings"} for t, row in tables.items()}

    assert figures(report.tables) == figures(authentic.replay(recs).tables)
