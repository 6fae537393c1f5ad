"""The snapshot encoder compiled once per type writes what the type-walk wrote: recursive types,
unions whose arms refuse, and the refusals themselves (docs/trust.md: snapshots are data)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

import pytest

from services.runtime.embedded import snapshot


@dataclass(frozen=True)
class Node:
    """A type that refers to itself (its encoder is resolved on first use)."""

    name: str
    children: tuple[Node, ...] = ()
    mark: Literal["a", "b"] | None = None


def test_a_recursive_dataclass_round_trips() -> None:
    tree = Node("root", (Node("x", (Node("y", mark="b"),)), Node("z", mark="a")))
    blob = snapshot.dumps(tree, Node)
    assert blob.startswith(b'{"name":"root","children":[{"name":"x","children":[{"name":"y"')
    assert snapshot.loads(blob, Node) == tree


def test_a_union_tries_its_arms_in_order() -> None:
    assert snapshot.encode(3, int | str) == 3
    assert snapshot.encode("3", int | str) == "3"
    assert snapshot.encode(None, int | None) is None
    with pytest.raises(snapshot.SnapshotError, match="float fits no arm"):
        snapshot.encode(1.5, int | str)


def test_an_arm_of_no_known_kind_is_skipped_not_fatal() -> None:
    """A type the codec cannot write fails only when a value reaches it, as before compiling."""
    assert snapshot.encode(7, complex | int) == 7
    with pytest.raises(snapshot.SnapshotError, match="no snapshot encoding"):
        snapshot.encode(1j, complex)


@pytest.mark.parametrize(
    ("value", "tp", "says"),
    [
        (True, int, "expected int, got bool"),
        (1, bool, "expected bool, got int"),
        ("c", Literal["a", "b"], "is not one of"),
        ({1: 2}, dict[str, int], "expected a str key"),
        ([1], tuple[int, ...], "expected a tuple"),
        ((1, 2), tuple[int], "expected 1 items, got 2"),
        (Node("n"), dict[str, int], "expected a mapping"),
        ({"n": 1}, Node, "expected Node, got dict"),
    ],
)
def test_a_value_that_does_not_fit_is_refused(value: object, tp: object, says: str) -> None:
    with pytest.raises(snapshot.SnapshotError, match=says):
        snapshot.encode(value, tp)


def test_mappings_keyed_otherwise_are_pairs_and_sets_are_sorted() -> None:
    assert snapshot.encode({(1, "a"): 2}, dict[tuple[int, str], int]) == [[[1, "a"], 2]]
    assert snapshot.encode(frozenset({"b", "a"}), frozenset[str]) == ["a", "b"]


@pytest.mark.parametrize(
    ("value", "tp", "says"),
    [
        ({"a": True}, dict[str, int], "expected int, got bool"),
        ({"a": 1}, dict[str, str], "expected str, got int"),
        ({"a": "1", 2: "b"}, dict[str, str], "expected a str key, got int"),
        ([("a", 1)], dict[str, int], "expected a mapping, got list"),
    ],
)
def test_a_flat_map_refuses_what_the_per_entry_walk_refused(value: object, tp: object, says: str) -> None:
    """``dict[str, str]`` and ``dict[str, int]`` (a wallet's maps) are checked in one pass: same refusals."""
    with pytest.raises(snapshot.SnapshotError, match=says):
        snapshot.encode(value, tp)


def test_a_flat_map_round_trips_and_decodes_only_exact_values() -> None:
    """A flat map comes back equal, in its order; a value of another type is refused when read back."""
    balances = {f"p{i}": i for i in range(50, 0, -1)}
    assert snapshot.loads(snapshot.dumps(balances, dict[str, int]), dict[str, int]) == balances
    assert list(snapshot.loads(snapshot.dumps(balances, dict[str, int]), dict[str, int])) == list(balances)
    for blob in (b'{"a":true}', b'{"a":"1"}', b'{"a":1.5}', b'{"a":null}'):
        with pytest.raises(snapshot.SnapshotError):
            snapshot.loads(blob, dict[str, int])
    with pytest.raises(snapshot.SnapshotError):
        snapshot.loads(b'{"a":1}', dict[str, str])


def test_bytes_are_those_of_the_standard_encoder() -> None:
    """orjson writes the snapshot; the bytes are the standard library's compact JSON (integers past 64
    bits included, by the fallback)."""
    data = {"é": [1, -(1 << 70), None, True, 'x\u2028"y'], "b": {"k": "v"}}
    assert snapshot.to_bytes(data) == json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()
