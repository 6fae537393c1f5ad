"""The event contract (DESIGN §3): one typed, frozen pydantic payload per event type.

The :class:`~services.core.envelope.Envelope` carries the payload as a plain dict so that its hash is
taken over canonical JSON; the models here say what that dict must hold. Every model is named exactly
like the event ``type`` it describes, and :data:`PAYLOADS` maps the one to the other.

What holds, and why:

* **Frozen, exact.** Models are immutable. What we produce is validated with ``extra="forbid"``: a
  misspelt or unplanned field is a bug, caught where the event is written.
* **Tolerant reading.** A reader may meet payloads written by a *newer* producer that added optional
  fields (the only change allowed without a version bump, see ``schemas/README.md``). Read those with
  ``payload_of(envelope, tolerant=True)``: the same models, validated with ``extra="ignore"`` at every
  level (pydantic's per-call ``extra`` override), so unknown fields are dropped, never guessed at.
  Types are checked just as strictly in both modes.
* **No floats, ever.** Every integer field is a strict ``int`` (a float such as ``5.0``, a bool or a
  numeric string is refused), money is in minor units (``*_minor``) next to a 3-letter currency code,
  and free-form JSON (:data:`Json`) excludes floats too — so RFC 8785 canonical JSON is plain
  ``json.dumps(sort_keys=True)`` and the hash of a payload is stable across languages.
* **Balanced transfers.** A ``postings`` list is never empty and sums to zero (double entry).
* **Versioned.** Each type has a current ``schema_version`` (:data:`SCHEMA_VERSIONS`). A breaking
  change bumps it and registers an upcaster next to the model (:data:`UPCASTERS`, keyed by
  ``(type, from_version)``); :func:`payload_of` upcasts old records step by step, so a replay of a
  years-old log reads every record through today's model.
* **Stable reason codes.** Business refusals are :class:`RefusalReason`, audit findings
  :class:`FindingReason`, both listed in precedence order; dead letters and operator-command refusals
  use :class:`services.core.errors.Reason`. Every refusal code is also a ``Reason`` (one vocabulary).

:func:`dump_payload` is the one way to turn a model into the dict an envelope carries
(``model_dump(mode="json")``, nothing excluded), and :func:`to_draft` puts it on the right topic
(:data:`TOPIC_OF_TYPE`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal, TypeAlias, TypeVar, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StringConstraints,
    model_validator,
)
from typing_extensions import TypeAliasType

from services.core import topics
from services.core.contract.reasons import FindingReason, Reason, RefusalReason, Severity
from services.core.envelope import Draft, Envelope
from services.core.errors import DomainError

# --- field types --------------------------------------------------------------------------------

Id = Annotated[str, StringConstraints(min_length=1, max_length=256, pattern=r"^\S+$")]
"""An identifier (table, account, bet, coup, shoe, transfer): non-empty, no whitespace."""

Name = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[a-z][a-z0-9_]*$")]
"""A spot, hand, variant, rounding or outcome name: lower-case snake case (``punter_3``)."""

TypeName = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Z][A-Za-z0-9]*$")]
"""An event or command type name (``PlaceBet``): PascalCase."""

Currency = Annotated[str, StringConstraints(pattern=r"^[A-Z]{3}$")]
"""An ISO 4217-style 3-letter currency code (``EUR``)."""

Minor = StrictInt
"""A signed amount in minor units (a posting). Strict: a float, bool or string is refused."""

Amount = Annotated[StrictInt, Field(ge=0)]
"""A non-negative amount in minor units."""

PositiveAmount = Annotated[StrictInt, Field(gt=0)]
"""A positive amount in minor units (a deposit, a withdrawal, a stake)."""

Count = Annotated[StrictInt, Field(ge=0)]
"""A non-negative count or position."""

Card = Annotated[str, StringConstraints(pattern=r"^[A2-9TJQK][SHDC]$")]
"""A card in canonical form (``9S``, ``TH``): what the dealer records."""

CardInput = Annotated[str, StringConstraints(pattern=r"^(10|[A2-9TJQKatjqk])[SHDCshdc]$")]
"""A card as a smart shoe may send it (``10H``, ``th``); the dealer canonicalises it."""

Timestamp = Annotated[
    str,
    StringConstraints(pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$"),
]
"""An RFC 3339 timestamp, taken from an input's ``occurred_at`` (never from a clock)."""

