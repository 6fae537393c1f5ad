"""The replay itself: each record decoded, deduplicated, hash- and chain-checked and re-audited
(:class:`Replayer`); :func:`replay_records` drives it over a stream."""

from __future__ import annotations

import gc
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from services.audit.processor import CHECKPOINT_EVERY, Audit, AuditState, digest_of, open_items
from services.audit.replay.attested import Attested
from services.audit.replay.checkpoints import Checkpoints
from services.audit.replay.collector import CoupCollector
from services.audit.replay.report import Report, entry
from services.audit.replay.scope import Scope
from services.audit.replay.summaries import _SUMMARISED, Summaries
from services.audit.replay.tree_head import TreeHeads
from services.core import topics
from services.core.envelope import Draft, Envelope, hash_of_bytes
from services.core.errors import DomainError
from services.core.reasons import (
    AUTH_REFUSALS,
    INTEGRITY_REASONS,
    FindingReason,
    Reason,
    ReplayReason,
    Severity,
)
from services.core.signing import fingerprint

DEDUP_WINDOW = 1 << 16
"""How many recent event ids the replay remembers to drop exact re-deliveries."""

REFUSED_REASONS = AUTH_REFUSALS
"""Dead-letter reasons of records refused by authentication (docs/trust.md): counted, listed, not findings."""

MAX_ALERTS_LISTED = 1000
"""The monitor's alerts listed in a report (the count per type is in ``types``)."""

MAX_REFUSED_LISTED = 100
"""Ids of refused records listed per reason; more are counted."""


def replay_audit(checkpoint_every: int) -> Audit:
    """The audit processor the replay runs (it signs nothing: it verifies the log's checkpoints).

    The one place the replay builds a processor (a composition root may take it over)."""
    return Audit(signing=None, checkpoint_every=checkpoint_every, tree=False)


def _table_of(env: Envelope) -> str:
    return str(env.payload.get("table_id") or env.key)


# --- decoding ------------------------------------------------------------------------------------


_envelope_from_json: Callable[[bytes | str], Envelope] = Envelope.__pydantic_validator__.validate_json
"""What ``Envelope.model_validate_json`` calls, without its wrapper (same validator, same result)."""


def decode(raw: bytes | str | Envelope) -> tuple[Envelope, str]:
    """One record and the hash its content calls for.

    Raises ``ValueError`` (JSON) or ``ValidationError`` (shape). Fast path: a record as the log writes
    it is canonical JSON, so its bytes without the top-level ``auth`` and ``hash`` members are exactly
    what the hash covers (:func:`~services.core.envelope.hash_of_bytes`); when SHA-256 of those bytes
    equals the recorded hash, the content is proven unchanged (a false match would be a SHA-256
    collision). Otherwise the body is re-serialised canonically from the decoded dict, as
    :meth:`Envelope.expected_hash` does.
    """
    if type(raw) is not bytes and isinstance(raw, Envelope):  # bytes first: an ``isinstance`` against a
        return raw, raw.expected_hash()  # pydantic model class goes through its metaclass, slower
    env = _envelope_from_json(raw)
    if isinstance(raw, bytes) and hash_of_bytes(raw, env) == env.hash:  # ``auth`` and ``hash`` cut out
        return env, env.hash
    return env, env.expected_hash()


_TALLIED = frozenset({"CoupResolved", "PayoutIssued"})

_SIDE: dict[str, Callable[[Replayer, Envelope], None]] = {
    "AnomalyDetected": lambda r, env: r.alert(env),
    "AuditFinding": lambda r, env: r.finding_record(env),
    "DeadLetter": lambda r, env: r.dead_letter(env),
}
"""What the replay notes of some record types besides auditing them."""


def _coup_row() -> dict[str, Any]:
    return {"stake_minor": 0, "credit_minor": 0, "payouts": 0}


