"""Merkle tree heads over chain heads, as Certificate Transparency builds them (RFC 6962 §2.1, RFC 9162 §2.1).

A **leaf** is one chained stream's head: ``(topic, key, seq, hash)``, encoded as the canonical JSON array
``[topic, key, seq, hash]`` (:func:`head_leaf`; ``hash`` is ``null`` for a stream whose head is claimed
by length only). The leaves are sorted by ``(topic, key)``, so the tree depends on which chains stand
where, never on the order anyone read them in. With SHA-256:

* ``MTH({}) = SHA-256()`` (:data:`EMPTY_ROOT`);
* ``MTH({d}) = SHA-256(0x00 ‖ d)`` (:func:`leaf_hash`);
* ``MTH(D[n]) = SHA-256(0x01 ‖ MTH(D[0:k]) ‖ MTH(D[k:n]))``, ``k`` the largest power of two below ``n``
  (:func:`node_hash`).

The 0x00/0x01 prefixes keep a leaf from passing for an inner node (a second-preimage attack on the tree).
:func:`root` computes the same value bottom-up (pairing neighbours level by level, an odd last node
carried up unchanged, which is exactly the left-balanced shape RFC 6962's recursion splits into), so
it costs one hash per node and no recursion. Pure: no I/O, no clock.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from services.core.envelope import canonical

EMPTY_ROOT: Final = hashlib.sha256(b"").digest()
"""The root of a tree with no leaf."""

Head = tuple[int, str | None]
"""A chain's head: its last ``seq`` and that record's ``hash`` (``None``: claimed by length only)."""


def leaf_hash(data: bytes) -> bytes:
    """``SHA-256(0x00 ‖ data)``: a leaf's hash."""
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """``SHA-256(0x01 ‖ left ‖ right)``: an inner node's hash."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def root(leaf_hashes: Sequence[bytes]) -> bytes:
    """The RFC 6962 Merkle tree hash of leaves already hashed with :func:`leaf_hash`, in order."""
    level = list(leaf_hashes)
    if not level:
        return EMPTY_ROOT
    while len(level) > 1:
        paired = [node_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0]


def head_leaf(topic: str, key: str, seq: int, hash_hex: str | None) -> bytes:
    """A chain head's leaf data: the canonical JSON of ``[topic, key, seq, hash]`` in UTF-8."""
    return canonical([topic, key, seq, hash_hex])


def sorted_heads(heads: Mapping[tuple[str, str], Head]) -> list[tuple[str, str, int, str | None]]:
    """``(topic, key, seq, hash)`` of every chain, sorted by ``(topic, key)``: the leaves' order."""
    return [(t, k, s, h) for (t, k), (s, h) in sorted(heads.items())]


def heads_root(leaves: Iterable[tuple[str, str, int, str | None]]) -> tuple[int, str]:
    """The number of leaves and the hex root of the tree over ``leaves`` (already in tree order)."""
    hashed = [leaf_hash(head_leaf(t, k, s, h)) for t, k, s, h in leaves]
    return len(hashed), root(hashed).hex()
