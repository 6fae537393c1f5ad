"""The processor contract shared by dealer, settlement, audit and monitor, and the pure step.

A processor is pure: ``handle(state, record) -> (state, drafts)``, written in one of two shapes
(docs/architecture.md §Processors): an :class:`Aggregate` (the dealer) decides events and folds its
**own** events with ``evolve``, so its state can be rebuilt from its log; a :class:`Reactor`
(settlement's stages, the monitor) folds the events of **others** and reacts to them in one pass. What
every processor needs on top of that lives here, once, so that the embedded and Kafka runtimes both
just call :func:`step`:

* **idempotence** — a record whose ``event_id`` was already applied yields nothing and changes
  nothing (Kafka delivers at least once; the SQLite runner may re-read after a crash);
* **sealing** — drafts become envelopes with derived ids (``derive_id(input id, n)`` in the stage's
  own namespace), the input's
  ``occurred_at``, causation and correlation, and ``seq``/``prev_hash`` from the chain heads this
  processor owns;
* **validation at the edge** — every input payload of a contract type is validated against the
  event contract (:mod:`services.core.contract`, tolerant of unknown fields) before the processor sees
  it (a type outside the contract is the processor's to refuse);
* **trust at the input** (docs/trust.md) — a processor built by the composition root carries a
  :class:`~services.core.trust.Guard`: each input is authenticated and authorized *before* anything
  else; a refused record (``unauthenticated``, ``not_permitted``, ``key_mismatch``) becomes a dead
  letter, changes no state and is **not** counted as applied, so a forgery cannot squat the id of the
  real record that follows (its dead letter's id is derived from the forgery's hash, never from its
  ``event_id``). Every output is then signed with the processor's own key. A processor without a
  guard (pure unit tests of one processor) checks and signs nothing;
* **dead letters** — a record the processor cannot understand (``DomainError`` or pydantic
  ``ValidationError`` raised while validating or handling) becomes a ``DeadLetter`` draft with a
  reason code and the original record, and the state does not change: nothing is lost, nothing
  crashes. Any other exception escaping ``handle`` (a bug, or a hole in validation that this one
  record found) becomes a dead letter too, with reason ``internal_error``: one poison pill must never
  halt a casino (docs/trust.md). The state is left as it was — by construction for processors with
  immutable state; a processor with a mutable state must check before it mutates.

Runtimes persist :class:`ProcessorState` (a snapshot) next to their input offset.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from pydantic import ValidationError

from services.core.contract import PAYLOADS, Payload, Written, payload_of, read_payload, to_draft
from services.core.envelope import ChainHead, Draft, Envelope, derive_id, seal_encoded, stage_namespace
from services.core.errors import DomainError, Reason
from services.core.topics import DEADLETTER
from services.core.trust import Guard, Refusal, Sealed
from services.core.values import immutable

S = TypeVar("S")


class Processor(ABC, Generic[S]):
    """A pure stream processor: one input topic (or a join, for audit), decisions as drafts."""

    name: ClassVar[str]
    """The ``producer`` written on every output."""
    stage: ClassVar[str] = ""
    """A name unique among processors (defaults to ``name``): the namespace of derived output ids."""
    writer: ClassVar[str] = ""
    """The name this processor signs its chain heads under (the key of its ``casino.attest`` stream:
    :mod:`services.core.attest`); defaults to the stage name. Two processors of one service that write
    chains of their own need two."""
    inputs: ClassVar[tuple[str, ...]]
    formerly: ClassVar[tuple[str, ...]] = ()
    """Modules this class was defined in before a move (issue #32): the runtimes' snapshots name the
    class by module, and one written under an earlier name is still read (no rebuild on upgrade)."""
    validates_inputs: ClassVar[bool] = True
    """Whether :func:`step` validates each input payload before :meth:`handle` (dead-lettering what
    fails). Audit turns it off: it must check a record's hash and chain *before* its content, and an
    invalid recorded event is a finding for it, not a dead letter. It also means the guard checks
    the MAC over the ``hash`` as written without recomputing it: audit reports an edited record's
    hash itself."""
    guard: Guard | None = None
    """Authenticates inputs and signs outputs; set by the composition root
    (:mod:`services.runtime.compose`). ``None``: no checks and no signatures (unit tests)."""

    @classmethod
    def stage_name(cls) -> str:
        """``stage`` or, when unset, ``name``."""
        return cls.stage or cls.name

    def cause_of(self, record: Envelope) -> Envelope:
        """The cause its outputs of ``record`` name: ``record`` itself, unless its inputs are another
        stage's results that it writes out for that stage (audit's tree stage on Kafka), whose outputs
        name the record that caused the input, the one a regulator reads."""
        return record

    @abstractmethod
    def initial(self) -> S:
        """The state before any input."""

    @abstractmethod
    def handle(self, state: S, record: Envelope) -> tuple[S, list[Draft]]:
        """Apply one input record: the new state and the outputs it causes, in order.

        Raise ``DomainError`` or ``ValidationError`` for a record that cannot be applied at all; a
        business refusal (bet too late, over the limit) is an output event instead.
        """

    def apply(self, state: S, record: Envelope, payload: Payload | None) -> tuple[S, list[Draft]]:
        """:meth:`handle` given the typed ``payload`` :func:`step` has already read from ``record``
        (``None`` when the processor reads its inputs itself, or the type is outside the contract).
        A processor whose handlers take typed payloads overrides this, and its ``handle`` reads the
        payload and calls it: the payload is validated once per record."""
        return self.handle(state, record)


class TypedProcessor(Processor[S]):
    """A processor whose handlers take typed payloads: it implements :meth:`apply`; :meth:`handle` (for
    callers outside :func:`step`) reads the payload first, so the payload is validated once either way."""

    def handle(self, state: S, record: Envelope) -> tuple[S, list[Draft]]:
        """:meth:`apply` to the record's payload, read tolerantly (``None`` outside the contract)."""
        return self.apply(state, record, read_payload(record))

    @abstractmethod
    def apply(self, state: S, record: Envelope, payload: Payload | None) -> tuple[S, list[Draft]]:
        """Apply one record given its typed payload (see :meth:`Processor.apply`)."""


