"""Integer money: amounts in minor units, and the one named function per rounding rule.

No float ever touches an amount. A win is ``stake × num ÷ den`` of the spot's exact ratio; where that
is not a whole number of minor units (a Super 6 banker win of 1:2 on an odd stake) it is rounded by
:func:`win_minor`, always down: the house never pays a fraction it does not hold. Commission is
``base × bps ÷ 10 000`` rounded by the table's named ``commission_rounding``:

* ``floor`` (the default): towards zero, in the player's favour — 5 % of 15 is 0.75 → 0;
* ``half_up``: to nearest, halves up — 0.75 → 1, 0.5 → 1, 0.25 → 0;
* ``ceil``: up, in the house's favour — 0.25 → 1.

``credit_minor`` is everything that goes back to the player: stake plus win less commission on a win,
the stake on a push or refund, nothing on a loss.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

from services.core.baccarat.engine import Grade
from services.core.errors import DomainError, Reason

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


@dataclass(frozen=True, slots=True)
class Settlement:
    """One bet's money: what it won, what commission it paid, what goes back to the wallet."""

    result: Literal["win", "lose", "push", "refund"]
    stake_minor: int
    win_minor: int
    commission_minor: int
    credit_minor: int


def settle(stake_minor: int, grade: Grade, rounding: str = "floor") -> Settlement:
    """Turn a bet's :class:`Grade` into minor units. ``stake_minor`` must be positive."""
    if stake_minor <= 0:
        raise DomainError(Reason.BAD_CONFIG, f"a stake is positive, not {stake_minor}")
    if grade.result == "lose":
        return Settlement("lose", stake_minor, 0, 0, 0)
    if grade.result == "push":
        return Settlement("push", stake_minor, 0, 0, stake_minor)
    win = win_minor(stake_minor, grade.win_ratio)
    base = win if grade.commission_base == "win" else stake_minor
    commission = commission_minor(base, grade.commission_bps, rounding)
    return Settlement("win", stake_minor, win, commission, stake_minor + win - commission)


def refund(stake_minor: int) -> Settlement:
    """A refused or voided bet: the stake goes back whole."""
    return Settlement("refund", stake_minor, 0, 0, stake_minor)
