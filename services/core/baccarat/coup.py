"""The coup record: one coup as its table's events tell it (:class:`Coup`), and what ``CoupResolved``
says of it as the engine's :class:`CoupResult` (:func:`result_of`).

A :class:`Coup` is the coup's identity and number, its phase, when betting opened, the accepted wagers
in order and, once dealing began, the engine's :class:`CoupState` (cards per hand, decisions). Its
methods are the only transitions: the dealer makes them from the commands it accepts (and writes the
event of each), the readers of the table stream make the very same ones from those events
(:func:`coup_opened`, :func:`evolve`): the simulator follows its coups with it, the monitor keeps its
per-coup watch beside one.

The readers that check or show a coup as it was *recorded* (audit, replay's ``--coup`` view) cannot fold
through the engine as they go: a tampered log may record a card to the wrong hand, or more cards than
the rules deal, and that is what they must report. They fold the same events into a
:class:`CoupRecord` instead (the record as written, nothing re-derived) and re-run the engine over it
once, at the end (:meth:`CoupRecord.replayed`).

The dealer writes a :class:`~services.core.contract.CoupResolved` from a :class:`CoupResult`; every
reader that needs the result back (settlement's payout stage, the monitor, audit, replay) rebuilds it
here, once, from the typed payload, never from the raw dict.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from services.core.baccarat.engine import (
    CoupResult,
    CoupState,
    HandResult,
    Step,
    TableConfig,
    apply_card,
    apply_decision,
    resolve,
    start,
)
from services.core.contract import (
    BetAccepted,
    BettingClosed,
    BettingOpened,
    CardDealt,
    CoupResolved,
    DecisionMade,
)
from services.core.contract.base import Payload
from services.core.ledger import Wager
from services.core.values import immutable

Phase = Literal["betting", "closed", "dealing"]
"""Where a coup stands: bets taken, betting closed, cards being dealt (resolved coups are no longer
held: ``CoupResolved`` ends the record)."""


class Bet(Protocol):
    """What a wager is made of, in the records that carry one (``PlaceBet``, ``BetPlaced``,
    ``BetAccepted``)."""

    @property
    def bet_id(self) -> str: ...
    @property
    def account_id(self) -> str: ...
    @property
    def spot(self) -> str: ...
    @property
    def stake_minor(self) -> int: ...


def wager_of(bet: Bet) -> Wager:
    """The :class:`Wager` a bet record stands for."""
    return Wager(bet.bet_id, bet.account_id, bet.spot, bet.stake_minor)


@immutable
class Coup:
    """One coup in play (see the module)."""

    coup_id: str
    number: int
    phase: Phase
    started_at: str
    wagers: tuple[Wager, ...] = ()
    state: CoupState | None = None

    # The transitions build the next coup directly (``dataclasses.replace`` costs several times more, and
    # the dealer folds every card twice: looking ahead in decide, then in evolve).

    def accept(self, wager: Wager) -> Coup:
        """With ``wager`` accepted (after those before it)."""
        return Coup(self.coup_id, self.number, self.phase, self.started_at, (*self.wagers, wager), self.state)

    def close(self) -> Coup:
        """Betting closed."""
        return Coup(self.coup_id, self.number, "closed", self.started_at, self.wagers, self.state)

    def deal(self, config: TableConfig) -> Coup:
        """Dealing begins: no card yet."""
        return Coup(self.coup_id, self.number, "dealing", self.started_at, self.wagers, start(config))

    def card(self, card: str, due: Step | None = None) -> Coup:
        """With ``card`` dealt to the hand due (``due``: ``next_step(self.state)``, if known:
        :func:`~services.core.baccarat.engine.apply_card`)."""
        assert self.state is not None, "deal() first"
        state = apply_card(self.state, card, due)
        return Coup(self.coup_id, self.number, self.phase, self.started_at, self.wagers, state)

    def decide(self, hand: str, choice: str) -> Coup:
        """With ``hand``'s ``choice`` taken."""
        assert self.state is not None, "deal() first"
        state = apply_decision(self.state, hand, choice)
        return Coup(self.coup_id, self.number, self.phase, self.started_at, self.wagers, state)


