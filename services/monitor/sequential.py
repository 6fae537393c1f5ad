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


def cusum_threshold(observations_per_10k: int, target: Fraction = FALSE_ALARMS_PER_10K_TARGET) -> int:
    """The CUSUM threshold ``h`` (micro-nats) with ``observations_per_10k / e^h ≤ target``."""
    return math.ceil(math.log(observations_per_10k / target) * MICRO)


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
