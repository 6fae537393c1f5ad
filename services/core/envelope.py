"""The event envelope (docs/event-contract.md): canonical JSON, hashes, derived ids, sealing.

Every record on every topic is one :class:`Envelope`. Its ``hash`` is SHA-256 (hex) over the
canonical JSON of the envelope without ``hash``. With no floats in events, RFC 8785 canonical JSON is
``json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`` in UTF-8 (keys here are
ASCII, so code-point order equals RFC 8785's UTF-16 order), which is what :func:`canonical` writes.

On an event stream (one writer per key) the writer sets ``seq`` (0, 1, 2, … per topic and key) and
``prev_hash`` (the previous event's ``hash`` on that topic and key; ``None`` for the first): a
:class:`ChainHead` carries that between events. On request topics both are ``None``.

Ids are derived, never random: an output's ``event_id`` is ``uuid5(NS, f"{causation_id}/{n}")`` where
``n`` numbers the outputs of one input from 0 and ``NS`` is the writing stage's namespace
(:func:`stage_namespace`), so that two stages reading one record never derive the same id. Time is
never read: ``occurred_at`` comes from the input that caused the event.
"""

from __future__ import annotations

import functools
import hashlib
import json
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final, NamedTuple

import orjson
from pydantic import BaseModel, ConfigDict

from services.core.values import immutable

NAMESPACE: Final = uuid.UUID("6f3a8a52-9c1e-5d7b-a1f0-ca51e0ba55a7")
"""The uuid5 namespace of every derived id in casino-ledger. Never change it: ids would change."""


def canonical_json(obj: Any) -> bytes:
    """:func:`canonical` by the standard library's encoder: the reference the fast path is proven
    against (``tests/unit/test_canonical_orjson.py``) and its fallback."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


_ORJSON_SORTED: Final = (
    orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
)
"""Sorted keys; a dataclass or a datetime is refused (the standard encoder refuses them too)."""


def canonical(obj: Any) -> bytes:
    """RFC 8785 canonical JSON (for float-free data) as UTF-8 bytes.

    Written by orjson (sorted keys, compact, UTF-8 unescaped: the same bytes as
    :func:`canonical_json`, about ten times faster); what orjson refuses (an integer beyond 64 bits,
    a non-string key, a lone surrogate, a type it does not know) goes to :func:`canonical_json`, which
    gives the standard library's answer: its bytes or its exception. One difference: orjson writes a
    plain ``Enum`` member or a ``UUID`` (their value, their string), which the standard encoder refuses;
    records hold JSON types only.
    """
    try:
        return orjson.dumps(obj, option=_ORJSON_SORTED)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return canonical_json(obj)


def sha256_hex(data: bytes) -> str:
    """SHA-256 of ``data``, lower-case hex."""
    return hashlib.sha256(data).hexdigest()


@functools.cache
def stage_namespace(stage: str) -> uuid.UUID:
    """The uuid5 namespace of one processing stage: ``uuid5(NAMESPACE, stage)``.

    Several stages consume the same record (audit reads what settlement reads), so each derives its
    outputs' ids in its own namespace; otherwise two stages' first outputs would share an id.
    """
    return uuid.uuid5(NAMESPACE, stage)


_VARIANT_OF_DIGIT: Final = {f"{i:x}": "89ab"[i & 3] for i in range(16)}
"""The first hex digit of a UUID's 9th byte once its two top bits are the RFC 4122 variant ``10``, by
the digit before (its low two bits are kept)."""


def uuid5_str(namespace: uuid.UUID, name: str) -> str:
    """``str(uuid.uuid5(namespace, name))`` without building the ``UUID`` object (property-tested equal):
    the SHA-1's first 32 hex digits, the 13th replaced by the version (5) and the 17th given the
    variant's top bits, cut into the 8-4-4-4-12 groups."""
    x = hashlib.sha1(namespace.bytes + name.encode("utf-8"), usedforsecurity=False).hexdigest()
    return f"{x[:8]}-{x[8:12]}-5{x[13:16]}-{_VARIANT_OF_DIGIT[x[16]]}{x[17:20]}-{x[20:32]}"


def derive_id(cause: str, n: int, namespace: uuid.UUID = NAMESPACE) -> str:
    """The id of the ``n``-th output caused by ``cause``: ``uuid5(namespace, f"{cause}/{n}")``."""
    return uuid5_str(namespace, f"{cause}/{n}")


def name_id(*parts: str) -> str:
    """A stable id for a named thing (a table's first event, an account): uuid5 of the joined parts."""
    return uuid5_str(NAMESPACE, "/".join(parts))