def coup_opened(event: BettingOpened, occurred_at: str) -> Coup:
    """The coup a ``BettingOpened`` (written at ``occurred_at``) opens."""
    return Coup(event.coup_id, event.coup_number, "betting", occurred_at)


def evolve(coup: Coup, event: Payload, config: TableConfig) -> Coup:
    """``coup`` after one event of its table (``config``'s): a bet accepted, betting closed, a card
    dealt (the first one begins the dealing), a decision made; any other event leaves it as it is.
    Dispatched on the exact class (the contract's classes are final; ``isinstance`` against a pydantic
    model class costs five times ``type() is``)."""
    if type(event) is BetAccepted:
        return coup.accept(wager_of(event))
    if type(event) is CardDealt:
        return (coup if coup.state is not None else coup.deal(config)).card(event.card)
    if type(event) is BettingClosed:
        return coup.close()
    if type(event) is DecisionMade:
        return coup.decide(event.hand, event.choice)
    return coup


def result_of(resolved: CoupResolved, hand_order: Sequence[str]) -> CoupResult:
    """The :class:`CoupResult` a ``CoupResolved`` records, its hands in the variant's ``hand_order``
    (a hand the record does not hold is left out)."""
    hands = tuple(
        HandResult(name, resolved.hands[name].cards, resolved.hands[name].total)
        for name in hand_order
        if name in resolved.hands
    )
    return CoupResult(
        variant=resolved.variant,
        rules_version=resolved.rules_version,
        hands=hands,
        outcome=resolved.outcome,
        natural=resolved.natural,
        cards_used=sum(len(h.cards) for h in hands),
        decisions=tuple((d.hand, d.choice) for d in resolved.decisions),
        versus=tuple(resolved.versus.items()),
        events=resolved.events,
    )


@dataclass(slots=True)
class CoupRecord:
    """One coup as its recorded events tell it, nothing re-derived: the bets accepted (by bet id, in
    the order accepted), each card with the hand and shoe position its record gives, each decision with
    who made it, and its id, shoe and number. Mutable, for speed (audit's stated exception,
    docs/architecture.md): :meth:`bet`, :meth:`card` and :meth:`decision` are its only writers. The
    values are taken as given: audit folds typed payloads, replay's ``--coup`` view the raw ones (it
    shows what was written, valid or not)."""

    table_id: str
    coup_id: str = ""
    shoe_id: str = ""
    number: int = 0
    bets: dict[str, Wager] = field(default_factory=dict)
    cards: list[tuple[str, str, int]] = field(default_factory=list)
    decisions: list[tuple[str, str, str]] = field(default_factory=list)

    def bet(self, bet_id: str, account_id: str, spot: str, stake_minor: int) -> Wager:
        """Bet ``bet_id`` accepted (a later record of the same id replaces it)."""
        wager = self.bets[bet_id] = Wager(bet_id, account_id, spot, stake_minor)
        return wager

    def card(self, hand: str, card: str, shoe_position: int) -> None:
        """``card`` dealt to ``hand`` from ``shoe_position``."""
        self.cards.append((hand, card, shoe_position))

    def decision(self, hand: str, choice: str, decided_by: str) -> None:
        """``hand``'s ``choice``, made by ``decided_by``."""
        self.decisions.append((hand, choice, decided_by))

    def dealt(self) -> list[str]:
        """The cards in the order dealt."""
        return [c for _, c, _ in self.cards]

    def dealt_to(self) -> dict[str, list[str]]:
        """The cards each hand was recorded to receive, in order (hands with none left out)."""
        out: dict[str, list[str]] = {}
        for hand, card, _ in self.cards:
            out.setdefault(hand, []).append(card)
        return out

    def replayed(self, config: TableConfig) -> CoupResult:
        """The engine re-run over the recorded cards and decisions (``DomainError`` where the rules
        cannot deal them so)."""
        return resolve(config, self.dealt(), [(h, c) for h, c, _ in self.decisions])
