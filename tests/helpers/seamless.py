"""What every seamless-wallet test checks once the faults stop (issue #14, "done when"), and a model
operator for the pure tests."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from services.core.envelope import Envelope, parse_record
from services.integrations.seamless.reconcile import ours_from, reconcile


def envelopes(records: Iterable[bytes | Envelope]) -> list[Envelope]:
    """Records as envelopes."""
    return [r if isinstance(r, Envelope) else parse_record(r) for r in records]


def expected_balances(records: list[Envelope], initial: Mapping[str, int]) -> dict[str, int]:
    """Each wallet's balance by the rules: funded, less each stake the table got, plus each credit and
    refund settlement issued (from the requests, not from the adapter's own events)."""
    out = dict(initial)
    placed = {e.payload["bet_id"] for e in records if e.type == "BetPlaced"}
    for e in records:
        p = e.payload
        if e.type == "BetPlaced":
            out[p["account_id"]] = out.get(p["account_id"], 0) - p["stake_minor"]
        elif e.type == "PayoutIssued":
            out[p["account_id"]] = out.get(p["account_id"], 0) + p["credit_minor"]
        elif e.type == "BetRefundDue" and p["bet_id"] in placed:
            out[p["account_id"]] = out.get(p["account_id"], 0) + p["stake_minor"]
    return out


def check_done(
    records: Iterable[bytes | Envelope], rows: list[dict[str, Any]], balances: Mapping[str, int],
    initial: Mapping[str, int],
) -> None:  # fmt: skip
    """The operator's balances equal what the rules say to the minor unit; every debit has exactly one
    credit or rollback; no transaction is applied twice; reconcile reports nothing."""
    recs = envelopes(records)
    want = expected_balances(recs, initial)
    assert {a: balances.get(a) for a in want} == want
    ids = Counter(r["transaction_id"] for r in rows)
    assert not [t for t, n in ids.items() if n > 1], "a transaction applied twice"
    closing = Counter(r["bet_id"] for r in rows if r["kind"] != "debit")
    debits = [r["bet_id"] for r in rows if r["kind"] == "debit"]
    assert all(closing[b] == 1 for b in debits), "a debit without exactly one credit or rollback"
    diffs = reconcile(ours_from(recs), rows)
    assert diffs == [], diffs[:5]
    placed = Counter(e.payload["bet_id"] for e in recs if e.type == "BetPlaced")
    assert set(placed.values()) <= {1}, "a bet reached the table twice"
    debited = {r["bet_id"] for r in rows if r["kind"] == "debit"}
    assert set(placed) <= debited, "a bet reached the table without an operator debit"


@dataclass(slots=True)
class ModelOperator:
    """An operator wallet as a dict: each transaction id applied at most once; rollbacks of unseen
    debits cancel them. ``apply`` returns the answer body (what the HTTP wallet would send)."""

    balances: dict[str, int]
    rows: list[dict[str, Any]] = field(default_factory=list)
    seen: dict[str, int] = field(default_factory=dict)
    cancelled: set[str] = field(default_factory=set)

    def apply(self, p: Mapping[str, Any], *, insufficient: bool = False) -> dict[str, Any]:
        """Apply one call (a ``SeamlessCallRequested`` payload)."""
        tx, account, kind = p["transaction_id"], p["account_id"], p["call"]
        if tx in self.seen:
            return {"status": "duplicate", "balance_minor": self.seen[tx]}
        if kind == "debit" and tx in self.cancelled:
            return {"status": "cancelled", "balance_minor": self.balances[account]}
        if account not in self.balances:
            return {"status": "unknown_account", "balance_minor": None}
        balance, amount = self.balances[account], p["amount_minor"]
        if kind == "debit" and (insufficient or amount > balance):
            return {"status": "insufficient_funds", "balance_minor": balance}
        if kind == "rollback":
            ref = p["reference_transaction_id"]
            debit = next((r for r in self.rows if r["transaction_id"] == ref), None)
            amount = debit["amount_minor"] if debit else 0
            if debit is None:
                self.cancelled.add(ref)
        after = balance - amount if kind == "debit" else balance + amount
        self.balances[account] = after
        self.seen[tx] = after
        self.rows.append({"transaction_id": tx, "kind": kind, "account_id": account, "bet_id": p["bet_id"],
                          "amount_minor": amount, "round_id": p["round_id"], "currency": p["currency"],
                          "reference_transaction_id": p.get("reference_transaction_id"),
                          "balance_after_minor": after})  # fmt: skip
        return {"status": "ok", "balance_minor": after}
