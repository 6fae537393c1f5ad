"""One game round in full (``replay --coup``): the coup folded into the core coup record, with each
record's time and the payloads as written."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from services.audit.replay.report import stable
from services.core.baccarat import TableConfig
from services.core.baccarat.coup import CoupRecord
from services.core.envelope import Envelope
from services.core.errors import DomainError


@dataclass(slots=True)
class CoupCollector:
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


def _c_opened(c: CoupCollector, env: Envelope, at: dict[str, Any]) -> None:
    c.round.update(table_id=env.key, shoe_id=env.payload.get("shoe_id"), betting_opened=at)


def _c_bet(c: CoupCollector, env: Envelope, at: dict[str, Any]) -> None:
    p = env.payload
    bet_id = str(p["bet_id"])
    if bet_id in c.coup.bets:  # the first record of a bet is the one shown
        return
    c.coup.bet(bet_id, *_raw(p, "account_id", "spot", "stake_minor"))
    c.bet_notes[bet_id] = {"currency": p.get("currency"), "accepted": at, **c.bet_notes.get(bet_id, {})}


def _c_refused(c: CoupCollector, env: Envelope, at: dict[str, Any]) -> None:
    keep = ("bet_id", "account_id", "spot", "stake_minor", "reason", "detail")
    c.refused.append({**{k: env.payload.get(k) for k in keep}, **at})


def _c_reserved(c: CoupCollector, env: Envelope, at: dict[str, Any]) -> None:
    p = env.payload
    bet = c.bet_notes.setdefault(str(p["bet_id"]), {})
    bet["balance_before_minor"], bet["balance_after_stake_minor"] = (
        p.get("balance_before_minor"),
        p.get("balance_after_minor"),
    )
    bet["stake_reserved"] = {**at, "postings": p.get("postings")}


def _c_closed(c: CoupCollector, env: Envelope, at: dict[str, Any]) -> None:
    c.round["betting_closed"] = {**at, "bet_ids": env.payload.get("bet_ids")}


def _c_card(c: CoupCollector, env: Envelope, at: dict[str, Any]) -> None:
    p = env.payload
    c.coup.card(*_raw(p, "hand", "card", "shoe_position"))
    c.card_notes.append(at)


def _c_decision(c: CoupCollector, env: Envelope, at: dict[str, Any]) -> None:
    p = env.payload
    c.coup.decision(*_raw(p, "hand", "choice", "decided_by"))
    c.decision_notes.append({"cell": p.get("cell"), **at})


def _c_resolved(c: CoupCollector, env: Envelope, at: dict[str, Any]) -> None:
    p = env.payload
    keep = ("table_id", "shoe_id", "coup_number", "variant", "rules_version", "hands", "outcome", "natural",
            "started_at", "ended_at")  # fmt: skip
    c.round.update({k: p.get(k) for k in keep})
    c.round["resolved"] = {**at, "bet_ids": p.get("bet_ids")}


def _c_payout(c: CoupCollector, env: Envelope, at: dict[str, Any]) -> None:
    p = env.payload
    po = c.payouts.setdefault(str(p["bet_id"]), {})
    if env.type == "PayoutIssued":
        keep = ("payout_id", "bet_id", "account_id", "spot", "stake_minor", "result", "win_minor",
                "commission_minor", "credit_minor", "postings")  # fmt: skip
        po.update({k: p.get(k) for k in keep}, issued=at)
    else:
        po.update(applied={**at, "balance_before_minor": p.get("balance_before_minor"),
                           "balance_after_minor": p.get("balance_after_minor")})  # fmt: skip


_COLLECT: dict[str, Callable[[CoupCollector, Envelope, dict[str, Any]], None]] = {
    "BettingOpened": _c_opened, "BetAccepted": _c_bet, "BetRefused": _c_refused,
    "StakeReserved": _c_reserved, "BettingClosed": _c_closed, "CardDealt": _c_card,
    "DecisionMade": _c_decision, "CoupResolved": _c_resolved, "PayoutIssued": _c_payout,
    "PayoutApplied": _c_payout,
}  # fmt: skip
