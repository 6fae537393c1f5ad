"""The audit processor's tamper evidence, pure: chains, signed checkpoints, digests, the replay report."""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.audit.processor import Audit, TableDigest, same_postings, table_digest
from services.audit.replay import Scope
from services.audit.replay import replayer as replay_mod
from services.core import topics
from services.core.envelope import ChainHead, Draft, Envelope, canonical, seal, sha256_hex
from services.core.processor import initial_state, step
from services.core.signing import (
    ALGORITHM,
    DEMO_PUBLIC_KEYS,
    DEMO_SIGNING_KEY,
    SigningKey,
    sign,
    signing_key_from_secret,
    verify,
)
from services.runtime.replay import replay
from services.runtime.report_html import render_html
from services.simulation.simulator import DEFAULT_TABLES, Session
from tests.helpers.membus import MemBus

KEY = SigningKey("unit-key", bytes(range(32)))
OTHER = SigningKey("unit-key", bytes(range(1, 33)))
PUBLIC = {KEY.key_id: KEY.public_hex()}

# --- signing ---------------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@given(payload=st.dictionaries(st.text(min_size=1, max_size=8), json_values, min_size=1, max_size=5))
@settings(max_examples=60, deadline=None)
def test_signed_payload_verifies_and_any_changed_field_does_not(payload: dict[str, Any]) -> None:
    """Whatever the payload, its signature verifies under its key, and changing any field breaks it."""
    signed = sign(payload, KEY)
    assert signed["algorithm"] == ALGORITHM and signed["key_id"] == KEY.key_id
    assert verify(signed, PUBLIC) is None
    for name in sorted(k for k in signed if k != "signature"):
        forged = dict(signed, **{name: ["changed", signed[name]]})
        assert verify(forged, PUBLIC) is not None, name


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda p: {k: v for k, v in p.items() if k != "signature"}, "unsigned"),
        (lambda p: dict(p, algorithm="hmac-sha256"), "unknown_algorithm"),
        (lambda p: dict(p, key_id="someone-else"), "unknown_key_id"),
        (lambda p: sign({k: v for k, v in p.items() if k not in ("key_id",)}, OTHER), "bad_signature"),
        (lambda p: dict(p, rounds=p["rounds"] + 1), "bad_signature"),
    ],
)
def test_verify_says_why_a_checkpoint_does_not_verify(change: Any, why: str) -> None:
    """Each way a signature can fail is named: missing, other algorithm, unknown key id, wrong MAC."""
    signed = sign({"table_id": "T", "rounds": 50, "table_digest": "ab" * 32}, KEY)
    assert verify(change(signed), PUBLIC) == why


def test_signing_key_never_shows_its_secret() -> None:
    """A key's repr names its id only, so it cannot leak into a log line."""
    assert KEY.seed.hex() not in repr(KEY) and "unit-key" in repr(KEY)


# --- digests -----------------------------------------------------------------------------------------


@given(hashes=st.dictionaries(st.integers(1, 40), st.text("0123456789abcdef", min_size=64, max_size=64)),
       seed=st.integers(0, 2**32))  # fmt: skip
@settings(max_examples=80, deadline=None)
def test_streamed_table_digest_does_not_depend_on_completion_order(hashes: dict[int, str], seed: int) -> None:
    """Rounds completed in any order stream to the digest of all of them in coup-number order."""
    order = list(hashes)
    random.Random(seed).shuffle(order)
    digest = TableDigest()
    for n in order:
        digest.add(n, hashes[n])
    assert digest.value() == table_digest(hashes)


_ROW = st.tuples(st.sampled_from(["wallet:a", "wallet:b", "table:T1:escrow"]), st.integers(-3, 3))


@given(want=st.lists(_ROW, max_size=4), got=st.lists(_ROW, max_size=4), shuffled=st.booleans(),
       seed=st.integers(0, 99))  # fmt: skip
@settings(max_examples=300, deadline=None)
def test_same_postings_is_equality_of_the_rows_in_any_order(
    want: list[tuple[str, int]], got: list[tuple[str, int]], shuffled: bool, seed: int
) -> None:
    """The payout comparison's shortcut (equal rows need no sorting) gives the answer of comparing the
    ``(account, amount)`` rows as multisets: a list against itself reordered, and different lists."""
    if shuffled:
        got = list(want)
        random.Random(seed).shuffle(got)
    assert same_postings(tuple(want), tuple(got)) == (Counter(want) == Counter(got))


# --- chains --------------------------------------------------------------------------------------------


