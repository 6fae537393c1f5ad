"""The dealer processor: pure decide/evolve over one table's inbox (docs/architecture.md).

Input: ``casino.table.inbox`` (keyed by table). Output: ``casino.table.events`` (same key, chained).

Per table it runs the betting window, refuses late, unknown, out-of-limit or uncovered bets, deals
from a seeded RNG shoe (committed before the first card, revealed at the end) or accepts a smart
shoe's ``CardRead``s checked against the rules, asks for decisions (``DecisionRequested``) where the
variant leaves a hand free, records them, and resolves the coup with the rules engine.

Operator commands that do not fit the table's state are refused with a ``CommandRefused`` event and a
stable reason code; the table's state does not change. Malformed records never reach here (the
shell dead-letters them) or raise and are dead-lettered by :func:`services.core.processor.step`.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, TypeVar

from services.core import topics
from services.core.baccarat import (
    CoupResult,
    Deal,
    Decide,
    Step,
    TableConfig,
    Variant,
    get_variant,
    next_step,
)
from services.core.baccarat.coup import Coup, coup_opened, wager_of
from services.core.baccarat.coup import evolve as evolve_coup
from services.core.boundary import DEALER_FOR, by_dealer
from services.core.cards import parse_card, shoe_cards
from services.core.contract import (
    BetAccepted,
    BetPlaced,
    BetRefused,
    BettingClosed,
    BettingOpened,
    CardDealt,
    CardRead,
    CloseBetting,
    CloseShoe,
    CommandRefused,
    CoupResolved,
    DealCoup,
    Decision,
    DecisionMade,
    DecisionRecord,
    DecisionRequested,
    HandRecord,
    Limit,
    OpenBetting,
    OpenShoe,
    OpenTable,
    Payload,
    PaytableEntry,
    RefusalReason,
    ShoeClosed,
    ShoeMode,
    ShoeOpened,
    TableConfigRecord,
    TableOpened,
    Written,
    trusted,
)
from services.core.envelope import Draft, Envelope
from services.core.errors import DomainError, Reason
from services.core.ledger import Wager
from services.core.limits import AMOUNT_MAX_MINOR, BALANCE_MAX_MINOR
from services.core.processor import Aggregate, Event, Private, drafts_of
from services.core.shoe import SHUFFLE_ALGORITHM, commitment, play_window, shuffle
from services.core.values import immutable, replace

DEMO_SHOE_KEY = hashlib.sha256(b"casino-ledger demo shoe key: never use in production").digest()
"""A public shoe key for unit tests of the bare processor. The composition root
(:mod:`services.runtime.compose`) always hands the dealer its secret from the keyring instead."""


class Refusal(Exception):
    """An operator command or bet the table cannot take now: becomes an event, not an error."""

    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


_BET_ID = attrgetter("bet_id")

ACCEPTED_COUPS_KEPT = 64
"""How many coups' bet indexes :class:`AcceptedBets` keeps (the open coups of as many tables)."""


class AcceptedBets:
    """Where each bet id stands in a coup's accepted wagers, for the duplicate check of a new bet in
    constant time: scanning every bet before it is quadratic in a coup's bets (5,000 bets a coup at a
    speed table: 12.5 million comparisons, most of the dealer's time in the betting window).

    A cache beside the state, never part of it (the state stays immutable and snapshots unchanged):
    it indexes the wagers tuple it last saw for a coup and follows the tuples that extend it (each
    ``Coup.accept`` copies the references before it, so a tuple holding the same wager object at
    the same position shares the whole prefix); for any other tuple (a restored snapshot, an older
    or a diverging state) it indexes that one afresh. :meth:`holds` therefore answers what the scan
    answers, for any state (``tests/unit/test_accepted_bets.py``)."""

    def __init__(self) -> None:
        self._coups: dict[str, tuple[tuple[Wager, ...], dict[str, int]]] = {}

    def holds(self, coup: Coup, bet_id: str) -> bool:
        """Whether ``coup`` already accepted a bet ``bet_id``."""
        wagers = coup.wagers
        known = self._coups.get(coup.coup_id)
        if known is None or not _same_prefix(wagers, known[0]):
            positions: dict[str, int] = {}
            for i, wager in enumerate(wagers):
                positions.setdefault(wager.bet_id, i)
            known = self._keep(coup.coup_id, wagers, positions)
        elif len(wagers) > len(known[0]):
            positions = known[1]
            for i in range(len(known[0]), len(wagers)):
                positions.setdefault(wagers[i].bet_id, i)
            known = self._keep(coup.coup_id, wagers, positions)
        at = known[1].get(bet_id)
        return at is not None and at < len(wagers)  # an index of a longer tuple knows later bets too

    def _keep(
        self, coup_id: str, wagers: tuple[Wager, ...], positions: dict[str, int]
    ) -> tuple[tuple[Wager, ...], dict[str, int]]:
        self._coups.pop(coup_id, None)
        if len(self._coups) >= ACCEPTED_COUPS_KEPT:
            del self._coups[next(iter(self._coups))]  # the coup seen longest ago
        self._coups[coup_id] = (wagers, positions)
        return wagers, positions


