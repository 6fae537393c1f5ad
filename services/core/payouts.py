"""Turning graded bets into balanced postings.

The default flow (house-banked games): the stake leaves the table escrow; the wallet gets back
``credit_minor``; the commission goes to the commission account; the house bankroll pays the win (or
keeps the stake). For every bet the postings sum to zero.
"""

from __future__ import annotations

import functools

from services.core.baccarat.engine import Accounts, CoupResult, Payout, TableConfig, Variant, Wager
from services.core.money import Settlement, settle


@functools.lru_cache(maxsize=4096)
def table_accounts(table_id: str) -> Accounts:
    """The ledger accounts of table ``table_id`` (names are part of the contract, DESIGN §3)."""
    return Accounts(
        escrow=f"table:{table_id}:escrow",
        house=f"table:{table_id}:house",
        commission=f"table:{table_id}:commission",
        bank=f"table:{table_id}:bank",
    )


def cage_account(currency: str) -> str:
    """The cashier's cage, the other side of deposits and withdrawals."""
    return f"cage:{currency}"


def postings_for(
    settlement: Settlement, wallet: str, counterparty: str, accounts: Accounts
) -> tuple[tuple[str, int], ...]:
    """Balanced postings for one settled bet against ``counterparty`` (house or bank).

    escrow −stake; wallet +credit; commission +commission; counterparty the balance
    (``stake − credit − commission``: positive when it wins the stake, negative when it pays).
    """
    stake, credit, commission = settlement.stake_minor, settlement.credit_minor, settlement.commission_minor
    rows: list[tuple[str, int]] = [(accounts.escrow, -stake)]
    if credit:
        rows.append((wallet, credit))
    if commission:
        rows.append((accounts.commission, commission))
    balance = stake - credit - commission
    if balance:
        rows.append((counterparty, balance))
    return tuple(rows)


def payout_of(wager: Wager, settlement: Settlement, postings: tuple[tuple[str, int], ...]) -> Payout:
    """Assemble a :class:`Payout` record."""
    return Payout(
        bet_id=wager.bet_id,
        account_id=wager.account_id,
        spot=wager.spot,
        stake_minor=wager.stake_minor,
        result=settlement.result,
        win_minor=settlement.win_minor,
        commission_minor=settlement.commission_minor,
        credit_minor=settlement.credit_minor,
        postings=postings,
    )


def house_banked(
    variant: Variant, result: CoupResult, wager: Wager, config: TableConfig, accounts: Accounts
) -> Payout:
    """Grade ``wager``, settle it with the table's rounding, post it against the house."""
    s = settle(wager.stake_minor, variant.grade(result, wager.spot, config), config.commission_rounding)
    return payout_of(wager, s, postings_for(s, wager.account_id, accounts.house, accounts))