Digest = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
"""A SHA-256 digest or a 256-bit seed, lower-case hex."""

Text = Annotated[str, StringConstraints(max_length=2000)]
"""A human sentence (a detail); machines read the reason code next to it."""

Choice = Literal["draw", "stand"]
"""A hand's choice where the rules leave it free."""

BetResult = Literal["win", "lose", "push", "refund"]
"""How a bet ended."""

ShoeMode = Literal["rng", "smart"]
"""An RNG shoe shuffled by the dealer from a committed seed, or a physical smart shoe reading cards."""

if TYPE_CHECKING:
    Json: TypeAlias = "bool | int | str | list[Json] | dict[str, Json] | None"
else:
    Json = TypeAliasType(
        "Json",
        Union[StrictBool, StrictInt, str, list["Json"], dict[str, "Json"], None],  # noqa: UP007
    )
"""Any JSON value except floats: what audit findings carry as expected/recorded values."""


ITEMS_MAX: Final = 256
"""The most entries of a small collection in a payload (limits, paytable, spots, hands, postings,
options, decisions): a variant has a dozen spots and a payout a handful of postings."""

BETS_MAX: Final = 20_000
"""The most bet ids one coup lists (a speed-baccarat coup takes about 5,000; twenty thousand ids still
fit a record of :data:`services.core.envelope.RECORD_MAX_BYTES`)."""

JSON_MAX_DEPTH: Final = 8
"""The deepest nesting of free-form JSON (a table's variant options, a finding's subject)."""

JSON_MAX_NODES: Final = 1_000
"""The most values in one free-form JSON field."""

JSON_MAX_CHARS: Final = 2_000
"""The longest string (or object key) in free-form JSON."""


def _bounded_json(value: Any) -> Any:
    """Refuse free-form JSON deeper, larger or with longer strings than the limits above, before it is
    validated (iteratively: a hostile nesting cannot exhaust the stack)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    nodes = 0
    while stack:
        item, depth = stack.pop()
        nodes += 1
        if nodes > JSON_MAX_NODES:
            raise ValueError(f"free-form JSON holds at most {JSON_MAX_NODES} values")
        if depth > JSON_MAX_DEPTH:
            raise ValueError(f"free-form JSON nests at most {JSON_MAX_DEPTH} levels deep")
        if isinstance(item, str) and len(item) > JSON_MAX_CHARS:
            raise ValueError(f"a string in free-form JSON has at most {JSON_MAX_CHARS} characters")
        if isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str) and len(key) > JSON_MAX_CHARS:
                    raise ValueError(f"a key in free-form JSON has at most {JSON_MAX_CHARS} characters")
                stack.append((child, depth + 1))
        elif isinstance(item, list | tuple):
            stack.extend((child, depth + 1) for child in item)
    return value


JsonObject = Annotated[dict[str, Json], BeforeValidator(_bounded_json)]
"""A free-form JSON object within the limits above (:data:`JSON_MAX_DEPTH`, :data:`JSON_MAX_NODES`,
:data:`JSON_MAX_CHARS`)."""

BoundedJson = Annotated[Json, BeforeValidator(_bounded_json)]
"""Any free-form JSON value within the same limits."""


def _few_options(value: Any) -> Any:
    """Refuse an options object with more than :data:`ITEMS_MAX` entries (any other shape is left to the
    variant's validator, which refuses it with a reason the table's operator can read)."""
    if isinstance(value, dict) and len(value) > ITEMS_MAX:
        raise ValueError(f"options hold at most {ITEMS_MAX} entries")
    return value


Options = Annotated[Json, BeforeValidator(_bounded_json), AfterValidator(_few_options)]
"""A table's free-form options: bounded JSON, at most :data:`ITEMS_MAX` entries when an object."""