def _same_prefix(wagers: tuple[Wager, ...], known: tuple[Wager, ...]) -> bool:
    """Whether the shorter tuple is the start of the longer (the same wager object at its last place)."""
    n = min(len(wagers), len(known))
    return n == 0 or wagers[n - 1] is known[n - 1]


REFUSAL_CODES = frozenset(RefusalReason)
"""The codes a ``BetRefused`` may carry; a variant refusing a bet for a reason the contract does not
list would be a dead letter (every variant's code is listed: ``bad_amount`` since issue #11)."""


@immutable
class Shoe:
    """The shoe in play. ``order`` is known for an RNG shoe; for a smart shoe it is the cards read so
    far (a card the shoe has already given as many times as its decks hold is refused)."""

    shoe_id: str
    mode: ShoeMode
    order: tuple[str, ...]
    seed_hex: str | None
    commitment: str | None
    position: int
    stop: int


@immutable
class Table:
    """One table's dealer state."""

    table_id: str
    config: TableConfig
    currency: str
    limits: Mapping[str, tuple[int, int]]
    shoe: Shoe | None = None
    coup: Coup | None = None
    coups: int = 0


@immutable
class DealerState:
    """Every table this dealer owns, by id."""

    tables: Mapping[str, Table] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ShoeSeeded(Private):
    """Private fact (folded, never recorded): the seed an ``OpenShoe`` chose itself (``seed_hex``, demo
    and test mode only). ``ShoeOpened`` publishes only the commitment and the seed stays secret until
    ``ShoeClosed``; a seed derived from the dealer's key is re-derived by :func:`evolve_table`, a seed
    the command chose cannot be, so this fact carries it."""

    seed_hex: str


@dataclass(frozen=True, slots=True)
class DealingBegan(Private):
    """Private fact (folded, never recorded): a ``DealCoup`` was accepted, the coup is dealt from now
    on. An RNG shoe's first ``CardDealt`` follows at once and says as much; a smart shoe's first card
    comes later (its ``CardRead``), and until then only this fact tells that a card is due (without
    it, that card would be refused ``card_not_due``). The contract has no event for it."""

    coup_id: str


@dataclass(frozen=True, slots=True)
class Reached(Private):
    """Private fact (folded, never recorded): the table the dealer's look-ahead reached after the events
    before it. Dealing ahead (``DealCoup``, a ``CardRead``, a ``Decision``), ``decide`` folds each
    card it deals through :func:`_evolve_coup`, the fold's own function, to know what is due next;
    :meth:`Dealer.apply` then starts its fold at this fact instead of folding those events a second
    time. Folded from the first event (a reader of the events as decided), it sets the table the events
    before it give; the recorded events alone rebuild the same table (``test_decide_evolve``)."""

    table: Table


Out = list[Payload | Private]
"""The events one input causes, in order, all on this table's stream."""

C = TypeVar("C", bound=Payload)
Handler = Callable[[Table | None, Envelope, C], Out]
"""A command's decide half: the table (``None`` before it opens), the record (its key, id and time)
and its typed payload; the events it causes (raise :class:`Refusal` to refuse it)."""


