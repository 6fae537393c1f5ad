"""Every wallet movement's record, built in one place: settlement's wallet stage
(:mod:`services.settlement.wallet_stage`) and the seamless adapter (:mod:`services.core.seamless`) write the
same payloads from the same functions. The postings come from :mod:`services.core.ledger`, the transfer
ids from :mod:`services.core.boundary`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from services.core.ledger import deposit_rows, refund_rows, stake_rows, withdraw_rows
from services.core.values import immutable

Payload = dict[str, Any]


@immutable  # built once per transfer, on the wallet stage's path: no frozen __setattr__
class Moved:
    """What every transfer record carries: its id, the wallet, the amount, and the balance around it."""

    transfer_id: str
    account_id: str
    amount_minor: int
    currency: str
    before: int
    after: int

    def head(self) -> Payload:
        """The record's first fields, in the order of the transfer models."""
        return {"transfer_id": self.transfer_id, "account_id": self.account_id,
                "amount_minor": self.amount_minor, "currency": self.currency}  # fmt: skip

    def moving(self, rows: Iterable[tuple[str, int]]) -> Payload:
        """The head, the balanced postings ``rows`` and the balances before and after."""
        return {**self.head(), "postings": postings(rows), "balance_before_minor": self.before,
                "balance_after_minor": self.after}  # fmt: skip


def postings(rows: Iterable[tuple[str, int]]) -> list[Payload]:
    """``(account, amount_minor)`` ledger rows as a record's postings."""
    return [{"account": a, "amount_minor": m} for a, m in rows]


def deposited(m: Moved) -> Payload:
    """``FundsDeposited``: the cage → the wallet."""
    return m.moving(deposit_rows(m.account_id, m.currency, m.amount_minor))


def withdrawn(m: Moved) -> Payload:
    """``FundsWithdrawn``: the wallet → the cage."""
    return m.moving(withdraw_rows(m.account_id, m.currency, m.amount_minor))


def stake_reserved(m: Moved, *, escrow: str, bet_id: str, table_id: str, coup_id: Any, spot: Any) -> Payload:
    """``StakeReserved``: a bet's stake from the wallet into the table's escrow."""
    return {**m.moving(stake_rows(m.account_id, escrow, m.amount_minor)), "bet_id": bet_id,
            "table_id": table_id, "coup_id": coup_id, "spot": spot}  # fmt: skip


def stake_refunded(m: Moved, *, escrow: str, bet_id: str, table_id: str, reason: Any) -> Payload:
    """``StakeRefunded``: a refused bet's stake from escrow back to the wallet."""
    return {**m.moving(refund_rows(escrow, m.account_id, m.amount_minor)), "bet_id": bet_id,
            "table_id": table_id, "reason": reason}  # fmt: skip


def payout_applied(m: Moved, rows: list[Payload], *, bet_id: str, table_id: str, coup_id: Any,
                   payout_id: str, result: Any) -> Payload:  # fmt: skip
    """``PayoutApplied``: a bet's payout, its postings as the payout stage computed them (``rows``)."""
    return {**m.head(), "postings": rows, "balance_before_minor": m.before, "balance_after_minor": m.after,
            "bet_id": bet_id, "table_id": table_id, "coup_id": coup_id, "payout_id": payout_id,
            "result": result}  # fmt: skip


def balance_synced(m: Moved, *, against: str, diff: int, transaction_id: str) -> Payload:
    """``OperatorBalanceSynced``: the operator's balance was ``diff`` from ours; the difference is posted
    against ``against`` (the operator's account in that currency)."""
    return {**m.moving(((against, -diff), (m.account_id, diff))), "transaction_id": transaction_id}