def _chain(n: int, key: str = "T1") -> list[Envelope]:
    out, head = [], None
    for i in range(n):
        draft = Draft("Noted", topics.TABLE_EVENTS, key, {"table_id": key, "i": i})
        env = seal(draft, event_id=f"e{i}", occurred_at="2026-11-22T20:00:00.000Z", producer="dealer",
                   cause=None, head=head)  # fmt: skip
        head = ChainHead(env.seq or 0, env.hash)
        out.append(env)
    return out


def _edited(env: Envelope, **payload: Any) -> Envelope:
    return env.model_copy(update={"payload": {**env.payload, **payload}})


def _rehashed(env: Envelope, **fields: Any) -> Envelope:
    body = env.body() | fields
    return Envelope(**body, hash=sha256_hex(canonical(body)))


CHAIN_CASES = [
    ("edited without re-hashing", lambda c: [*c[:3], _edited(c[3], i=99), *c[4:]], {"hash_mismatch": ["e3"]}),
    ("one record deleted", lambda c: [*c[:3], *c[4:]], {"seq_gap": ["e4"]}),
    ("the last two records swapped", lambda c: [*c[:4], c[5], c[4]], {"seq_reordered": ["e5", "e4"]}),
    ("two records swapped", lambda c: [*c[:2], c[3], c[2], *c[4:]], {"seq_reordered": ["e3", "e2"]}),
    ("the first two records swapped", lambda c: [c[1], c[0], *c[2:]], {"seq_reordered": ["e1", "e0"]}),
    ("one record replayed later", lambda c: [*c, _rehashed(c[2], event_id="x2")], {"seq_duplicate": ["x2"]}),
    ("prev_hash pointing elsewhere", lambda c: [*c[:3], _rehashed(c[3], prev_hash="00" * 32), *c[4:]],
     {"chain_broken": ["e3", "e4"]}),
    ("the tail deleted after a gap", lambda c: [*c[:2], c[4]], {"seq_gap": ["e4"]}),
]  # fmt: skip


@pytest.mark.parametrize(("case", "tamper", "want"), CHAIN_CASES, ids=[c[0] for c in CHAIN_CASES])
def test_chain_tampering_gives_one_finding_naming_the_records(
    case: str, tamper: Any, want: dict[str, list[str]]
) -> None:
    """Each kind of chain tampering is found with its reason code and the ids of the records concerned."""
    audit = Audit()
    state = audit.initial()
    drafts: list[Draft] = []
    for env in tamper(_chain(6)):
        drafts.extend(audit.check_chain(state, env))
    drafts.extend(audit.finish(state))
    got: dict[str, list[str]] = {}
    for d in drafts:
        subject = d.payload["subject"]
        got.setdefault(d.payload["reason"], []).extend(subject.get("event_ids") or [subject["event_id"]])
    assert got == want, case


def test_untampered_chain_gives_no_finding() -> None:
    """A chain as written has no finding (so each case above fails for its tampering only)."""
    audit = Audit()
    state = audit.initial()
    assert [d for env in _chain(6) for d in audit.check_chain(state, env)] == []
    assert audit.finish(state) == []


# --- checkpoints and the replay over an in-memory pipeline ----------------------------------------------


def _played(audit: Audit, coups: int = 12, seed: int = 5) -> MemBus:
    bus = MemBus()
    i = next(i for i, (p, _) in enumerate(bus.procs) if isinstance(p, Audit))
    audit.guard = bus.procs[i][0].guard  # it signs its heads as the audit it replaces would
    bus.procs[i] = (audit, initial_state(audit))  # type: ignore[assignment, arg-type]
    Session(bus, seed=seed).run(list(DEFAULT_TABLES[:2]), coups)
    return bus


@pytest.fixture(scope="module")
def signed_log() -> list[Envelope]:
    """Two tables, 12 coups each, audited with a checkpoint every 5 rounds under ``KEY``."""
    return _played(Audit(signing=KEY, checkpoint_every=5)).log


def test_every_checkpoint_is_signed_under_the_configured_key(signed_log: list[Envelope]) -> None:
    """Audit signs each checkpoint with its key id; every 5 rounds and at each shoe close."""
    cps = [e for e in signed_log if e.type == "AuditCheckpoint"]
    rounds = sorted((e.key, e.payload["rounds"]) for e in cps)
    tables = sorted({e.key for e in signed_log if e.type == "TableOpened"})
    assert rounds == sorted([(t, n) for t in tables for n in (5, 10, 12)])
    assert all(verify(e.payload, PUBLIC) is None for e in cps)
    assert all(verify(e.payload, {KEY.key_id: OTHER.public_hex()}) == "bad_signature" for e in cps)