def table_config(command: OpenTable) -> TableConfig:
    """The engine configuration an ``OpenTable`` command asks for: its fields and ``options`` checked
    against the variant's declared settings; ``DomainError(BAD_CONFIG)`` naming every problem otherwise
    (the dealer answers ``CommandRefused`` and the table is never opened)."""
    variant = get_variant(command.variant)
    options = command.options or {}
    if not isinstance(options, Mapping) or not all(isinstance(k, str) for k in options):
        raise DomainError(Reason.BAD_CONFIG, f"options must be an object of settings, not {options!r:.60}")
    overrides: dict[str, Any] = dict(options)
    for name in ("decks", "tie_pays", "commission_bps", "commission_rounding", "punters"):
        value = getattr(command, name)
        if value is not None:
            if name in overrides:
                raise DomainError(Reason.BAD_CONFIG, f"{name} is given twice (field and option)")
            overrides[name] = value
    return variant.config(**overrides)


class Dealer(Aggregate[DealerState]):
    """The dealer (see the module docstring): an :class:`~services.core.processor.Aggregate` whose
    state is the fold of its own events (:func:`evolve_table`)."""

    name = "dealer"
    inputs = (topics.TABLE_INBOX,)

    def __init__(
        self,
        shoe_key: bytes = DEMO_SHOE_KEY,
        amount_max_minor: int = AMOUNT_MAX_MINOR,
        *,
        allow_seed_hex: bool = False,
    ) -> None:
        """``shoe_key``: the secret every RNG shoe's seed is derived from (:func:`shoe_seed`; the
        dealer's secret in the keyring). ``amount_max_minor``: the largest stake accepted.
        ``allow_seed_hex``: honour an ``OpenShoe``'s own ``seed_hex`` (demo and test mode only:
        otherwise any inbox writer could choose, and so know, the order of a shoe); when off, such a
        command is refused with ``seed_not_allowed``."""
        if not 1 <= amount_max_minor <= BALANCE_MAX_MINOR:
            raise ValueError(f"amount_max_minor is 1 to {BALANCE_MAX_MINOR}, not {amount_max_minor}")
        self.shoe_key = shoe_key
        self.amount_max_minor = amount_max_minor
        self.allow_seed_hex = allow_seed_hex
        self.accepted = AcceptedBets()

    def initial(self) -> DealerState:
        """No tables."""
        return DealerState()

    def decide(self, state: DealerState, record: Envelope, payload: Payload | None) -> list[Event]:
        """Dispatch on the payload's type; refusals become ``CommandRefused``/``BetRefused``."""
        handler = None if payload is None else _HANDLERS.get(type(payload))
        if payload is None or handler is None:
            raise DomainError(Reason.UNKNOWN_TYPE, f"the dealer does not take {record.type!r}")
        table = state.tables.get(record.key)
        out: Out
        try:
            if type(payload) is BetPlaced:  # the exact class (``handler`` is its): half the inputs
                if payload.stake_minor > self.amount_max_minor:
                    raise Refusal(Reason.AMOUNT_TOO_LARGE, f"a stake is at most {self.amount_max_minor}")
                out = on_bet_placed(table, record, payload, self.accepted)
            elif isinstance(payload, OpenShoe):
                if payload.seed_hex is not None and not self.allow_seed_hex:
                    detail = "a shoe's seed comes from the dealer's secret; seed_hex is for demo and tests"
                    raise Refusal(Reason.SEED_NOT_ALLOWED, detail)
                out = on_open_shoe(table, record, payload, self.shoe_key)
            else:
                out = handler(table, record, payload)
        except Refusal as refusal:
            out = [_refused(record, payload, refusal)]
        except DomainError as err:
            if isinstance(payload, BetPlaced):
                raise
            out = [_refused(record, payload, Refusal(err.reason, err.message))]
        return [Event(record.key, record.occurred_at, event) for event in out]

    def apply(
        self, state: DealerState, record: Envelope, payload: Payload | None
    ) -> tuple[DealerState, list[Draft]]:
        """:meth:`~services.core.processor.Aggregate.apply`, the fold started at the last
        :class:`Reached` fact (the table the look-ahead already folded the events before it into)."""
        events = self.decide(state, record, payload)
        start = 0
        for i in range(len(events) - 1, -1, -1):
            if isinstance(events[i].payload, Reached):
                start = i
                break
        for event in events[start:]:
            state = self.evolve(state, event)
        return state, drafts_of(events)

    def evolve(self, state: DealerState, event: Event) -> DealerState:
        """The tables after one of the dealer's own events (:func:`evolve_table`)."""
        table = state.tables.get(event.key)
        assert not isinstance(event.payload, Written), "the dealer writes its events as models"
        new = evolve_table(table, event.payload, event.occurred_at, self.shoe_key)
        if new is None or new is table:
            return state
        return DealerState({**state.tables, event.key: new})