class _Window:
    """The last ``size`` event ids seen, with their hashes (drops exact re-deliveries in O(1) memory)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.hashes: dict[str, str] = {}
        self.order: deque[str] = deque()

    def seen_or_add(self, event_id: str, digest: str) -> str | None:
        """The hash of the record seen under ``event_id`` in the window, or ``None`` after remembering
        this one."""
        hashes = self.hashes
        earlier = hashes.get(event_id)
        if earlier is not None:
            return earlier
        hashes[event_id] = digest
        order = self.order
        order.append(event_id)
        if len(order) > self.size:
            hashes.pop(order.popleft(), None)
        return None


# --- the replay ----------------------------------------------------------------------------------


@dataclass(slots=True)
class Replayer:
    """One replay's moving parts; :func:`replay` drives it."""

    scope: Scope
    keys: Mapping[str, str]
    checkpoint_every: int = CHECKPOINT_EVERY
    collector: CoupCollector | None = None
    ordered: bool | Literal["strict"] = False
    """The log is read in the order it was written (a SQLite log or its export; not Kafka topic by topic);
    ``"strict"``: and by construction (a SQLite log), so records out of that order were moved."""
    attested: Attested | None = None
    """Which records are facts (the first pass: :mod:`services.audit.replay.attested`); ``None``: every
    record is judged as one (a replay without public writer keys at hand)."""
    audit: Audit = field(init=False)
    state: AuditState = field(init=False)
    report: Report = field(init=False)
    summaries: Summaries = field(init=False)
    checkpoints: Checkpoints = field(init=False)
    trees: TreeHeads = field(init=False)
    window: _Window = field(init=False)
    coup_rows: dict[str, dict[str, Any]] = field(init=False)
    findings_records: dict[str, int] = field(init=False)
    last: tuple[int, Envelope] | None = field(init=False)
    inputs: frozenset[str] = field(init=False)
    """The topics audit reads (:attr:`Audit.inputs`)."""
    everything: bool = field(init=False)
    """The scope selects everything: no record needs its table and time tested (:attr:`Scope.everything`)."""

    def __post_init__(self) -> None:
        self.everything = self.scope.everything
        self.audit = replay_audit(self.checkpoint_every)
        self.inputs = frozenset(self.audit.inputs)
        self.state = self.audit.initial()
        self.report = Report(scope=self.scope)
        self.summaries = Summaries(self.scope)
        self.checkpoints = Checkpoints(self.keys)
        self.trees = TreeHeads(self.ordered is not False, strict=self.ordered == "strict")
        self.window = _Window(DEDUP_WINDOW)
        self.coup_rows = {}
        self.findings_records = {}
        self.last = None

    def feed(self, n: int, raw: bytes | str | Envelope) -> None:
        """Replay one record (the ``n``-th of the log), judged by :attr:`attested`."""
        try:
            env, want_hash = decode(raw)
        except (ValueError, ValidationError) as exc:
            self.undecodable(n, exc)
            return
        attested = self.attested
        self.take(n, env, want_hash, attested is None or attested.admit(env.topic, env.hash, env.event_id))

    def undecodable(self, n: int, exc: Exception) -> None:
        """A record that does not decode: a finding, or with signed heads at hand an unattested record (no
        signed head can name it: nothing to judge)."""
        self.report.records += 1
        if self.attested is not None:
            self.attested.undecodable(n)
            return
        undecodable = {"reason": Reason.UNDECODABLE.value, "severity": Severity.CRITICAL.value,
                       "table_id": None, "subject": {"record": n}, "detail": str(exc)[:300]}  # fmt: skip
        self.found(undecodable, None)

    def take(self, n: int, env: Envelope, want_hash: str, fact: bool) -> None:
        """Replay one decoded record (the ``n``-th of the log); ``fact``: whether it is a ledger fact (one
        that is not is only counted)."""
        report = self.report
        report.records += 1
        kind = env.type
        types = report.types
        types[kind] = types.get(kind, 0) + 1
        self.last = (n, env)
        if not fact:
            if kind == "DeadLetter":  # a refusal notice no alert took up: still counted as refused
                self.dead_letter(env)
            return
        earlier = self.window.seen_or_add(env.event_id, env.hash)
        if earlier is not None:
            same = "an exact re-delivery" if earlier == env.hash else "another record under a used id"
            detail = f"event id seen before in this log: {same}; not applied twice"
            subject = {"event_id": env.event_id, "topic": env.topic, "record": n}
            self.found(entry(ReplayReason.DUPLICATE_EVENT, _table_of(env), subject, detail=detail), env)
            return
        side = _SIDE.get(kind)
        if side is not None:
            side(self, env)
        if self.collector is not None:
            self.collector.observe(env)
        topic = env.topic
        if env.seq is not None and topic in topics.EVENT_STREAMS and topic not in topics.NOT_IN_TREE_HEADS:
            self.trees.on_record(n, env, want_hash == env.hash)
        if topic in self.inputs:
            self.apply(n, env, want_hash)
        elif topic in topics.EVENT_STREAMS:
            for draft in self.audit.check_chain(self.state, env, want_hash):
                self.found(dict(draft.payload), env)
            if kind == "AuditCheckpoint":
                for item in self.checkpoints.on_recorded(env):
                    self.found(item, env)
                if env.event_id in self.checkpoints.valid and "tree" in env.payload:
                    self.trees.on_tree(env.event_id, env.key, env.payload["tree"])
        elif env.hash != want_hash:
            subject = {"event_id": env.event_id, "topic": env.topic, "key": env.key}
            edited = entry(FindingReason.HASH_MISMATCH, env.key, subject, want_hash, env.hash, detail="")
            self.found(edited, env)

    def alert(self, env: Envelope) -> None:
        """Remember a monitor alert: its place in its stream (checkpoints claim it) and, in scope, a row."""
        self.checkpoints.on_alert(env)
        p = env.payload
        if len(self.report.alerts) >= MAX_ALERTS_LISTED:
            return
        if self.scope.table(str(p.get("table_id"))) and self.scope.at(env.occurred_at):
            self.report.alerts.append({
                "event_id": env.event_id, "occurred_at": env.occurred_at, "table_id": p.get("table_id"),
                "detector": p.get("detector"), "category": p.get("category"),
                "severity": p.get("severity"), "subject": p.get("subject"), "detail": p.get("detail"),
                "observed": p.get("observed"), "threshold": p.get("threshold"),
                "honest_probability": p.get("honest_probability"),
            })  # fmt: skip

    def finding_record(self, env: Envelope) -> None:
        """Count an ``AuditFinding`` record of the log per key (the digest covers the findings stream)."""
        self.findings_records[env.key] = self.findings_records.get(env.key, 0) + 1

    def dead_letter(self, env: Envelope) -> None:
        """Count a dead letter by reason; list the ids of records refused by authentication (an attempt
        turned away, not a breach: it does not make the verdict unclean)."""
        reason = str(env.payload.get("reason"))
        report = self.report
        report.dead_letters[reason] = report.dead_letters.get(reason, 0) + 1
        if reason in REFUSED_REASONS:
            self.trees.refused.add(str(env.payload.get("original_event_id")))
            entry = report.refused.setdefault(reason, {"count": 0, "ids": []})
            entry["count"] += 1
            if len(entry["ids"]) < MAX_REFUSED_LISTED:
                entry["ids"].append(env.payload.get("original_event_id") or env.event_id)

    def tally(self, env: Envelope) -> None:
        """Outcome counts per table and one row per coup (house result from its payouts), in scope."""
        p = env.payload
        if env.type == "CoupResolved":
            table = self.report.outcomes.setdefault(env.key, {})
            table[str(p.get("outcome"))] = table.get(str(p.get("outcome")), 0) + 1
            row = self.coup_rows.setdefault(str(p["coup_id"]), _coup_row())
            row.update(coup_id=p["coup_id"], table_id=env.key, shoe_id=p.get("shoe_id"),
                       coup_number=p.get("coup_number"), outcome=p.get("outcome"),
                       occurred_at=env.occurred_at, bets=len(p.get("bet_ids") or []))  # fmt: skip
        elif env.type == "PayoutIssued":
            row = self.coup_rows.setdefault(str(p.get("coup_id")), _coup_row())
            row["stake_minor"] += int(p.get("stake_minor") or 0)
            row["credit_minor"] += int(p.get("credit_minor") or 0)
            row["payouts"] += 1

    def apply(self, n: int, env: Envelope, want_hash: str) -> None:
        """Run audit on one of its input records."""
        try:  # audit checks the hash and chain first, then the contract (an invalid event: a finding)
            _, drafts = self.audit.handle_hashed(self.state, env, want_hash)
        except (DomainError, ValidationError, KeyError, TypeError, ValueError) as exc:
            subject = {"event_id": env.event_id, "type": env.type, "record": n}
            detail = f"{type(exc).__name__}: {str(exc)[:300]}"
            self.found(entry(ReplayReason.UNPROCESSABLE, _table_of(env), subject, detail=detail), env)
            return
        kind = env.type
        if kind in _SUMMARISED and not self.state.invalid:
            self.summaries.observe(env)
            if kind in _TALLIED and (self.everything or self.in_scope(_table_of(env), env)):
                self.tally(env)
        for draft in drafts:
            self.output(draft, env)
        if kind == "CoupResolved" and (self.everything or self.in_scope(env.key, env)):
            self.report.coups += 1

    def in_scope(self, table_id: str, env: Envelope) -> bool:
        """Whether ``env``, at ``table_id``, is in the report's scope."""
        return self.scope.table(table_id) and self.scope.at(env.occurred_at)

    def output(self, draft: Draft, env: Envelope) -> None:
        """One draft of the replay's audit: a finding, or a checkpoint to match with the log's."""
        if draft.type == "AuditFinding":
            self.found(dict(draft.payload), env)
        elif draft.type == "AuditCheckpoint":
            for item in self.checkpoints.on_derived(draft.payload):
                self.found(item, env)

    def found(self, item: dict[str, Any], env: Envelope | None) -> None:
        """Record a finding if it is in scope (integrity findings always are)."""
        if env is not None:
            item["found_at"] = {"event_id": env.event_id, "occurred_at": env.occurred_at}
        if item.get("reason") not in INTEGRITY_REASONS:
            table = str(item.get("table_id"))
            known_table = table in self.state.configs
            if known_table and not self.scope.table(table):
                return
            if env is not None and not self.scope.at(env.occurred_at):
                return
        self.report.add_finding(item)
        self.summaries.count_finding(item)
        if self.collector is not None:
            self.collector.finding(item)

    def finish(self) -> Report:
        """Flush what only the end of the log can tell, and fill in the report."""
        for draft in self.audit.finish(self.state):
            self.found(dict(draft.payload), None)
        for item in self.checkpoints.finish():
            self.found(item, None)
        for item in self.trees.finish(chained_records=bool(self.trees.streams or self.trees.odd)):
            self.found(item, None)
        report = self.report
        if self.attested is not None:
            for item in [*self.attested.findings, *self.attested.unread_causes()]:
                self.found(dict(item), None)
            report.attestation = self.attested.to_dict()
        report.digest = digest_of(self.state, self.findings_records)
        report.open_items = [
            i for i in open_items(self.state)
            if (i["missing_payouts"] or not i["resolved"]) and self.scope.table(i["table_id"])
        ]  # fmt: skip
        self.summaries.finish(self.state)
        report.tables = self.summaries.tables
        report.shoes = self.summaries.shoes
        report.checkpoints = {**self.checkpoints.to_dict(), "tree_heads": self.trees.to_dict()}
        report.unproven = self.trees.unproven
        if self.last is not None:
            n, env = self.last
            report.ends_at = {"record": n, "event_id": env.event_id, "type": env.type, "topic": env.topic,
                              "occurred_at": env.occurred_at}  # fmt: skip
        prints = {k: _fingerprint(v) for k, v in sorted(self.keys.items())}
        signed_by = report.checkpoints.get("signed_by", {})
        report.keys = {"key_ids": sorted(self.keys), "signed_by": signed_by, "fingerprints": prints}
        report.tables_in_log = sorted(self.state.configs)
        report.coup_rows = [
            {**row, "house_minor": row["stake_minor"] - row["credit_minor"]}
            for row in self.coup_rows.values() if "coup_id" in row
        ]  # fmt: skip
        return report


