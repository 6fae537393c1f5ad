"""Export and replay: the log as JSONL, and the regulatory replay over it (docs/cli.md, issue 5).

The replay re-runs the audit processor — the very core code production ran — over every record of a
log, in log order, from scratch: it trusts nothing the log says about itself. It re-derives every coup
from the *recorded* cards and decisions, every payout, commission and tie push, every balance; checks
every record's hash, every per-key ``seq``/``prev_hash`` chain (gaps, duplicates, two events swapped)
and every shoe commitment; and checks each ``AuditCheckpoint`` the audit wrote at the time:

* its Ed25519 signature under its key id (``checkpoint_signature_invalid``), against the PUBLIC
  keyring only (``--keys FILE`` or ``CASINO_PUBLIC_KEYRING``, written by ``keys public``;
  :func:`public_keys_from`); an unsigned checkpoint does not verify either; the report says which key
  ids signed how many checkpoints;
* its content against the checkpoint the replay's own audit derives at the same round count of the
  same table (``checkpoint_mismatch``: rounds, table digest, chain head, findings so far). A forger who
  rewrites a whole chain with valid hashes changes the round records, hence the digest, and cannot sign
  the new one; the findings count also shows a log edited *after* audit ran;
* that every checkpoint the cadence calls for is there (``checkpoint_missing``) and none is extra;
* that the monitor's alerts it counted at its table are in the log (a claim checked at the end, so
  deleting every alert — which leaves no gap in any chain — is still found).

**Verdicts.** ``clean`` (exit 0): a complete log replayed and agreed. ``findings`` (exit 1). ``incomplete``
(exit 1): nothing disagrees, but the log stops with coups open or accepted bets unpaid (``ends_at`` says
where). An empty source, a foreign file (another program's SQLite database or JSON), a Kafka prefix
with no records, an unknown ``--table``: :class:`SourceError`, one line, exit 2. Dead letters of records
refused by authentication are counted by reason (``refused``), not findings. Findings are grouped by
root cause (:func:`group_findings`). ``--db`` is opened read-only (:func:`open_readonly`): no byte of
the file changes and nothing is created beside it.

**Scope.** ``--table`` and ``--since``/``--until`` (ISO 8601, ``since`` inclusive, ``until``
exclusive, on ``occurred_at``) limit the *report*, never the verification: chains, balances and
checkpoints only make sense over the whole stream, so every record is always read and checked. A
finding is in scope when its table is selected and the record that raised it occurred in the range;
integrity findings (hashes, chains, checkpoints, duplicates, undecodable records) are reported whatever
the scope, because a broken log is broken for every table. The digest covers the whole log.

**Memory.** Records are streamed (:func:`read_jsonl`, :func:`read_db` page through the log). The replay
does not use :func:`services.core.processor.step`, whose ``applied`` set grows with every record: it
calls :meth:`Audit.handle_hashed` itself and drops re-deliveries with a bounded window of recent event
ids (:data:`DEDUP_WINDOW`). A re-delivery further back than the window is still caught: on a chained
stream its ``seq`` is behind the head (``seq_duplicate``); a repeated ``PayoutIssued`` is a second
payout for its bet or an orphan left open. Audit drops completed coups and folds round hashes, so the
state grows with tables, shoes in play and accounts — not with the log. Findings are kept up to
:data:`MAX_FINDINGS_LISTED` and counted beyond.

**Reports.** JSON with a fixed top-level key order and every nested object's keys sorted, nothing from
the clock, the path or the environment: the same input gives byte-identical reports. Text by default.
HTML (:mod:`services.runtime.report_html`) adds what the shell knows: the generation time (the clock,
or ``SOURCE_DATE_EPOCH``), the tool version, the source and its SHA-256, the keyring. ``--coup ID``
prints one game round in full instead (text, ``--json``, or ``--html FILE``).
"""

from __future__ import annotations

import argparse
import functools
import gc
import hashlib
import json
import os
import sqlite3
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from services.audit.processor import CHECKPOINT_EVERY, Audit, AuditState, digest_of, open_items
from services.core import topics
from services.core.baccarat import TableConfig
from services.core.baccarat.coup import CoupRecord
from services.core.baccarat.variants.french_club import COVER_SPOT
from services.core.envelope import Draft, Envelope, hash_of_bytes
from services.core.errors import DomainError
from services.core.reasons import (
    AUTH_REFUSALS,
    INTEGRITY_REASONS,
    ROOT_PRIORITY,
    FindingReason,
    Reason,
    ReplayReason,
    Severity,
)
from services.core.signing import DEMO_PUBLIC_KEYS, parse_public_keyring, verify
from services.runtime.failures import BadInput
from services.runtime.settings import int_from_env

DEDUP_WINDOW = 1 << 16
"""How many recent event ids the replay remembers to drop exact re-deliveries."""

MAX_FINDINGS_LISTED = 10_000
"""Findings listed in a report; more are counted (``findings_total``), not listed."""

REFUSED_REASONS = AUTH_REFUSALS
"""Dead-letter reasons of records refused by authentication (docs/trust.md): counted, listed, not findings."""

MAX_ALERTS_LISTED = 1000
"""The monitor's alerts listed in a report (the count per type is in ``types``)."""

MAX_REFUSED_LISTED = 100
"""Ids of refused records listed per reason; more are counted."""


ENV_PUBLIC_KEYRING = "CASINO_PUBLIC_KEYRING"
ENV_CHECKPOINT_EVERY = "CASINO_AUDIT_CHECKPOINT_EVERY"


# --- configuration -------------------------------------------------------------------------------


class SourceError(BadInput):
    """A replay source or option that cannot be used (one line for the CLI, exit 2)."""