DETAIL_MAX_CHARS = 2000
"""The longest refusal detail an event carries (``Text``)."""


def _refused(record: Envelope, command: Payload, refusal: Refusal) -> Payload:
    detail = refusal.detail[:DETAIL_MAX_CHARS]
    if isinstance(command, BetPlaced):
        return BetRefused(
            bet_id=command.bet_id, account_id=command.account_id, table_id=record.key,
            coup_id=command.coup_id, spot=command.spot, stake_minor=command.stake_minor,
            currency=command.currency, reason=RefusalReason(refusal.reason), detail=detail,
        )  # fmt: skip
    return CommandRefused(
        table_id=record.key, command_id=record.event_id, command=record.type, reason=refusal.reason,
        detail=detail,
    )  # fmt: skip


def _need(table: Table | None) -> Table:
    if table is None:
        raise Refusal(Reason.NO_TABLE, "no such table is open")
    return table


def on_open_table(table: Table | None, rec: Envelope, command: OpenTable) -> Out:
    """Open a table of a variant with its limits; the paytable comes from the engine."""
    if table is not None:
        raise Refusal(Reason.TABLE_EXISTS, f"table {rec.key} is already open")
    config = table_config(command)
    variant = get_variant(config.variant)
    limits = {s: (v.min_minor, v.max_minor) for s, v in command.limits.items()}
    for spot in limits:
        if spot not in variant.spots(config):
            raise DomainError(Reason.UNKNOWN_SPOT, f"{config.variant} has no spot {spot!r}")
    paytable = {
        s: PaytableEntry.model_validate({**v, "commission_rounding": config.commission_rounding})
        for s, v in variant.paytable(config).items()
    }
    return [TableOpened(
        table_id=rec.key, variant=config.variant, rules_version=variant.rules_version,
        decks=config.decks, currency=command.currency, paytable=paytable,
        limits={s: Limit(min_minor=lo, max_minor=hi) for s, (lo, hi) in sorted(limits.items())},
        config=TableConfigRecord.model_validate(config.to_dict()), spots=tuple(variant.spots(config)),
    )]  # fmt: skip


def shoe_seed(shoe_key: bytes, table_id: str, shoe_id: str) -> bytes:
    """A shoe's 256-bit seed: HMAC-SHA256(shoe key, ``table_id/shoe_id``). Secret until the dealer
    reveals it in ``ShoeClosed``; anyone can then check it against the ``ShoeOpened`` commitment."""
    return hmac.new(shoe_key, f"{table_id}/{shoe_id}".encode(), hashlib.sha256).digest()


@functools.lru_cache(maxsize=16)
def rng_order(seed: bytes, decks: int) -> tuple[str, ...]:
    """The order of an RNG shoe of ``decks`` decks shuffled under ``seed``: computed once for
    :func:`on_open_shoe` (the commitment and play window) and :func:`evolve_table` (the shoe held)."""
    return shuffle(seed, shoe_cards(decks))


def on_open_shoe(
    table: Table | None, rec: Envelope, command: OpenShoe, shoe_key: bytes = DEMO_SHOE_KEY
) -> Out:
    """Open a shoe: shuffle from its seed and publish only the commitment (and, for a seed the
    command chose, the private :class:`ShoeSeeded`)."""
    t = _need(table)
    if t.shoe is not None:
        raise Refusal(Reason.SHOE_OPEN, f"shoe {t.shoe.shoe_id} is still open")
    mode = command.mode
    variant = get_variant(t.config.variant)
    cards = len(shoe_cards(t.config.decks))
    given = command.seed_hex
    seeded: Out = []
    if mode == "rng":
        seed = bytes.fromhex(given) if given else shoe_seed(shoe_key, rec.key, command.shoe_id)
        order = rng_order(seed, t.config.decks)
        first, stop = play_window(order, variant.shoe_rules_for(t.config))
        sealed: str | None = commitment(seed, order)
        if given:
            seeded = [ShoeSeeded(seed.hex())]
    else:  # smart: the contract allows no other mode
        first, stop, sealed = 0, cards - variant.shoe_rules_for(t.config).stop_from_end, None
    return [ShoeOpened(
        table_id=t.table_id, shoe_id=command.shoe_id, mode=mode, commitment=sealed,
        algorithm=SHUFFLE_ALGORITHM if mode == "rng" else None, cards=cards,
        decks=t.config.decks, burned=first, first_position=first, stop_position=stop,
    ), *seeded]  # fmt: skip


