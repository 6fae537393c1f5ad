"""The log's audit checkpoints against the replay's own: signatures, content, cadence, alerts claimed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from services.audit.replay.report import entry, stable
from services.core.envelope import Envelope
from services.core.reasons import (
    FindingReason,
)
from services.core.signing import verify


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
    valid: set[str] = field(default_factory=set)
    """Event ids of the recorded checkpoints whose signature verifies: only they count as verified."""

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
            self.valid.add(env.event_id)
            self.signed_by[str(p["key_id"])] = self.signed_by.get(str(p["key_id"]), 0) + 1
            tables = self.signed_tables.setdefault(str(p["key_id"]), {})
            tables[table] = tables.get(table, 0) + 1
        else:
            detail = f"{why}: the checkpoint does not verify under key id {p.get('key_id')!r}"
            reason = FindingReason.CHECKPOINT_SIGNATURE_INVALID
            out.append(entry(reason, table, subject, None, p.get("signature"), detail=detail))
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
            self.verified += event_id in self.valid
            return []
        subject = {"event_id": event_id, "table_id": table, "rounds": want["rounds"], "fields": diff}
        detail = "the log no longer holds what audit checkpointed" + (
            ": rewritten rounds or chain" if set(diff) - {"findings"} else ": edited after audit ran"
        )
        expected, recorded = {f: want.get(f) for f in diff}, {f: got.get(f) for f in diff}
        return [entry(FindingReason.CHECKPOINT_MISMATCH, table, subject, expected, recorded, detail=detail)]

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
                out.append(entry(FindingReason.CHECKPOINT_MISSING, table, subject, digest, detail=detail))
            for rounds, (got, event_id) in gots[len(wants) :]:
                subject = {"event_id": event_id, "table_id": table, "rounds": rounds, "fields": ["rounds"]}
                detail = "a checkpoint for rounds the replay never completed at this table"
                digest = got.get("table_digest")
                reason = FindingReason.CHECKPOINT_MISMATCH
                out.append(entry(reason, table, subject, None, digest, detail=detail))
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
            out.append(entry(FindingReason.CHECKPOINT_MISMATCH, table, subject, {"alerts": held},
                             {"alerts": {"count": count, "head": head}}, detail=detail))  # fmt: skip
        return out

    def to_dict(self) -> dict[str, Any]:
        """The JSON summary."""
        return {"verified": self.verified, "signed_by": dict(sorted(self.signed_by.items())),
                "signed_tables": stable(self.signed_tables)}  # fmt: skip