class Envelope(BaseModel):
    """One record on a topic. Frozen; unknown fields refused (we produce it, so it is exact)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    event_id: str
    type: str
    schema_version: int = 1
    topic: str
    key: str
    seq: int | None = None
    occurred_at: str
    causation_id: str | None = None
    causation_hash: str | None = None
    correlation_id: str | None = None
    producer: str
    prev_hash: str | None = None
    hash: str
    payload: dict[str, Any]
    auth: dict[str, str] | None = None
    """Who wrote the record (docs/trust.md): ``{"key_id", "mac"}``, the MAC over ``hash`` with the writer's
    key (:mod:`services.core.trust`). Outside the hash; absent from the bytes when ``None``, so an
    unauthenticated record serializes exactly as before the field existed."""

    def body(self) -> dict[str, Any]:
        """The envelope as a dict without ``hash`` and ``auth``: what the hash covers."""
        data = self.model_dump()
        del data["hash"]
        del data["auth"]
        return data

    def expected_hash(self) -> str:
        """The hash this envelope should carry, recomputed from its content (from the fields as they are,
        as :meth:`to_json` writes them, without a pydantic dump: audit recomputes it for every record)."""
        data = dict(self.__dict__)
        del data["hash"]
        del data["auth"]
        try:
            return sha256_hex(canonical(data))
        except TypeError:  # a model or a dataclass in the payload: pydantic's dump first
            return sha256_hex(canonical(self.body()))

    def to_json(self) -> bytes:
        """The record's bytes on the wire and in the log: canonical JSON of the whole envelope (``auth``
        left out when ``None``)."""
        try:  # the fields as they are (what model_dump gives for JSON values), without a dump
            return canonical(_without_absent_auth(self.__dict__))
        except TypeError:  # a model or a dataclass in the payload: pydantic's dump first
            return canonical(_without_absent_auth(self.model_dump()))


def _without_absent_auth(fields: Mapping[str, Any]) -> dict[str, Any]:
    """An envelope's fields, ``auth`` left out when ``None`` (as it is on the wire)."""
    data = dict(fields)
    if data["auth"] is None:
        del data["auth"]
    return data


@immutable
class ChainHead:
    """The last event written on one topic and key: its ``seq`` and ``hash``."""

    seq: int
    hash: str


class Draft(NamedTuple):
    """An output a processor decided on, before it is sealed into an :class:`Envelope`.

    ``chained``: the topic is an event stream whose writer numbers and chains its events. A named tuple
    (immutable, like the frozen dataclass it was): one is made per output, and a frozen dataclass's
    ``__init__`` costs a microsecond more.
    """

    type: str
    topic: str
    key: str
    payload: Mapping[str, Any]
    chained: bool = True
    schema_version: int = 1


def seal(
    draft: Draft,
    *,
    event_id: str,
    occurred_at: str,
    producer: str,
    cause: Envelope | None,
    head: ChainHead | None,
    auth_for: Callable[[str], dict[str, str]] | None = None,
) -> Envelope:
    """Give ``draft`` its envelope: id, time and causation from ``cause``, seq/prev_hash from ``head``;
    ``auth_for`` (the writer's :meth:`services.core.trust.Guard.auth_for`) authenticates it from its hash."""
    envelope, _bytes = seal_encoded(
        draft, event_id=event_id, occurred_at=occurred_at, producer=producer, cause=cause, head=head,
        auth_for=auth_for,
    )  # fmt: skip
    return envelope


def seal_encoded(
    draft: Draft,
    *,
    event_id: str,
    occurred_at: str,
    producer: str,
    cause: Envelope | None,
    head: ChainHead | None,
    auth_for: Callable[[str], dict[str, str]] | None = None,
) -> tuple[Envelope, bytes]:
    """:func:`seal` (which is this without the bytes), and the record's bytes (``Envelope.to_json()``)
    made from the canonical JSON the hash was taken over, with ``hash`` and ``auth`` spliced in
    (:func:`record_bytes`) instead of serialising the whole envelope a second time
    (docs/performance.md#trust-mac-and-sealed-records)."""
    body = _sealed_body(draft, event_id, occurred_at, producer, cause, head)
    content = canonical(body)
    digest = sha256_hex(content)
    auth = auth_for(digest) if auth_for is not None else None
    return _built(body, digest, auth), record_bytes(content, digest, auth)