def on_open_betting(table: Table | None, rec: Envelope, command: OpenBetting) -> Out:
    """Open the betting window of the next coup."""
    t = _need(table)
    if t.shoe is None:
        raise Refusal(Reason.NO_SHOE, "open a shoe before betting")
    if t.coup is not None:
        raise Refusal(Reason.WRONG_PHASE, f"coup {t.coup.coup_id} is still in play ({t.coup.phase})")
    number = t.coups + 1
    coup_id = f"{t.table_id}/{t.shoe.shoe_id}/{number}"
    return [BettingOpened(table_id=t.table_id, shoe_id=t.shoe.shoe_id, coup_id=coup_id, coup_number=number)]


def on_bet_placed(
    table: Table | None, rec: Envelope, bet: BetPlaced, accepted: AcceptedBets | None = None
) -> Out:
    """Accept a bet (funds already held) into the open coup, or refuse it (``accepted``: the dealer's
    index of the coups' bets; without one, the coup's wagers are scanned)."""
    t = _need(table)
    wager = wager_of(bet)
    coup = t.coup
    if coup is None or coup.phase != "betting":
        raise Refusal(Reason.BETTING_CLOSED, "no betting window is open")
    if bet.coup_id not in (None, coup.coup_id):
        raise Refusal(Reason.WRONG_COUP, f"bet for {bet.coup_id}, open coup is {coup.coup_id}")
    if accepted.holds(coup, wager.bet_id) if accepted else wager.bet_id in map(_BET_ID, coup.wagers):
        raise Refusal(Reason.DUPLICATE_BET, f"bet {wager.bet_id} is already in the coup")
    if bet.currency != t.currency:
        raise Refusal(Reason.CURRENCY_MISMATCH, f"table plays {t.currency}, bet is {bet.currency}")
    variant = get_variant(t.config.variant)
    if wager.spot not in _offered(variant, t.config):
        raise Refusal(Reason.UNKNOWN_SPOT, f"{t.config.variant} has no spot {wager.spot!r}")
    lo, hi = t.limits.get(wager.spot, (1, 1 << 62))
    if wager.stake_minor < lo:
        raise Refusal(Reason.UNDER_LIMIT, f"{wager.spot} takes at least {lo}")
    if wager.stake_minor > hi:
        raise Refusal(Reason.OVER_LIMIT, f"{wager.spot} takes at most {hi}")
    # the base rule only checks the spot, done above (house-banked games); the others judge the coup
    base_rule = type(variant).accepts is Variant.accepts
    refusal = None if base_rule else variant.accepts(t.config, coup.wagers, wager)
    if refusal is not None:
        detail = f"{t.config.variant} refuses this bet: {refusal}"
        if refusal not in REFUSAL_CODES:  # a code the contract does not list: a dead letter
            raise DomainError(Reason(refusal), detail)
        raise Refusal(Reason(refusal), detail)
    return [trusted(BetAccepted, {  # every value validated already: the bet's, the table's, the coup's
        "bet_id": wager.bet_id, "account_id": wager.account_id, "table_id": t.table_id,
        "coup_id": coup.coup_id, "spot": wager.spot, "stake_minor": wager.stake_minor, "currency": t.currency,
    })]  # fmt: skip


@functools.lru_cache(maxsize=64)
def _offered_at(variant_id: str, config: TableConfig) -> frozenset[str]:
    return frozenset(get_variant(variant_id).spots(config))


