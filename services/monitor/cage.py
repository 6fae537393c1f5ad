"""The monitor's cage stage: deposits across accounts, in the cage's one order (issue #29).

Input: ``casino.monitor.cage`` only (``CageDeposit``, keyed by the cage: the account stage hands each
deposit it reads to it). The wallet events are keyed by account, so on Kafka no stage reading them sees
two accounts' deposits in an order every run shares; the cage topic has one key, so it is one ordered
input (docs/architecture.md), whichever runtime wrote it. Output: ``AnomalyDetected`` on
``casino.monitor.alerts`` keyed by the cage (its own chain).

**Cage structuring** (``cage_structuring``): deposits just under the reporting threshold
(:func:`services.monitor.accounts.in_band`), whoever makes them: eight accounts each depositing 9,800
twice, or many accounts now and then. Every deposit is one observation ``x`` (1: in the band); an
honest deposit lands in the band with chance at most ``p0`` = :data:`~services.monitor.accounts.
DEPOSIT_BAND_P0` (the cage's stated bound, the one the per-account rule rests on). The test is the
monitor's own (:mod:`services.monitor.sequential`): :data:`LAMBDAS` CUSUMs of the betting martingale
``1 + λ(x − p0)`` (mean at most 1 under honest deposits, whatever the accounts), alarming at
``h = ln(K · 10 000 / share)`` (:data:`THRESHOLD`): at most :data:`SHARE` false alarms per 10 000
honest deposits at a cage. After an alarm the CUSUMs start again from zero.

State: the CUSUMs and the in-band deposits since they last stood at zero (at most
:data:`EVIDENCE_MAX`, with their accounts), per cage.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import field
from fractions import Fraction
from typing import Final

from services.core import topics
from services.core.contract import CageDeposit, Payload
from services.core.envelope import Envelope
from services.core.processor import Event, Observer
from services.core.reasons import Detector, Severity
from services.core.values import immutable, replace
from services.monitor.accounts import DEPOSIT_BAND_BPS, DEPOSIT_BAND_P0, REPORTING_THRESHOLD_MINOR, in_band
from services.monitor.alerts import Alert, alert
from services.monitor.sequential import MICRO, bet_increments, cusums, nats

LAMBDAS: Final = (1.0, 3.0, 6.0, 9.0)
"""The alternatives (``λ`` below ``1/p0`` = 10): about 20, 35, 60 and 90 % of deposits in the band."""

SHARE: Final = Fraction(1, 10)
"""False alarms allowed per 10 000 honest deposits at one cage (the cage's own budget: a cage is not a
table; docs/monitoring.md)."""

THRESHOLD: Final = math.ceil(math.log(len(LAMBDAS) * 10_000 / SHARE) * MICRO)
"""``h`` in micro-nats: ``ln(4 · 10 000 / 0.1)`` ≈ 12.9 nats."""

EVIDENCE_MAX: Final = 32
"""In-band deposits an alert names (the latest)."""

P0: Final = float(DEPOSIT_BAND_P0)


@immutable
class Cage:
    """One cage: its CUSUMs, and the in-band deposits ``(deposit_id, account_id)`` since they last
    stood at zero (the latest :data:`EVIDENCE_MAX`; ``count``: all of them)."""

    stats: tuple[int, ...] = (0,) * len(LAMBDAS)
    evidence: tuple[tuple[str, str], ...] = ()
    count: int = 0
    deposits: int = 0


@immutable
class CagesState:
    """Every cage, by key."""

    cages: Mapping[str, Cage] = field(default_factory=dict)


def observe(cage: Cage, deposit: CageDeposit) -> Cage:
    """Fold one deposit into the cage's CUSUMs (its evidence forgotten when they all stand at zero)."""
    x = int(in_band(deposit.amount_minor))
    stats = cusums(cage.stats, bet_increments(LAMBDAS, 1.0, x, P0))
    if not any(stats):
        return Cage(deposits=cage.deposits + 1)
    evidence, count = cage.evidence, cage.count
    if x:
        evidence, count = (*evidence, (deposit.deposit_id, deposit.account_id))[-EVIDENCE_MAX:], count + 1
    return replace(cage, stats=stats, evidence=evidence, count=count, deposits=cage.deposits + 1)


def found(cage_id: str, cage: Cage) -> Alert:
    """The ``cage_structuring`` alert of a cage whose CUSUM reached the threshold."""
    accounts = sorted({a for _, a in cage.evidence})
    best = max(cage.stats)
    return alert(
        Detector.CAGE_STRUCTURING, Severity.WARNING, cage_id, key=cage_id,
        subject={"event_ids": [d for d, _ in cage.evidence], "account_ids": accounts,
                 "evidence_count": cage.count},
        observed={"deposits_in_band": cage.count, "accounts": len(accounts), "statistic_nats": nats(best)},
        threshold={"reporting_threshold_minor": REPORTING_THRESHOLD_MINOR, "band_bps": DEPOSIT_BAND_BPS,
                   "p0": str(DEPOSIT_BAND_P0), "h_nats": nats(THRESHOLD)},
        detail=f"{cage.count} deposits just under {REPORTING_THRESHOLD_MINOR} at {cage_id}"
               f" from {len(accounts)} account(s)",
        honest_probability=f"{math.exp(-best / MICRO):.3g}", accounts=accounts,
    )  # fmt: skip


class CageMonitor(Observer[CagesState]):
    """The cage stage of the monitor (see the module docstring)."""

    name = "monitor"
    writer = "monitor.cage"
    inputs = (topics.CAGE,)

    def initial(self) -> CagesState:
        """No cage followed."""
        return CagesState()

    def react(
        self, state: CagesState, record: Envelope, payload: Payload | None
    ) -> tuple[CagesState, list[Event]]:
        """Fold a deposit into its cage; alert (and start again) at the threshold."""
        if not isinstance(payload, CageDeposit):
            return state, []
        cage = observe(state.cages.get(record.key) or Cage(), payload)
        out: list[Event] = []
        if max(cage.stats) >= THRESHOLD:
            out.append(found(record.key, cage).event(record.occurred_at))
            cage = Cage(deposits=cage.deposits)
        return CagesState({**state.cages, record.key: cage}), out