def record_bytes(content: bytes, digest: str, auth: Mapping[str, str] | None) -> bytes:
    """The canonical JSON of a whole envelope from ``content``, the canonical JSON of its fields but
    ``hash`` and ``auth`` (what ``digest`` was taken over). In key order ``auth`` comes first and
    ``hash`` right before ``key``; the first ``,"key":`` of ``content`` is the top-level one, as only
    string or null members come before it and a ``"`` inside a string is escaped (a test compares the
    result with :meth:`Envelope.to_json` over generated payloads)."""
    cut = content.find(b',"key":')
    if cut < 0 or not content.startswith(b'{"causation_hash":'):
        raise ValueError("not the canonical JSON of a sealed envelope's fields")
    start = b'{"auth":' + canonical(auth) + b"," if auth is not None else b"{"
    return b"".join((start, content[1:cut], b',"hash":"', digest.encode("ascii"), b'"', content[cut:]))


def _sealed_body(  # noqa: PLR0917 (seal's arguments, once)
    draft: Draft,
    event_id: str,
    occurred_at: str,
    producer: str,
    cause: Envelope | None,
    head: ChainHead | None,
) -> dict[str, Any]:
    """The fields of a sealed envelope but ``hash`` and ``auth`` (what the hash covers)."""
    return {
        "event_id": event_id,
        "type": draft.type,
        "schema_version": draft.schema_version,
        "topic": draft.topic,
        "key": draft.key,
        "seq": (head.seq + 1 if head else 0) if draft.chained else None,
        "occurred_at": occurred_at,
        "causation_id": cause.event_id if cause else None,
        "causation_hash": cause.hash if cause else None,
        "correlation_id": (cause.correlation_id or cause.event_id) if cause else event_id,
        "producer": producer,
        "prev_hash": (head.hash if head else None) if draft.chained else None,
        "payload": dict(draft.payload),
    }


_FIELDS: Final = tuple(Envelope.model_fields)
_FIELDS_SET: Final = frozenset(_FIELDS)
_FIELDS_SET_UNSIGNED: Final = _FIELDS_SET - {"auth"}
_set_attr: Final = object.__setattr__


def _built(body: dict[str, Any], digest: str, auth: dict[str, str] | None) -> Envelope:
    """The envelope of a sealed ``body`` (taken over: the caller hashed it and lets it go), not validated
    again: every field comes from the core (what ``model_construct`` does, without its per-field default
    and alias handling; a test compares it with the envelope its own bytes decode to)."""
    payload = body.pop("payload")  # the fields in Envelope's order: hash, then payload, then auth
    body["hash"] = digest
    body["payload"] = payload
    body["auth"] = auth
    env = Envelope.__new__(Envelope)
    _set_attr(env, "__dict__", body)
    _set_attr(env, "__pydantic_fields_set__", set(_FIELDS_SET if auth is not None else _FIELDS_SET_UNSIGNED))
    _set_attr(env, "__pydantic_extra__", None)
    _set_attr(env, "__pydantic_private__", None)
    return env


def hash_of_bytes(raw: bytes, env: Envelope) -> str | None:
    """The hash of ``env``'s content computed from ``raw``, the canonical bytes it was parsed from, by
    cutting the ``auth`` and ``hash`` members out (no re-serialisation: the pieces left, joined, are fed
    to SHA-256); ``None`` when ``raw`` is not in the canonical form this needs (the caller then
    uses :meth:`Envelope.expected_hash`)."""
    auth = env.auth
    start = 0
    if auth is not None:
        if len(auth) == 2 and "key_id" in auth and "mac" in auth:  # the usual shape, without json.dumps
            # (a key id that canonical JSON would escape makes this differ from the bytes: slow path)
            member = f'{{"auth":{{"key_id":"{auth["key_id"]}","mac":"{auth["mac"]}"}},'.encode()
        else:
            member = b'{"auth":' + canonical(auth) + b","
        if not raw.startswith(member):
            return None
        start = len(member)  # the body is ``{`` and what follows the member
    member = f',"hash":"{env.hash}"'.encode()
    cut = raw.find(member, start)
    if cut < 0:
        return None
    # one SHA-256 call over one buffer: copying about 1 KiB costs less than more calls
    rest = raw[cut + len(member) :]
    return hashlib.sha256(b"{" + raw[start:cut] + rest if start else raw[:cut] + rest).hexdigest()


def request(
    type_: str,
    topic: str,
    key: str,
    payload: Mapping[str, Any],
    *,
    event_id: str,
    occurred_at: str,
    producer: str,
    correlation_id: str | None = None,
) -> Envelope:
    """An unchained record for a request topic, written by an outside party (terminal, operator)."""
    body: dict[str, Any] = {
        "event_id": event_id,
        "type": type_,
        "schema_version": 1,
        "topic": topic,
        "key": key,
        "seq": None,
        "occurred_at": occurred_at,
        "causation_id": None,
        "causation_hash": None,
        "correlation_id": correlation_id or event_id,
        "producer": producer,
        "prev_hash": None,
        "payload": dict(payload),
    }
    return Envelope(hash=sha256_hex(canonical(body)), **body)


