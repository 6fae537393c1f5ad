"""The intake of both runtimes: bytes on a record ⇄ :class:`~services.core.envelope.Envelope`, and the dead
letter a processor writes for bytes that are no envelope for their topic.

A record's value is the canonical JSON of its envelope (``Envelope.to_json()``), its key the envelope's
``key`` in UTF-8: partitioning by key is what keeps one table's (or one account's) records in order.
The embedded log stores the same bytes.

:func:`decode` never lets a foreign exception escape: anything it cannot turn into an envelope raises
:class:`DecodeError` carrying a stable :class:`~services.core.errors.Reason` and a sentence that depends
on the bytes only, so the caller can dead-letter the raw bytes (docs/architecture.md) instead of crashing or
dropping them. ``undecodable``: not UTF-8 JSON, or not an envelope; ``invalid_payload``: a valid
envelope written to a topic other than the one it names. :func:`dead_letter_of` is that dead letter,
the same from the embedded runner and the Kafka worker.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from services.core.envelope import RECORD_MAX_BYTES, Envelope, derive_id, parse_record, seal
from services.core.errors import Reason
from services.core.processor import Processor, dead_letter

EPOCH_OCCURRED_AT = "1970-01-01T00:00:00.000Z"
"""``occurred_at`` of a dead letter whose original has no readable time (never the wall clock)."""


class DecodeError(Exception):
    """A record that is not an envelope for its topic: the reason code, a sentence, the raw bytes."""

    def __init__(self, reason: Reason, detail: str, raw: bytes | None) -> None:
        super().__init__(f"{reason.value}: {detail}")
        self.reason = reason
        self.detail = detail
        self.raw = raw


def encode(envelope: Envelope) -> bytes:
    """The record value: canonical JSON of the whole envelope, UTF-8."""
    return envelope.to_json()


def encode_key(envelope: Envelope) -> bytes:
    """The record key: the envelope's ``key`` in UTF-8."""
    return envelope.key.encode("utf-8")


def _why(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['type']}"
            for err in exc.errors(include_url=False)
        )
        return f"not an envelope: {problems}"
    return f"not JSON: {exc}"


def decode(raw: bytes | None, topic: str | None = None) -> Envelope:
    """The envelope in ``raw``; ``topic`` (logical name) must be the one the envelope names, if given.

    Raises :class:`DecodeError` for anything else, including a tombstone (``None``).
    """
    if raw is None:
        raise DecodeError(Reason.UNDECODABLE, "empty record (tombstone)", raw)
    try:
        envelope = parse_record(raw)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError, ValidationError
        raise DecodeError(Reason.UNDECODABLE, _why(exc), raw) from exc
    if topic is not None:
        check_topic(envelope, topic, raw)
    return envelope


def check_topic(envelope: Envelope, topic: str, raw: bytes | None) -> None:
    """Raise :class:`DecodeError` (``invalid_payload``) unless ``envelope`` names ``topic``, where it was
    written."""
    if envelope.topic != topic:
        detail = f"envelope says topic {envelope.topic!r} but was written to {topic!r}"
        raise DecodeError(Reason.INVALID_PAYLOAD, detail, raw)


def dead_letter_of(processor: Processor[Any], error: DecodeError, topic: str, position: str) -> Envelope:
    """The dead letter ``processor`` writes for the record ``error`` refused on ``topic``: the reason, the
    sentence and the original bytes, its id derived from ``position`` (the consumer and where the record
    stands: two processors reading one topic dead-letter it apart), its time the one the bytes claim,
    signed with the processor's key where it has one."""
    draft = dead_letter(None, error.raw, error.reason.value, error.detail, topic)
    env = seal(
        draft,
        event_id=derive_id(position, 0),
        occurred_at=occurred_at_of(error.raw),
        producer=processor.name,
        cause=None,
        head=None,
    )
    guard = processor.guard
    return guard.sign(env) if guard is not None else env


def _fields(raw: bytes | None, *names: str) -> tuple[str | None, ...]:
    """The string values of top-level ``names`` in ``raw`` without validating it (``None`` where absent,
    not a string, or where ``raw`` is no JSON object or over the record size)."""
    if raw is None or len(raw) > RECORD_MAX_BYTES:  # never parsed: undecodable anyway
        return (None,) * len(names)
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return (None,) * len(names)
    if not isinstance(data, dict):
        return (None,) * len(names)
    return tuple(v if isinstance(v := data.get(n), str) else None for n in names)


def occurred_at_of(raw: bytes | None) -> str:
    """The ``occurred_at`` a broken record claims, if any readable; else :data:`EPOCH_OCCURRED_AT`."""
    (occurred_at,) = _fields(raw, "occurred_at")
    return EPOCH_OCCURRED_AT if occurred_at is None else occurred_at


def identity_of(raw: bytes | None) -> tuple[str | None, str | None]:
    """``(event_id, producer)`` of a record without validating it (for the output index)."""
    event_id, producer = _fields(raw, "event_id", "producer")
    return event_id, producer


def id_and_type_of(raw: bytes | None) -> tuple[str | None, str | None]:
    """``(event_id, type)`` of a record without validating it (for the log's index of outside bytes)."""
    event_id, type_ = _fields(raw, "event_id", "type")
    return event_id, type_