def _offered(variant: Variant, config: TableConfig) -> frozenset[str]:
    """The spots a table of ``config`` offers (``variant.spots``, computed once per configuration: a
    variant's side bets are read from the options for every bet otherwise)."""
    try:
        return _offered_at(variant.id, config)
    except TypeError:  # an option value that is not hashable: asked afresh
        return frozenset(variant.spots(config))


def on_close_betting(table: Table | None, rec: Envelope, command: CloseBetting) -> Out:
    """Close the window: the accepted bets are final."""
    t = _need(table)
    if t.coup is None or t.coup.phase != "betting":
        raise Refusal(Reason.WRONG_PHASE, "no betting window is open")
    bet_ids = tuple(w.bet_id for w in t.coup.wagers)
    return [BettingClosed(table_id=t.table_id, coup_id=t.coup.coup_id, bet_ids=bet_ids)]


def on_deal_coup(table: Table | None, rec: Envelope, command: DealCoup) -> Out:
    """Start dealing: an RNG shoe deals until a decision is due or the coup resolves."""
    t = _need(table)
    if t.coup is None or t.coup.phase != "closed":
        raise Refusal(Reason.WRONG_PHASE, "close betting before dealing")
    began = DealingBegan(t.coup.coup_id)
    return _advance(_evolve_coup(t, began), rec, [began])


def on_card_read(table: Table | None, rec: Envelope, read: CardRead) -> Out:
    """A smart shoe read a card: take it if a card is due, else refuse (and keep the state)."""
    t = _need(table)
    if t.shoe is None or t.shoe.mode != "smart" or t.coup is None or t.coup.state is None:
        raise Refusal(Reason.CARD_NOT_DUE, "no smart-shoe card is due at this table")
    card = parse_card(read.card)
    held = shoe_cards(t.config.decks).count(card)
    if t.shoe.order.count(card) >= held:
        raise Refusal(
            Reason.CARD_NOT_IN_SHOE,
            f"{card}: shoe {t.shoe.shoe_id} ({t.config.decks} deck(s)) has dealt all {held} of it",
        )
    due = next_step(t.coup.state)
    dealt = _card_dealt(t, due.hand if isinstance(due, Deal) else "?", card)
    return _advance(_evolve_coup(t, dealt, due), rec, [dealt])


def on_decision(table: Table | None, rec: Envelope, decision: Decision) -> Out:
    """Record a hand's choice, made by who may make it (:func:`decided_by`), then go on dealing."""
    t = _need(table)
    if t.coup is None or t.coup.state is None:
        raise Refusal(Reason.DECISION_NOT_DUE, "no coup is being dealt")
    if decision.coup_id is not None and decision.coup_id != t.coup.coup_id:
        raise Refusal(Reason.WRONG_COUP, f"coup {t.coup.coup_id} is being dealt, not {decision.coup_id[:80]}")
    made = DecisionMade(
        table_id=t.table_id, coup_id=t.coup.coup_id, hand=decision.hand, choice=decision.choice,
        decided_by=decided_by(t, decision),
    )  # fmt: skip
    return _advance(_evolve_coup(t, made), rec, [made])


def decided_by(t: Table, decision: Decision) -> str:
    """Who made ``decision``, as recorded, once the hand is due: the seated player of that hand in this
    coup (:meth:`~services.core.baccarat.engine.Variant.seat`) naming itself, or the dealer on their
    behalf (``dealer:<account>``; ``dealer`` alone where no one is seated). Anyone else is refused
    ``not_seated`` (docs/trust.md: the policy lets only a terminal claim a player, only the operator
    the dealer)."""
    assert t.coup is not None and t.coup.state is not None
    due = next_step(t.coup.state)
    if not isinstance(due, Decide) or due.hand != decision.hand:
        raise Refusal(Reason.DECISION_NOT_DUE, f"no decision is due from {decision.hand!r}")
    seat = get_variant(t.config.variant).seat(t.config, t.coup.wagers, decision.hand)
    claimed = decision.decided_by
    if by_dealer(claimed):
        named = claimed.partition(":")[2] if claimed else ""
        if named and named != seat:
            raise Refusal(Reason.NOT_SEATED, f"{named[:80]} is not seated at {decision.hand} in this coup")
        return f"{DEALER_FOR}:{seat}" if seat else DEALER_FOR
    if claimed is None or claimed != seat:
        who = f"{seat[:80]}'s" if seat else "the dealer's (no one is seated there)"
        raise Refusal(
            Reason.NOT_SEATED, f"{decision.hand} in this coup is {who} to decide, not {claimed!r:.80}"
        )
    return claimed