class Payload(BaseModel):
    """Base of every payload: frozen, unknown fields refused (read tolerantly via :func:`payload_of`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


# --- shared parts -------------------------------------------------------------------------------


class Posting(Payload):
    """One leg of a double-entry transfer: ``amount_minor`` credited (+) or debited (-) to ``account``."""

    account: Id
    amount_minor: Minor


def _balanced(rows: tuple[Posting, ...]) -> tuple[Posting, ...]:
    if not rows:
        raise ValueError("a transfer has at least one posting")
    total = sum(r.amount_minor for r in rows)
    if total != 0:
        raise ValueError(f"postings must sum to zero, they sum to {total}")
    return rows


Postings = Annotated[tuple[Posting, ...], Field(max_length=ITEMS_MAX), AfterValidator(_balanced)]
"""A transfer's postings: non-empty and summing to zero, so money is only ever moved, never made."""


def _balanced_or_none(rows: tuple[Posting, ...]) -> tuple[Posting, ...]:
    return _balanced(rows) if rows else rows


PayoutPostings = Annotated[
    tuple[Posting, ...], Field(max_length=ITEMS_MAX), AfterValidator(_balanced_or_none)
]
"""A payout's postings: summing to zero; empty only when the payout moves nothing — in player-banked
games a losing punter's stake stays in escrow and the bank's own payout releases it (the payout's
validator then requires ``credit_minor == 0``)."""


def _unique(ids: tuple[str, ...]) -> tuple[str, ...]:
    if len(set(ids)) != len(ids):
        raise ValueError("bet ids must be unique")
    return ids


BetIds = Annotated[tuple[Id, ...], Field(max_length=BETS_MAX), AfterValidator(_unique)]
"""Bet ids in the order the bets were accepted, each once."""


class Limit(Payload):
    """A spot's stake limits, both inclusive, ``min_minor <= max_minor``."""

    min_minor: Amount
    max_minor: Amount

    @model_validator(mode="after")
    def _ordered(self) -> Limit:
        if self.min_minor > self.max_minor:
            raise ValueError(f"min_minor {self.min_minor} > max_minor {self.max_minor}")
        return self


class PaytableEntry(Payload):
    """One spot's pay: ``pays`` = ``[win, per]`` (8:1 is ``[8, 1]``, Super 6's 1:2 is ``[1, 2]``), the
    commission in basis points of the win and its named rounding; ``levy_step_minor`` where the house
    levy is rounded to a step (chemin de fer, baccarat banque). A variant may add its own parameters (a
    graded side-bet table…): the paytable is the variant's, so extra keys are allowed here — and only
    here — typed :data:`Json`, never floats. A tolerant read drops them like any unknown field.
    """

    model_config = ConfigDict(frozen=True, extra="allow")
    __pydantic_extra__: dict[str, Json] = Field(init=False)

    pays: tuple[Count, Annotated[StrictInt, Field(gt=0)]]
    commission_bps: Count = 0
    commission_rounding: Name | None = None
    levy_step_minor: Amount | None = None


class TableConfigRecord(Payload):
    """The engine configuration a table runs (``TableConfig.to_dict``): replay rebuilds it from here."""

    variant: Name
    decks: Annotated[StrictInt, Field(gt=0)]
    tie_pays: Count
    commission_bps: Count
    commission_rounding: Name
    punters: Count
    options: Annotated[JsonObject, Field(max_length=ITEMS_MAX)] = Field(default_factory=dict)


class HandRecord(Payload):
    """A hand at the end of a coup: its cards in the order dealt and its total (0–9)."""

    cards: Annotated[tuple[Card, ...], Field(max_length=ITEMS_MAX)]
    total: Annotated[StrictInt, Field(ge=0, le=9)]


class DecisionRecord(Payload):
    """One decision the coup applied, in order (who made it is in the ``DecisionMade`` event)."""

    hand: Name
    choice: Choice


class ChainHeadRecord(Payload):
    """The last ``seq`` and ``hash`` audit saw on one topic and key."""

    seq: Count
    hash: Digest


# --- casino.wallet.requests ---------------------------------------------------------------------


class Deposit(Payload):
    """Cashier: put ``amount_minor`` into a wallet. ``transfer_id`` makes a retry harmless; without one
    the wallet stage uses ``deposit/<event_id>``."""

    account_id: Id
    amount_minor: PositiveAmount
    currency: Currency
    transfer_id: Id | None = None