RECORD_MAX_BYTES: Final = 1 << 20
"""The largest record accepted (1 MiB): a coup of thousands of bets fits many times over; beyond it a
record is undecodable, however well formed, so no writer can make a processor hold gigabytes."""

ENVELOPE_MAX_CHARS: Final[Mapping[str, int]] = {
    "event_id": 256, "type": 64, "topic": 249, "key": 256, "occurred_at": 64, "producer": 256,
    "causation_id": 256, "causation_hash": 64, "correlation_id": 256, "prev_hash": 64, "hash": 64,
}  # fmt: skip
"""The longest value of each envelope string field (a topic name is at most 249 characters in Kafka)."""
_ENVELOPE_MAX_CHARS_ITEMS: Final = tuple(ENVELOPE_MAX_CHARS.items())
_validate_envelope: Final = Envelope.__pydantic_validator__.validate_python
"""``Envelope.model_validate`` without its Python wrapper (what it calls)."""
_validate_envelope_json: Final = Envelope.__pydantic_validator__.validate_json
"""``Envelope.model_validate_json`` without its Python wrapper."""


_DIGITS_AS_ZEROS: Final = bytes.maketrans(b"123456789", b"000000000")
_LONG_NUMBER: Final = b"0" * 19
"""Nineteen digits in a row: from there an integer may pass 64 bits, which orjson reads as a float."""

NESTING_FAST_MAX: Final = 128
"""Bytes with this many ``[`` and ``{`` (nested or not, in strings or not) are read by the standard
library alone: its nesting limit is the interpreter's stack, orjson's a fixed 1,024 levels."""


def loads(raw: bytes | str) -> Any:
    """``json.loads(raw)``: its value or its exception, read by orjson (about three times faster)
    where orjson's answer is the same, else by the standard library itself.

    orjson reads UTF-8 bytes only and refuses NaN and Infinity, lone surrogates (escaped or encoded),
    a byte-order mark, UTF-16/32, a float beyond the double range: each refusal falls back to
    ``json.loads``, which gives its own value or error. Where orjson would *accept* with another
    answer, it is not asked: an integer beyond 64 bits (which it reads as a float; any run of 19
    digits goes to the standard library) and deep nesting (:data:`NESTING_FAST_MAX`). Duplicate keys:
    the last value, at the first key's place, in both. ``tests/unit/test_loads.py`` holds the table."""
    if (
        isinstance(raw, bytes)
        and raw.count(b"[") + raw.count(b"{") < NESTING_FAST_MAX
        and raw.translate(_DIGITS_AS_ZEROS).find(_LONG_NUMBER) < 0
    ):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass  # the standard library's own answer: a value orjson refuses, or its error message
    return json.loads(raw)


def parse_record(raw: bytes | str | Mapping[str, Any]) -> Envelope:
    """Decode one record; raises ``ValueError`` (JSON, size, an overlong envelope field) or pydantic
    ``ValidationError`` (shape).

    Bytes are first read by pydantic's own JSON parser straight into the envelope
    (``validate_json``: no intermediate dict, 8 % of the dealer's instructions per record); where it
    refuses them, they are read again as before (:func:`loads`, then the envelope validated), so a
    refusal is the one it always was, and what the JSON parser reads differently (a byte-order mark,
    UTF-16, a lone surrogate, nesting past its limit) is read by the standard library's rules. Where it
    accepts, the envelope is the one the other way gives (``tests/unit/test_parse_record.py``: a table
    of such bytes, and generated records)."""
    if isinstance(raw, bytes | str) and len(raw) > RECORD_MAX_BYTES:
        raise ValueError(f"a record is at most {RECORD_MAX_BYTES} bytes, this one has {len(raw)}")
    env: Envelope | None = None
    if isinstance(raw, bytes):
        try:
            env = _validate_envelope_json(raw)
        except (ValueError, RecursionError):  # ValidationError among them: the slow path answers
            env = None
    if env is None:
        data = loads(raw) if isinstance(raw, bytes | str) else dict(raw)
        env = _validate_envelope(data)
    fields = env.__dict__
    for name, most in _ENVELOPE_MAX_CHARS_ITEMS:
        value = fields[name]
        if value is not None and len(value) > most:
            raise ValueError(f"envelope field {name} is at most {most} characters, not {len(value)}")
    return env