def on_close_shoe(table: Table | None, rec: Envelope, command: CloseShoe) -> Out:
    """Close the shoe between coups and reveal its seed."""
    t = _need(table)
    if t.shoe is None:
        raise Refusal(Reason.NO_SHOE, "no shoe is open")
    if t.coup is not None:
        raise Refusal(Reason.WRONG_PHASE, f"coup {t.coup.coup_id} is still in play")
    s = t.shoe
    return [ShoeClosed(
        table_id=t.table_id, shoe_id=s.shoe_id, mode=s.mode, seed_hex=s.seed_hex,
        commitment=s.commitment, cards_dealt=s.position, coups=t.coups,
    )]  # fmt: skip


def _advance(t: Table, rec: Envelope, out: Out) -> Out:
    """Deal RNG cards while one is due; stop at a decision, a smart shoe's turn or the result. ``t`` is
    the table after ``out``; each card dealt is folded into it (:func:`_evolve_coup`) before the next."""
    while True:
        coup, shoe = t.coup, t.shoe
        assert coup is not None and coup.state is not None and shoe is not None
        step = next_step(coup.state)
        if isinstance(step, Deal):
            if shoe.mode == "smart":
                out.append(Reached(t))
                return out
            if shoe.position >= len(shoe.order):
                raise DomainError(Reason.SHOE_EXHAUSTED, f"shoe {shoe.shoe_id} has no card left")
            dealt = _card_drawn(t, step.hand, shoe.order[shoe.position])
            t = _evolve_coup(t, dealt, step)
            out.append(dealt)
            continue
        out.append(Reached(t))
        if isinstance(step, Decide):
            out.append(DecisionRequested(
                table_id=t.table_id, coup_id=coup.coup_id, hand=step.hand, options=tuple(step.options),
                cell=step.cell,
            ))  # fmt: skip
            return out
        out.append(_resolved(t, rec, step.result))
        return out


def _card_drawn(t: Table, hand: str, card: str) -> CardDealt:
    """:func:`_card_dealt` of a card an RNG shoe deals to the hand due (:func:`trusted`: the table's,
    shoe's and coup's ids validated when they were opened, a hand the engine names, a card of the
    shoe's own order)."""
    assert t.coup is not None and t.shoe is not None
    return trusted(CardDealt, {
        "table_id": t.table_id, "shoe_id": t.shoe.shoe_id, "coup_id": t.coup.coup_id, "hand": hand,
        "card": card, "shoe_position": t.shoe.position,
    })  # fmt: skip


def _card_dealt(t: Table, hand: str, card: str) -> CardDealt:
    """The ``CardDealt`` of ``card`` to ``hand``, the hand due (``"?"`` when no card is due: the engine
    then refuses the card as the table folds it)."""
    assert t.coup is not None and t.shoe is not None
    return CardDealt(
        table_id=t.table_id, shoe_id=t.shoe.shoe_id, coup_id=t.coup.coup_id, hand=hand, card=card,
        shoe_position=t.shoe.position,
    )  # fmt: skip


def _resolved(t: Table, rec: Envelope, r: CoupResult) -> CoupResolved:
    assert t.coup is not None and t.shoe is not None
    return CoupResolved(
        table_id=t.table_id, shoe_id=t.shoe.shoe_id, coup_id=t.coup.coup_id, coup_number=t.coup.number,
        variant=r.variant, rules_version=r.rules_version,
        hands={h.name: HandRecord(cards=tuple(h.cards), total=h.total) for h in r.hands},
        outcome=r.outcome, natural=r.natural, versus=dict(r.versus), events=tuple(r.events),
        decisions=tuple(DecisionRecord(hand=h, choice=c) for h, c in r.decisions),  # type: ignore[arg-type]
        bet_ids=tuple(w.bet_id for w in t.coup.wagers), started_at=t.coup.started_at,
        ended_at=rec.occurred_at, shoe_position_end=t.shoe.position,
        stop_card_reached=t.shoe.position >= t.shoe.stop,
    )  # fmt: skip