@immutable
class Event:
    """One event as a processor's ``decide`` makes it and its ``evolve`` folds it: the stream it goes to
    (``key``), when it happened (``occurred_at``: :func:`step` seals every output with its input's
    time) and its typed ``payload`` (or, for a reactor's outputs made by the thousand, the payload
    :class:`~services.core.contract.Written` as its record carries it). A *private* fact
    (:class:`Private`) is folded like any event but never recorded: :meth:`Aggregate.apply` drafts
    only the contract's payloads."""

    key: str
    occurred_at: str
    payload: Payload | Private | Written

    @classmethod
    def recorded(cls, record: Envelope) -> Event:
        """The event a sealed record holds (its payload read tolerantly, as a reader would)."""
        return cls(record.key, record.occurred_at, payload_of(record, tolerant=True))


class Private:
    """Base of the facts an aggregate folds but does not record (each subclass says why it must)."""

    __slots__ = ()


def drafts_of(events: Iterable[Event]) -> list[Draft]:
    """The drafts of the events the contract records (a :class:`Private` fact is folded, never written)."""
    return [to_draft(e.payload, e.key) for e in events if not isinstance(e.payload, Private)]


class Aggregate(TypedProcessor[S]):
    """A processor whose state is the fold of its **own** events (the dealer; docs/architecture.md
    §Processors): :meth:`decide` says what an input causes, :meth:`evolve` folds one of those events,
    and the state is never changed any other way, so rebuilding it from the log gives the same state.

    ``decide`` is pure (same state and input, same events; the state is immutable and left as it was);
    a refusal is an event that ``evolve`` folds without effect. :meth:`apply` (what :func:`step` calls)
    decides, folds the events in order and drafts the recorded ones."""

    @abstractmethod
    def decide(self, state: S, record: Envelope, payload: Payload | None) -> list[Event]:
        """The events ``record`` causes, in order (raise ``DomainError`` for one that cannot be applied)."""

    @abstractmethod
    def evolve(self, state: S, event: Event) -> S:
        """``state`` after one of this processor's own events."""

    def apply(self, state: S, record: Envelope, payload: Payload | None) -> tuple[S, list[Draft]]:
        """:meth:`decide`, then :meth:`evolve` over the events; the drafts of those the contract records."""
        events = self.decide(state, record, payload)
        for event in events:
            state = self.evolve(state, event)
        return state, drafts_of(events)

    def fold(self, events: Iterable[Event], state: S | None = None) -> S:
        """:meth:`evolve` over ``events`` from ``state`` (the initial state when ``None``)."""
        state = self.initial() if state is None else state
        for event in events:
            state = self.evolve(state, event)
        return state