class Withdraw(Payload):
    """Cashier: take ``amount_minor`` out of a wallet (refused if it cannot cover it)."""

    account_id: Id
    amount_minor: PositiveAmount
    currency: Currency
    transfer_id: Id | None = None


class PlaceBet(Payload):
    """A terminal asks to stake ``stake_minor`` on ``spot`` of the coup open at ``table_id``."""

    account_id: Id
    bet_id: Id
    table_id: Id
    coup_id: Id | None = None
    spot: Name
    stake_minor: PositiveAmount
    currency: Currency


class PayoutIssued(Payload):
    """Settlement's result for one bet. ``credit_minor`` is all that goes back to the wallet (stake
    returned plus win less commission); ``postings`` move it out of the table's escrow and house
    accounts. Holds: postings balance, and the wallet's own postings add up to ``credit_minor``.
    """

    payout_id: Id
    bet_id: Id
    account_id: Id
    table_id: Id
    coup_id: Id
    spot: Name
    stake_minor: Amount
    result: BetResult
    win_minor: Amount
    commission_minor: Amount
    credit_minor: Amount
    currency: Currency
    postings: PayoutPostings

    @model_validator(mode="after")
    def _credit_is_posted(self) -> PayoutIssued:
        mine = sum(p.amount_minor for p in self.postings if p.account == self.account_id)
        if mine != self.credit_minor:
            detail = f"postings credit {self.account_id} with {mine}, credit_minor is {self.credit_minor}"
            raise ValueError(detail)
        return self


class BetRefundDue(Payload):
    """Settlement: a bet the dealer refused gets its stake back from escrow."""

    refund_id: Id
    bet_id: Id
    account_id: Id
    table_id: Id
    coup_id: Id | None = None
    stake_minor: PositiveAmount
    currency: Currency
    reason: RefusalReason


SeamlessCall = Literal["debit", "credit", "rollback"]
"""A seamless-wallet call (DESIGN §10): ``debit`` a stake, ``credit`` a payout (zero closes a lost
round), ``rollback`` a debit."""

SeamlessStatus = Literal[
    "ok", "insufficient_funds", "unknown_account", "duplicate",
    "timeout", "server_error", "transport_error", "bad_answer",
]  # fmt: skip
"""How a seamless call ended. The first four are the operator's definite answers (``duplicate``: the
transaction id was already applied, a success); the others are no answer at all (a timeout, a 5xx, a
refused connection, an unreadable body) and the call is retried with the same transaction id."""


class SeamlessCallAnswered(Payload):
    """Settlement's HTTP shell: what one seamless call (``transaction_id``, try ``attempt``) got back,
    recorded before the adapter acts on it, so that a replay needs no operator. ``elapsed_ms`` is how
    long the try took (its back-off delay included): the adapter's betting-window budget adds them up."""

    transaction_id: Id
    account_id: Id
    attempt: Count
    status: SeamlessStatus
    balance_minor: Amount | None = None
    http_status: Annotated[StrictInt, Field(ge=0, le=999)] | None = None
    elapsed_ms: Count = 0
    detail: Text | None = None


# --- casino.wallet.events -----------------------------------------------------------------------


class SeamlessCallRequested(Payload):
    """The seamless adapter asks its HTTP shell to make one call (DESIGN §10), after ``delay_ms`` (the
    back-off of a retry). The body sent is exactly the protocol's fields here; a retry reuses the
    ``transaction_id`` with the next ``attempt``. ``request`` is the wallet request it serves."""

    transaction_id: Id
    call: SeamlessCall
    account_id: Id
    round_id: Id
    bet_id: Id
    table_id: Id
    amount_minor: Amount
    currency: Currency
    reference_transaction_id: Id | None = None
    attempt: Count
    delay_ms: Count
    request: TypeName




