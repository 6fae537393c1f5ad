"""The ledger: integer money, the accounts it moves between, and each bet's payout as balanced postings.

Everything about money lives here, once, and imports nothing of the games: a variant grades a bet
(:class:`Grade`), the ledger turns the grade into minor units (:func:`amounts_of`) and the minor
units into postings (:func:`postings_for`, :func:`payout_of`, :func:`payout_against`).

**Money.** Integer money: amounts in minor units, and the one named function per rounding rule.

No float ever touches an amount. A win is ``stake × num ÷ den`` of the spot's exact ratio; where that
is not a whole number of minor units (a Super 6 banker win of 1:2 on an odd stake) it is rounded by
:func:`win_minor`, always down: the house never pays a fraction it does not hold. Commission is
``base × bps ÷ 10 000`` rounded by the table's named ``commission_rounding``:

* ``floor`` (the default): towards zero, in the player's favour — 5 % of 15 is 0.75 → 0;
* ``half_up``: to nearest, halves up — 0.75 → 1, 0.5 → 1, 0.25 → 0;
* ``ceil``: up, in the house's favour — 0.25 → 1.

``credit_minor`` is everything that goes back to the player: stake plus win less commission on a win,
the stake on a push or refund, nothing on a loss.

**Postings.** The default flow (house-banked games): the stake leaves the table escrow; the wallet
gets back ``credit_minor``; the commission goes to the commission account; the house bankroll pays the
win (or keeps the stake). For every bet the postings sum to zero.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from services.core.errors import DomainError, Reason
from services.core.values import immutable

BPS: Final = 10_000


def _floor(num: int, den: int) -> int:
    return num // den


def _half_up(num: int, den: int) -> int:
    return (2 * num + den) // (2 * den)


def _ceil(num: int, den: int) -> int:
    return -((-num) // den)


ROUNDINGS: Final[dict[str, Callable[[int, int], int]]] = {
    "floor": _floor,
    "half_up": _half_up,
    "ceil": _ceil,
}
"""Every commission rounding rule a table may name, by name."""


def round_ratio(num: int, den: int, rounding: str) -> int:
    """``num ÷ den`` (both ≥ 0) rounded to an integer by the rule called ``rounding``."""
    try:
        return ROUNDINGS[rounding](num, den)
    except KeyError:
        known = list(ROUNDINGS)
        raise DomainError(Reason.BAD_CONFIG, f"unknown rounding {rounding!r} (known: {known})") from None


def win_minor(stake_minor: int, ratio: tuple[int, int]) -> int:
    """The win on ``stake_minor`` at ``ratio`` (num, den), rounded down to the minor unit."""
    num, den = ratio
    return stake_minor * num // den


def commission_minor(base_minor: int, bps: int, rounding: str = "floor") -> int:
    """Commission of ``bps`` basis points on ``base_minor``, rounded by ``rounding``."""
    return round_ratio(base_minor * bps, BPS, rounding)


@immutable
class Amounts:
    """One bet's money: what it won, what commission it paid, what goes back to the wallet."""

    result: Literal["win", "lose", "push", "refund"]
    stake_minor: int
    win_minor: int
    commission_minor: int
    credit_minor: int


def amounts_of(stake_minor: int, grade: Grade, rounding: str = "floor") -> Amounts:
    """Turn a bet's :class:`Grade` into minor units. ``stake_minor`` must be positive."""
    if stake_minor <= 0:
        raise DomainError(Reason.BAD_CONFIG, f"a stake is positive, not {stake_minor}")
    if grade.result == "lose":
        return Amounts("lose", stake_minor, 0, 0, 0)
    if grade.result == "push":
        return Amounts("push", stake_minor, 0, 0, stake_minor)
    win = win_minor(stake_minor, grade.win_ratio)
    base = win if grade.commission_base == "win" else stake_minor
    commission = commission_minor(base, grade.commission_bps, rounding)
    return Amounts("win", stake_minor, win, commission, stake_minor + win - commission)


def refund(stake_minor: int) -> Amounts:
    """A refused or voided bet: the stake goes back whole."""
    return Amounts("refund", stake_minor, 0, 0, stake_minor)


# --- grades, wagers, accounts, payouts --------------------------------------------------------------


@immutable
class Grade:
    """How one bet on one spot fares in a resolved coup, per unit staked.

    ``win_ratio`` is the win as an exact fraction of the stake (``(1, 1)`` even money, ``(8, 1)`` a tie
    at 8:1, ``(1, 2)`` a Super 6 banker win); ``commission_bps`` is levied on the win (or on the stake
    when ``commission_base`` is ``"stake"``). A push returns the stake; a loss returns nothing.
    """

    result: Literal["win", "lose", "push"]
    win_ratio: tuple[int, int] = (0, 1)
    commission_bps: int = 0
    commission_base: Literal["win", "stake"] = "win"


LOSE = Grade("lose")
PUSH = Grade("push")


@immutable
class Wager:
    """An accepted bet as the engine sees it: who staked how much on which spot."""

    bet_id: str
    account_id: str
    spot: str
    stake_minor: int