def test_replay_verifies_checkpoints_and_is_clean(signed_log: list[Envelope]) -> None:
    """A replay with the right key and cadence verifies every checkpoint and finds nothing."""
    report = replay(signed_log, keys=PUBLIC, checkpoint_every=5)
    assert report.clean, report.to_dict()["findings"]
    assert report.checkpoints["verified"] == sum(1 for e in signed_log if e.type == "AuditCheckpoint")


def test_replay_with_another_key_reports_every_checkpoint(signed_log: list[Envelope]) -> None:
    """Under a keyring without the writer's key, each checkpoint is reported with its event id."""
    demo_public = {DEMO_SIGNING_KEY.key_id: DEMO_SIGNING_KEY.public_hex()}
    report = replay(signed_log, keys=demo_public, checkpoint_every=5)
    cps = [e.event_id for e in signed_log if e.type == "AuditCheckpoint"]
    bad = [f for f in report.findings if f["reason"] == "checkpoint_signature_invalid"]
    assert [f["subject"]["event_id"] for f in bad] == cps
    assert all("unknown_key_id" in f["detail"] for f in bad)


def test_replay_with_another_cadence_reports_the_checkpoints_off_it(signed_log: list[Envelope]) -> None:
    """A replay expecting a checkpoint every 4 rounds reports each one at 5 and 10 as off its cadence."""
    report = replay(signed_log, keys=PUBLIC, checkpoint_every=4)
    off = sorted((f["table_id"], f["expected"]["rounds"], f["recorded"]["rounds"]) for f in report.findings
                 if "rounds" in f["subject"]["fields"])  # fmt: skip
    tables = sorted({e.key for e in signed_log if e.type == "TableOpened"})
    assert {f["reason"] for f in report.findings} == {"checkpoint_mismatch"}
    assert off == [(t, want, got) for t in tables for want, got in ((4, 5), (8, 10))]


def test_same_input_gives_byte_identical_reports(signed_log: list[Envelope]) -> None:
    """Two replays of one log (as bytes, then as envelopes) give the same JSON and HTML, byte for byte."""
    raw = [e.to_json() for e in signed_log]
    raw[40] = raw[40].replace(b'"seq":', b'"seq": ', 1)  # a re-formatted record: content unchanged
    a = replay(raw, keys=PUBLIC, checkpoint_every=5)
    b = replay(signed_log, keys=PUBLIC, checkpoint_every=5)
    assert a.to_json() == b.to_json()
    assert render_html(a.to_dict()) == render_html(b.to_dict())
    assert json.loads(a.to_json())["digest"] == a.digest


def test_html_escapes_what_the_log_says() -> None:
    """A hostile value in a finding is escaped in the HTML and nothing loads from outside the page."""
    report = replay([])
    hostile = {
        "reason": "<script>alert(1)</script>",
        "table_id": 'T"><img src=x>',
        "subject": {"event_id": "<b>"},
    }
    report.add_finding({**hostile, "detail": "&", "expected": "<evil-i>", "recorded": None})
    page = render_html(report.to_dict())
    assert "<script>" not in page and "<img" not in page and "<evil" not in page
    assert "&lt;script&gt;" in page and 'src="' not in page
    assert page.count('href="') == page.count('href="#')  # links stay inside the page


def test_scope_everything_only_when_nothing_is_selected() -> None:
    """The replay skips the scope tests only for the scope that selects every table at every instant."""
    assert Scope().everything
    assert not Scope(tables=frozenset({"T1"})).everything
    assert not Scope(since="2026-01-01T00:00:00.000Z").everything
    assert not Scope(until="2026-01-01T00:00:00.000Z").everything


def test_scope_limits_the_report_but_not_the_integrity_checks(signed_log: list[Envelope]) -> None:
    """Limited to one table, a payout finding at the other is left out; a broken chain there is not."""
    log = list(signed_log)
    tables = sorted({e.key for e in log if e.type == "TableOpened"})
    # the last win: far from the deleted card, so its coup is re-derived and the edit is a payout finding
    i = max(i for i, e in enumerate(log) if e.type == "PayoutIssued" and e.payload["table_id"] == tables[1]
            and e.payload["result"] == "win" and e.payload["spot"] != "tie")  # fmt: skip
    log[i] = _rehashed(log[i], payload={**log[i].payload, "spot": "tie"})
    j = next(i for i, e in enumerate(log) if e.type == "CardDealt" and e.key == tables[1])
    del log[j]
    keys = PUBLIC
    full = replay(log, keys=keys, checkpoint_every=5)
    only = replay(log, keys=keys, checkpoint_every=5, scope=Scope(tables=frozenset({tables[0]})))
    assert {"payout_mismatch", "seq_gap"} <= {f["reason"] for f in full.findings}
    assert "payout_mismatch" not in {f["reason"] for f in only.findings}
    assert "seq_gap" in {f["reason"] for f in only.findings}
    assert [t["table_id"] for t in only.to_dict()["tables"]] == [tables[0]]
    assert full.digest == only.digest


