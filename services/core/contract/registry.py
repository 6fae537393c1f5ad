"""The registry of the contract: which types each topic holds, versions and upcasters, and the only ways
to read a payload (:func:`payload_of`) and to write one (:func:`to_draft`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from services.core import topics
from services.core.contract import attest, casework, findings, table, wallet
from services.core.contract.base import Payload
from services.core.envelope import Draft, Envelope
from services.core.reasons import DomainError, Reason

__all__ = [
    "FLAT",
    "PAYLOADS",
    "SCHEMA_VERSIONS",
    "TOPIC_OF_TYPE",
    "TOPIC_TYPES",
    "UPCASTERS",
    "Upcaster",
    "Written",
    "dump_payload",
    "payload_as",
    "payload_of",
    "read_payload",
    "to_draft",
    "trusted",
    "type_of",
    "upcast",
    "validate_payload",
]

# --- the registry -------------------------------------------------------------------------------

P = TypeVar("P", bound=Payload)

TOPIC_TYPES: Final[Mapping[str, tuple[type[Payload], ...]]] = {
    topics.WALLET_REQUESTS: (
        wallet.Deposit, wallet.Withdraw, wallet.PlaceBet, wallet.PayoutIssued, wallet.BetRefundDue,
        wallet.SeamlessCallAnswered,
    ),
    topics.WALLET_EVENTS: (
        wallet.FundsDeposited, wallet.FundsWithdrawn, wallet.StakeReserved, wallet.PayoutApplied,
        wallet.StakeRefunded, wallet.BetRejected, wallet.WithdrawalRejected, wallet.TransferRefused,
        wallet.SeamlessCallRequested, wallet.OperatorBalanceSynced,
    ),
    topics.TABLE_INBOX: (
        table.OpenTable, table.OpenShoe, table.OpenBetting, table.BetPlaced, table.CloseBetting,
        table.DealCoup, table.CardRead, table.Decision, table.CloseShoe,
    ),
    topics.TABLE_EVENTS: (
        table.TableOpened, table.ShoeOpened, table.BettingOpened, table.BetAccepted, table.BetRefused,
        table.BettingClosed, table.CardDealt, table.DecisionRequested, table.DecisionMade,
        table.CoupResolved, table.CommandRefused, table.ShoeClosed,
    ),
    topics.AUDIT_FINDINGS: (findings.AuditFinding, findings.AuditCheckpoint),
    topics.MONITOR_ALERTS: (findings.AnomalyDetected, casework.AlertCaseChanged),
    topics.CASEWORK: (casework.WorkAlert,),
    topics.CAGE: (casework.CageDeposit,),
    topics.DEADLETTER: (findings.DeadLetter,),
    topics.ATTEST: (attest.HeadsAttested,),
}  # fmt: skip
"""Which payload types each topic holds, in the order of the flow (docs/event-contract.md).
``AnomalyDetected``
is on the monitor's own ``casino.monitor.alerts``, not on ``casino.audit.findings`` as
docs/event-contract.md's
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
    ("DecisionMade", 0): table.decision_made_v0,
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
    current = SCHEMA_VERSIONS[type_]
    # a payload at the current version (every record but an old one) is validated as it is: no copy
    upcasted = data if version is None or version == current else upcast(type_, version, data)
    validate = model.__pydantic_validator__.validate_python  # what model_validate calls, without its wrapper
    return validate(upcasted, extra="ignore") if tolerant else validate(upcasted)  # type: ignore[no-any-return]


def payload_of(envelope: Envelope, *, tolerant: bool = False) -> Payload:
    """The typed payload of ``envelope``, read by its ``type`` and ``schema_version``."""
    return validate_payload(
        envelope.type, envelope.payload, version=envelope.schema_version, tolerant=tolerant
    )


def read_payload(envelope: Envelope) -> Payload | None:
    """The payload of ``envelope`` read tolerantly, or ``None`` for a type outside the contract (a
    processor's ``handle`` reads its input so when :func:`services.core.processor.step` has not)."""
    return payload_of(envelope, tolerant=True) if envelope.type in PAYLOADS else None


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


@dataclass(frozen=True, slots=True)
class Written:
    """A payload the core writes directly as the dict an envelope carries, without building its model:
    for the outputs it makes by the thousand from values already validated (a speed-baccarat coup's
    payouts), where building a model and dumping it cost five times the rest of the output. ``model``
    names the contract's class (never a type-name string: renaming a model is a type error here too);
    ``data`` is exactly what :func:`dump_payload` of the validated model gives, keys in the model's
    order (``tests/unit/test_written_outputs.py`` validates every one a seeded session writes); the
    record's reader validates it like any other."""

    model: type[Payload]
    data: Mapping[str, Any]


_DRAFTED: Final[Mapping[type[Payload], tuple[str, str, bool, int]]] = {
    cls: (name, TOPIC_OF_TYPE[name], TOPIC_OF_TYPE[name] in topics.EVENT_STREAMS, SCHEMA_VERSIONS[name])
    for name, cls in PAYLOADS.items()
}
"""What a draft of each contract class carries besides its key and data: its type name, topic, whether
the topic is chained and the schema version (one lookup per output instead of four)."""


FLAT: Final[frozenset[type[Payload]]] = frozenset({table.BetAccepted, table.CardDealt})
"""Payloads of scalar fields only (strings and integers), made by the thousand: their JSON dump is the
dict of their fields as they hold them (``tests/unit/test_written_outputs.py`` checks the field types and
the dumps), so :func:`to_draft` copies that dict instead of running pydantic's serializer, and
:func:`trusted` may build them."""

_set_attr: Final = object.__setattr__


def trusted(model: type[P], data: dict[str, Any]) -> P:
    """``model`` (one of :data:`FLAT`) holding ``data`` as it is, not validated: for the outputs the
    dealer makes by the thousand (a bet accepted, a card dealt) from values already validated (the
    input's fields, the table's state), where validating costs more than the rest of building one. As
    :class:`Written`, ``data`` must be exactly what :func:`dump_payload` of the validated model gives,
    every field, in the model's order (``tests/unit/test_written_outputs.py`` validates every one a
    seeded session writes); the record's reader validates it like any other."""
    assert model in FLAT, f"{model.__name__} is not a flat payload"
    built = model.__new__(model)
    _set_attr(built, "__dict__", data)
    _set_attr(built, "__pydantic_fields_set__", set(data))
    _set_attr(built, "__pydantic_extra__", None)
    _set_attr(built, "__pydantic_private__", None)
    return built


def to_draft(model: Payload | Written, key: str) -> Draft:
    """A draft of ``model`` on its topic under ``key``, chained when the topic is an event stream."""
    cls = model.model if isinstance(model, Written) else type(model)
    drafted = _DRAFTED.get(cls)
    if drafted is None:
        raise DomainError(Reason.UNKNOWN_TYPE, f"{cls.__name__} is not an event payload")
    if isinstance(model, Written):
        data = model.data
    else:
        data = dict(model.__dict__) if cls in FLAT else dump_payload(model)
    type_, topic, chained, version = drafted
    return Draft(type_, topic, key, data, chained, version)