class Transfer(Payload):
    """A movement applied to one wallet, exactly once per ``transfer_id``. Holds: postings balance, the
    wallet's balance moves by exactly its own postings, and by ``amount_minor`` (in or out)."""

    transfer_id: Id
    account_id: Id
    amount_minor: Amount
    currency: Currency
    postings: Postings
    balance_before_minor: Amount
    balance_after_minor: Amount

    @model_validator(mode="after")
    def _balance_follows_postings(self) -> Transfer:
        delta = self.balance_after_minor - self.balance_before_minor
        mine = sum(p.amount_minor for p in self.postings if p.account == self.account_id)
        if mine != delta:
            raise ValueError(f"balance moved by {delta} but {self.account_id}'s postings sum to {mine}")
        if abs(delta) != self.amount_minor:
            raise ValueError(f"balance moved by {delta}, amount_minor is {self.amount_minor}")
        return self


class FundsDeposited(Transfer):
    """A deposit applied: cage → wallet."""


class FundsWithdrawn(Transfer):
    """A withdrawal applied: wallet → cage."""


class StakeReserved(Transfer):
    """A bet's stake held: wallet → the table's escrow; ``BetPlaced`` goes to the table next."""

    bet_id: Id
    table_id: Id
    coup_id: Id | None = None
    spot: Name


class StakeRefunded(Transfer):
    """A refused bet's stake returned: escrow → wallet."""

    bet_id: Id
    table_id: Id
    reason: RefusalReason


class PayoutApplied(Transfer):
    """A ``PayoutIssued`` applied to the wallet, with its postings (empty when it moves nothing)."""

    postings: PayoutPostings

    bet_id: Id
    table_id: Id
    coup_id: Id
    payout_id: Id
    result: BetResult


class WalletRefusal(Payload):
    """A request the wallet stage refused; nothing moved. ``request`` is the refused request's type."""

    transfer_id: Id
    account_id: Id
    request: TypeName
    reason: RefusalReason
    detail: Text | None = None
    bet_id: Id | None = None
    table_id: Id | None = None
    amount_minor: Amount | None = None
    currency: Currency | None = None


class BetRejected(WalletRefusal):
    """A ``PlaceBet`` refused by the wallet (``insufficient_funds``, ``currency_mismatch``…)."""

    bet_id: Id
    table_id: Id


class WithdrawalRejected(WalletRefusal):
    """A ``Withdraw`` refused by the wallet."""


class TransferRefused(WalletRefusal):
    """Any other request refused, e.g. a transfer id reused with other content."""


class OperatorBalanceSynced(Transfer):
    """Seamless wallet: the operator's balance (from an answer) differs from the one our events lead
    to — the first call for a wallet, or money the operator moved outside our tables. The difference
    is posted against the operator's account (``operator:<currency>``) so that each wallet's balance
    still follows its postings; ``transaction_id`` is the answered call that showed it."""

    transaction_id: Id


# --- casino.table.inbox -------------------------------------------------------------------------


class TableCommand(Payload):
    """Base of operator commands: the table they address (also the record's key)."""

    table_id: Id


class OpenTable(TableCommand):
    """Open a table of ``variant``. The paytable is chosen through ``tie_pays``, ``commission_bps``,
    ``commission_rounding`` and the variant's ``options`` (unset: the variant's defaults); the dealer
    publishes the resulting full paytable in ``TableOpened``. ``limits`` per spot; ``operator`` is who
    opened it (DESIGN §8: who did what). The configuration fields are any JSON here: what a variant
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


def _decision_made_v0(data: dict[str, Any]) -> dict[str, Any]:
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


# --- casino.audit.findings ----------------------------------------------------------------------


class AuditFinding(Payload):
    """A discrepancy, with the ids that prove it (``subject``) and the expected and recorded values.
    ``table_id`` is the finding's key: the table, or the account for a wallet finding."""

    reason: FindingReason
    severity: Severity
    table_id: Id
    subject: JsonObject
    expected: BoundedJson = None
    recorded: BoundedJson = None
    detail: Text = ""


