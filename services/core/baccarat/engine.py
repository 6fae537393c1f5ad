"""The coup state machine shared by every variant.

A coup is a fold over two kinds of input: cards (from an RNG shoe or a smart shoe) and decisions
(a hand's choice to draw or stand where its rules leave it free). The variant says, from what has been
dealt and decided so far, what is due next (:func:`next_step`):

* :class:`Deal` — the next card goes to hand ``hand``;
* :class:`Decide` — hand ``hand`` must choose one of ``options`` (a decision event, never a coin flip);
* :class:`Resolved` — the coup is over; ``result`` holds every hand, the outcome and what is needed to
  grade every bet.

:func:`apply_card` and :func:`apply_decision` refuse input that is not due with a
:class:`~services.core.errors.DomainError` carrying a stable reason code, so a wrong card can never
produce a wrong result. States are immutable; each step returns a new one.

Grading a bet (:meth:`Variant.grade`) gives a :class:`Grade`: win, lose or push, the win per unit
staked as an exact integer ratio and the commission rate in basis points. Turning that into minor
units (with the table's named rounding) is :mod:`services.core.ledger`'s job.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal

from services.core.baccarat.settings import Setting, config_errors
from services.core.cards import CARD_POINTS, Card, check_shoe_holds, hand_total, parse_card
from services.core.errors import DomainError, Reason
from services.core.ledger import Accounts, Grade, Payout, Wager, payout_against
from services.core.shoe import ShoeRules
from services.core.values import immutable

ROUNDING_NAMES: tuple[str, ...] = ("floor", "half_up", "ceil")
"""The rounding rules a table may name (:data:`services.core.ledger.ROUNDINGS`; a test keeps them equal)."""


def rounding_setting(default: str, source: str) -> Setting:
    """The ``commission_rounding`` setting: one of :data:`ROUNDING_NAMES`."""
    return Setting("commission_rounding", "name", default, source, values=ROUNDING_NAMES)


Choice = Literal["draw", "stand"]
CHOICES: tuple[Choice, ...] = ("draw", "stand")


def _frozen(value: Any) -> Any:
    """``value`` with every JSON list as a tuple (an option's value stays hashable)."""
    return tuple(map(_frozen, value)) if isinstance(value, list) else value


@dataclass(frozen=True, slots=True)
class TableConfig:
    """A table's rules configuration: everything that may differ between two tables of one variant.

    ``options`` holds variant-specific settings as sorted ``(name, value)`` pairs (hashable and
    order-independent); read them with :meth:`option`.
    """

    variant: str
    decks: int
    tie_pays: int = 8
    commission_bps: int = 500
    commission_rounding: str = "floor"
    punters: int = 0
    options: tuple[tuple[str, Any], ...] = ()

    def option(self, name: str, default: Any = None) -> Any:
        """The value of variant option ``name``, or ``default``."""
        for key, value in self.options:
            if key == name:
                return value
        return default

    def to_dict(self) -> dict[str, Any]:
        """The JSON form recorded in ``TableOpened`` (read back by :meth:`from_dict`)."""
        return {
            "variant": self.variant, "decks": self.decks, "tie_pays": self.tie_pays,
            "commission_bps": self.commission_bps, "commission_rounding": self.commission_rounding,
            "punters": self.punters, "options": dict(self.options),
        }  # fmt: skip

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> TableConfig:
        """Rebuild the configuration a ``TableOpened`` event recorded: equal to the one written (a list
        option, such as ``side_bets``, is read back as the tuple :meth:`Variant.config` made of it)."""
        return TableConfig(
            variant=str(data["variant"]),
            decks=int(data["decks"]),
            tie_pays=int(data["tie_pays"]),
            commission_bps=int(data["commission_bps"]),
            commission_rounding=str(data["commission_rounding"]),
            punters=int(data["punters"]),
            options=tuple(sorted((k, _frozen(v)) for k, v in dict(data.get("options") or {}).items())),
        )

    def with_options(self, **values: Any) -> TableConfig:
        """A copy with ``values`` merged into ``options``."""
        merged = dict(self.options)
        merged.update(values)
        return replace(self, options=tuple(sorted(merged.items())))


@immutable
class Deal:
    """The next card goes to ``hand``."""

    hand: str


@immutable
class Decide:
    """``hand`` must choose one of ``options``; ``cell`` names the rule that leaves it free."""

    hand: str
    options: tuple[Choice, ...] = CHOICES
    cell: str = ""


@immutable
class HandResult:
    """One hand at the end of a coup."""

    name: str
    cards: tuple[Card, ...]
    total: int


@immutable
class CoupResult:
    """Everything a coup decided.

    ``outcome``: for two-hand games the winning hand's name (``player``/``banker``, ``ponte``/``banker``)
    or ``tie``. For games with several punter hands against one banker, ``versus`` gives each punter
    hand's own result (``win``/``lose``/``tie`` from that hand's side) and ``outcome`` summarises
    (``banker`` if the banker beat every hand, ``punters`` if every hand beat the banker, ``tie`` if all
    tied, ``split`` otherwise). ``events`` names special rules that fired (e.g. ``banker_nine``).
    """

    variant: str
    rules_version: str
    hands: tuple[HandResult, ...]
    outcome: str
    natural: bool
    cards_used: int
    decisions: tuple[tuple[str, str], ...] = ()
    versus: tuple[tuple[str, str], ...] = ()
    events: tuple[str, ...] = ()

    def hand(self, name: str) -> HandResult:
        """The hand called ``name``."""
        for h in self.hands:
            if h.name == name:
                return h
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of docs/cli.md (``deal``) plus ``versus``/``decisions`` where present."""
        out: dict[str, Any] = {
            "variant": self.variant,
            "hands": {h.name: {"cards": list(h.cards), "total": h.total} for h in self.hands},
            "outcome": self.outcome,
            "natural": self.natural,
            "cards_used": self.cards_used,
        }
        if self.versus:
            out["versus"] = dict(self.versus)
        if self.decisions:
            out["decisions"] = [{"hand": h, "choice": c} for h, c in self.decisions]
        if self.events:
            out["events"] = list(self.events)
        return out


def result_from_dict(data: Mapping[str, Any], hand_order: Sequence[str]) -> CoupResult:
    """Rebuild a :class:`CoupResult` from a ``CoupResolved`` payload (hands in ``hand_order``)."""
    hands_data: Mapping[str, Any] = data["hands"]
    hands = tuple(
        HandResult(name, tuple(hands_data[name]["cards"]), int(hands_data[name]["total"]))
        for name in hand_order
        if name in hands_data
    )
    return CoupResult(
        variant=str(data["variant"]),
        rules_version=str(data["rules_version"]),
        hands=hands,
        outcome=str(data["outcome"]),
        natural=bool(data["natural"]),
        cards_used=sum(len(h.cards) for h in hands),
        decisions=tuple((str(d["hand"]), str(d["choice"])) for d in data.get("decisions") or ()),
        versus=tuple((str(k), str(v)) for k, v in dict(data.get("versus") or {}).items()),
        events=tuple(str(e) for e in data.get("events") or ()),
    )


@immutable
class Resolved:
    """The coup is over."""

    result: CoupResult


Step = Deal | Decide | Resolved


@immutable
class CoupState:
    """A coup in progress: the cards dealt to each hand in order, and the decisions taken."""

    config: TableConfig
    hands: tuple[tuple[str, tuple[Card, ...]], ...]
    decisions: tuple[tuple[str, str], ...] = ()
    cards_used: int = 0

    def cards(self, hand: str) -> tuple[Card, ...]:
        """The cards dealt to ``hand`` so far."""
        for name, cards in self.hands:
            if name == hand:
                return cards
        raise KeyError(hand)

    def decision(self, hand: str) -> str | None:
        """The last choice ``hand`` made, if any."""
        for name, choice in reversed(self.decisions):
            if name == hand:
                return choice
        return None


Strategy = Callable[["CoupState", Decide], str]
"""A named way to choose where the rules leave a hand free: ``(state, decide) -> choice``."""


class Variant(ABC):
    """A baccarat variant: its hands, spots, tableau and paytable. Stateless; one instance each."""

    id: ClassVar[str]
    rules_version: ClassVar[str]
    source: ClassVar[str] = ""
    default_decks: ClassVar[int] = 8
    allowed_decks: ClassVar[tuple[int, ...]] = (1, 2, 3, 4, 5, 6, 7, 8)
    shoe_rules: ClassVar[ShoeRules] = ShoeRules()
    card_points: ClassVar[Mapping[Card, int]] = CARD_POINTS
    house_banked: ClassVar[bool] = True
    enumerable: ClassVar[bool] = True
    """Whether exact odds by full enumeration finish in reasonable time (false for the multi-hand games)."""

    def fast_play(self) -> Callable[[Sequence[Card]], CoupResult] | None:
        """A function resolving a coup straight from its cards, where the tableau leaves no choice
        (the same :class:`CoupResult` as :func:`resolve`, tested); ``None``: go through :func:`resolve`."""
        return None

    def config(self, **overrides: Any) -> TableConfig:
        """This variant's default configuration with ``overrides``, after checking them against
        :meth:`settings` (:func:`~services.core.baccarat.settings.config_errors`): anything undeclared,
        of the wrong type or outside the declared values is refused with ``DomainError(BAD_CONFIG)``
        naming every problem."""
        errors = config_errors(self.id, self.settings(), overrides)
        if errors:
            raise DomainError(Reason.BAD_CONFIG, f"{self.id}: " + "; ".join(errors))
        return self.make_config(**overrides)

    def settings(self) -> tuple[Setting, ...]:
        """What a table of this variant may configure (the README's table is generated from it)."""
        return (
            Setting("decks", "int", str(self.default_decks), self.source, values=self.allowed_decks),
            rounding_setting("floor", "the house's rule (a named rounding, docs/event-contract.md)"),
        )

    def make_config(self, **overrides: Any) -> TableConfig:
        """Build the configuration from validated ``overrides`` (names beyond the fields go to options)."""
        fields = {"decks", "tie_pays", "commission_bps", "commission_rounding", "punters"}
        base = TableConfig(variant=self.id, decks=self.default_decks, punters=self.default_punters())
        known = {k: v for k, v in overrides.items() if k in fields}
        extra = {k: v for k, v in overrides.items() if k not in fields}
        cfg = replace(base, **known)
        if extra:
            cfg = cfg.with_options(**extra)
        self.validate(cfg)
        return cfg

    def shoe_rules_for(self, config: TableConfig) -> ShoeRules:
        """How a shoe at a table of ``config`` is burned and where its stop card sits (by default the
        variant's :attr:`shoe_rules`; a variant whose coups grow with the table overrides it)."""
        return self.shoe_rules

    def default_punters(self) -> int:
        """How many punter hands a table has by default (0 where the hands are fixed)."""
        return 0

    def validate(self, config: TableConfig) -> None:
        """Refuse a configuration this variant cannot run."""
        if config.decks not in self.allowed_decks:
            raise DomainError(
                Reason.BAD_CONFIG,
                f"{self.id} is played with {self.allowed_decks} decks, not {config.decks}",
            )

    @abstractmethod
    def hands(self, config: TableConfig) -> tuple[str, ...]:
        """The hands, in the order they receive their first card."""

    @abstractmethod
    def spots(self, config: TableConfig) -> tuple[str, ...]:
        """What can be bet on at a table of this configuration."""

    @abstractmethod
    def next_step(self, state: CoupState) -> Step:
        """What is due next, from the cards and decisions so far."""

    @abstractmethod
    def grade(self, result: CoupResult, spot: str, config: TableConfig) -> Grade:
        """How a bet on ``spot`` fares in ``result``; unknown spot → ``DomainError(UNKNOWN_SPOT)``."""

    def accepts(self, config: TableConfig, accepted: Sequence[Wager], wager: Wager) -> str | None:
        """``None`` when ``wager`` may join the coup beside ``accepted``, else a refusal reason code.

        House-banked games accept any bet on a known spot (limits are the dealer's); player-banked
        games refuse what the bank cannot cover.
        """
        if wager.spot not in self.spots(config):
            return Reason.UNKNOWN_SPOT.value
        return None

    def seat(self, config: TableConfig, wagers: Sequence[Wager], hand: str) -> str | None:
        """Who plays ``hand`` in a coup with ``wagers`` (acceptance order): the account whose decision
        it is (docs/trust.md), or ``None`` when no one is seated there (the dealer then decides by the
        house's rule). By default the ``banker`` hand is the bank's holder (the stake on ``bank``) and
        any other hand the account with the most staked on the spot of its name, the first to bet
        among equals (the ponte of chemin de fer, a baccarat banque tableau's player, a Russian
        punter's own hand)."""
        return seated_account(wagers, "bank" if hand == "banker" else hand)

    def settle(
        self, result: CoupResult, wagers: Sequence[Wager], config: TableConfig, accounts: Accounts
    ) -> tuple[Payout, ...]:
        """Every wager's payout, in the order given. House-banked by default: the house pays wins,
        takes losses and commission goes to ``accounts.commission``."""
        rounding, house = config.commission_rounding, accounts.house
        return tuple(
            payout_against(house, w, self.grade(result, w.spot, config), rounding, accounts) for w in wagers
        )

    def odds_grade(self, result: CoupResult, spot: str, config: TableConfig) -> Grade:
        """How the odds count a bet on ``spot`` per unit staked: its :meth:`grade` unless the money a
        unit really makes depends on more than the grade (e.g. a levy taken in :meth:`settle`)."""
        return self.grade(result, spot, config)

    def odds_includes(self, spot: str, config: TableConfig) -> str:
        """What the odds' figures for ``spot`` include, in words (printed beside them)."""
        return "the bettor's net per unit staked as this table pays it (pushes count 0)"

    def strategies(self) -> Mapping[str, Strategy]:
        """Named decision strategies for the simulator and the odds (none for forced games)."""
        return {}

    def paytable(self, config: TableConfig) -> dict[str, dict[str, Any]]:
        """Per spot: the headline win ratio and commission, for ``TableOpened`` and the README."""
        return {}

    def total(self, cards: Iterable[Card]) -> int:
        """A hand's total under this variant's card values."""
        return hand_total(cards, self.card_points)

    def unknown_spot(self, spot: str) -> DomainError:
        """The error for a bet on a spot this variant does not have."""
        return DomainError(Reason.UNKNOWN_SPOT, f"{self.id} has no spot {spot!r}")


def seated_account(wagers: Sequence[Wager], spot: str) -> str | None:
    """The account with the most staked on ``spot`` among ``wagers`` (acceptance order), the first to bet
    among equals; ``None`` when nobody staked on it."""
    totals: dict[str, int] = {}
    for w in wagers:
        if w.spot == spot:
            totals[w.account_id] = totals.get(w.account_id, 0) + w.stake_minor
    best: str | None = None
    for account, total in totals.items():  # first-insertion order: the order of first bets
        if best is None or total > totals[best]:
            best = account
    return best


# --- the driver: the same four functions for every variant ---------------------------------------


VARIANTS: dict[str, Variant] = {}
"""Every registered variant, by id. Filled by :mod:`services.core.baccarat.variants` (imported with the
package, before anything can reach the driver): the registry depends on the engine, never the reverse."""


def get_variant(variant_id: str) -> Variant:
    """The variant called ``variant_id``; ``DomainError(UNKNOWN_VARIANT)`` otherwise."""
    try:
        return VARIANTS[variant_id]
    except KeyError:
        known = ", ".join(VARIANTS)
        raise DomainError(
            Reason.UNKNOWN_VARIANT, f"unknown variant {variant_id!r} (known: {known})"
        ) from None


def start(config: TableConfig) -> CoupState:
    """A fresh coup at a table of ``config``: every hand empty."""
    return _started(get_variant(config.variant), config)


def _started(variant: Variant, config: TableConfig) -> CoupState:
    return CoupState(config=config, hands=tuple((h, ()) for h in variant.hands(config)))


def next_step(state: CoupState) -> Step:
    """What is due next in ``state``."""
    return get_variant(state.config.variant).next_step(state)


def apply_card(state: CoupState, card: Card, due: Step | None = None) -> CoupState:
    """Deal ``card`` to the hand it is due to; refuse it when no card is due. ``due``: the caller's
    ``next_step(state)`` when it has just computed it (the dealer, dealing from its shoe), so it is
    not computed again; ``None`` computes it."""
    step = next_step(state) if due is None else due
    if not isinstance(step, Deal):
        raise DomainError(Reason.CARD_NOT_DUE, f"no card is due ({_describe(step)}), got {card}")
    return _dealt(state, step, parse_card(card))


def _dealt(state: CoupState, step: Deal, card: Card) -> CoupState:
    """``state`` with the canonical ``card`` dealt as ``step``, the step due in ``state``, says."""
    hands = tuple((n, (*cs, card)) if n == step.hand else (n, cs) for n, cs in state.hands)
    return CoupState(state.config, hands, state.decisions, state.cards_used + 1)


def apply_decision(state: CoupState, hand: str, choice: str) -> CoupState:
    """Record ``hand``'s ``choice``; refuse it unless that hand is asked and the choice allowed."""
    return _decided(state, next_step(state), hand, choice)


def _decided(state: CoupState, step: Step, hand: str, choice: str) -> CoupState:
    """:func:`apply_decision` given the step due in ``state``."""
    if not isinstance(step, Decide) or step.hand != hand:
        raise DomainError(Reason.DECISION_NOT_DUE, f"no decision is due from {hand!r} ({_describe(step)})")
    if choice not in step.options:
        raise DomainError(Reason.INVALID_CHOICE, f"{hand} may choose {list(step.options)}, not {choice!r}")
    return CoupState(state.config, state.hands, (*state.decisions, (hand, choice)), state.cards_used)


def _describe(step: Step) -> str:
    if isinstance(step, Deal):
        return f"a card is due to {step.hand}"
    if isinstance(step, Decide):
        return f"{step.hand} must choose {'/'.join(step.options)}"
    return "the coup is resolved"


def resolve(
    config: TableConfig,
    cards: Sequence[Card],
    decisions: Iterable[tuple[str, str]] = (),
    strategy: Strategy | None = None,
) -> CoupResult:
    """Play a whole coup from ``cards`` in shoe order.

    Decisions come from ``decisions`` in order, then from ``strategy``; a decision due with neither
    raises ``DECISION_REQUIRED``. Running out of cards raises ``TOO_FEW_CARDS``. Extra cards are left
    unused (see ``cards_used``). A card order the table's shoe cannot hold (more copies of a card than
    it has decks) raises ``CARD_NOT_IN_SHOE``.
    """
    cards = tuple(parse_card(c) for c in cards)
    check_shoe_holds(cards, config.decks)
    variant = get_variant(config.variant)  # what next_step looks up, looked up once
    state = _started(variant, config)
    pending = list(decisions)
    pos = 0
    while True:
        step = variant.next_step(state)
        if isinstance(step, Resolved):
            return step.result
        if isinstance(step, Deal):
            if pos >= len(cards):
                raise DomainError(
                    Reason.TOO_FEW_CARDS,
                    f"{config.variant} needs more than the {len(cards)} cards given",
                )
            state = _dealt(state, step, cards[pos])  # apply_card without finding the step again
            pos += 1
            continue
        if pending:
            hand, choice = pending.pop(0)
            state = _decided(state, step, hand, choice)
        elif strategy is not None:
            state = _decided(state, step, step.hand, strategy(state, step))
        else:
            raise DomainError(Reason.DECISION_REQUIRED, f"{step.hand} must choose and no decision was given")
