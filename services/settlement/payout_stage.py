"""Settlement's payout stage (input ``casino.table.events``, per table; docs/event-contract.md,
docs/architecture.md): remembers each coup's accepted bets and, on ``CoupResolved``, asks the variant to
settle them — commission, tie pushes, side-bet paytables, player-banked flows — and writes one
``PayoutIssued`` per bet to ``casino.wallet.requests`` with its balanced postings. A refused bet becomes
a ``BetRefundDue``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from itertools import chain

from services.core import topics
from services.core.baccarat import TableConfig, get_variant
from services.core.baccarat.coup import result_of, wager_of
from services.core.boundary import payout_id, refund_id
from services.core.contract import (
    BetAccepted,
    BetRefundDue,
    BetRefused,
    CoupResolved,
    Payload,
    PayoutIssued,
    TableOpened,
    Written,
)
from services.core.envelope import Envelope
from services.core.ledger import Payout, Wager, table_accounts
from services.core.processor import Event, Reactor
from services.core.values import immutable

__all__ = ["PayoutStage", "bets_of", "payout_payload", "with_bet"]


Bets = tuple[tuple[Wager, ...], ...]
"""A coup's accepted bets in acceptance order, in runs of at most :data:`BET_RUN` (only the last run
may be short): :func:`with_bet` adds one, :func:`bets_of` reads them all."""

BET_RUN = 64
"""The longest run of :data:`Bets`. One tuple of a coup's bets, copied whole to add one (the state is
immutable), made a coup of n bets cost n²/2 copied references
(docs/performance.md#settlement-bet-runs-and-exact-classes). In runs, adding a bet copies the last
run and the tuple of runs: at most 64 + n/64 references."""


def with_bet(bets: Bets, wager: Wager) -> Bets:
    """``bets`` and then ``wager`` (new tuples; ``bets`` is left as it was)."""
    if bets and len(last := bets[-1]) < BET_RUN:
        return (*bets[:-1], (*last, wager))
    return (*bets, (wager,))


def bets_of(bets: Bets) -> tuple[Wager, ...]:
    """Every bet of ``bets``, in acceptance order."""
    return tuple(chain.from_iterable(bets))


@immutable
class PayoutTable:
    """What the payout stage knows of one table: its config and currency, and by coup id the bets
    accepted in each coup not yet resolved."""

    config: TableConfig
    currency: str
    wagers: Mapping[str, Bets] = field(default_factory=dict)


@immutable
class PayoutState:
    """Every table's config and the accepted bets of its open coups."""

    tables: Mapping[str, PayoutTable] = field(default_factory=dict)


def payout_payload(p: Payout, coup_id: str, table_id: str, currency: str) -> Written:
    """The ``PayoutIssued`` of one settled bet, written as its record carries it (a coup pays thousands:
    no model per payout; every value comes from the table's validated config and bets and from the
    engine, and the wallet stage validates the record when it reads it)."""
    return Written(PayoutIssued, {
        "payout_id": payout_id(p.bet_id), "bet_id": p.bet_id, "account_id": p.account_id,
        "table_id": table_id, "coup_id": coup_id, "spot": p.spot, "stake_minor": p.stake_minor,
        "result": p.result, "win_minor": p.win_minor, "commission_minor": p.commission_minor,
        "credit_minor": p.credit_minor, "currency": currency,
        "postings": [{"account": a, "amount_minor": m} for a, m in p.postings],
    })  # fmt: skip


class PayoutStage(Reactor[PayoutState]):
    """Settlement's payout stage (see the module docstring): a :class:`~services.core.processor.Reactor`
    whose :meth:`evolve` half remembers configs and accepted bets and whose :meth:`decide` half settles
    each resolved coup (from the state before it: its bets are forgotten as they are paid)."""

    name = "settlement"
    stage = "settlement.payout"
    inputs = (topics.TABLE_EVENTS,)
    formerly = ("services.settlement.processor",)

    def initial(self) -> PayoutState:
        """No tables."""
        return PayoutState()

    def react(
        self, state: PayoutState, record: Envelope, payload: Payload | None
    ) -> tuple[PayoutState, list[Event]]:
        """:meth:`evolve` and :meth:`decide`, both from the state before ``record``."""
        return self.evolve(state, record.key, payload), self.decide(state, record, payload)

    def evolve(self, state: PayoutState, key: str, payload: Payload | None) -> PayoutState:
        """The tables after one table event: a table's config, a coup's accepted bets, a coup settled
        (told apart by exact class, as the wallet stage's requests: see
        :data:`~services.settlement.wallet_stage.REQUESTS`)."""
        if type(payload) is TableOpened:
            config = TableConfig.from_dict(payload.config.model_dump(mode="json"))
            return PayoutState({**state.tables, key: PayoutTable(config, payload.currency)})
        table = state.tables.get(key)
        if table is None:
            return state
        if type(payload) is BetAccepted:
            held = table.wagers.get(payload.coup_id, ())
            wagers = {**table.wagers, payload.coup_id: with_bet(held, wager_of(payload))}
            return PayoutState({**state.tables, key: PayoutTable(table.config, table.currency, wagers)})
        if type(payload) is CoupResolved:
            wagers = {c: w for c, w in table.wagers.items() if c != payload.coup_id}
            return PayoutState({**state.tables, key: PayoutTable(table.config, table.currency, wagers)})
        return state

    def decide(self, state: PayoutState, record: Envelope, payload: Payload | None) -> list[Event]:
        """A refused bet's refund; every bet of a resolved coup paid (one ``PayoutIssued`` each)."""
        at = record.occurred_at
        if type(payload) is BetRefused:
            return [Event(payload.account_id, at, _refund_due(payload, record.key))]
        if type(payload) is not CoupResolved or (table := state.tables.get(record.key)) is None:
            return []
        variant = get_variant(table.config.variant)
        result = result_of(payload, variant.hands(table.config))
        accepted = bets_of(table.wagers.get(payload.coup_id, ()))
        payouts = variant.settle(result, accepted, table.config, table_accounts(record.key))
        return [
            Event(po.account_id, at, payout_payload(po, payload.coup_id, record.key, table.currency))
            for po in payouts
        ]


def _refund_due(refused: BetRefused, table_id: str) -> BetRefundDue:
    return BetRefundDue(
        refund_id=refund_id(refused.bet_id), bet_id=refused.bet_id, account_id=refused.account_id,
        table_id=table_id, coup_id=refused.coup_id, stake_minor=refused.stake_minor,
        currency=refused.currency, reason=refused.reason,
    )  # fmt: skip