class Reactor(TypedProcessor[S]):
    """A processor that reacts to the events of **others** (settlement's stages, the monitor): its
    state is a fold of its inputs, and its outputs are decided from the state before each input.

    :meth:`react` is the one pass :meth:`apply` makes: the *decide* half (the events the input causes)
    and the *evolve* half (the state after it), written together where splitting them would compute
    twice (a payout settled is also the coup's bets forgotten). Pure: same state and input, same
    result; the state passed in is not changed (see each reactor for its one documented exception)."""

    @abstractmethod
    def react(self, state: S, record: Envelope, payload: Payload | None) -> tuple[S, list[Event]]:
        """The state after ``record`` and the events it causes, in order."""

    def apply(self, state: S, record: Envelope, payload: Payload | None) -> tuple[S, list[Draft]]:
        """:meth:`react`, its events drafted."""
        state, events = self.react(state, record, payload)
        return state, drafts_of(events)


class Observer(Reactor[S]):
    """A reactor that only watches (the monitor's account, cage and casework stages): a record the
    contract refuses changes nothing and causes nothing (through :func:`step` the edge has dead-lettered
    it first), so a watcher never raises on what it reads."""

    def handle(self, state: S, record: Envelope) -> tuple[S, list[Draft]]:
        """:meth:`apply` to the record's payload, read here; a refused one passes."""
        try:
            payload = read_payload(record)
        except (ValidationError, DomainError):
            return state, []
        return self.apply(state, record, payload)


class AppliedIds(Protocol):
    """The ids of the records a processor has applied: a ``set`` in memory, or a store of the shell's
    (the embedded runtime keeps them in the log's file, so they never weigh on a snapshot)."""

    def __contains__(self, event_id: object, /) -> bool:
        """Whether ``event_id`` was applied."""

    def add(self, event_id: str, /) -> None:
        """Remember ``event_id`` as applied."""


@dataclass(slots=True)
class ProcessorState(Generic[S]):
    """A processor's whole durable state: its own state, what it has applied, its chain heads."""

    inner: S
    applied: AppliedIds = field(default_factory=set[str])
    heads: dict[tuple[str, str], ChainHead] = field(default_factory=dict)
    records: int = 0


def initial_state(processor: Processor[S]) -> ProcessorState[S]:
    """A fresh :class:`ProcessorState` for ``processor``."""
    return ProcessorState(inner=processor.initial())


ORIGINAL_MAX_CHARS = 1 << 17
"""The most characters of an original record a dead letter quotes: even escaped as ``\\uXXXX`` they
stay under :data:`services.core.envelope.RECORD_MAX_BYTES`, so a dead letter never becomes undecodable
itself (a reader of dead letters would otherwise dead-letter it again, without end)."""


def dead_letter(
    record: Envelope | None, raw: bytes | str | None, reason: str, detail: str, source: str
) -> Draft:
    """A dead-letter draft: the reason code, a sentence, and the original record's bytes (cut to
    :data:`ORIGINAL_MAX_CHARS`, so that a dead letter is always a record every reader accepts)."""
    original = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    if original is None and record is not None:
        original = record.to_json().decode("utf-8")
    if original is not None and len(original) > ORIGINAL_MAX_CHARS:
        detail = f"{detail[:1800]} (original cut to {ORIGINAL_MAX_CHARS} of {len(original)} characters)"
        original = original[:ORIGINAL_MAX_CHARS]
    payload: dict[str, Any] = {
        "source_topic": source,
        "reason": reason,
        "detail": detail[:2000],
        "original": original,
        "original_event_id": record.event_id if record else None,
    }
    return Draft("DeadLetter", DEADLETTER, source, payload, chained=False)


def describe(exc: DomainError | ValidationError) -> str:
    """A stable sentence for a dead letter: no library version or documentation URL in it."""
    if isinstance(exc, DomainError):
        return exc.message
    problems = exc.errors(include_url=False, include_context=False, include_input=False)
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or '(payload)'}: {e['msg']}" for e in problems)


INTERNAL_DETAIL_MAX_CHARS = 300
"""Longest exception message quoted in an ``internal_error`` dead letter."""


def internal_error_detail(processor: Processor[Any], exc: Exception) -> str:
    """The sentence of an ``internal_error`` dead letter: the stage, the exception's class and its
    message cut short. No traceback, no local values: a processor may hold a key, and a dead letter is
    read by operators; the message depends only on the code and the record, so it is deterministic."""
    message = " ".join(str(exc).split())[:INTERNAL_DETAIL_MAX_CHARS]
    return f"{processor.stage_name()} failed on this record: {type(exc).__name__}: {message}".rstrip(": ")


