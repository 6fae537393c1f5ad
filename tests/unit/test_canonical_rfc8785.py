"""Our canonical JSON is RFC 8785's on the records' domain (integers, strings, booleans, null, arrays and
objects), checked against the RFC 8785 package. We keep our encoder because the package is much slower
(docs/performance.md, "Canonical JSON: ours or the RFC 8785 package")."""

from __future__ import annotations

from typing import Any

import pytest
import rfc8785
from hypothesis import example, given
from hypothesis import strategies as st

from services.core.envelope import canonical

SAFE = 2**53 - 1
"""RFC 8785 writes numbers as IEEE 754 doubles: integers beyond this are outside its domain (ours are
money in minor units, far below it)."""

TEXT = st.text(st.characters(exclude_categories=["Cs"]))  # any code point but lone surrogates (not UTF-8)
KEYS = st.text(st.characters(max_codepoint=0xD7FF))
"""Keys below the surrogates: there code-point order (ours) and UTF-16 order (RFC 8785) are one order.
Our keys are ASCII field names and ids."""

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-SAFE, SAFE) | TEXT,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(KEYS, inner, max_size=5),
    max_leaves=30,
)


@given(JSON)
@example({"b": [1, -1, 0], "a": '\u2028\x7f\x00"\\\n\t\x1f', "é": None, "A": True})
@example({"amount_minor": SAFE, "balance_minor": -SAFE, "id": "\U0001f0a1"})
def test_ours_writes_the_bytes_of_the_rfc8785_package(obj: Any) -> None:
    """For any value of the records' domain, ours and the package write the same bytes."""
    assert canonical(obj) == rfc8785.dumps(obj)


def test_the_domains_edge_is_the_packages_too() -> None:
    """Beyond 2**53 the package refuses an integer (a double cannot hold it); ours writes it exactly, a
    value our records never carry."""
    with pytest.raises(rfc8785.IntegerDomainError):
        rfc8785.dumps({"n": 2**53})
    assert canonical({"n": 2**53}) == b'{"n":9007199254740992}'
