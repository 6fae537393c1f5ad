"""The building blocks of every payload: strict field types (no floats), bounded free-form JSON,
the frozen :class:`Payload` base, and the parts payloads share (postings, limits, paytable, hands)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Final, Literal, TypeAlias, TypeVar, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StrictBool,
    StrictInt,
    StringConstraints,
    model_serializer,
    model_validator,
)
from typing_extensions import TypeAliasType

__all__ = [
    "BETS_MAX",
    "ITEMS_MAX",
    "JSON_MAX_CHARS",
    "JSON_MAX_DEPTH",
    "JSON_MAX_NODES",
    "Amount",
    "BetIds",
    "BetResult",
    "BoundedJson",
    "Card",
    "CardInput",
    "ChainHeadRecord",
    "Choice",
    "Count",
    "Currency",
    "DecisionRecord",
    "Digest",
    "HandRecord",
    "Id",
    "Json",
    "JsonObject",
    "Limit",
    "Minor",
    "Name",
    "OmitsUnset",
    "Options",
    "Payload",
    "PayoutPostings",
    "PaytableEntry",
    "PositiveAmount",
    "Posting",
    "Postings",
    "ShoeMode",
    "TableConfigRecord",
    "Text",
    "Timestamp",
    "TypeName",
    "unchecked",
]

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


P = TypeVar("P", bound=Payload)

_set_attr: Final = object.__setattr__


def unchecked(model: type[P], /, **fields: Any) -> P:
    """A ``model`` payload of ``fields`` without validating them again: for outputs the core computes
    from inputs already validated (a payout from a resolved coup's accepted bets, a wallet's transfer
    from its request), where validation costs more than the rest of the work. What ``model_construct``
    does, without its per-field default handling, so the caller gives **every** field, each as
    validation would make it (a tuple for a sequence, a model for a nested payload, an enum member for
    an enum); ``tests/unit/test_unchecked_outputs.py`` validates every one a seeded session builds and
    compares. Inputs are never read this way: readers validate each record (:func:`payload_of`), and
    so does every consumer of what this builds."""
    made = model.__new__(model)
    _set_attr(made, "__dict__", fields)
    _set_attr(made, "__pydantic_fields_set__", set(fields))
    _set_attr(made, "__pydantic_extra__", None)
    _set_attr(made, "__pydantic_private__", None)
    return made


class OmitsUnset(Payload):
    """A payload base: the optional fields named in ``dumped_only_when_given`` are dumped only when they
    were given (even as null). The processors have always left them out when they had nothing to say,
    and a dump that added ``null`` would change those records' hashes; a record read and dumped again
    is the record."""

    dumped_only_when_given: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _omit_unset(self, dump: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = dump(self)
        for name in self.dumped_only_when_given - self.model_fields_set:
            data.pop(name, None)
        return data


# --- shared parts -------------------------------------------------------------------------------


class Posting(Payload):
    """One leg of a double-entry transfer: ``amount_minor`` credited (+) or debited (-) to ``account``."""

    account: Id
    amount_minor: Minor


def _balanced(rows: tuple[Posting, ...]) -> tuple[Posting, ...]:
    if not rows:
        raise ValueError("a transfer has at least one posting")
    total = 0
    for r in rows:  # a loop, not sum() over a generator: run for every transfer read
        total += r.amount_minor
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


class PaytableEntry(OmitsUnset):
    """One spot's pay: ``pays`` = ``[win, per]`` (8:1 is ``[8, 1]``, Super 6's 1:2 is ``[1, 2]``), the
    commission in basis points of the win and its named rounding; ``levy_step_minor`` where the house
    levy is rounded to a step (chemin de fer, baccarat banque). A variant may add its own parameters (a
    graded side-bet table…): the paytable is the variant's, so extra keys are allowed here — and only
    here — typed :data:`Json`, never floats. A tolerant read drops them like any unknown field.
    """

    model_config = ConfigDict(frozen=True, extra="allow")
    __pydantic_extra__: dict[str, Json] = Field(init=False)
    dumped_only_when_given: ClassVar[frozenset[str]] = frozenset({"levy_step_minor"})

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
