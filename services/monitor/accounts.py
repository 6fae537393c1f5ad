"""The monitor's per-account stage: players followed across tables (issue #13).

Input: ``casino.wallet.events`` only (keyed by account, written by settlement's wallet stage: one
ordered input per stateful stage, docs/architecture.md). Every deposit and every stake of an account passes
through its wallet whatever the table, so this stage sees a player at all tables at once. Output:
``AnomalyDetected`` on ``casino.monitor.alerts`` keyed by the **account** (its own chain, never
interleaved with a table's); ``table_id`` names the table of the latest evidence (``cage`` for a
deposit).

Each deposit is also handed on (``CageDeposit`` on ``casino.monitor.cage``, under the one key
:data:`CAGE`) to the cage stage (:mod:`services.monitor.cage`), which looks across accounts.

Detectors:

* **deposit structuring** — deposits just under the reporting threshold
  (:data:`REPORTING_THRESHOLD_MINOR`, within :data:`DEPOSIT_BAND_BPS`), :data:`DEPOSIT_STRUCTURING_AT`
  of them among the account's last :data:`DEPOSIT_WINDOW` deposits. An honest deposit lands in the
  band with probability at most :data:`DEPOSIT_BAND_P0`; the count is derived from the binomial tail.
* **in and out** — cash deposited and withdrawn with little play between (issue #29): a withdrawal of
  at least :data:`IN_AND_OUT_MIN_MINOR` when the account staked less than :data:`IN_AND_OUT_PLAY_BPS`
  of what it deposited since its last withdrawal (turning cash into a "casino cheque" without gambling
  it). A rule, not a statistic: the cage's own guidance; honest players who deposit that much play it.

The cross-table hedge of issue #13 is retired: opposite bets at two tables are two independent coups,
not a hedge (each table's coup is won or lost on its own), and flat players at two tables raised it
every few dozen coups.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from fractions import Fraction
from typing import Final

from services.core import topics
from services.core.contract import (
    CageDeposit,
    FundsDeposited,
    FundsWithdrawn,
    Payload,
    StakeReserved,
)
from services.core.envelope import Envelope
from services.core.ledger import BPS
from services.core.processor import Event, Observer
from services.core.reasons import Detector, Severity
from services.core.values import immutable, replace
from services.monitor.alerts import UNREADABLE, Alerts, alert
from services.monitor.sequential import binomial_tail, binomial_threshold

REPORTING_THRESHOLD_MINOR: Final = 1_000_000
"""Cash deposits from this amount (10 000 in major units) are reported: the limit structurers avoid."""

DEPOSIT_BAND_BPS: Final = 1_000
"""A deposit is "just under" the threshold when below it by at most 10 %."""

DEPOSIT_BAND_P0: Final = Fraction(1, 10)
"""Honest bound on the chance that a deposit falls in the band just under the threshold."""

DEPOSIT_WINDOW: Final = 10
"""Deposits of one account looked at together."""

DEPOSIT_STRUCTURING_AT: Final = binomial_threshold(DEPOSIT_WINDOW, DEPOSIT_BAND_P0, 10_000)
"""In-band deposits among the last 10 that raise ``deposit_structuring``: the least ``k`` with
``10 000 · P(Binomial(10, 1/10) ≥ k) ≤ 1/10`` (at most one deposit checked per coup): 7."""

IN_AND_OUT_MIN_MINOR: Final = REPORTING_THRESHOLD_MINOR // 2
"""Withdrawals from this amount (5 000 in major units) are looked at."""

IN_AND_OUT_PLAY_BPS: Final = 1_000
"""Staking less than 10 % of the deposits before withdrawing them is "little play"."""

CAGE: Final = "cage"
"""The ``table_id`` of an alert about deposits (they are made at the cashier's cage)."""


@immutable
class Player:
    """One account: its last deposits ``(event_id, in_band)``; since its last withdrawal, the deposits'
    ids and sum, and what it staked."""

    deposits: tuple[tuple[str, bool], ...] = ()
    cash_in: tuple[str, ...] = ()
    cash_in_minor: int = 0
    staked_minor: int = 0


@immutable
class AccountsState:
    """Every account followed, by id."""

    players: Mapping[str, Player] = field(default_factory=dict)


def in_band(amount_minor: int) -> bool:
    """A deposit just under the reporting threshold."""
    floor = REPORTING_THRESHOLD_MINOR * (BPS - DEPOSIT_BAND_BPS)
    return amount_minor < REPORTING_THRESHOLD_MINOR and amount_minor * BPS >= floor


def on_deposit(player: Player, rec: Envelope, deposited: FundsDeposited) -> tuple[Player, Alerts]:
    """Count the deposit in the window; alert (and forget the window) at the threshold."""
    amount = deposited.amount_minor
    player = replace(player, cash_in=(*player.cash_in, rec.event_id)[-32:],
                     cash_in_minor=player.cash_in_minor + amount)  # fmt: skip
    deposits = (*player.deposits, (rec.event_id, in_band(amount)))[-DEPOSIT_WINDOW:]
    hits = [e for e, band in deposits if band]
    if len(hits) < DEPOSIT_STRUCTURING_AT:
        return replace(player, deposits=deposits), []
    account = rec.key
    chance = binomial_tail(DEPOSIT_WINDOW, DEPOSIT_BAND_P0, len(hits))
    found = alert(
        Detector.DEPOSIT_STRUCTURING, Severity.WARNING, CAGE, key=account,
        subject={"event_ids": hits, "account_id": account},
        observed={"deposits_in_band": len(hits), "deposits": len(deposits), "last_amount_minor": amount},
        threshold={"reporting_threshold_minor": REPORTING_THRESHOLD_MINOR, "band_bps": DEPOSIT_BAND_BPS,
                   "in_band_at": DEPOSIT_STRUCTURING_AT, "p0": str(DEPOSIT_BAND_P0)},
        detail=f"{account} deposited just under {REPORTING_THRESHOLD_MINOR} {len(hits)} times"
               f" in {len(deposits)}",
        honest_probability=f"{float(chance):.3g}", accounts=[account],
    )  # fmt: skip
    return replace(player, deposits=()), [found]


def on_stake(player: Player, rec: Envelope, reserved: StakeReserved) -> tuple[Player, Alerts]:
    """Count the stake as play."""
    return replace(player, staked_minor=player.staked_minor + reserved.amount_minor), []


def on_withdrawal(player: Player, rec: Envelope, withdrawn: FundsWithdrawn) -> tuple[Player, Alerts]:
    """A withdrawal: in and out with little play when the deposits since the last one were barely
    staked (see the module docstring); the account's cash-in record starts again."""
    amount = withdrawn.amount_minor
    deposited, staked = player.cash_in_minor, player.staked_minor
    fresh = replace(player, cash_in=(), cash_in_minor=0, staked_minor=0)
    little = staked * BPS < deposited * IN_AND_OUT_PLAY_BPS
    if amount < IN_AND_OUT_MIN_MINOR or not deposited or not little:
        return fresh, []
    account = rec.key
    found = alert(
        Detector.IN_AND_OUT, Severity.WARNING, CAGE, key=account,
        subject={"event_ids": [*player.cash_in[-31:], rec.event_id], "account_id": account,
                 "evidence_count": len(player.cash_in) + 1},
        observed={"deposited_minor": deposited, "staked_minor": staked, "withdrawn_minor": amount},
        threshold={"withdrawal_min_minor": IN_AND_OUT_MIN_MINOR, "play_bps": IN_AND_OUT_PLAY_BPS},
        detail=f"{account} withdrew {amount} after depositing {deposited} and staking only {staked}",
        accounts=[account],
    )  # fmt: skip
    return fresh, [found]


def handed(rec: Envelope, deposited: FundsDeposited) -> CageDeposit:
    """The deposit as the cage stage reads it (:mod:`services.monitor.cage`), under the one cage key."""
    return CageDeposit(cage_id=CAGE, account_id=rec.key, deposit_id=rec.event_id,
                       amount_minor=deposited.amount_minor, currency=deposited.currency)  # fmt: skip


class AccountMonitor(Observer[AccountsState]):
    """The per-account stage of the monitor (see the module docstring): a
    :class:`~services.core.processor.Reactor` to the wallet events, in one pass."""

    name = "monitor"
    writer = "monitor.accounts"
    inputs = (topics.WALLET_EVENTS,)

    def initial(self) -> AccountsState:
        """No account followed."""
        return AccountsState()

    def react(
        self, state: AccountsState, record: Envelope, payload: Payload | None
    ) -> tuple[AccountsState, list[Event]]:
        """Fold a deposit or a stake into its account; other wallet events pass."""
        player = state.players.get(record.key) or Player()
        try:
            if isinstance(payload, FundsDeposited):
                player, out = on_deposit(player, record, payload)
            elif isinstance(payload, StakeReserved):
                player, out = on_stake(player, record, payload)
            elif isinstance(payload, FundsWithdrawn):
                player, out = on_withdrawal(player, record, payload)
            else:
                return state, []
        except UNREADABLE:
            return state, []
        players = {**state.players, record.key: player}
        events = [a.event(record.occurred_at) for a in out]
        if isinstance(payload, FundsDeposited):  # to the cage stage, which sees every account in one order
            events.append(Event(CAGE, record.occurred_at, handed(record, payload)))
        return AccountsState(players), events
