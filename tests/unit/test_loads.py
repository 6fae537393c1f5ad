"""Records are read by orjson where it answers as the standard library does, and by ``json.loads``
everywhere else: the same value or the same error for every input, so the same records are accepted,
refused, and dead-lettered with the same reason and sentence as before orjson read them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.core import envelope
from services.core.envelope import NESTING_FAST_MAX, loads
from services.runtime.intake import DecodeError, decode
from tests.helpers.typed import typed


def _answer(read: Any, raw: bytes | str) -> tuple[str, str]:
    """What reading ``raw`` gives: the value (its repr tells an int from a float, NaN included) with the
    types of every node, or the error's class and sentence."""
    try:
        value = read(raw)
    except (ValueError, RecursionError) as exc:
        return type(exc).__name__, str(exc)
    return "value", repr(typed(value))


DEEP = NESTING_FAST_MAX + 1
CASES = [
    ("an envelope-like object", b'{"a":1,"b":"x","c":[true,false,null],"d":{"e":-3}}'),
    ("duplicate keys: the last value at the first place", b'{"a":1,"b":2,"a":3}'),
    ("duplicate keys, nested", b'{"p":{"a":1,"a":[1]}}'),
    ("NaN", b'{"a":NaN}'),
    ("Infinity", b'{"a":Infinity}'),
    ("-Infinity", b'{"a":-Infinity}'),
    ("a float beyond the double range", b'{"a":1e400}'),
    ("a float under it", b'{"a":1e-400}'),
    ("an integer of 64 bits", b'{"a":18446744073709551615}'),
    ("an integer beyond 64 bits", b'{"a":18446744073709551616}'),
    ("a negative integer beyond 64 bits", b'{"a":-9223372036854775809}'),
    ("a 30-digit integer", b'{"a":123456789012345678901234567890}'),
    ("5,000 digits", b'{"a":' + b"9" * 5000 + b"}"),
    ("a long fraction", b'{"a":0.30000000000000004441}'),
    ("-0", b'{"a":-0}'),
    ("-0.0", b'{"a":-0.0}'),
    ("1E2", b'{"a":1E2}'),
    ("an escaped lone surrogate", b'{"a":"\\ud800"}'),
    ("an encoded lone surrogate", b'{"a":"\xed\xa0\x80"}'),
    ("a lone surrogate in a key", b'{"\\udc00":1}'),
    ("an escaped surrogate pair", b'{"a":"\\ud83d\\ude00"}'),
    ("a UTF-8 byte-order mark", b'\xef\xbb\xbf{"a":1}'),
    ("UTF-16 with its mark", '{"a":1}'.encode("utf-16")),
    ("UTF-16-LE", '{"a":1}'.encode("utf-16-le")),
    ("UTF-32-BE", '{"a":1}'.encode("utf-32-be")),
    ("invalid UTF-8", b'{"a":"\xff"}'),
    ("overlong UTF-8", b'{"a":"\xc0\xaf"}'),
    ("a raw control character in a string", b'{"a":"\x01"}'),
    ("a raw tab in a string", b'{"a":"\t"}'),
    ("an escaped NUL", b'{"a":"\\u0000"}'),
    ("U+2028 and U+FFFF", '{"a":"\u2028\uffff"}'.encode()),
    ("JSON whitespace around", b' \t\n\r{"a":1}\n'),
    ("a no-break space before", b'\xc2\xa0{"a":1}'),
    ("trailing bytes", b'{"a":1} x'),
    ("a trailing comma", b'{"a":1,}'),
    ("single quotes", b"{'a':1}"),
    ("a key that is not a string", b"{1:2}"),
    ("a leading zero", b'{"a":01}'),
    ("a plus sign", b'{"a":+1}'),
    ("a \\x escape", b'{"a":"\\x41"}'),
    ("empty", b""),
    ("a bare string", b'"x"'),
    ("nested just under the fast limit", b"[" * (NESTING_FAST_MAX - 1) + b"]" * (NESTING_FAST_MAX - 1)),
    ("nested just over it", b"[" * DEEP + b"]" * DEEP),
    ("nested 1,000 deep: beyond the interpreter's stack here, within orjson's limit",
     b"[" * 1000 + b"]" * 1000),
    ("nested beyond orjson's limit", b'{"a":' + b"[" * 1100 + b"]" * 1100 + b"}"),
    ("nested beyond the interpreter's", b"[" * 100_000 + b"]" * 100_000),
    ("a str, not bytes", '{"a":"\ud800"}'),
]  # fmt: skip


@pytest.mark.parametrize(("case", "raw"), CASES, ids=[c[0] for c in CASES])
def test_loads_answers_as_the_standard_library(case: str, raw: bytes | str) -> None:
    """Each row: the same value, with the same types and key order, or the same error and sentence."""
    assert _answer(loads, raw) == _answer(json.loads, raw), case


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300)
@given(json_values, st.booleans())
def test_any_json_the_standard_library_writes_reads_back_the_same(value: Any, ascii_only: bool) -> None:
    """Integers of any size, floats with NaN and infinities, any text (lone surrogates escaped, or
    encoded with surrogatepass when not escaped): the same answer as ``json.loads``."""
    text = json.dumps(value, ensure_ascii=ascii_only)
    raw = text.encode("utf-8", "surrogatepass")
    assert _answer(loads, raw) == _answer(json.loads, raw)


def _record(fragment: bytes) -> bytes:
    return (
        b'{"event_id":"e","type":"Deposit","schema_version":1,"topic":"casino.wallet.requests",'
        b'"key":"a","seq":null,"occurred_at":"2026-11-23T10:00:00.000Z","causation_id":null,'
        b'"causation_hash":null,"correlation_id":"e","producer":"cashier","prev_hash":null,"hash":"h",'
        b'"payload":{"account_id":"a","amount_minor":' + fragment + b',"currency":"EUR"}}'
    )


def _decoded(raw: bytes) -> tuple[str, str]:
    try:
        env = decode(raw)
    except DecodeError as exc:
        return exc.reason.value, exc.detail
    return "decoded", repr(typed(env.model_dump()))


@pytest.mark.parametrize(("case", "raw"), CASES, ids=[c[0] for c in CASES])
def test_decode_accepts_and_refuses_as_with_the_standard_library(
    case: str, raw: bytes | str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each row as a record, and as an amount inside a record: the same envelope, or the same
    dead-letter reason and sentence, as the standard library's reading gives."""
    if isinstance(raw, str):
        return  # records are bytes
    records = [raw, _record(raw)]
    fast = [_decoded(r) for r in records]
    monkeypatch.setattr(envelope, "loads", json.loads)
    assert fast == [_decoded(r) for r in records], case