def _fingerprint(public_hex: str) -> str | None:
    try:
        return fingerprint(public_hex)
    except ValueError:
        return None


def replayer(  # noqa: PLR0917 (the replay's options, once)
    keys: Mapping[str, str],
    checkpoint_every: int,
    scope: Scope | None,
    collector: CoupCollector | None,
    ordered: bool | Literal["strict"],
    expect: Mapping[str, Any] | None,
) -> Replayer:
    """A :class:`Replayer` for :func:`replay_records`' options, holding the pinned tree head ``expect``."""
    r = Replayer(scope or Scope(), keys, checkpoint_every, collector, ordered)
    if expect is not None:
        pinned_id, pinned_key = str(expect.get("event_id")), str(expect.get("table_id"))
        r.trees.on_tree(pinned_id, pinned_key, expect.get("tree"), pinned=True)
    return r


def replay_records(
    raw_records: Iterable[bytes | str | Envelope],
    *,
    keys: Mapping[str, str],
    checkpoint_every: int,
    scope: Scope | None = None,
    collector: CoupCollector | None = None,
    ordered: bool | Literal["strict"] = False,
    expect: Mapping[str, Any] | None = None,
    attested: Attested | None = None,
) -> Report:
    """Re-run audit over ``raw_records`` (in log order, streamed) and report: the pure replay. ``keys``:
    the public checkpoint keyring; ``checkpoint_every``: the cadence audit ran with. The shell
    (:func:`services.runtime.replay.replay`) finds both in the environment. ``ordered``: the records come
    in the order they were written (not a Kafka log read topic by topic); ``expect``: a signed tree head
    the log must extend (its checkpoint payload, verified by the caller: :mod:`.tree_head`);
    ``attested``: the facts the first pass found (:func:`services.audit.replay.attested.survey` over the
    same records)."""
    r = replayer(keys, checkpoint_every, scope, collector, ordered, expect)
    r.attested = attested
    with frozen_heap():
        feed = r.feed
        for n, raw in enumerate(raw_records):
            feed(n, raw)
    return r.finish()


class frozen_heap:
    """While the replay streams: the objects that existed before it (modules, validators, schemas: most
    of the heap) frozen out of the cyclic garbage collector (:func:`gc.freeze`), unfrozen after, unless
    the caller had frozen some itself (then nothing is done). Each collection then visits the replay's
    own objects only, not the whole program again and again (docs/performance.md#garbage-collector;
    cycles made meanwhile are still collected)."""

    def __enter__(self) -> frozen_heap:
        self.owned = gc.get_freeze_count() == 0
        if self.owned:
            gc.freeze()
        return self

    def again(self) -> None:
        """Freeze what lives now too (the one-pass replay, :mod:`.onepass`, after a run of signed heads:
        the records it holds back, which would otherwise be visited by every collection while they
        wait), unless the caller had frozen some itself."""
        if self.owned:
            gc.freeze()

    def __exit__(self, *exc: object) -> None:
        if self.owned:
            gc.unfreeze()
