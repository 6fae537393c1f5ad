"""Bytes on a Kafka record ⇄ :class:`~services.core.envelope.Envelope`.

A record's value is the canonical JSON of its envelope (``Envelope.to_json()``), its key the envelope's
``key`` in UTF-8: partitioning by key is what keeps one table's (or one account's) records in order.

:func:`decode` never lets a foreign exception escape: anything it cannot turn into an envelope raises
:class:`DecodeError` carrying a stable :class:`~services.core.errors.Reason` and a sentence that depends
on the bytes only, so the caller can dead-letter the raw bytes (docs/architecture.md) instead of crashing or
dropping them. ``undecodable``: not UTF-8 JSON, or not an envelope; ``invalid_payload``: a valid
envelope written to a topic other than the one it names.
"""

from __future__ import annotations

import json

from pydantic import ValidationError

from services.core.envelope import RECORD_MAX_BYTES, Envelope, parse_record
from services.core.errors import Reason

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
    if topic is not None and envelope.topic != topic:
        detail = f"envelope says topic {envelope.topic!r} but was written to {topic!r}"
        raise DecodeError(Reason.INVALID_PAYLOAD, detail, raw)
    return envelope


def occurred_at_of(raw: bytes | None) -> str:
    """The ``occurred_at`` a broken record claims, if any readable; else :data:`EPOCH_OCCURRED_AT`."""
    if raw is not None and len(raw) > RECORD_MAX_BYTES:  # never parsed: undecodable anyway
        return EPOCH_OCCURRED_AT
    try:
        data = json.loads(raw or b"")
    except (ValueError, RecursionError):
        return EPOCH_OCCURRED_AT
    value = data.get("occurred_at") if isinstance(data, dict) else None
    return value if isinstance(value, str) else EPOCH_OCCURRED_AT


def identity_of(raw: bytes | None) -> tuple[str | None, str | None]:
    """``(event_id, producer)`` of a record without validating it (for the output index)."""
    try:
        data = json.loads(raw or b"")
    except (ValueError, RecursionError):
        return None, None
    if not isinstance(data, dict):
        return None, None
    event_id, producer = data.get("event_id"), data.get("producer")
    return (
        event_id if isinstance(event_id, str) else None,
        producer if isinstance(producer, str) else None,
    )