def test_a_redelivery_beyond_the_window_is_still_caught(
    signed_log: list[Envelope], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a tiny de-duplication window, a re-delivered wallet event is reported by its seq instead."""
    monkeypatch.setattr(replay_mod, "DEDUP_WINDOW", 8)
    log = list(signed_log)
    i = next(i for i, e in enumerate(log) if e.type == "PayoutApplied")
    near = replay([*log[: i + 1], log[i], *log[i + 1 :]], keys=PUBLIC, checkpoint_every=5)
    far = replay([*log, log[i]], keys=PUBLIC, checkpoint_every=5)
    assert [f["reason"] for f in near.findings] == ["duplicate_event"]
    assert "seq_duplicate" in {f["reason"] for f in far.findings}
    assert any(f["subject"].get("event_id") == log[i].event_id for f in far.findings)


def test_an_edit_that_breaks_the_contract_is_a_hash_finding_not_a_dead_letter(
    signed_log: list[Envelope],
) -> None:
    """An inflated wallet credit that no longer matches its postings is found as edited (hash) and invalid,
    on the record itself, through the pure step and the replay alike, and nothing is dead-lettered.

    Regression: the step's edge validation used to dead-letter such a record before audit saw it, so
    the edit went unreported."""
    log = list(signed_log)
    i = next(i for i, e in enumerate(log) if e.type == "PayoutApplied" and e.payload["amount_minor"] > 0)
    target = log[i]
    log[i] = _edited(target, amount_minor=target.payload["amount_minor"] * 10)
    audit = Audit(signing=KEY, checkpoint_every=5)
    state = initial_state(audit)
    out = [o for e in log if e.topic in audit.inputs for o in step(audit, state, e)]
    assert not [o for o in out if o.type == "DeadLetter"]
    at_target = {
        o.payload["reason"] for o in out
        if o.type == "AuditFinding" and o.payload["subject"].get("event_id") == target.event_id
    }  # fmt: skip
    assert {"hash_mismatch", "invalid_payload"} <= at_target
    report = replay(log, keys=PUBLIC, checkpoint_every=5)
    reasons = {f["reason"] for f in report.to_dict()["findings"]}
    assert {"hash_mismatch", "invalid_payload"} <= reasons
    assert "seq_gap" not in reasons and "chain_broken" not in reasons  # the chain is intact: no cascade


def test_checkpoint_key_is_derived_from_the_audit_secret_as_agreed() -> None:
    """The Ed25519 key is HMAC-SHA256(audit secret, "casino-ledger/ed25519-checkpoints") under the
    principal's key id (the agreed derivation), computed here independently of the module."""
    import hashlib  # noqa: PLC0415
    import hmac  # noqa: PLC0415

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: PLC0415
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat  # noqa: PLC0415

    secret = bytes(range(7, 39))
    seed = hmac.new(secret, b"casino-ledger/ed25519-checkpoints", hashlib.sha256).digest()
    public = Ed25519PrivateKey.from_private_bytes(seed).public_key()
    key = signing_key_from_secret("audit-0000beef", secret)
    assert key.key_id == "audit-0000beef"
    assert key.public_hex() == public.public_bytes(Encoding.Raw, PublicFormat.Raw).hex()


def test_signatures_are_deterministic_and_verify_with_the_public_key_alone() -> None:
    """Signing twice gives the same bytes (replays stay byte-identical); the public keyring verifies it,
    and the demo key's public keyring verifies what the demo key signed."""
    payload = {"table_id": "T", "rounds": 3, "table_digest": "cd" * 32}
    assert sign(payload, KEY) == sign(payload, KEY)
    assert verify(sign(payload, KEY), PUBLIC) is None
    assert verify(sign(payload, DEMO_SIGNING_KEY), DEMO_PUBLIC_KEYS) is None
    assert verify(sign(payload, DEMO_SIGNING_KEY), PUBLIC) == "unknown_key_id"