class AnomalyDetected(Payload):
    """A fraud or anomaly detector of the monitor fired (past-posting, shoe tampering, outliers, bet
    patterns): the stable ``detector`` code and its ``category``, the ids concerned (``subject``), what
    was ``observed`` against the ``threshold``. No floats: probabilities and z values are written as
    exact fractions or decimal strings. Written on ``casino.monitor.alerts`` (the monitor's own chained
    stream: audit is the only writer of ``casino.audit.findings``)."""

    detector: Name
    category: Name
    severity: Severity
    table_id: Id
    subject: JsonObject
    observed: JsonObject = Field(default_factory=dict)
    threshold: JsonObject = Field(default_factory=dict)
    detail: Text = ""
    honest_probability: Annotated[str, StringConstraints(min_length=1, max_length=64)] | None = None
    """A bound on the chance of what was seen under honest play (a decimal string), where known."""


class AlertsDigest(Payload):
    """The monitor's alerts at a table as audit saw them: how many, and the last one's hash."""

    count: Count
    head: Digest | None = None


class AuditCheckpoint(Payload):
    """A running digest every N rounds: rounds audited, the table's digest over its round records,
    the chain heads seen, findings at the table so far, the count and digest of the monitor's alerts at
    the table; optionally signed (Ed25519 ``signature`` under ``key_id``; ``hmac-sha256`` is the legacy
    scheme, readable but not verifiable without the casino's secret)."""

    table_id: Id
    rounds: Count
    table_digest: Digest
    chain_heads: Annotated[dict[str, ChainHeadRecord], Field(max_length=BETS_MAX)]
    findings: Count
    alerts: AlertsDigest | None = None
    signature: Annotated[str, StringConstraints(min_length=1, max_length=1024)] | None = None
    key_id: Id | None = None
    algorithm: Literal["ed25519", "hmac-sha256"] | None = None

    @model_validator(mode="after")
    def _signature_has_key(self) -> AuditCheckpoint:
        if (self.signature is None) != (self.key_id is None):
            raise ValueError("a signature comes with its key_id, and a key_id with a signature")
        return self


# --- casino.deadletter --------------------------------------------------------------------------


class DeadLetter(Payload):
    """A record a processor could not apply: the reason code, a sentence, and the original bytes."""

    source_topic: Annotated[str, StringConstraints(min_length=1, max_length=249)]
    reason: Reason
    detail: Text
    original: str | None
    original_event_id: Id | None


# --- the registry -------------------------------------------------------------------------------

P = TypeVar("P", bound=Payload)

TOPIC_TYPES: Final[Mapping[str, tuple[type[Payload], ...]]] = {
    topics.WALLET_REQUESTS: (Deposit, Withdraw, PlaceBet, PayoutIssued, BetRefundDue, SeamlessCallAnswered),
    topics.WALLET_EVENTS: (
        FundsDeposited, FundsWithdrawn, StakeReserved, PayoutApplied, StakeRefunded,
        BetRejected, WithdrawalRejected, TransferRefused, SeamlessCallRequested, OperatorBalanceSynced,
    ),
    topics.TABLE_INBOX: (
        OpenTable, OpenShoe, OpenBetting, BetPlaced, CloseBetting, DealCoup, CardRead, Decision, CloseShoe,
    ),
    topics.TABLE_EVENTS: (
        TableOpened, ShoeOpened, BettingOpened, BetAccepted, BetRefused, BettingClosed, CardDealt,
        DecisionRequested, DecisionMade, CoupResolved, CommandRefused, ShoeClosed,
    ),
    topics.AUDIT_FINDINGS: (AuditFinding, AuditCheckpoint),
    topics.MONITOR_ALERTS: (AnomalyDetected,),
    topics.DEADLETTER: (DeadLetter,),
}  # fmt: skip
"""Which payload types each topic holds, in the order of the flow (DESIGN §3). ``AnomalyDetected``
is on the monitor's own ``casino.monitor.alerts``, not on ``casino.audit.findings`` as DESIGN §3's
table has it: a chained stream has one writer per key, and audit already writes findings per table."""

PAYLOADS: Final[Mapping[str, type[Payload]]] = {
    cls.__name__: cls for types in TOPIC_TYPES.values() for cls in types
}
"""Every event type, by name: the envelope's ``type`` is the model's class name."""

TOPIC_OF_TYPE: Final[Mapping[str, str]] = {
    cls.__name__: topic for topic, types in TOPIC_TYPES.items() for cls in types
}
"""The one topic each type is written to (names may gain a prefix; keys must not change)."""

