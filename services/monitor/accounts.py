"""The monitor's per-account stage: players followed across tables (issue #13).

Input: ``casino.wallet.events`` only (keyed by account, written by settlement's wallet stage: one
ordered input per stateful stage, docs/architecture.md). Every deposit and every stake of an account passes
through its wallet whatever the table, so this stage sees a player at all tables at once. Output:
``AnomalyDetected`` on ``casino.monitor.alerts`` keyed by the **account** (its own chain, never
interleaved with a table's); ``table_id`` names the table of the latest evidence (``cage`` for a
deposit).

Detectors:

* **deposit structuring** — deposits just under the reporting threshold
  (:data:`REPORTING_THRESHOLD_MINOR`, within :data:`DEPOSIT_BAND_BPS`), :data:`DEPOSIT_STRUCTURING_AT`
  of them among the account's last :data:`DEPOSIT_WINDOW` deposits. An honest deposit lands in the
  band with probability at most :data:`DEPOSIT_BAND_P0`; the count is derived from the binomial tail.
* **cross-table hedge** — an even-money stake on one side at one table whose account's latest stake at
  *another* table, within :data:`CROSS_WINDOW_MS`, was a matched stake (within 5 %) on the other side:
  the same account holding both risks across tables. Only the latest other-table stake is compared (one
  candidate per bet, so that the per-bet bound :data:`CROSS_P0` holds). :data:`CROSS_HEDGE_AT` such
  pairs among its last :data:`CROSS_WINDOW_BETS`
  bets raise a warning.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from fractions import Fraction
from typing import Final

from pydantic import ValidationError

from services.core import topics
from services.core.contract import FundsDeposited, Payload, StakeReserved, read_payload
from services.core.envelope import Draft, Envelope
from services.core.ledger import BPS
from services.core.processor import Event, Reactor
from services.core.reasons import Detector, DomainError, Severity
from services.core.values import immutable, replace
from services.monitor.processor import HEDGE_SIDES, LINK_BAND_BPS, UNREADABLE, Alerts, alert, millis
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

CROSS_WINDOW_MS: Final = 120_000
"""Two stakes at different tables within two minutes are held at the same time."""

CROSS_P0: Final = Fraction(1, 8)
"""Honest bound on the chance that a bet at another table within the window stands on the opposite
even-money side with a matched stake (opposite side at most 1/2, matched stake at most 1/4)."""

CROSS_WINDOW_BETS: Final = 40
"""Even-money bets of one account looked at together."""

CROSS_HEDGE_AT: Final = binomial_threshold(CROSS_WINDOW_BETS, CROSS_P0, 8 * 10_000)
"""Cross-table opposite matched pairs among the last 40 bets that raise ``cross_table_hedge``: the
least ``k`` with ``80 000 · P(Binomial(40, 1/8) ≥ k) ≤ 1/10`` (one check per bet): 18."""

CAGE: Final = "cage"
"""The ``table_id`` of an alert about deposits (they are made at the cashier's cage)."""


@immutable
class Player:
    """One account: its last deposits ``(event_id, in_band)``, last even-money stakes ``(event_id,
    table_id, spot, stake_minor, at_ms)`` and whether each made a cross-table hedge."""

    deposits: tuple[tuple[str, bool], ...] = ()
    stakes: tuple[tuple[str, str, str, int, int], ...] = ()
    hedges: tuple[bool, ...] = ()


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
        honest_probability=f"{float(chance):.3g}",
    )  # fmt: skip
    return replace(player, deposits=()), [found]


def on_stake(player: Player, rec: Envelope, reserved: StakeReserved) -> tuple[Player, Alerts]:
    """Look for an opposite matched stake at another table within the window; alert at the count."""
    spot, table = reserved.spot, reserved.table_id
    if spot not in HEDGE_SIDES:
        return player, []
    stake, at = reserved.amount_minor, millis(rec.occurred_at)
    last = next((s for s in reversed(player.stakes) if s[1] != table), None)  # the one bet it could hedge
    hedge = (last is not None and last[2] != spot and at - last[4] <= CROSS_WINDOW_MS
             and abs(last[3] - stake) * BPS <= max(last[3], stake) * LINK_BAND_BPS)  # fmt: skip
    partner = last if hedge else None
    stakes = (*player.stakes, (rec.event_id, table, spot, stake, at))[-CROSS_WINDOW_BETS:]
    hedges = (*player.hedges, partner is not None)[-CROSS_WINDOW_BETS:]
    n = sum(hedges)
    if partner is None or n < CROSS_HEDGE_AT:
        return replace(player, stakes=stakes, hedges=hedges), []
    account = rec.key
    chance = binomial_tail(CROSS_WINDOW_BETS, CROSS_P0, n)
    found = alert(
        Detector.CROSS_TABLE_HEDGE, Severity.WARNING, table, key=account,
        subject={"event_ids": [partner[0], rec.event_id], "account_id": account,
                 "table_ids": sorted({partner[1], table}), "bet_ids": [reserved.bet_id]},
        observed={"hedged_pairs": n, "bets": len(hedges)},
        threshold={"hedged_pairs": CROSS_HEDGE_AT, "window_bets": CROSS_WINDOW_BETS,
                   "window_ms": CROSS_WINDOW_MS, "p0": str(CROSS_P0)},
        detail=f"{account} held opposite matched stakes at two tables {n} times in {len(hedges)} bets",
        honest_probability=f"{float(chance):.3g}",
    )  # fmt: skip
    return Player(player.deposits), [found]


class AccountMonitor(Reactor[AccountsState]):
    """The per-account stage of the monitor (see the module docstring): a
    :class:`~services.core.processor.Reactor` to the wallet events, in one pass."""

    name = "monitor"
    writer = "monitor.accounts"
    inputs = (topics.WALLET_EVENTS,)

    def initial(self) -> AccountsState:
        """No account followed."""
        return AccountsState()

    def handle(self, state: AccountsState, record: Envelope) -> tuple[AccountsState, list[Draft]]:
        """:meth:`apply` to the record's payload, read here (one the contract refuses passes)."""
        try:
            payload = read_payload(record)
        except (ValidationError, DomainError):
            return state, []
        return self.apply(state, record, payload)

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
            else:
                return state, []
        except UNREADABLE:
            return state, []
        players = {**state.players, record.key: player}
        return AccountsState(players), [a.event(record.occurred_at) for a in out]