_HANDLERS: Mapping[type[Payload], Handler[Any]] = {
    OpenTable: on_open_table,
    OpenShoe: on_open_shoe,
    OpenBetting: on_open_betting,
    BetPlaced: on_bet_placed,
    CloseBetting: on_close_betting,
    DealCoup: on_deal_coup,
    CardRead: on_card_read,
    Decision: on_decision,
    CloseShoe: on_close_shoe,
}

# --- evolve: the table after one of its own events -------------------------------------------------


def evolve_table(
    table: Table | None, event: Payload | Private, occurred_at: str, shoe_key: bytes
) -> Table | None:
    """``table`` (``None`` before ``TableOpened``) after one of the dealer's own events, recorded at
    ``occurred_at``: the only way a table changes. An RNG shoe's order and seed follow from the
    dealer's ``shoe_key`` (:func:`shoe_seed`) or, for a seed the command chose, from :class:`ShoeSeeded`;
    refusals and ``DecisionRequested`` change nothing.

    Dispatched on the exact class (the contract's classes are final; ``isinstance`` against a pydantic
    model class costs five times ``type() is``), a coup's bets and cards first: nine events in ten."""
    if (type(event) is BetAccepted or type(event) is CardDealt) and table is not None:
        return _evolve_coup(table, event)
    if isinstance(event, Reached):
        return event.table
    if isinstance(event, TableOpened):
        config = TableConfig.from_dict(event.config.model_dump(mode="json"))
        limits = {s: (v.min_minor, v.max_minor) for s, v in event.limits.items()}
        return Table(event.table_id, config, event.currency, limits)
    if table is None:
        return None
    if isinstance(event, ShoeOpened):
        if event.mode == "rng":
            seed = shoe_seed(shoe_key, table.table_id, event.shoe_id)
            order, seed_hex = rng_order(seed, table.config.decks), seed.hex()
        else:
            order, seed_hex = (), None
        shoe = Shoe(event.shoe_id, event.mode, order, seed_hex, event.commitment, event.first_position,
                    event.stop_position)  # fmt: skip
        return replace(table, shoe=shoe)
    if isinstance(event, ShoeSeeded):
        assert table.shoe is not None, "ShoeSeeded follows ShoeOpened"
        order = rng_order(bytes.fromhex(event.seed_hex), table.config.decks)
        return replace(table, shoe=replace(table.shoe, order=order, seed_hex=event.seed_hex))
    if isinstance(event, BettingOpened):
        return replace(table, coup=coup_opened(event, occurred_at))
    if isinstance(event, CoupResolved):
        return replace(table, coup=None, coups=table.coups + 1)
    if isinstance(event, ShoeClosed):
        return replace(table, shoe=None)
    return _evolve_coup(table, event)


def _evolve_coup(t: Table, event: Payload | Private, due: Step | None = None) -> Table:
    """The table after an event of its open coup: dealing began, a bet accepted, betting closed, a
    card dealt (the shoe moves on; a smart shoe's order is what it has read so far), a decision made;
    any other event leaves it as it is. ``due``: for a card dealt while the coup is dealing, the step
    due before it, when the caller has just computed it (the dealer's look-ahead)."""
    if t.coup is None:
        return t
    if isinstance(event, DealingBegan):
        return replace(t, coup=t.coup.deal(t.config))
    if due is not None and type(event) is CardDealt and t.coup.state is not None:
        coup = t.coup.card(event.card, due)
    else:
        coup = evolve_coup(t.coup, event, t.config) if isinstance(event, Payload) else t.coup
    shoe = t.shoe
    if type(event) is CardDealt and shoe is not None:  # built directly: the hot path of the fold
        order = (*shoe.order, event.card) if shoe.mode == "smart" else shoe.order
        shoe = Shoe(shoe.shoe_id, shoe.mode, order, shoe.seed_hex, shoe.commitment, event.shoe_position + 1,
                    shoe.stop)  # fmt: skip
    elif coup is t.coup:
        return t
    return Table(t.table_id, t.config, t.currency, t.limits, shoe, coup, t.coups)
