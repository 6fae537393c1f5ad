"""Sequential tests for the monitor: exact tails and CUSUM thresholds with their false-alarm targets.

Pure and integer-valued where state is kept (snapshots hold ints): a log-likelihood ratio is kept in
micro-nats (``round(LLR * 10**6)``), so the same input always gives the same statistic.

**The false-alarm budget.** The goal is at most one warning-or-worse false alarm per 10 000 honest
coups over the whole monitor. Each detector gets a tenth of it, :data:`FALSE_ALARMS_PER_10K_TARGET`
= 1/10, so that the ten warning detectors together stay within the goal.

**CUSUM (Page 1954) on a log-likelihood ratio.** For observations ``x_i`` with the honest law ``f0``
and the cheating law ``f1``, ``S_n = max(0, S_{n-1} + log f1(x_n)/f0(x_n))`` raises an alarm when
``S_n ≥ h``. Under ``f0`` the mean run length to a false alarm is at least ``e^h`` observations
(Lorden 1971; the bound holds for any honest law whose likelihood ratio has mean ≤ 1 under it, so in
particular for every honest probability *below* the bound ``p0`` used to build the ratio). A detector
that sees ``n`` observations per 10 000 coups therefore raises at most ``n / e^h`` false alarms per
10 000 coups, and :func:`cusum_threshold` picks ``h = ln(n / target)``.

**Runs.** Where a detector waits for ``k`` consecutive events each of honest probability at most
``q``, one check is a false alarm with probability at most ``q^k``; with ``n`` checks per 10 000 coups
:func:`run_length` picks the least ``k`` with ``n · q^k ≤ target``.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Final

MICRO: Final = 1_000_000
"""Scale of the integer log-likelihood ratios (micro-nats)."""

FALSE_ALARMS_PER_10K_TARGET: Final = Fraction(1, 10)
"""Each warning detector's share of the goal (≤ 1 false alarm per 10 000 honest coups in total)."""


def llr_micro(p1: Fraction, p0: Fraction) -> int:
    """``log(p1 / p0)`` in micro-nats, rounded to the nearest integer."""
    return round(math.log(p1 / p0) * MICRO)


@functools.lru_cache(maxsize=256)
def cusum_threshold(observations_per_10k: int, target: Fraction = FALSE_ALARMS_PER_10K_TARGET) -> int:
    """The CUSUM threshold ``h`` (micro-nats) with ``observations_per_10k / e^h ≤ target``."""
    return math.ceil(math.log(observations_per_10k / target) * MICRO)


@functools.lru_cache(maxsize=256)
def run_length(q: Fraction, checks_per_10k: int, target: Fraction = FALSE_ALARMS_PER_10K_TARGET) -> int:
    """The least ``k`` with ``checks_per_10k · q^k ≤ target``."""
    if not 0 < q < 1:
        raise ValueError("a probability strictly between 0 and 1 is needed")
    k, tail = 1, q
    while checks_per_10k * tail > target:
        k, tail = k + 1, tail * q
    return k


@functools.lru_cache(maxsize=256)
def binomial_tail(n: int, p: Fraction, k: int) -> Fraction:
    """``P(Binomial(n, p) ≥ k)``, exactly (kept per arguments: each alert of a detector asks it again
    with the same window and rate, and exact fractions cost milliseconds)."""
    return sum((Fraction(math.comb(n, i)) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1)), Fraction(0))


def binomial_threshold(n: int, p: Fraction, checks_per_10k: int,
                       target: Fraction = FALSE_ALARMS_PER_10K_TARGET) -> int:  # fmt: skip
    """The least ``k`` with ``checks_per_10k · P(Binomial(n, p) ≥ k) ≤ target``."""
    k = 0
    while checks_per_10k * binomial_tail(n, p, k) > target:
        k += 1
    return k


def cusum_step(s: int, increment: int) -> int:
    """One CUSUM step: ``max(0, s + increment)``."""
    return max(0, s + increment)


def nats(micro: int) -> str:
    """A micro-nat statistic written as a decimal string (no float is written)."""
    return f"{micro / MICRO:.3f}"


def run_probability(q: Fraction, k: int) -> str:
    """``q^k`` as a short decimal string."""
    return f"{float(q**k):.3g}"


# --- one false-alarm budget per table (issue #29; derivation in docs/monitoring.md) -------------------

BUDGET_PER_10K: Final = Fraction(1)
"""Warning-or-worse false alarms allowed per table per 10 000 honest coups, across every detector. A
table plays at most about 3 000 coups a gaming day (a speed table: 120 coups an hour around the clock;
a live table 60-80 an hour), so this is also at most one false alarm per table and gaming day."""

SHARES: Final = {
    "shoe_bias": Fraction(1, 10),
    "account_edge": Fraction(2, 10),
    "group_edge": Fraction(1, 10),
    "linked_hedge": Fraction(15, 100),
    "late_bet": Fraction(1, 10),
    "past_posting": Fraction(1, 10),
    "edge_sorting": Fraction(1, 10),
    "bot_regularity": Fraction(5, 100),
    "paired_play": Fraction(5, 100),
    "structuring": Fraction(5, 100),
}
"""The budget split between the detectors that can fire on honest play (alpha spending). The rules
that fire only on what honest play never produces (a bet on both sides, a card not due, a card dealt
more often than the decks hold, a position going back, a late decision, a refused record) spend none."""


@functools.cache
def share(detector: str) -> Fraction:
    """``detector``'s part of :data:`BUDGET_PER_10K`."""
    return BUDGET_PER_10K * SHARES[detector]


def level(n: int) -> int:
    """The least power of two ≥ ``n`` (and ≥ 1): a table's crowd level, which only grows, so that a
    threshold derived from it only rises (each observation is then tested at least as strictly as the
    level when it was made allows: the union bound below holds)."""
    return 1 << max(0, n - 1).bit_length()


@functools.cache
def mixture_threshold(components: int, observations_per_coup: int, detector: str) -> int:
    """The alarm level ``h`` (micro-nats) of ``components`` CUSUMs over at most
    ``observations_per_coup`` observations a coup: each observation starts a test whose chance of ever
    reaching ``h`` is at most ``e^-h`` (Ville's inequality on a nonnegative supermartingale), so the
    expected false alarms per 10 000 coups are at most ``components · observations · 10 000 · e^-h``,
    which ``h = ln(components · observations · 10 000 / share)`` makes the detector's share."""
    return math.ceil(math.log(components * observations_per_coup * 10_000 / share(detector)) * MICRO)


def bet_increments(lambdas: tuple[float, ...], weight: float, x: int, p0: float) -> tuple[int, ...]:
    """``log(1 + λ·weight·(x − p0))`` for each ``λ``, in micro-nats rounded down (so that a sum never
    exceeds the true log of the betting martingale: every bound above errs towards silence). Under any
    law with ``P(x = 1) ≤ p0`` each factor has mean ≤ 1 (``weight`` ∈ [0, 1] fixed before ``x``)."""
    return tuple(math.floor(math.log1p(lam * weight * (x - p0)) * MICRO) for lam in lambdas)


def cusums(stats: tuple[int, ...], increments: tuple[int, ...]) -> tuple[int, ...]:
    """One step of several CUSUMs."""
    return tuple(max(0, s + i) for s, i in zip(stats, increments, strict=True))
