"""Per-table and per-shoe summaries of a replay (handle, win, hold, commission, outcomes)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from services.audit.processor import AuditState
from services.audit.replay.scope import Scope
from services.core import figures
from services.core.envelope import Envelope
from services.core.reasons import (
    FindingReason,
)


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
                "table_id": table_id, "variant": None, "rules_version": None,
                **dict.fromkeys(figures.COUNTERS, 0), "findings": 0, "rounds_audited": 0,
                "table_digest": None, **self.table_meta.get(table_id, {}),
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
        add = figures.of_record(env.topic, kind, p) if kind in figures.COUNTED else None
        if add is not None:  # the figures' one definition (services.core.figures)
            row = self.table(table_id)
            for name, amount in add.counted():
                row[name] += amount
        if kind == "CardDealt":
            self.shoe(str(p["shoe_id"]), table_id)["cards_dealt"] += 1
        elif kind == "CoupResolved":
            self.shoe(str(p["shoe_id"]), table_id)["coups"] += 1
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
            total = figures.Figures(*(row[name] for name in figures.COUNTERS))
            row["win_minor"] = row["house_minor"] = total.win_minor  # house_minor: the name reports read
            row["hold_bps"] = total.hold_bps
            row["rounds_audited"] = state.rounds_done.get(table_id, 0)
            digest = state.digests.get(table_id)
            row["table_digest"] = digest.value() if digest else None


_SUMMARISED = frozenset({"TableOpened", "ShoeOpened", "ShoeClosed", "BetAccepted", "BetRefused", "CardDealt",
                         "CoupResolved", "PayoutIssued"})  # fmt: skip
"""The types :meth:`Summaries.observe` counts or takes metadata from."""


def _shoe_of_coup(coup_id: Any) -> str | None:
    parts = str(coup_id).split("/") if coup_id else []
    return parts[1] if len(parts) == 3 else None