def step(
    processor: Processor[S], state: ProcessorState[S], record: Envelope, raw: bytes | None = None
) -> list[Envelope]:
    """Apply ``record`` to ``state`` in place (the shell owns the mutable holder) and seal the outputs.

    Returns the envelopes to append, in order; an empty list for a re-delivered record. ``raw``: the
    bytes ``record`` was decoded from, when the shell has them (checking its hash is then cheaper).
    """
    return [env for env, _bytes in step_encoded(processor, state, record, raw)]


def _refused(
    processor: Processor[S], guard: Guard, record: Envelope, refusal: Refusal, sealed: Sealed | None
) -> tuple[Envelope, bytes]:
    """The dead letter of a record the guard refused, sealed (its id derives from the record's hash)."""
    draft = dead_letter(record, None, refusal.reason.value, refusal.detail, record.topic)
    refused = seal_encoded(
        draft,
        event_id=derive_id(f"refused/{record.hash}", 0, stage_namespace(processor.stage_name())),
        occurred_at=record.occurred_at,
        producer=processor.name,
        cause=record,
        head=None,
        auth_for=guard.auth_for,
    )
    if sealed is not None:
        sealed.add(refused[0].event_id, refused[1], guard.own, refused[0].topic)
    return refused


def step_encoded(
    processor: Processor[S],
    state: ProcessorState[S],
    record: Envelope,
    raw: bytes | None = None,
    sealed: Sealed | None = None,
) -> list[tuple[Envelope, bytes]]:
    """:func:`step`, each output with its record's bytes (``Envelope.to_json()``, made as it is sealed:
    :func:`~services.core.envelope.seal_encoded`), for a shell that writes them.

    ``sealed``: the shell's memo of the records its processors sealed
    (:class:`~services.core.trust.Sealed`): each output is added to it, and an input whose ``raw``
    bytes are exactly bytes sealed there is admitted without verifying it again
    (:meth:`~services.core.trust.Guard.admit`; never for audit, which verifies every record itself).
    Only a shell that passes ``raw`` as the very bytes ``record`` was decoded from may pass it."""
    if record.event_id in state.applied:
        return []
    guard = processor.guard
    if guard is not None:
        judge = processor.validates_inputs  # audit judges hashes and keys itself: findings, not refusals
        memo = sealed if judge else None  # audit verifies every record independently
        refusal = guard.admit(record, check_hash=judge, raw=raw, bind_key=judge, sealed=memo)
        if refusal is not None:  # not applied: the real record under this id still will be
            return [_refused(processor, guard, record, refusal, sealed)]
    try:  # validate at the edge: a malformed payload never reaches handle
        payload = None
        if processor.validates_inputs and record.type in PAYLOADS:
            payload = payload_of(record, tolerant=True)
        inner, drafts = processor.apply(state.inner, record, payload)
    except (DomainError, ValidationError) as exc:
        reason = exc.reason.value if isinstance(exc, DomainError) else Reason.INVALID_PAYLOAD.value
        inner, drafts = state.inner, [dead_letter(record, None, reason, describe(exc), record.topic)]
    except Exception as exc:  # one bad record must never stop a processor (docs/trust.md)
        detail = internal_error_detail(processor, exc)
        reason = Reason.INTERNAL_ERROR.value
        inner, drafts = state.inner, [dead_letter(record, None, reason, detail, record.topic)]
    out: list[tuple[Envelope, bytes]] = []
    namespace = stage_namespace(processor.stage_name())
    cause = processor.cause_of(record)
    for n, draft in enumerate(drafts):
        head_key = (draft.topic, draft.key)
        head = state.heads.get(head_key) if draft.chained else None
        env, encoded = seal_encoded(
            draft,
            event_id=derive_id(record.event_id, n, namespace),
            occurred_at=record.occurred_at,
            producer=processor.name,
            cause=cause,
            head=head,
            auth_for=guard.auth_for if guard is not None else None,
        )
        if draft.chained:
            state.heads[head_key] = ChainHead(env.seq or 0, env.hash)
        if sealed is not None and guard is not None:
            sealed.add(env.event_id, encoded, guard.own, env.topic)
        out.append((env, encoded))
    state.inner = inner
    state.applied.add(record.event_id)
    state.records += 1
    return out
