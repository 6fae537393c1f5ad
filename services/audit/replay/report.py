"""The replay's report and its findings grouped by root cause."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from services.audit.replay.scope import Scope
from services.core.reasons import (
    ROOT_PRIORITY,
    FindingReason,
    Reason,
    ReplayReason,
    Severity,
)

MAX_FINDINGS_LISTED = 10_000
"""Findings listed in a report; more are counted (``findings_total``), not listed."""


CLEAN_KEYS_NOT_SUPPLIED = "clean (keys not supplied independently)"
"""The verdict of a log that agrees with every check, verified with a keyring the regulator did not
supply (one found beside the log, or the public demo key): anyone who could write the log could have
written that keyring too, so it proves nothing about who signed (docs/trust.md)."""


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
    unproven: bool = False
    """No signed tree head verifies: nothing in the log is proven, so it is never ``clean``."""
    keys_supplied: bool = True
    """The public keyring came from the regulator (``--keys``, ``CASINO_PUBLIC_KEYRING``), not from beside
    the log or the source code: without it a ``clean`` is :data:`CLEAN_KEYS_NOT_SUPPLIED`."""
    attestation: dict[str, Any] = field(default_factory=dict)
    """What the writers' signed heads cover (:meth:`services.audit.replay.attested.Attested.to_dict`):
    its ``incomplete`` lists why the log cannot be called complete and authentic."""

    @property
    def clean(self) -> bool:
        """No finding, nothing left open, a signed tree head verified and the end sealed by the writers'
        signed heads (whoever supplied the keys: :attr:`verdict` says that)."""
        return (
            not self.findings_total
            and not self.open_items
            and not self.unproven
            and not self.attestation.get("incomplete")
        )

    @property
    def verdict(self) -> str:
        """``findings`` when anything disagrees; else ``incomplete`` when the log stops with coups open
        or accepted bets unpaid, or no signed tree head verifies, or its end is not sealed by signed
        heads (an unattested tail, no valid signature); else ``clean``, qualified
        (:data:`CLEAN_KEYS_NOT_SUPPLIED`) when the keys were not supplied independently. Refused and
        unattested records (an outsider's) are neither."""
        if self.findings_total:
            return "findings"
        if self.open_items or self.unproven or self.attestation.get("incomplete"):
            return "incomplete"
        return "clean" if self.keys_supplied else CLEAN_KEYS_NOT_SUPPLIED

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
            "attestation": stable(self.attestation),
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
        "Re-running the rules on the recorded cards and decisions gives another result than the one recorded."
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
    ReplayReason.ATTESTED_HEAD_MISSING: (
        "A writer signed a head of this chain that the log no longer reaches: signed records were deleted or"
        " changed."
    ),
    ReplayReason.CAUSE_MISSING: "An attested record names a cause the log does not hold.",
    FindingReason.HASH_MISMATCH: (
        "The record was changed after it was written: its hash no longer matches its content."
    ),
    FindingReason.CHECKPOINT_SIGNATURE_INVALID: (
        "A checkpoint does not verify under the public keyring: not written by audit's key, or altered."
    ),
    FindingReason.CHECKPOINT_MISSING: "A checkpoint the cadence calls for is not in the log.",
    FindingReason.CHECKPOINT_MISMATCH: "The log no longer holds what audit signed at the time.",
    ReplayReason.TREE_HEAD_INVALID: "A signed tree head's root is not the tree of the chain heads it lists.",
    ReplayReason.CHAIN_DELETED: "A chain that audit's signed tree head covers is gone from the log.",
    ReplayReason.CHAIN_CUT: "A chain ends before the head a signed tree head claims: its tail was deleted.",
    ReplayReason.CHAIN_REWRITTEN: "The record under a head audit signed was replaced: history rewritten.",
    ReplayReason.CHAIN_NOT_IN_TREE_HEAD: "A chain none of audit's signed tree heads covers: spliced in.",
    ReplayReason.HEADS_NOT_EXTENDED: (
        "The log does not extend the tree head pinned with --expect: truncated, rolled back or forked."
    ),
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


def entry(
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
