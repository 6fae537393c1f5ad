"""Bytes are read into an envelope by pydantic's JSON parser first, and by ``loads`` plus the envelope's
validation wherever that parser refuses them: for every input the same envelope (every value of the
same type, in the same order) or the same error as the standard path alone, so the same records are
accepted, refused and dead-lettered with the same reason and sentence as before."""

from __future__ import annotations

import json
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.core import envelope, topics
from services.core.envelope import Envelope, parse_record, request
from tests.helpers.typed import typed


def _refuse(raw: bytes) -> Envelope:
    raise ValueError("the JSON parser is not asked")


def _standard(raw: bytes) -> Envelope:
    """The standard path alone: ``loads`` then the envelope validated (what ``parse_record`` did before)."""
    with mock.patch.object(envelope, "_validate_envelope_json", _refuse):
        return parse_record(raw)


def _answer(read: Any, raw: bytes) -> tuple[str, Any]:
    """What reading ``raw`` gives: the envelope's fields with the type of every node, or the error's
    class and sentence."""
    try:
        env = read(raw)
    except (ValueError, RecursionError) as exc:
        return type(exc).__name__, str(exc)
    return "envelope", typed(env.__dict__)


BASE = request(
    "Deposit", topics.WALLET_REQUESTS, "acct", {"account_id": "acct", "amount_minor": 5},
    event_id="e1", occurred_at="2026-01-01T00:00:00Z", producer="cashier",
).to_json()  # fmt: skip


def _amount(text: bytes) -> bytes:
    return BASE.replace(b'"amount_minor":5', b'"amount_minor":' + text)


def _account(text: bytes) -> bytes:
    return BASE.replace(b'"acct"', text, 1)


ODD = {
    "canonical": BASE,
    "integer past 64 bits": _amount(b"123456789012345678901234567890"),
    "negative integer past 64 bits": _amount(b"-9223372036854775809"),
    "float": _amount(b"1.5e300"),
    "float past the double range": _amount(b"1e400"),
    "float below the double range": _amount(b"1e-400"),
    "float of many digits": _amount(b"1.00000000000000011102230246251565404236316680908203125"),
    "subnormal float": _amount(b"2.2250738585072011e-308"),
    "negative zero": _amount(b"-0"),
    "NaN": _amount(b"NaN"),
    "-Infinity": _amount(b"-Infinity"),
    "leading zero": _amount(b"05"),
    "plus sign": _amount(b"+5"),
    "nested 150 deep": _amount(b"[" * 150 + b"]" * 150),
    "nested 300 deep": _amount(b"[" * 300 + b"]" * 300),
    "nested 1200 deep": _amount(b"[" * 1200 + b"]" * 1200),
    "duplicate envelope key": BASE.replace(b'"key":"acct"', b'"key":"acct","key":"other"'),
    "duplicate payload key": _amount(b'5,"amount_minor":6'),
    "escaped key": BASE.replace(b'"key":', b'"k\\u0065y":'),
    "invalid UTF-8": _account(b'"ac\xffct"'),
    "overlong UTF-8": _account(b'"ac\xc0\xafct"'),
    "UTF-8 encoded surrogate": _account(b'"ac\xed\xa0\x80ct"'),
    "escaped lone surrogate": _account(b'"ac\\ud800ct"'),
    "escaped surrogate pair": _account(b'"ac\\ud83d\\ude00ct"'),
    "escaped NUL": _account(b'"a\\u0000c"'),
    "raw newline in a string": _account(b'"ac\nct"'),
    "raw tab in a string": _account(b'"ac\tct"'),
    "raw DEL in a string": _account(b'"ac\x7fct"'),
    "byte-order mark": b"\xef\xbb\xbf" + BASE,
    "UTF-16": BASE.decode().encode("utf-16"),
    "trailing whitespace": BASE + b" \n",
    "trailing garbage": BASE + b"x",
    "trailing comma": BASE[:-1] + b",}",
    "seq as a float": BASE.replace(b'"seq":null', b'"seq":3.0'),
    "seq as a fraction": BASE.replace(b'"seq":null', b'"seq":3.5'),
    "seq as a string": BASE.replace(b'"seq":null', b'"seq":"3"'),
    "seq as a bool": BASE.replace(b'"seq":null', b'"seq":true'),
    "seq as an exponent": BASE.replace(b'"seq":null', b'"seq":1e3'),
    "schema_version as a string": BASE.replace(b'"schema_version":1', b'"schema_version":"1"'),
    "payload null": BASE.replace(b'"payload":{', b'"payload":null,"x":{'),
    "an overlong key": BASE.replace(b'"key":"acct"', b'"key":"' + b"k" * 300 + b'"'),
    "empty": b"",
    "whitespace": b"  ",
    "an array": b"[]",
    "a number": b"5",
}


@pytest.mark.parametrize("raw", list(ODD.values()), ids=list(ODD))
def test_odd_bytes_read_as_the_standard_path_reads_them(raw: bytes) -> None:
    """The same envelope or the same error as ``loads`` and the envelope's validation alone."""
    assert _answer(parse_record, raw) == _answer(_standard, raw)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.text(max_size=8), _JSON, max_size=4),
    st.text(min_size=1, max_size=20),
    st.one_of(st.none(), st.integers()),
    st.booleans(),
)
def test_generated_records_read_as_the_standard_path_reads_them(
    payload: dict[str, Any], key: str, seq: int | None, ascii_only: bool
) -> None:
    """Records with generated payloads, keys and sequence numbers, written with and without escapes,
    give the same envelope or error either way."""
    fields = {**json.loads(BASE), "payload": payload, "key": key, "seq": seq}
    raw = json.dumps(fields, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    assert _answer(parse_record, raw) == _answer(_standard, raw)
