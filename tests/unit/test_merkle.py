"""The tree heads' Merkle trees are RFC 6962's: the Certificate Transparency reference roots, and the
recursive definition of the RFC for any number of leaves."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.core.merkle import EMPTY_ROOT, head_leaf, heads_root, leaf_hash, root, sorted_heads

CT_LEAVES = [
    "",
    "00",
    "10",
    "2021",
    "3031",
    "40414243",
    "5051525354555657",
    "606162636465666768696a6b6c6d6e6f",
]
"""The leaves of Certificate Transparency's reference tree (its merkle tree tests)."""

CT_ROOTS = [
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
"""The reference tree's root for its first 0..8 leaves."""


@pytest.mark.parametrize("size", range(len(CT_ROOTS)))
def test_roots_are_certificate_transparencys(size: int) -> None:
    """The first ``size`` reference leaves give the published root (the empty tree: SHA-256 of nothing)."""
    hashed = [leaf_hash(bytes.fromhex(d)) for d in CT_LEAVES[:size]]
    assert root(hashed).hex() == CT_ROOTS[size]


def _mth(data: list[bytes]) -> bytes:
    """RFC 6962 §2.1 as written: split at the largest power of two below n, recursively."""
    if not data:
        return hashlib.sha256(b"").digest()
    if len(data) == 1:
        return hashlib.sha256(b"\x00" + data[0]).digest()
    k = 1
    while k * 2 < len(data):
        k *= 2
    return hashlib.sha256(b"\x01" + _mth(data[:k]) + _mth(data[k:])).digest()


@given(st.lists(st.binary(max_size=8), max_size=70))
def test_the_bottom_up_root_is_the_rfcs_recursion(data: list[bytes]) -> None:
    """Any number of leaves: the level-by-level root equals the recursive definition."""
    assert root([leaf_hash(d) for d in data]) == _mth(data)


def test_a_leaf_is_not_a_node() -> None:
    """A leaf holding two hashes does not hash like the node over them (the 0x00/0x01 prefixes)."""
    a, b = leaf_hash(b"a"), leaf_hash(b"b")
    assert root([a, b]) != leaf_hash(a + b) and hashlib.sha256(b"").digest() == EMPTY_ROOT


CHAINS = st.tuples(st.sampled_from(["t.a", "t.b"]), st.text(min_size=1, max_size=4))
HEADS = st.tuples(st.integers(0, 9), st.none() | st.just("ab" * 32))


@given(st.dictionaries(CHAINS, HEADS, max_size=12))
def test_heads_root_depends_on_the_heads_not_their_order(
    heads: dict[tuple[str, str], tuple[int, str | None]],
) -> None:
    """The same heads inserted in any order give the same tree; one head moved gives another."""
    leaves = sorted_heads(heads)
    backwards = sorted_heads(dict(reversed(list(heads.items()))))
    assert heads_root(leaves) == heads_root(backwards)
    assert heads_root(leaves)[1] == _mth([head_leaf(*leaf) for leaf in leaves]).hex()
    if heads:
        (chain, (seq, digest)), *_ = heads.items()
        moved = sorted_heads({**heads, chain: (seq + 1, digest)})
        assert heads_root(moved) != heads_root(leaves)