SCHEMA_VERSIONS: Final[Mapping[str, int]] = dict.fromkeys(PAYLOADS, 1)
"""The current ``schema_version`` of each type; bump it (and add an upcaster) for a breaking change."""

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
"""Rewrites a payload of version ``v`` into version ``v + 1``; pure, never drops information silently."""

UPCASTERS: Final[dict[tuple[str, int], Upcaster]] = {
    ("DecisionMade", 0): _decision_made_v0,
}
"""Upcasters by ``(type, from_version)``; each is defined next to its model."""


def upcast(type_: str, version: int, data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` of ``type_`` at ``version`` rewritten to the current version, one step at a time.

    Raises ``DomainError(UNKNOWN_TYPE)`` for an unknown type and ``DomainError(UNSUPPORTED_VERSION)``
    for a version newer than this code knows or with no upcaster path: never a guess.
    """
    if type_ not in PAYLOADS:
        raise DomainError(Reason.UNKNOWN_TYPE, f"no event type {type_!r} in the contract")
    current = SCHEMA_VERSIONS[type_]
    if version > current:
        raise DomainError(Reason.UNSUPPORTED_VERSION, f"{type_} v{version} is newer than v{current}")
    out = dict(data)
    for v in range(version, current):
        step = UPCASTERS.get((type_, v))
        if step is None:
            raise DomainError(Reason.UNSUPPORTED_VERSION, f"no upcaster for {type_} v{v} -> v{v + 1}")
        out = step(out)
    return out


def validate_payload(
    type_: str, data: Mapping[str, Any], *, version: int | None = None, tolerant: bool = False
) -> Payload:
    """Validate ``data`` as a ``type_`` payload written at ``version`` (default: the current one),
    upcasting it first.

    ``tolerant``: ignore unknown fields at every level (reading a newer producer); otherwise refuse
    them. Raises pydantic ``ValidationError`` for a malformed payload, ``DomainError`` as :func:`upcast`.
    """
    model = PAYLOADS.get(type_)
    if model is None:
        raise DomainError(Reason.UNKNOWN_TYPE, f"no event type {type_!r} in the contract")
    upcasted = upcast(type_, SCHEMA_VERSIONS[type_] if version is None else version, data)
    if tolerant:
        return model.model_validate(upcasted, extra="ignore")
    return model.model_validate(upcasted)


def payload_of(envelope: Envelope, *, tolerant: bool = False) -> Payload:
    """The typed payload of ``envelope``, read by its ``type`` and ``schema_version``."""
    return validate_payload(
        envelope.type, envelope.payload, version=envelope.schema_version, tolerant=tolerant
    )


def payload_as(envelope: Envelope, model: type[P], *, tolerant: bool = False) -> P:
    """The payload of ``envelope`` as ``model``; ``DomainError(UNKNOWN_TYPE)`` if the type differs."""
    if envelope.type != model.__name__:
        raise DomainError(Reason.UNKNOWN_TYPE, f"expected {model.__name__}, got {envelope.type}")
    payload = payload_of(envelope, tolerant=tolerant)
    assert isinstance(payload, model)
    return payload


def dump_payload(model: Payload) -> dict[str, Any]:
    """The JSON-ready dict an envelope carries: every field, defaults included, enums as their values,
    tuples as lists. No floats can appear (the types forbid them), so its canonical JSON and hash are
    stable: ``dump_payload(validate_payload(t, dump_payload(m))) == dump_payload(m)``."""
    return model.model_dump(mode="json")


def type_of(model: Payload) -> str:
    """The event ``type`` of a payload: its model's name."""
    name = type(model).__name__
    if name not in PAYLOADS:
        raise DomainError(Reason.UNKNOWN_TYPE, f"{name} is not an event payload")
    return name


def to_draft(model: Payload, key: str) -> Draft:
    """A draft of ``model`` on its topic under ``key``, chained when the topic is an event stream."""
    type_ = type_of(model)
    topic = TOPIC_OF_TYPE[type_]
    return Draft(
        type_, topic, key, dump_payload(model), chained=topic in topics.EVENT_STREAMS,
        schema_version=SCHEMA_VERSIONS[type_],
    )  # fmt: skip