@dataclass(frozen=True, slots=True)
class Accounts:
    """The ledger accounts of one table.

    ``escrow`` holds accepted stakes until the coup is settled; ``house`` is the house bankroll at
    the table (the counterparty of every bet in a house-banked game); ``commission`` collects
    commission and levies; ``bank`` is, in a player-banked game, the account of whoever holds the
    bank this coup (the counterparty of the punters), else ``None``.
    """

    escrow: str
    house: str
    commission: str
    bank: str | None = None


@immutable
class Payout:
    """One bet's settlement: the money and the balanced postings that move it.

    ``postings`` are ``(account, amount_minor)`` pairs summing to zero; the stake leaves ``escrow``.
    """

    bet_id: str
    account_id: str
    spot: str
    stake_minor: int
    result: Literal["win", "lose", "push", "refund"]
    win_minor: int
    commission_minor: int
    credit_minor: int
    postings: tuple[tuple[str, int], ...]


@functools.lru_cache(maxsize=4096)
def table_accounts(table_id: str) -> Accounts:
    """The ledger accounts of table ``table_id`` (names are part of the contract, docs/event-contract.md)."""
    return Accounts(
        escrow=f"table:{table_id}:escrow",
        house=f"table:{table_id}:house",
        commission=f"table:{table_id}:commission",
        bank=f"table:{table_id}:bank",
    )


def cage_account(currency: str) -> str:
    """The cashier's cage, the other side of deposits and withdrawals."""
    return f"cage:{currency}"


Rows = tuple[tuple[str, int], ...]
"""Postings as ``(account, amount_minor)`` pairs summing to zero."""


def stake_rows(account: str, escrow: str, amount_minor: int) -> Rows:
    """A stake held: the wallet pays ``amount_minor`` into the table's escrow (``StakeReserved``)."""
    return ((account, -amount_minor), (escrow, amount_minor))


def refund_rows(escrow: str, account: str, amount_minor: int) -> Rows:
    """A refused bet's stake back: escrow → wallet (``StakeRefunded``)."""
    return ((escrow, -amount_minor), (account, amount_minor))


def deposit_rows(account: str, currency: str, amount_minor: int) -> Rows:
    """A deposit: the cage → the wallet (``FundsDeposited``)."""
    return ((cage_account(currency), -amount_minor), (account, amount_minor))


def withdraw_rows(account: str, currency: str, amount_minor: int) -> Rows:
    """A withdrawal: the wallet → the cage (``FundsWithdrawn``)."""
    return ((account, -amount_minor), (cage_account(currency), amount_minor))


def postings_for(
    settlement: Amounts, wallet: str, counterparty: str, accounts: Accounts
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


def payout_of(wager: Wager, settlement: Amounts, postings: tuple[tuple[str, int], ...]) -> Payout:
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


def payout_against(
    counterparty: str, wager: Wager, grade: Grade, rounding: str, accounts: Accounts
) -> Payout:
    """``wager`` graded ``grade``, its money rounded by the table's ``rounding``, posted against
    ``counterparty`` (the house, or the bank's holder)."""
    s = amounts_of(wager.stake_minor, grade, rounding)
    return payout_of(wager, s, postings_for(s, wager.account_id, counterparty, accounts))


def bank_payout(
    bank: Wager, share_minor: int, net_minor: int, accounts: Accounts, bank_account: str
) -> Payout:
    """A player-banked game's banker (``bank``): the stake leaves escrow and ``share_minor`` of the bank
    account's net for the coup is settled (all of a gain; of a debt, as much as the stake holds, or
    all of it where the stake covers every debt); ``net_minor`` gives the result."""
    credit = bank.stake_minor + share_minor
    rows: list[tuple[str, int]] = [(accounts.escrow, -bank.stake_minor)]
    if share_minor:
        rows.append((bank_account, -share_minor))
    if credit:
        rows.append((bank.account_id, credit))
    result: Literal["win", "lose", "push"] = "win" if net_minor > 0 else "lose" if net_minor < 0 else "push"
    return Payout(
        bet_id=bank.bet_id, account_id=bank.account_id, spot=bank.spot, stake_minor=bank.stake_minor,
        result=result, win_minor=max(net_minor, 0), commission_minor=0, credit_minor=credit,
        postings=tuple(rows),
    )  # fmt: skip


def bank_first(
    accepted: Sequence[Wager], wager: Wager, bank_spot: str = "bank"
) -> tuple[str | None, Wager | None]:
    """The bank's rule at a table where a player holds the bank and must bet first (French club,
    Russian classic): ``(refusal, bank)``.

    * ``wager`` is the bank: ``(None, None)`` when nothing was accepted before it, else refused —
      ``bank_taken`` if a bank is already in, ``bank_cannot_cover`` if punters came first;
    * a punter's bet before any bank: ``(bank_cannot_cover, None)``;
    * otherwise ``(None, bank)``: the variant goes on with its own checks against that bank.

    So ``bank is None`` means the answer is ``refusal``."""
    bank = next((w for w in accepted if w.spot == bank_spot), None)
    if wager.spot == bank_spot:
        if bank is not None:
            return Reason.BANK_TAKEN.value, None
        return (Reason.BANK_CANNOT_COVER.value if accepted else None), None
    if bank is None:
        return Reason.BANK_CANNOT_COVER.value, None
    return None, bank