def load_public_keyring(path: Path) -> dict[str, str]:
    """Key id → Ed25519 public key hex from a public keyring file (``keys public``); ``SourceError``."""
    try:
        return parse_public_keyring(json.loads(path.read_text(encoding="utf-8")))
    except OSError as exc:
        raise SourceError(f"cannot read the public keyring {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise SourceError(f"{path}: {exc}") from None


PUBLIC_KEYRING_SUFFIX = ".public-keyring.json"
"""A log file's own public keyring, written beside it (``<db>.public-keyring.json``) by ``demo``."""


def public_keys_from(
    path: str | None, env: Mapping[str, str] | None = None, *, log: Path | None = None
) -> tuple[dict[str, str], str]:
    """The checkpoint verification keys and where they come from: ``--keys PATH``, else
    ``CASINO_PUBLIC_KEYRING``, else the public keyring beside the ``log`` file (``<db>``
    :data:`PUBLIC_KEYRING_SUFFIX`, which ``demo`` writes), else (demo and tests only) the public demo
    key, said so in the report."""
    env = os.environ if env is None else env
    chosen = path or env.get(ENV_PUBLIC_KEYRING, "").strip()
    if not chosen and log is not None and Path(f"{log}{PUBLIC_KEYRING_SUFFIX}").is_file():
        chosen = f"{log}{PUBLIC_KEYRING_SUFFIX}"
    if chosen:
        return load_public_keyring(Path(chosen)), str(chosen)
    return dict(DEMO_PUBLIC_KEYS), "public demo key (demo and tests only: proves nothing)"


def replay_audit(checkpoint_every: int) -> Audit:
    """The audit processor the replay runs (it signs nothing: it verifies the log's checkpoints).

    The one place the replay builds a processor (a composition root may take it over)."""
    return Audit(signing=None, checkpoint_every=checkpoint_every)


# --- scope ---------------------------------------------------------------------------------------


def iso_instant(text: str) -> str:
    """``text`` (ISO 8601, any offset; a date alone means its midnight UTC) as the log's own form,
    ``YYYY-MM-DDTHH:MM:SS.mmmZ`` in UTC, so that instants compare as strings."""
    moment = datetime.fromisoformat(text.strip())
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@dataclass(frozen=True, slots=True)
class Scope:
    """What the report covers: some tables (``None``: all) and a half-open time range."""

    tables: frozenset[str] | None = None
    since: str | None = None
    until: str | None = None

    @property
    def everything(self) -> bool:
        """Whether the scope selects every table at every instant (the replay then skips the tests)."""
        return self.tables is None and self.since is None and self.until is None

    def at(self, occurred_at: str) -> bool:
        """Whether an instant falls in ``[since, until)``."""
        if self.since is None and self.until is None:
            return True
        when = occurred_at if len(occurred_at) == 24 and occurred_at[-1] == "Z" else iso_instant(occurred_at)
        return (self.since is None or when >= self.since) and (self.until is None or when < self.until)

    def table(self, table_id: str) -> bool:
        """Whether a table is selected."""
        return self.tables is None or table_id in self.tables

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        tables = sorted(self.tables) if self.tables is not None else None
        return {"since": self.since, "tables": tables, "until": self.until}


# --- the report ----------------------------------------------------------------------------------


@dataclass(slots=True)
class Report:
    """What a replay found."""

    records: int = 0
    findings: list[dict[str, Any]] = field(default_factory=list)
    findings_total: int = 0
    open_items: list[dict[str, Any]] = field(default_factory=list)
    digest: str = ""
    coups: int = 0
    types: dict[str, int] = field(default_factory=dict)
    scope: Scope = field(default_factory=Scope)
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    shoes: dict[str, dict[str, Any]] = field(default_factory=dict)
    checkpoints: dict[str, Any] = field(default_factory=dict)
    ends_at: dict[str, Any] | None = None
    refused: dict[str, Any] = field(default_factory=dict)
    dead_letters: dict[str, int] = field(default_factory=dict)
    keys: dict[str, Any] = field(default_factory=dict)
    tables_in_log: list[str] = field(default_factory=list)
    alerts: list[dict[str, Any]] = field(default_factory=list)
    outcomes: dict[str, dict[str, int]] = field(default_factory=dict)
    coup_rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """No finding and nothing left open."""
        return not self.findings_total and not self.open_items

    @property
    def verdict(self) -> str:
        """``findings`` when anything disagrees; else ``incomplete`` when the log stops with coups open
        or accepted bets unpaid; else ``clean``. Refused records (a forgery turned away) are neither."""
        if self.findings_total:
            return "findings"
        return "incomplete" if self.open_items else "clean"

    def add_finding(self, item: dict[str, Any]) -> None:
        """Count a finding; list it while under :data:`MAX_FINDINGS_LISTED`."""
        self.findings_total += 1
        if len(self.findings) < MAX_FINDINGS_LISTED:
            self.findings.append(item)

    @property
    def groups(self) -> list[dict[str, Any]]:
        """The listed findings grouped by root cause (:func:`group_findings`)."""
        return group_findings(self.findings)

    def to_dict(self) -> dict[str, Any]:
        """The JSON report: fixed top-level order, nested keys sorted (see :func:`stable`)."""
        groups = self.groups
        return {
            "verdict": self.verdict,
            "digest": self.digest,
            "scope": self.scope.to_dict(),
            "records": self.records,
            "coups": self.coups,
            "types": stable(self.types),
            "tables": [stable(t) for _, t in sorted(self.tables.items())],
            "shoes": [stable(s) for _, s in sorted(self.shoes.items())],
            "checkpoints": stable(self.checkpoints),
            "keys": stable(self.keys),
            "findings_total": self.findings_total,
            "root_findings": len(groups),
            "groups": [stable(g) for g in groups],
            "findings": [stable(f) for f in self.findings],
            "open_items": [stable(i) for i in self.open_items],
            "ends_at": stable(self.ends_at),
            "refused": stable(self.refused),
            "dead_letters": stable(self.dead_letters),
            "outcomes": stable(self.outcomes),
            "coup_list": [stable(c) for c in self.coup_rows],
            "alerts": [stable(a) for a in self.alerts],
        }

    def to_json(self) -> str:
        """The JSON report as text (what ``--json`` prints)."""
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"


def stable(obj: Any) -> Any:
    """``obj`` with every mapping's keys in sorted order, recursively (lists keep their order)."""
    if isinstance(obj, Mapping):
        return {str(k): stable(obj[k]) for k in sorted(obj, key=str)}
    if isinstance(obj, list | tuple):
        return [stable(v) for v in obj]
    return obj


# --- root causes ---------------------------------------------------------------------------------

# ROOT_PRIORITY (which finding of a group is its root) and INTEGRITY_REASONS (findings about the log
# itself, reported whatever the scope) live with the codes, in services.core.reasons.

CONSEQUENTIAL = frozenset({FindingReason.CHECKPOINT_MISMATCH, FindingReason.CHECKPOINT_MISSING})
"""Findings that follow from an earlier one at the same table (a changed round changes every later
checkpoint of its table): listed under it."""

EXPLAIN: dict[str, str] = {
    FindingReason.CARD_MISMATCH: (
        "The cards recorded cannot have been dealt this way: not the order the rules or the revealed shoe"
        " give."
    ),
    FindingReason.OUTCOME_MISMATCH: (
        "Re-running the rules on the recorded cards and decisions gives another result than the one "
        "recorded."
    ),
    FindingReason.BET_SET_MISMATCH: (
        "The coup was resolved with another set of bets than the dealer accepted."
    ),
    FindingReason.SHOE_COMMITMENT_MISMATCH: (
        "The revealed shoe seed does not give the order committed before play."
    ),
    FindingReason.UNKNOWN_TABLE: "A coup at a table that was never opened.",
    FindingReason.PAYOUT_MISMATCH: (
        "The payout recorded is not what the table's recorded paytable and rules give for this bet and "
        "outcome."
    ),
    FindingReason.COMMISSION_MISMATCH: (
        "The commission charged is not the table's commission rule applied to this win."
    ),
    FindingReason.COMMISSION_POSTING_MISMATCH: (
        "What the payout posts to the commission account is not the commission it reports."
    ),
    FindingReason.POSTINGS_MISMATCH: (
        "The payout's amounts are right but its postings move money between other accounts than the rules"
        " call for."
    ),
    FindingReason.PAYOUT_UNEXPECTED: "A payout for a bet that was not accepted in its coup.",
    FindingReason.DUPLICATE_PAYOUT: "A bet was settled more than once.",
    FindingReason.ESCROW_NOT_ZERO: (
        "The stakes put into the table's escrow for this coup are not what its payouts took out."
    ),
    FindingReason.POSTINGS_UNBALANCED: "A transfer's postings do not sum to zero.",
    FindingReason.BALANCE_MISMATCH: "A wallet's recorded balance is not the fold of its postings.",
    FindingReason.INVALID_PAYLOAD: "A recorded event breaks the event contract.",
    FindingReason.SEQ_GAP: "Records are missing from a chained stream: deleted.",
    FindingReason.SEQ_REORDERED: "Two records of a chained stream are in swapped order.",
    FindingReason.SEQ_DUPLICATE: "A record reuses a sequence number: replayed or re-inserted.",
    FindingReason.CHAIN_BROKEN: "A record's prev_hash does not link to the record before it.",
    ReplayReason.DUPLICATE_EVENT: "An event id appears twice in the log.",
    Reason.UNDECODABLE: "A line of the log is not an event envelope.",
    ReplayReason.UNPROCESSABLE: "A record could not be processed at all.",
    FindingReason.HASH_MISMATCH: (
        "The record was changed after it was written: its hash no longer matches its content."
    ),
    FindingReason.CHECKPOINT_SIGNATURE_INVALID: (
        "A checkpoint does not verify under the public keyring: not written by audit's key, or altered."
    ),
    FindingReason.CHECKPOINT_MISSING: "A checkpoint the cadence calls for is not in the log.",
    FindingReason.CHECKPOINT_MISMATCH: "The log no longer holds what audit signed at the time.",
}


def _event_ids(f: Mapping[str, Any]) -> list[str]:
    subject = f.get("subject") or {}
    ids = [subject.get("event_id"), *(subject.get("event_ids") or [])]
    return [str(i) for i in ids if i]


_CONSEQUENCE_FIELDS = ("reason", "table_id", "subject", "detail", "expected", "recorded")


def group_findings(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Findings grouped by root cause: those naming the same event or the same coup are one group;
    checkpoint findings join the latest group of their table (or start one). Each group is its root
    (the most specific finding, with an explanation) and the consequences listed beneath it."""
    parent = list(range(len(findings)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    latest_at_table: dict[str, int] = {}
    for i, f in enumerate(findings):
        table = str(f.get("table_id"))
        if f.get("reason") in CONSEQUENTIAL:
            if table in latest_at_table:
                parent[i] = find(latest_at_table[table])
            latest_at_table[table] = i
            continue
        coup = (f.get("subject") or {}).get("coup_id")
        for key in [*_event_ids(f), *([f"coup:{coup}"] if coup else [])]:
            if key in owner:
                parent[find(i)] = find(owner[key])
            else:
                owner[key] = i
        latest_at_table[table] = i
    members: dict[int, list[int]] = {}
    for i in range(len(findings)):
        members.setdefault(find(i), []).append(i)
    rank: dict[str, int] = {r: n for n, r in enumerate(ROOT_PRIORITY)}
    groups = []
    for idx in sorted(members.values(), key=lambda m: m[0]):
        root_i = min(idx, key=lambda i: (rank.get(str(findings[i].get("reason")), len(rank)), i))
        root = dict(findings[root_i])
        explanation = EXPLAIN.get(str(root.get("reason")), "")
        hashed = [findings[i] for i in idx if findings[i].get("reason") == FindingReason.HASH_MISMATCH]
        edited = {e for f in hashed for e in _event_ids(f)}
        if root.get("reason") != FindingReason.HASH_MISMATCH and edited & set(_event_ids(root)):
            explanation += " " + EXPLAIN[FindingReason.HASH_MISMATCH]
        root["explanation"] = explanation
        consequences = [
            {k: findings[i].get(k) for k in _CONSEQUENCE_FIELDS} for i in idx if i != root_i
        ]  # fmt: skip
        ids = sorted({e for i in idx for e in _event_ids(findings[i])})
        groups.append({"root": root, "consequences": consequences, "event_ids": ids})
    return groups


# --- per-table and per-shoe summaries ------------------------------------------------------------


@dataclass(slots=True)
class Summaries:
    """Per-table and per-shoe counts and money over the records in scope (bounded by tables and shoes)."""

    scope: Scope
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    shoes: dict[str, dict[str, Any]] = field(default_factory=dict)
    table_meta: dict[str, dict[str, Any]] = field(default_factory=dict)
    shoe_meta: dict[str, dict[str, Any]] = field(default_factory=dict)
    everything: bool = field(init=False)

    def __post_init__(self) -> None:
        self.everything = self.scope.everything

    def table(self, table_id: str) -> dict[str, Any]:
        """The summary row of one table."""
        row = self.tables.get(table_id)
        if row is None:
            row = self.tables[table_id] = {
                "table_id": table_id, "variant": None, "rules_version": None, "coups": 0, "bets": 0,
                "refused": 0, "handle_minor": 0, "paid_minor": 0, "commission_minor": 0, "findings": 0,
                "rounds_audited": 0, "table_digest": None, **self.table_meta.get(table_id, {}),
            }  # fmt: skip
        return row

    def shoe(self, shoe_id: str, table_id: str) -> dict[str, Any]:
        """The summary row of one shoe."""
        row = self.shoes.get(shoe_id)
        if row is None:
            row = self.shoes[shoe_id] = {
                "shoe_id": shoe_id, "table_id": table_id, "mode": None, "commitment": None, "opened_at": None,
                "closed_at": None, "coups": 0, "cards_dealt": 0, "seed_revealed": False, "findings": 0,
                "commitment_verified": False, **self.shoe_meta.get(shoe_id, {}),
            }  # fmt: skip
        return row

    def observe(self, env: Envelope) -> None:
        """Count one record (when its table and time are in scope); keep table and shoe metadata."""
        kind = env.type
        if kind not in _SUMMARISED:
            return
        p = env.payload
        table_id = str(p.get("table_id") or env.key)
        everything = self.everything
        if not everything and not self.scope.table(table_id):
            return
        if kind in ("TableOpened", "ShoeOpened", "ShoeClosed"):
            self._meta(kind, table_id, env)
        if not everything and not self.scope.at(env.occurred_at):
            return
        if kind == "BetAccepted" and p.get("spot") != COVER_SPOT:  # a bank's cover is a reserve, no wager
            row = self.table(table_id)
            row["bets"] += 1
            row["handle_minor"] += int(p["stake_minor"])
        elif kind == "BetRefused":
            self.table(table_id)["refused"] += 1
        elif kind == "CardDealt":
            self.shoe(str(p["shoe_id"]), table_id)["cards_dealt"] += 1
        elif kind == "CoupResolved":
            self.table(table_id)["coups"] += 1
            self.shoe(str(p["shoe_id"]), table_id)["coups"] += 1
        elif kind == "PayoutIssued" and env.topic == topics.WALLET_REQUESTS and p.get("spot") != COVER_SPOT:
            row = self.table(table_id)
            row["paid_minor"] += int(p["credit_minor"])
            row["commission_minor"] += int(p["commission_minor"])
        elif kind in ("ShoeOpened", "ShoeClosed"):
            self.shoe(str(p["shoe_id"]), table_id)

    def _meta(self, kind: str, table_id: str, env: Envelope) -> None:
        p = env.payload
        if kind == "TableOpened":
            self.table_meta[table_id] = {
                "variant": p.get("variant"), "rules_version": p.get("rules_version"),
                "currency": p.get("currency"), "decks": p.get("decks"),
            }  # fmt: skip
            if table_id in self.tables:
                self.tables[table_id].update(self.table_meta[table_id])
            return
        meta = self.shoe_meta.setdefault(str(p["shoe_id"]), {})
        if kind == "ShoeOpened":
            meta.update(mode=p.get("mode"), commitment=p.get("commitment"), opened_at=env.occurred_at)
        else:
            meta.update(closed_at=env.occurred_at, seed_revealed=bool(p.get("seed_hex")))
            meta["commitment_verified"] = meta["seed_revealed"] and meta.get("mode") == "rng"
        if str(p["shoe_id"]) in self.shoes:
            self.shoes[str(p["shoe_id"])].update(meta)

    def count_finding(self, item: Mapping[str, Any]) -> None:
        """Attribute a finding to its table and, when it names one, its shoe."""
        table = self.tables.get(str(item.get("table_id")))
        if table is not None:
            table["findings"] += 1
        subject = item.get("subject") or {}
        shoe_id = subject.get("shoe_id") or _shoe_of_coup(subject.get("coup_id"))
        shoe = self.shoes.get(str(shoe_id)) if shoe_id else None
        if shoe is not None:
            shoe["findings"] += 1
            if item.get("reason") in (FindingReason.SHOE_COMMITMENT_MISMATCH, FindingReason.CARD_MISMATCH):
                shoe["commitment_verified"] = False

    def finish(self, state: AuditState) -> None:
        """Money totals and each table's audited rounds and digest."""
        for table_id, row in self.tables.items():
            row["house_minor"] = row["handle_minor"] - row["paid_minor"]
            row["hold_bps"] = row["house_minor"] * 10_000 // row["handle_minor"] if row["handle_minor"] else 0
            row["rounds_audited"] = state.rounds_done.get(table_id, 0)
            digest = state.digests.get(table_id)
            row["table_digest"] = digest.value() if digest else None


_SUMMARISED = frozenset({"TableOpened", "ShoeOpened", "ShoeClosed", "BetAccepted", "BetRefused", "CardDealt",
                         "CoupResolved", "PayoutIssued"})  # fmt: skip
"""The types :meth:`Summaries.observe` counts or takes metadata from."""


def _shoe_of_coup(coup_id: Any) -> str | None:
    parts = str(coup_id).split("/") if coup_id else []
    return parts[1] if len(parts) == 3 else None


# --- checkpoints ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Checkpoints:
    """Matches the checkpoints recorded in the log with those the replay's audit derives itself.

    Both sides are keyed by (table, rounds) and wait for the other (bounded by how far audit lagged
    behind its inputs); what is left unmatched at the end is missing or extra.
    """

    keys: Mapping[str, str]
    derived: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    recorded: dict[tuple[str, int], tuple[dict[str, Any], str]] = field(default_factory=dict)
    verified: int = 0
    signed_by: dict[str, int] = field(default_factory=dict)
    signed_tables: dict[str, dict[str, int]] = field(default_factory=dict)
    alert_hashes: dict[tuple[str, int], str] = field(default_factory=dict)
    claims: dict[tuple[str, int], tuple[Any, str]] = field(default_factory=dict)

    def on_alert(self, env: Envelope) -> None:
        """Remember an alert's place in its table's stream (checkpoints claim alerts by it)."""
        if env.seq is not None:
            self.alert_hashes[(env.key, env.seq)] = env.hash

    def on_derived(self, payload: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The replay's audit wrote a checkpoint: compare with the recorded one if already seen."""
        slot = (str(payload["table_id"]), int(payload["rounds"]))
        if slot in self.recorded:
            got, event_id = self.recorded.pop(slot)
            return self._compare(dict(payload), got, event_id)
        self.derived[slot] = dict(payload)
        return []

    def on_recorded(self, env: Envelope) -> list[dict[str, Any]]:
        """A checkpoint in the log: check its signature, then its content."""
        p = env.payload
        table = str(p.get("table_id") or env.key)
        subject = {
            "event_id": env.event_id,
            "table_id": table,
            "rounds": p.get("rounds"),
            "key_id": p.get("key_id"),
        }
        out = []
        why = verify(p, self.keys)
        if why is None:
            self.signed_by[str(p["key_id"])] = self.signed_by.get(str(p["key_id"]), 0) + 1
            tables = self.signed_tables.setdefault(str(p["key_id"]), {})
            tables[table] = tables.get(table, 0) + 1
        else:
            detail = f"{why}: the checkpoint does not verify under key id {p.get('key_id')!r}"
            reason = FindingReason.CHECKPOINT_SIGNATURE_INVALID
            out.append(_item(reason, table, subject, None, p.get("signature"), detail=detail))
        alerts = p.get("alerts")
        if isinstance(alerts, Mapping) and isinstance(alerts.get("count"), int) and alerts["count"] > 0:
            self.claims[(table, alerts["count"])] = (alerts.get("head"), env.event_id)
        slot = (table, int(p.get("rounds") or 0))
        want = self.derived.pop(slot, None)
        if want is None:
            self.recorded[slot] = (dict(p), env.event_id)
            return out
        return out + self._compare(want, dict(p), env.event_id)

    def _compare(self, want: dict[str, Any], got: dict[str, Any], event_id: str) -> list[dict[str, Any]]:
        table = str(want["table_id"])
        diff = [f for f in ("rounds", "table_digest", "chain_heads", "findings") if want.get(f) != got.get(f)]
        if not diff:
            self.verified += 1
            return []
        subject = {"event_id": event_id, "table_id": table, "rounds": want["rounds"], "fields": diff}
        detail = "the log no longer holds what audit checkpointed" + (
            ": rewritten rounds or chain" if set(diff) - {"findings"} else ": edited after audit ran"
        )
        expected, recorded = {f: want.get(f) for f in diff}, {f: got.get(f) for f in diff}
        return [_item(FindingReason.CHECKPOINT_MISMATCH, table, subject, expected, recorded, detail=detail)]

    def finish(self) -> list[dict[str, Any]]:
        """Checkpoints the cadence called for but the log lacks, and recorded ones nothing matches.

        Per table, an unmatched recorded checkpoint and an unmatched derived one are paired in order
        (a round lost or added shifts the count: one mismatch, not a missing and an extra one).
        """
        out = self._check_alert_claims()
        tables = sorted({t for t, _ in self.derived} | {t for t, _ in self.recorded})
        for table in tables:
            wants = sorted((r, w) for (t, r), w in self.derived.items() if t == table)
            gots = sorted((r, g) for (t, r), g in self.recorded.items() if t == table)
            for (_, want), (_, (got, event_id)) in zip(wants, gots, strict=False):
                out.extend(self._compare(want, got, event_id))
            for rounds, want in wants[len(gots) :]:
                subject = {"table_id": table, "rounds": rounds}
                detail = "no checkpoint in the log for this round count: deleted or never written"
                digest = want.get("table_digest")
                out.append(_item(FindingReason.CHECKPOINT_MISSING, table, subject, digest, detail=detail))
            for rounds, (got, event_id) in gots[len(wants) :]:
                subject = {"event_id": event_id, "table_id": table, "rounds": rounds, "fields": ["rounds"]}
                detail = "a checkpoint for rounds the replay never completed at this table"
                digest = got.get("table_digest")
                reason = FindingReason.CHECKPOINT_MISMATCH
                out.append(_item(reason, table, subject, None, digest, detail=detail))
        return out

    def _check_alert_claims(self) -> list[dict[str, Any]]:
        """Each checkpoint's claim "the monitor had raised N alerts at this table, the last with hash H"
        must hold in the log (checked at the end: it does not depend on how topics interleave)."""
        out = []
        for (table, count), (head, event_id) in sorted(self.claims.items()):
            if self.alert_hashes.get((table, count - 1)) == head:
                continue
            held = 1 + max((s for t, s in self.alert_hashes if t == table), default=-1)
            subject = {"event_id": event_id, "table_id": table, "fields": ["alerts"]}
            detail = f"the checkpoint counted {count} alerts at this table, the log holds {held}"
            out.append(_item(FindingReason.CHECKPOINT_MISMATCH, table, subject, {"alerts": held},
                             {"alerts": {"count": count, "head": head}}, detail=detail))  # fmt: skip
        return out

    def to_dict(self) -> dict[str, Any]:
        """The JSON summary."""
        return {"verified": self.verified, "signed_by": dict(sorted(self.signed_by.items())),
                "signed_tables": stable(self.signed_tables)}  # fmt: skip


def _item(
    reason: FindingReason | ReplayReason | Reason,
    table: str,
    subject: dict[str, Any],
    expected: Any = None,
    recorded: Any = None,
    *,
    detail: str,
) -> dict[str, Any]:
    return {"reason": reason.value, "severity": Severity.CRITICAL.value, "table_id": table,
            "subject": subject, "expected": expected, "recorded": recorded, "detail": detail}  # fmt: skip


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
        self.add(event_id, digest)
        return None

    def add(self, event_id: str, digest: str) -> None:
        """Remember an event id not in the window, forgetting the oldest beyond ``size``."""
        self.hashes[event_id] = digest
        order = self.order
        order.append(event_id)
        if len(order) > self.size:
            self.hashes.pop(order.popleft(), None)


# --- the replay ----------------------------------------------------------------------------------


@dataclass(slots=True)
class Replayer:
    """One replay's moving parts; :func:`replay` drives it."""

    scope: Scope
    keys: Mapping[str, str]
    checkpoint_every: int = CHECKPOINT_EVERY
    collector: RoundCollector | None = None
    audit: Audit = field(init=False)
    state: AuditState = field(init=False)
    report: Report = field(init=False)
    summaries: Summaries = field(init=False)
    checkpoints: Checkpoints = field(init=False)
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
        self.window = _Window(DEDUP_WINDOW)
        self.coup_rows = {}
        self.findings_records = {}
        self.last = None

    def feed(self, n: int, raw: bytes | str | Envelope) -> None:
        """Replay one record (the ``n``-th of the log)."""
        report = self.report
        report.records += 1
        try:
            if type(raw) is bytes:  # the usual case: :func:`decode`, inlined
                env = _envelope_from_json(raw)
                want_hash = env.hash if hash_of_bytes(raw, env) == env.hash else env.expected_hash()
            else:
                env, want_hash = decode(raw)
        except (ValueError, ValidationError) as exc:
            undecodable = {"reason": Reason.UNDECODABLE.value, "severity": Severity.CRITICAL.value,
                           "table_id": None, "subject": {"record": n}, "detail": str(exc)[:300]}  # fmt: skip
            self.found(undecodable, None)
            return
        kind = env.type
        types = report.types
        types[kind] = types.get(kind, 0) + 1
        self.last = (n, env)
        window = self.window
        earlier = window.hashes.get(env.event_id)
        if earlier is None:
            window.add(env.event_id, env.hash)
        else:
            same = "an exact re-delivery" if earlier == env.hash else "another record under a used id"
            detail = f"event id seen before in this log: {same}; not applied twice"
            subject = {"event_id": env.event_id, "topic": env.topic, "record": n}
            self.found(_item(ReplayReason.DUPLICATE_EVENT, _table_of(env), subject, detail=detail), env)
            return
        side = _SIDE.get(kind)
        if side is not None:
            side(self, env)
        if self.collector is not None:
            self.collector.observe(env)
        topic = env.topic
        if topic in self.inputs:
            self.apply(n, env, want_hash)
        elif topic in topics.EVENT_STREAMS:
            for draft in self.audit.check_chain(self.state, env, want_hash):
                self.found(dict(draft.payload), env)
            if kind == "AuditCheckpoint":
                for item in self.checkpoints.on_recorded(env):
                    self.found(item, env)
        elif env.hash != want_hash:
            subject = {"event_id": env.event_id, "topic": env.topic, "key": env.key}
            edited = _item(FindingReason.HASH_MISMATCH, env.key, subject, want_hash, env.hash, detail="")
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
            self.found(_item(ReplayReason.UNPROCESSABLE, _table_of(env), subject, detail=detail), env)
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
        report = self.report
        report.digest = digest_of(self.state, self.findings_records)
        report.open_items = [
            i for i in open_items(self.state)
            if (i["missing_payouts"] or not i["resolved"]) and self.scope.table(i["table_id"])
        ]  # fmt: skip
        self.summaries.finish(self.state)
        report.tables = self.summaries.tables
        report.shoes = self.summaries.shoes
        report.checkpoints = self.checkpoints.to_dict()
        if self.last is not None:
            n, env = self.last
            report.ends_at = {"record": n, "event_id": env.event_id, "type": env.type, "topic": env.topic,
                              "occurred_at": env.occurred_at}  # fmt: skip
        report.keys = {"key_ids": sorted(self.keys), "signed_by": report.checkpoints.get("signed_by", {})}
        report.tables_in_log = sorted(self.state.configs)
        report.coup_rows = [
            {**row, "house_minor": row["stake_minor"] - row["credit_minor"]}
            for row in self.coup_rows.values() if "coup_id" in row
        ]  # fmt: skip
        return report


def replay(
    raw_records: Iterable[bytes | str | Envelope],
    *,
    scope: Scope | None = None,
    keys: Mapping[str, str] | None = None,
    checkpoint_every: int | None = None,
    collector: RoundCollector | None = None,
) -> Report:
    """Re-run audit over ``raw_records`` (in log order, streamed) and report.

    ``keys``: the public checkpoint keyring (default :func:`public_keys_from`); ``checkpoint_every``: the
    cadence audit ran with (default ``CASINO_AUDIT_CHECKPOINT_EVERY`` or 50).
    """
    every = checkpoint_every or int_from_env(
        ENV_CHECKPOINT_EVERY, os.environ.get(ENV_CHECKPOINT_EVERY, "") or str(CHECKPOINT_EVERY)
    )
    r = Replayer(scope or Scope(), public_keys_from(None)[0] if keys is None else keys, every, collector)
    with _frozen_heap():
        feed = r.feed
        for n, raw in enumerate(raw_records):
            feed(n, raw)
    return r.finish()


class _frozen_heap:
    """While the replay streams: the objects that existed before it (modules, validators, schemas: most
    of the heap) frozen out of the cyclic garbage collector (:func:`gc.freeze`), unfrozen after, unless
    the caller had frozen some itself (then nothing is done). Each collection then visits the replay's
    own objects only, not the whole program again and again (about 3 % of the replay's instructions
    went to the collector; cycles made meanwhile are still collected)."""

    def __enter__(self) -> None:
        self.owned = gc.get_freeze_count() == 0
        if self.owned:
            gc.freeze()

    def __exit__(self, *exc: object) -> None:
        if self.owned:
            gc.unfreeze()


# --- one game round in full ----------------------------------------------------------------------


@dataclass(slots=True)
class RoundCollector:
    """Everything about one coup, gathered while the replay streams (``--coup ID``).

    The coup itself (bets accepted, cards, decisions) is folded into a
    :class:`~services.core.baccarat.coup.CoupRecord`, as audit folds it, but from the raw payloads: the
    view shows what was written, valid or not. Beside it, what each record adds for the reader: when it
    was written, a bet's currency and stake reservation, a decision's cell."""

    coup_id: str
    coup: CoupRecord = field(init=False)
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    round: dict[str, Any] = field(default_factory=dict)
    bet_notes: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per bet id: when it was accepted and in what currency, its stake reservation."""
    card_notes: list[dict[str, Any]] = field(default_factory=list)
    """Per card of :attr:`coup`, in order: its record's id and time."""
    decision_notes: list[dict[str, Any]] = field(default_factory=list)
    """Per decision of :attr:`coup`, in order: the cell of the rules that left it free, its record."""
    refused: list[dict[str, Any]] = field(default_factory=list)
    payouts: dict[str, dict[str, Any]] = field(default_factory=dict)
    findings: list[dict[str, Any]] = field(default_factory=list)
    event_ids: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.coup = CoupRecord("", self.coup_id)

    @property
    def found(self) -> bool:
        """Whether the log holds the coup at all."""
        return bool(self.round or self.coup.cards or self.coup.bets or self.bet_notes)

    def observe(self, env: Envelope) -> None:
        """Keep what concerns the coup."""
        p = env.payload
        if env.type == "TableOpened":
            self.tables[env.key] = dict(p)
            return
        bet_id = str(p.get("bet_id", ""))
        if p.get("coup_id") != self.coup_id and bet_id not in self.bet_notes:
            return
        self.event_ids.add(env.event_id)
        at = {"event_id": env.event_id, "occurred_at": env.occurred_at}
        handler = _COLLECT.get(env.type)
        if handler is not None:
            handler(self, env, at)

    def finding(self, item: Mapping[str, Any]) -> None:
        """Keep a finding that names the coup, one of its bets or one of its events."""
        subject = item.get("subject") or {}
        ids = {subject.get("coup_id"), subject.get("bet_id"), subject.get("event_id"),
               *(subject.get("event_ids") or [])}  # fmt: skip
        if self.coup_id in ids or ids & set(self.bet_notes) or ids & self.event_ids:
            self.findings.append(dict(item))

    def to_dict(self) -> dict[str, Any]:
        """The game round in full (stable key order)."""
        r = self.round
        table = self.tables.get(str(r.get("table_id") or ""), {})
        payouts = [self.payouts[b] for b in sorted(self.payouts)]
        bets = [{"bet_id": b, "account_id": w.account_id, "spot": w.spot, "stake_minor": w.stake_minor,
                 **self.bet_notes[b]} for b, w in sorted(self.coup.bets.items())]  # fmt: skip
        refused = [{**self.bet_notes.get(str(x["bet_id"]), {}), **x} for x in self.refused]
        stake = sum(int(w.stake_minor) for w in self.coup.bets.values())
        credit = sum(int(po.get("credit_minor", 0)) for po in payouts)
        totals = {
            "bets": len(bets), "stake_minor": stake, "credit_minor": credit,
            "win_minor": sum(int(po.get("win_minor", 0)) for po in payouts),
            "commission_minor": sum(int(po.get("commission_minor", 0)) for po in payouts),
            "house_result_minor": stake - credit,
        }  # fmt: skip
        notes = zip(self.coup.cards, self.card_notes, strict=True)
        cards = [{"n": n, "hand": h, "card": c, "shoe_position": pos, **note}
                 for n, ((h, c, pos), note) in enumerate(notes, 1)]  # fmt: skip
        made = zip(self.coup.decisions, self.decision_notes, strict=True)
        decisions = [{"hand": h, "choice": c, "decided_by": by, **note} for (h, c, by), note in made]
        out = {
            "coup_id": self.coup_id, "table_id": r.get("table_id"), "shoe_id": r.get("shoe_id"),
            "coup_number": r.get("coup_number"), "variant": r.get("variant") or table.get("variant"),
            "rules_version": r.get("rules_version") or table.get("rules_version"),
            "started_at": r.get("started_at"), "ended_at": r.get("ended_at"),
            "betting_opened": r.get("betting_opened"), "betting_closed": r.get("betting_closed"),
            "resolved": r.get("resolved"), "paytable": table.get("paytable"),
            "bets": bets, "refused_bets": refused,
            "cards": cards, "decisions": decisions, "hands": r.get("hands"),
            "outcome": r.get("outcome"), "natural": r.get("natural"), "recomputed": self._recomputed(table),
            "payouts": payouts, "totals": totals, "verdict": "findings" if self.findings else "clean",
            "findings": self.findings,
        }  # fmt: skip
        return {k: stable(v) for k, v in out.items()}

    def _recomputed(self, table: Mapping[str, Any]) -> dict[str, Any] | None:
        if "config" not in table:
            return None
        try:
            result = self.coup.replayed(TableConfig.from_dict(table["config"]))
        except DomainError as exc:
            return {"error": str(exc)}
        d = result.to_dict()
        return {"hands": d["hands"], "outcome": d["outcome"], "natural": d["natural"]}


def _raw(p: Mapping[str, Any], *names: str) -> list[Any]:
    """The fields ``names`` of a raw payload as written (``None`` where missing)."""
    return [p.get(n) for n in names]


def _c_opened(c: RoundCollector, env: Envelope, at: dict[str, Any]) -> None:
    c.round.update(table_id=env.key, shoe_id=env.payload.get("shoe_id"), betting_opened=at)


def _c_bet(c: RoundCollector, env: Envelope, at: dict[str, Any]) -> None:
    p = env.payload
    bet_id = str(p["bet_id"])
    if bet_id in c.coup.bets:  # the first record of a bet is the one shown
        return
    c.coup.bet(bet_id, *_raw(p, "account_id", "spot", "stake_minor"))
    c.bet_notes[bet_id] = {"currency": p.get("currency"), "accepted": at, **c.bet_notes.get(bet_id, {})}


def _c_refused(c: RoundCollector, env: Envelope, at: dict[str, Any]) -> None:
    keep = ("bet_id", "account_id", "spot", "stake_minor", "reason", "detail")
    c.refused.append({**{k: env.payload.get(k) for k in keep}, **at})


def _c_reserved(c: RoundCollector, env: Envelope, at: dict[str, Any]) -> None:
    p = env.payload
    bet = c.bet_notes.setdefault(str(p["bet_id"]), {})
    bet["balance_before_minor"], bet["balance_after_stake_minor"] = (
        p.get("balance_before_minor"),
        p.get("balance_after_minor"),
    )
    bet["stake_reserved"] = {**at, "postings": p.get("postings")}


def _c_closed(c: RoundCollector, env: Envelope, at: dict[str, Any]) -> None:
    c.round["betting_closed"] = {**at, "bet_ids": env.payload.get("bet_ids")}


def _c_card(c: RoundCollector, env: Envelope, at: dict[str, Any]) -> None:
    p = env.payload
    c.coup.card(*_raw(p, "hand", "card", "shoe_position"))
    c.card_notes.append(at)


def _c_decision(c: RoundCollector, env: Envelope, at: dict[str, Any]) -> None:
    p = env.payload
    c.coup.decision(*_raw(p, "hand", "choice", "decided_by"))
    c.decision_notes.append({"cell": p.get("cell"), **at})


def _c_resolved(c: RoundCollector, env: Envelope, at: dict[str, Any]) -> None:
    p = env.payload
    keep = ("table_id", "shoe_id", "coup_number", "variant", "rules_version", "hands", "outcome", "natural",
            "started_at", "ended_at")  # fmt: skip
    c.round.update({k: p.get(k) for k in keep})
    c.round["resolved"] = {**at, "bet_ids": p.get("bet_ids")}


def _c_payout(c: RoundCollector, env: Envelope, at: dict[str, Any]) -> None:
    p = env.payload
    po = c.payouts.setdefault(str(p["bet_id"]), {})
    if env.type == "PayoutIssued":
        keep = ("payout_id", "bet_id", "account_id", "spot", "stake_minor", "result", "win_minor",
                "commission_minor", "credit_minor", "postings")  # fmt: skip
        po.update({k: p.get(k) for k in keep}, issued=at)
    else:
        po.update(applied={**at, "balance_before_minor": p.get("balance_before_minor"),
                           "balance_after_minor": p.get("balance_after_minor")})  # fmt: skip


_COLLECT: dict[str, Callable[[RoundCollector, Envelope, dict[str, Any]], None]] = {
    "BettingOpened": _c_opened, "BetAccepted": _c_bet, "BetRefused": _c_refused,
    "StakeReserved": _c_reserved, "BettingClosed": _c_closed, "CardDealt": _c_card,
    "DecisionMade": _c_decision, "CoupResolved": _c_resolved, "PayoutIssued": _c_payout,
    "PayoutApplied": _c_payout,
}  # fmt: skip


# --- reading logs --------------------------------------------------------------------------------


def read_jsonl(path: Path, progress: Callable[[int], None] | None = None) -> Iterator[bytes]:
    """The records of a JSONL export, one per non-empty line, streamed (``progress`` gets bytes read)."""
    with path.open("rb") as fh:
        for line in fh:
            if progress is not None:
                progress(len(line))
            record = line.rstrip(b"\r\n")
            if record and not record.isspace():  # a blank line is no record
                yield record


_LOG_COLUMNS = frozenset({"offset", "topic", "key", "body"})


def open_readonly(path: Path) -> sqlite3.Connection:
    """A read-only connection to an embedded log (``SourceError`` when it is not one).

    Never writes to the file: ``mode=ro`` (no table creation, no WAL switch); a WAL-mode file with no
    ``-wal`` beside it (a log whose writer has closed) is opened ``immutable=1`` so that not even the
    ``-shm`` index is created next to it."""
    try:
        with path.open("rb") as fh:
            header = fh.read(100)
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc.strerror}") from None
    if not header.startswith(b"SQLite format 3\x00"):
        raise SourceError(f"{path} is not a SQLite file")
    quiet = len(header) > 18 and header[18] == 2 and not Path(f"{path}-wal").exists()
    uri = path.resolve().as_uri() + ("?immutable=1" if quiet else "?mode=ro")
    try:
        conn = sqlite3.connect(uri, uri=True)
        columns = {str(r[1]) for r in conn.execute("PRAGMA table_info(records)")}
    except sqlite3.DatabaseError as exc:
        raise SourceError(f"{path} cannot be read as SQLite: {exc}") from None
    if not columns >= _LOG_COLUMNS:
        names = sorted(str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
        conn.close()
        shown = f"an SQLite database of something else (tables: {', '.join(names[:5])})" if names else "empty"
        raise SourceError(f"{path} is not a casino-ledger log: {shown}")
    return conn


def read_db(path: Path, progress: Callable[[int], None] | None = None, page: int = 1000) -> Iterator[bytes]:
    """The records of an embedded SQLite log, in log order, streamed (``progress`` gets 1 per record).
    Read-only (:func:`open_readonly`): the file's bytes are unchanged."""
    conn = open_readonly(path)
    try:
        after = 0
        while True:
            rows = conn.execute(
                'SELECT "offset", body FROM records WHERE "offset" > ? ORDER BY "offset" LIMIT ?',
                (after, page),
            ).fetchall()
            for _offset, body in rows:
                if progress is not None:
                    progress(1)
                yield bytes(body)
            if len(rows) < page:
                return
            after = int(rows[-1][0])
    finally:
        conn.close()


def _db_count(path: Path) -> int:
    conn = open_readonly(path)
    try:
        return int(conn.execute("SELECT count(*) FROM records").fetchone()[0])
    finally:
        conn.close()


def export_main(args: argparse.Namespace) -> int:
    """``casino-ledger export --db PATH --out FILE``."""
    db = Path(args.db)
    if not db.exists():
        print(f"casino-ledger: error: no log at {db}", file=sys.stderr)
        return 2
    n = 0
    with Path(args.out).open("wb") as fh:
        for raw in read_db(db):
            fh.write(raw + b"\n")
            n += 1
    print(json.dumps({"exported": n, "out": str(args.out)}))
    return 0


def _scope_of(args: argparse.Namespace) -> Scope:
    tables = frozenset(args.table) if getattr(args, "table", None) else None
    since = iso_instant(args.since) if getattr(args, "since", None) else None
    until = iso_instant(args.until) if getattr(args, "until", None) else None
    return Scope(tables, since, until)


def replay_main(args: argparse.Namespace, now: Callable[[], datetime] | None = None) -> int:
    """``casino-ledger replay --db PATH | --jsonl FILE | --kafka HOST:PORT [options]``.

    Exit 0 clean, 1 findings or incomplete, 2 for a source or option that cannot be used (one line)."""
    try:
        return _replay_main(args, now or _clock)
    except SourceError as exc:
        print(f"casino-ledger: error: {exc}", file=sys.stderr)
        return 2


def _clock() -> datetime:
    """Now, or ``SOURCE_DATE_EPOCH`` (seconds) when set: a reproducible report for a reproducible input."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if epoch.isdigit():
        return datetime.fromtimestamp(int(epoch), UTC)
    return datetime.now(UTC)


def _replay_main(args: argparse.Namespace, now: Callable[[], datetime]) -> int:
    try:
        scope = _scope_of(args)
    except ValueError as exc:
        raise SourceError(f"--since/--until must be ISO 8601: {exc}") from None
    keys, key_source = public_keys_from(getattr(args, "keys", None), log=Path(args.db) if args.db else None)
    source = Path(args.db or args.jsonl) if (args.db or args.jsonl) else None
    if source is not None and not source.exists():
        raise SourceError(f"no {'log' if args.db else 'file'} at {source}")
    if args.db:
        open_readonly(Path(args.db)).close()  # a foreign file is an error before anything is read
    collector = RoundCollector(args.coup) if getattr(args, "coup", None) else None
    with _progress(args, source) as advance:
        if args.db:
            records: Iterable[bytes | str | Envelope] = read_db(Path(args.db), advance)
        elif args.jsonl:
            records = read_jsonl(Path(args.jsonl), advance)
        else:
            from services.runtime.kafka import topic_io as kafka_io  # noqa: PLC0415

            records = (r.value or b"" for r in kafka_io.iter_raw(args.kafka, list(topics.ALL_TOPICS)))
        report = replay(records, scope=scope, keys=keys, collector=collector)
    what = str(source) if source is not None else f"the topics at {args.kafka}"
    if report.records == 0:
        hint = "" if source is not None else " (check the topic prefix)"
        raise SourceError(f"{what} holds no records: nothing to replay{hint}")
    if not report.types:
        raise SourceError(f"{what} holds no casino-ledger event: not a log of this system")
    unknown = sorted((scope.tables or frozenset()) - set(report.tables_in_log))
    if unknown:
        raise SourceError(
            f"no table {', '.join(unknown)} in the log (tables: {', '.join(report.tables_in_log)})"
        )
    if collector is not None:
        return _coup_main(args, collector)
    if getattr(args, "html", None):
        from services.runtime.report_html import render_html  # noqa: PLC0415

        meta = report_meta(args, source, key_source, now())
        data = report.to_dict()
        Path(args.html).write_text(render_html(data, meta, table_odds(data)), encoding="utf-8")
        print(f"casino-ledger: report written to {args.html}", file=sys.stderr)
    if args.json:
        sys.stdout.write(report.to_json())
    else:
        print(render_text(report))
    return 0 if report.verdict == "clean" else 1


def _coup_main(args: argparse.Namespace, collector: RoundCollector) -> int:
    if not collector.found:
        raise SourceError(f"no coup {args.coup} in the log")
    view = collector.to_dict()
    if getattr(args, "html", None):
        from services.runtime.report_html import render_coup_html  # noqa: PLC0415

        Path(args.html).write_text(render_coup_html(view), encoding="utf-8")
        print(f"coup view written to {args.html}")
    elif args.json:
        print(json.dumps(view, indent=2, ensure_ascii=False))
    else:
        from services.runtime.textfit import fit  # noqa: PLC0415

        print(fit(render_coup_text(view)))  # at the terminal's width: a money figure is never cut
    return 1 if collector.findings else 0


@functools.lru_cache(maxsize=32)
def exact_outcomes(variant: str, decks: int) -> dict[str, float] | None:
    """Exact outcome probabilities of a variant's default table by full enumeration (``None`` where the
    variant has too many hands to enumerate); cached: a report computes each variant once."""
    from services.core.baccarat import odds  # noqa: PLC0415

    try:
        report = odds.odds_report(variant, decks)
    except DomainError:
        return None
    return {str(k): float(v["probability"]) for k, v in report["outcomes"].items()}


def table_odds(report: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Exact outcome probabilities per table of a JSON report, for its charts."""
    out = {}
    for t in report.get("tables") or []:
        if t.get("variant") and isinstance(t.get("decks"), int) and t.get("coups"):
            got = exact_outcomes(str(t["variant"]), int(t["decks"]))
            if got is not None:
                out[str(t["table_id"])] = got
    return out


def file_digest(path: Path) -> str:
    """SHA-256 (hex) of a file's bytes, read in chunks."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def tool_version() -> str:
    """This program's installed version."""
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    try:
        return version("casino-ledger")
    except PackageNotFoundError:
        return "unknown"


def report_meta(
    args: argparse.Namespace, source: Path | None, key_source: str, at: datetime
) -> dict[str, Any]:
    """What the human report says about itself: when (``at``, read by the caller), which tool, which
    source and its SHA-256, which keyring verified the checkpoints."""
    src: dict[str, str | None]
    if source is not None:
        kind = "SQLite log" if args.db else "JSONL export"
        src = {"kind": kind, "path": str(source), "sha256": file_digest(source)}
    else:
        src = {"kind": "Kafka topics", "path": str(args.kafka), "sha256": None}
    when = at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return {"generated_at": when, "tool_version": tool_version(), "source": src, "keyring": key_source}


class _progress:
    """A rich progress bar on stdout when it is a terminal; a no-op otherwise (pipes, tests, CI)."""

    def __init__(self, args: argparse.Namespace, source: Path | None) -> None:
        self.args, self.source = args, source
        self.bar: Any = None

    def __enter__(self) -> Callable[[int], None] | None:
        if self.source is None or not sys.stdout.isatty() or os.environ.get("CI"):
            return None
        from rich.progress import Progress  # noqa: PLC0415

        total = self.source.stat().st_size if self.args.jsonl else _db_count(self.source)
        self.bar = Progress(transient=True)
        self.bar.start()
        task = self.bar.add_task("replaying", total=total)
        pending = [0]

        def advance(n: int) -> None:
            pending[0] += n
            if pending[0] >= (1 << 16 if self.args.jsonl else 1000):
                self.bar.advance(task, pending[0])
                pending[0] = 0

        return advance

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()


def render_text(report: Report) -> str:
    """The human summary of a replay: verdict, root findings with their consequences, open items."""
    d = report.to_dict()
    cp = d["checkpoints"]
    signed = ", ".join(f"{k} ({n})" for k, n in sorted(cp.get("signed_by", {}).items())) or "none"
    lines = [
        f"replayed {report.records} records, {report.coups} coups",
        f"checkpoints verified: {cp.get('verified', 0)}; signed by: {signed}",
        f"findings: {d['root_findings']} root cause(s), {d['findings_total']} finding(s) in all; "
        f"open items: {len(d['open_items'])}",
    ]
    for g in d["groups"][:50]:
        root = g["root"]
        lines.append(f"  * {root.get('reason')} at {root.get('table_id')}: {root.get('explanation')}")
        lines.append(f"      events: {', '.join(g['event_ids'][:6])}")
        if root.get("expected") is not None or root.get("recorded") is not None:
            lines.append(f"      expected {json.dumps(root.get('expected'), sort_keys=True)}"
                         f" / recorded {json.dumps(root.get('recorded'), sort_keys=True)}")  # fmt: skip
        if root.get("detail"):
            lines.append(f"      {root['detail']}")
        for c in g["consequences"][:10]:
            lines.append(
                f"      - consequence: {c.get('reason')} {json.dumps(c.get('subject'), sort_keys=True)}"
            )
        if len(g["consequences"]) > 10:
            lines.append(f"      - and {len(g['consequences']) - 10} more consequences")
    for i in d["open_items"][:50]:
        lines.append(f"  - open: {json.dumps(i, sort_keys=True)}")
    for reason, entry in sorted(d["refused"].items()):
        lines.append(f"refused records ({reason}): {entry['count']} — attempts turned away, not a breach")
    if d["verdict"] == "incomplete" and d["ends_at"]:
        e = d["ends_at"]
        lines.append(
            f"the log stops at record {e['record']}: {e['type']} {e['event_id']} ({e['occurred_at']})"
        )
    lines.append(f"verdict: {d['verdict']}")
    lines.append(f"digest: {report.digest}")
    return "\n".join(lines)


def _money(minor: Any) -> str:
    return f"{int(minor) / 100:,.2f}" if isinstance(minor, int) else "-"


def render_coup_text(view: Mapping[str, Any]) -> str:
    """One game round, readable: bets, cards, decisions, result (recorded and recomputed), payouts."""
    lines = [
        f"coup {view.get('coup_id')} — table {view.get('table_id')}, shoe {view.get('shoe_id')}, "
        f"coup #{view.get('coup_number')}",
        f"variant {view.get('variant')} (rules {view.get('rules_version')}), "
        f"{view.get('started_at')} → {view.get('ended_at')}",
        "bets:",
    ]
    for b in view.get("bets") or []:
        lines.append(
            f"  {b.get('bet_id')}  {b.get('account_id')}  {b.get('spot')}  {_money(b.get('stake_minor'))}"
        )
    lines.append("cards:")
    for c in view.get("cards") or []:
        lines.append(
            f"  {c.get('n')}. {c.get('hand')}: {c.get('card')} (shoe position {c.get('shoe_position')})"
        )
    for dec in view.get("decisions") or []:
        lines.append(f"  decision: {dec.get('hand')} {dec.get('choice')} (by {dec.get('decided_by')})")
    hands = view.get("hands") or {}
    shown = ", ".join(
        f"{h} {' '.join(v.get('cards', []))} = {v.get('total')}" for h, v in sorted(hands.items())
    )
    lines.append(f"result: {view.get('outcome')}{' (natural)' if view.get('natural') else ''} — {shown}")
    again = view.get("recomputed") or {}
    agree = again.get("outcome") == view.get("outcome") and again.get("hands") == view.get("hands")
    lines.append(
        f"recomputed from the recorded cards: {again.get('outcome')} ({'agrees' if agree else 'DIFFERS'})"
    )
    lines.append("payouts:")
    for po in view.get("payouts") or []:
        lines.append(f"  {po.get('bet_id')}  {po.get('result')}  stake {_money(po.get('stake_minor'))}  "
                     f"win {_money(po.get('win_minor'))}  commission {_money(po.get('commission_minor'))}  "
                     f"credit {_money(po.get('credit_minor'))}")  # fmt: skip
    t = view.get("totals") or {}
    lines.append(
        f"totals: staked {_money(t.get('stake_minor'))}, paid back {_money(t.get('credit_minor'))}, "
        f"commission {_money(t.get('commission_minor'))}, house {_money(t.get('house_result_minor'))}"
    )
    for f in view.get("findings") or []:
        lines.append(f"finding: {f.get('reason')} {f.get('detail') or ''}")
    lines.append(f"verdict: {view.get('verdict')}")
    return "\n".join(lines)
