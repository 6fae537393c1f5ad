"""The monitor's sequential thresholds (issue #13): each is the least value meeting its false-alarm target."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.core import topics
from services.core.envelope import request
from services.monitor import accounts, detectors
from services.monitor import sequential as seq
from services.monitor import sequential_detectors as mon
from services.monitor.sequential import (
    FALSE_ALARMS_PER_10K_TARGET,
    MICRO,
    binomial_tail,
    binomial_threshold,
    cusum_threshold,
    run_length,
)

TARGET = FALSE_ALARMS_PER_10K_TARGET


@given(st.fractions(min_value=Fraction(1, 100), max_value=Fraction(99, 100)), st.integers(1, 10**6))
def test_run_length_is_the_least_meeting_the_target(q: Fraction, checks: int) -> None:
    """run_length gives the least k with checks · q^k ≤ target (k - 1 misses it)."""
    k = run_length(q, checks)
    assert checks * q**k <= TARGET
    assert k == 1 or checks * q ** (k - 1) > TARGET


CASES = [(50, Fraction(1, 20), 500), (10, Fraction(1, 10), 10_000), (40, Fraction(1, 8), 80_000),
         (50, Fraction(1, 8), 40_000)]  # fmt: skip


@pytest.mark.parametrize(("n", "p", "checks"), CASES)
def test_binomial_threshold_is_the_least_meeting_the_target(n: int, p: Fraction, checks: int) -> None:
    """binomial_threshold gives the least k with checks · P(Bin(n, p) ≥ k) ≤ target."""
    k = binomial_threshold(n, p, checks)
    assert checks * binomial_tail(n, p, k) <= TARGET < checks * binomial_tail(n, p, k - 1)


def test_binomial_tail_is_exact() -> None:
    """P(Bin(n, p) ≥ 0) is 1 and P(Bin(2, 1/2) ≥ 1) is 3/4, exactly."""
    assert binomial_tail(7, Fraction(1, 3), 0) == 1
    assert binomial_tail(2, Fraction(1, 2), 1) == Fraction(3, 4)


@pytest.mark.parametrize("observations", [20_000, 80_000])
def test_cusum_threshold_bounds_false_alarms(observations: int) -> None:
    """With h from cusum_threshold, observations / e^h (Lorden's bound) is within the target, and
    one micro-nat less would not be much lower (h is not inflated)."""
    h = cusum_threshold(observations) / MICRO
    assert observations / math.exp(h) <= TARGET
    assert observations / math.exp(h - 1e-3) > TARGET * Fraction(99, 100)


def test_the_detectors_thresholds_are_the_derived_ones() -> None:
    """The constants the detectors use are the derivations stated in their docstrings."""
    assert detectors.PAST_POSTING_WARNING_AT == binomial_threshold(50, Fraction(1, 20), 500) == 10
    assert mon.BOT_RUN == run_length(Fraction(1, 4), 80_000, Fraction(1, 20)) == 11
    assert mon.PAIR_RUN == run_length(Fraction(1, 2), 80_000, Fraction(1, 20)) == 21
    assert accounts.DEPOSIT_STRUCTURING_AT == binomial_threshold(10, Fraction(1, 10), 10_000) == 7
    assert all(lam < 1 / mon.EDGE_P0 for lam in mon.SORT_LAMBDAS)  # each factor stays positive
    k = len(mon.SORT_LAMBDAS) + 1  # and the unweighted one
    sort_h = seq.mixture_threshold(k, 8, "edge_sorting")
    assert k * 8 * 10_000 * math.exp(-sort_h / MICRO) <= 0.1 and mon.SORT_FLAT < 1 / mon.EDGE_P0


def test_the_budget_is_split_once() -> None:
    """The detectors' shares of the one budget per table add up to it, no more (alpha spending)."""
    assert sum(seq.SHARES.values()) == 1
    assert seq.BUDGET_PER_10K == 1
    assert all(share > 0 for share in seq.SHARES.values())


@given(st.integers(1, 6), st.integers(1, 5000), st.sampled_from(sorted(seq.SHARES)))
def test_mixture_threshold_spends_the_share(components: int, per_coup: int, detector: str) -> None:
    """K CUSUMs over n observations a coup, each reaching h with chance at most e^-h: K·n·10 000·e^-h is
    the detector's share, and one micro-nat less would overspend it (h is not inflated)."""
    h = seq.mixture_threshold(components, per_coup, detector) / MICRO
    spent = components * per_coup * 10_000 * math.exp(-h)
    assert spent <= seq.share(detector) * Fraction(1_000_001, 1_000_000)
    assert components * per_coup * 10_000 * math.exp(-(h - 2e-6)) > seq.share(detector)


@given(st.integers(0, 10**6), st.integers(0, 10**6))
def test_the_crowd_level_only_grows_and_covers(a: int, b: int) -> None:
    """The level is a power of two at least the count, and monotone (thresholds never fall)."""
    assert seq.level(a) >= max(a, 1) and seq.level(a) & (seq.level(a) - 1) == 0
    assert seq.level(a) < 2 * max(a, 1)
    assert a > b or seq.level(a) <= seq.level(b)


@given(
    st.sampled_from(mon.EDGE_LAMBDAS),
    st.floats(0.0, 1.0),
    st.sampled_from([0, 1]),
    st.sampled_from([0.497, 0.51]),
)
def test_increments_never_exceed_the_martingale(lam: float, weight: float, x: int, p0: float) -> None:
    """Each increment is the log of the betting factor rounded down, and the factor's mean under the
    honest bound p0 is at most 1 (so the CUSUMs built from them are sound)."""
    (inc,) = seq.bet_increments((lam,), weight, x, p0)
    assert inc <= math.log1p(lam * weight * (x - p0)) * MICRO < inc + 1
    mean = p0 * (1 + lam * weight * (1 - p0)) + (1 - p0) * (1 + lam * weight * (0 - p0))
    assert mean <= 1 + 1e-12


def _deposit(account: str, n: int, amount: int):  # type: ignore[no-untyped-def]
    postings = [{"account": "cage:EUR", "amount_minor": -amount},
                {"account": account, "amount_minor": amount}]  # fmt: skip
    payload = {"transfer_id": f"t{n}", "account_id": account, "amount_minor": amount, "currency": "EUR",
               "postings": postings, "balance_before_minor": 0, "balance_after_minor": amount}  # fmt: skip
    return request("FundsDeposited", topics.WALLET_EVENTS, account, payload, event_id=f"e-{account}-{n}",
                   occurred_at="2026-11-22T20:00:00.000Z", producer="settlement")  # fmt: skip


@pytest.mark.parametrize(
    ("amounts", "alerts"),
    [
        ([990_000] * accounts.DEPOSIT_STRUCTURING_AT, 1),
        ([990_000] * (accounts.DEPOSIT_STRUCTURING_AT - 1), 0),
        ([1_000_000] * 10, 0),
        ([890_000] * 10, 0),
        ([990_000, 5_000] * accounts.DEPOSIT_STRUCTURING_AT, 0),
    ],
    ids=["at_the_count", "one_short", "at_the_threshold_is_reported_anyway", "below_the_band", "spread_out"],
)
def test_deposit_structuring(amounts: list[int], alerts: int) -> None:
    """Deposits just under the reporting threshold raise one alert, keyed by the account, once enough of
    the last ten are in the band; deposits at or well under the threshold raise nothing."""
    stage = accounts.AccountMonitor()
    state = stage.initial()
    out = []
    for n, amount in enumerate(amounts):
        state, drafts = stage.handle(state, _deposit("acc:1", n, amount))
        handed = [d for d in drafts if d.topic == topics.CAGE]
        assert [d.payload["amount_minor"] for d in handed] == [amount]  # every deposit, to the cage stage
        out += [d for d in drafts if d.topic == topics.MONITOR_ALERTS]
    assert len(out) == alerts
    for d in out:
        assert d.key == "acc:1" and d.payload["detector"] == "deposit_structuring"
        assert len(d.payload["subject"]["event_ids"]) == accounts.DEPOSIT_STRUCTURING_AT
        assert float(d.payload["honest_probability"]) < 1e-5


def _cash(kind: str, account: str, n: int, amount: int):  # type: ignore[no-untyped-def]
    sign = 1 if kind == "FundsDeposited" else -1
    postings = [{"account": "cage:EUR", "amount_minor": -sign * amount},
                {"account": account, "amount_minor": sign * amount}]  # fmt: skip
    payload = {"transfer_id": f"t{n}", "account_id": account, "amount_minor": amount, "currency": "EUR",
               "postings": postings, "balance_before_minor": 0 if sign > 0 else amount,
               "balance_after_minor": amount if sign > 0 else 0}  # fmt: skip
    return request(kind, topics.WALLET_EVENTS, account, payload, event_id=f"c-{account}-{n}",
                   occurred_at="2026-11-22T20:00:00.000Z", producer="settlement")  # fmt: skip


@pytest.mark.parametrize(
    ("deposits", "withdrawn", "alerts"),
    [
        ([983_333] * 6, 5_895_998, 1),
        ([983_333] * 6, accounts.IN_AND_OUT_MIN_MINOR - 1, 0),
        ([400_000], 390_000, 0),
    ],
    ids=["59k_in_and_out", "small_withdrawal", "under_the_floor"],
)
def test_in_and_out_with_little_play(deposits: list[int], withdrawn: int, alerts: int) -> None:
    """Cash deposited and withdrawn with no play between raises one in_and_out alert naming every
    deposit and the withdrawal; a withdrawal under the floor raises nothing."""
    stage = accounts.AccountMonitor()
    state = stage.initial()
    out = []
    for n, amount in enumerate(deposits):
        state, drafts = stage.handle(state, _cash("FundsDeposited", "acc:2", n, amount))
        out += drafts
    state, drafts = stage.handle(state, _cash("FundsWithdrawn", "acc:2", 99, withdrawn))
    out += drafts
    found = [d.payload for d in out if d.payload.get("detector") == "in_and_out"]
    assert len(found) == alerts
    for p in found:
        assert p["account_ids"] == ["acc:2"] and p["subject"]["evidence_count"] == len(deposits) + 1
        assert p["subject"]["event_ids"][-1] == "c-acc:2-99"
