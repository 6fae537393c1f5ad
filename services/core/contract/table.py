"""The table family: commands on ``casino.table.inbox`` and the dealer's events on
``casino.table.events`` (docs/event-contract.md)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    Field,
    StrictBool,
    StrictInt,
    StringConstraints,
    model_validator,
)

from services.core.contract.base import (
    ITEMS_MAX,
    BetIds,
    BoundedJson,
    Card,
    CardInput,
    Choice,
    Count,
    Currency,
    DecisionRecord,
    Digest,
    HandRecord,
    Id,
    Limit,
    Name,
    Options,
    Payload,
    PaytableEntry,
    PositiveAmount,
    ShoeMode,
    TableConfigRecord,
    Text,
    Timestamp,
    TypeName,
)
from services.core.reasons import Reason, RefusalReason

__all__ = [
    "BetAccepted",
    "BetPlaced",
    "BetRefused",
    "BettingClosed",
    "BettingOpened",
    "CardDealt",
    "CardRead",
    "CloseBetting",
    "CloseShoe",
    "CommandRefused",
    "CoupResolved",
    "DealCoup",
    "Decision",
    "DecisionMade",
    "DecisionRequested",
    "OpenBetting",
    "OpenShoe",
    "OpenTable",
    "ShoeClosed",
    "ShoeOpened",
    "TableCommand",
    "TableOpened",
]

# --- casino.table.inbox -------------------------------------------------------------------------


class TableCommand(Payload):
    """Base of operator commands: the table they address (also the record's key)."""

    table_id: Id


class OpenTable(TableCommand):
    """Open a table of ``variant``. The paytable is chosen through ``tie_pays``, ``commission_bps``,
    ``commission_rounding`` and the variant's ``options`` (unset: the variant's defaults); the dealer
    publishes the resulting full paytable in ``TableOpened``. ``limits`` per spot; ``operator`` is who
    opened it (docs/architecture.md: who did what). The configuration fields are any JSON here: what a variant
    allows is its own declaration (:mod:`services.core.baccarat.settings`), checked by the dealer, which
    refuses the rest with ``CommandRefused`` (``bad_config``) naming every problem."""

    variant: Name
    currency: Currency
    decks: BoundedJson = None
    tie_pays: BoundedJson = None
    commission_bps: BoundedJson = None
    commission_rounding: BoundedJson = None
    punters: BoundedJson = None
    limits: Annotated[dict[Name, Limit], Field(max_length=ITEMS_MAX)] = Field(default_factory=dict)
    options: Options = Field(default_factory=dict)
    operator: Id | None = None


class OpenShoe(TableCommand):
    """Open a shoe. ``rng``: the dealer shuffles from a 256-bit seed and commits to it — the seed is
    derived by the dealer from its secret shoe key (so the inbox never shows it before the reveal),
    or, for imports and tests only, given as ``seed_hex``; ``smart``: a physical shoe will send
    ``CardRead``s (no seed)."""

    shoe_id: Id
    mode: ShoeMode = "rng"
    seed_hex: Digest | None = None

    @model_validator(mode="after")
    def _no_seed_for_smart(self) -> OpenShoe:
        if self.mode == "smart" and self.seed_hex is not None:
            raise ValueError("a smart shoe has no seed")
        return self


class OpenBetting(TableCommand):
    """Open the betting window of the next coup."""


class CloseBetting(TableCommand):
    """Close the betting window: the accepted bets are final."""


class DealCoup(TableCommand):
    """Start dealing the closed coup."""


class CardRead(TableCommand):
    """A smart shoe read ``card``; the dealer checks that a card is due."""

    card: CardInput
    shoe_id: Id | None = None


class Decision(TableCommand):
    """A hand's choice where the rules leave it free, and who made it."""

    coup_id: Id | None = None
    hand: Name
    choice: Choice
    decided_by: Id | None = None


class CloseShoe(TableCommand):
    """Close the shoe between coups; the dealer reveals the seed."""


class BetPlaced(Payload):
    """Settlement → dealer: a bet whose stake is held in escrow, for the open coup."""

    bet_id: Id
    account_id: Id
    table_id: Id
    coup_id: Id | None = None
    spot: Name
    stake_minor: PositiveAmount
    currency: Currency


# --- casino.table.events ------------------------------------------------------------------------


class TableOpened(Payload):
    """A table is open: its variant and rules version, the full paytable and limits per spot, and the
    engine configuration replay rebuilds the rules from."""

    table_id: Id
    variant: Name
    rules_version: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    decks: Annotated[StrictInt, Field(gt=0)]
    currency: Currency
    paytable: Annotated[dict[Name, PaytableEntry], Field(max_length=ITEMS_MAX)]
    limits: Annotated[dict[Name, Limit], Field(max_length=ITEMS_MAX)]
    config: TableConfigRecord
    spots: Annotated[tuple[Name, ...], Field(max_length=ITEMS_MAX)]


class ShoeOpened(Payload):
    """A shoe is open. ``rng``: ``commitment`` = SHA-256(seed ‖ order) under ``algorithm``, published
    before the first card. ``cards`` in the shoe, ``burned`` before ``first_position``, play stops at
    ``stop_position``."""

    table_id: Id
    shoe_id: Id
    mode: ShoeMode
    commitment: Digest | None
    algorithm: Annotated[str, StringConstraints(min_length=1, max_length=128)] | None
    cards: Annotated[StrictInt, Field(gt=0)]
    decks: Annotated[StrictInt, Field(gt=0)]
    burned: Count
    first_position: Count
    stop_position: Count

    @model_validator(mode="after")
    def _commitment_iff_rng(self) -> ShoeOpened:
        if (self.mode == "rng") != (self.commitment is not None and self.algorithm is not None):
            raise ValueError("an rng shoe publishes its commitment and algorithm; a smart shoe neither")
        return self


class BettingOpened(Payload):
    """The betting window of coup number ``coup_number`` of the shoe is open."""

    table_id: Id
    shoe_id: Id
    coup_id: Id
    coup_number: Annotated[StrictInt, Field(gt=0)]


class BetAccepted(Payload):
    """The dealer took the bet into the open coup."""

    bet_id: Id
    account_id: Id
    table_id: Id
    coup_id: Id
    spot: Name
    stake_minor: PositiveAmount
    currency: Currency


class BetRefused(Payload):
    """The dealer refused a held bet (late, out of limits…): settlement refunds it."""

    bet_id: Id
    account_id: Id
    table_id: Id
    coup_id: Id | None = None
    spot: Name
    stake_minor: PositiveAmount
    currency: Currency
    reason: RefusalReason
    detail: Text | None = None


class BettingClosed(Payload):
    """The window closed; ``bet_ids`` are the coup's accepted bets, final."""

    table_id: Id
    coup_id: Id
    bet_ids: BetIds


class CardDealt(Payload):
    """One card to ``hand``, from ``shoe_position`` of the shoe (0-based, burnt cards included)."""

    table_id: Id
    shoe_id: Id
    coup_id: Id
    hand: Name
    card: Card
    shoe_position: Count


class DecisionRequested(Payload):
    """The rules leave ``hand`` free at tableau cell ``cell``: a ``Decision`` is due."""

    table_id: Id
    coup_id: Id
    hand: Name
    options: Annotated[tuple[Choice, ...], Field(max_length=ITEMS_MAX)]
    cell: Annotated[str, StringConstraints(max_length=64)] = ""


class DecisionMade(Payload):
    """A decision applied to the coup, and who made it (a player, the banker, a named strategy)."""

    table_id: Id
    coup_id: Id
    hand: Name
    choice: Choice
    decided_by: Annotated[str, StringConstraints(min_length=1, max_length=256)]


def decision_made_v0(data: dict[str, Any]) -> dict[str, Any]:
    """v0 → v1: v0 recorded a decision without who made it; v1 requires ``decided_by`` (a regulator
    asks for every choice *and* its maker). Old records say ``unknown``, the very value the dealer
    writes when a ``Decision`` names nobody."""
    return {**data, "decided_by": data.get("decided_by") or "unknown"}


class CoupResolved(Payload):
    """The game-round record: variant and rules version, the hands with their cards and totals, the
    outcome, the decisions, the bets, when it began (betting opened) and ended (last card or decision),
    and where the shoe stands. ``versus`` gives each punter hand's own result in multi-hand games;
    ``events`` names special rules that fired."""

    table_id: Id
    shoe_id: Id
    coup_id: Id
    coup_number: Annotated[StrictInt, Field(gt=0)]
    variant: Name
    rules_version: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    hands: Annotated[dict[Name, HandRecord], Field(max_length=ITEMS_MAX)]
    outcome: Name
    natural: StrictBool
    versus: Annotated[dict[Name, Name], Field(max_length=ITEMS_MAX)] = Field(default_factory=dict)
    events: Annotated[tuple[Name, ...], Field(max_length=ITEMS_MAX)] = ()
    decisions: Annotated[tuple[DecisionRecord, ...], Field(max_length=ITEMS_MAX)] = ()
    bet_ids: BetIds
    started_at: Timestamp
    ended_at: Timestamp
    shoe_position_end: Count
    stop_card_reached: StrictBool


class CommandRefused(Payload):
    """An operator command that does not fit the table's state; the state did not change."""

    table_id: Id
    command_id: Id
    command: TypeName
    reason: Reason
    detail: Text


class ShoeClosed(Payload):
    """The shoe is closed; an rng shoe reveals ``seed_hex`` so anyone can re-derive the order."""

    table_id: Id
    shoe_id: Id
    mode: ShoeMode
    seed_hex: Digest | None
    commitment: Digest | None
    cards_dealt: Count
    coups: Count
