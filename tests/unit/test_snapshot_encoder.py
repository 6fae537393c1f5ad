"""The snapshot encoder compiled once per type writes what the type-walk wrote: recursive types,
unions whose arms refuse, and the refusals themselves (docs/trust.md: snapshots are data)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
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


class _Str(str):
    """A ``str`` subclass (an enum's value type, say): written as the plain string it is."""


class _Pair(tuple[int, ...]):
    """A ``tuple`` subclass: written as the list of its items."""

    __slots__ = ()


@pytest.mark.parametrize(
    ("value", "tp"),
    [
        ((), tuple[int, ...]),
        ((1, 2, 3), tuple[int, ...]),
        (("a", "b"), tuple[str, ...]),
        ((_Str("a"), "b"), tuple[str, ...]),
        ({"a|b": (1, 2), "c|d": ()}, dict[str, tuple[int, ...]]),
        ({_Str("k"): (3,), "j": (4,)}, dict[str, tuple[int, ...]]),
        ({"k": _Pair((1, 2)), "j": (4,)}, dict[str, tuple[int, ...]]),
        ({"k": ("x", "y")}, dict[str, tuple[str, ...]]),
        ({"n": Node("x", (Node("y"),))}, dict[str, Node]),
    ],
)
def test_the_one_pass_paths_write_what_the_per_item_walk_writes(value: object, tp: object) -> None:
    """A tuple of exact ``int`` or ``str`` items and a map of exact ``str`` keys (the monitor's pairs: a
    million entries on a speed table) are written in one pass; the data and the bytes are those of the
    walk (a subclass, as before, goes item by item and comes out a plain ``str``)."""
    got = snapshot.encode(value, tp)
    assert json.loads(snapshot.dumps(value, tp)) == got
    if isinstance(value, dict):
        assert got == {str(k): snapshot.encode(v, tp.__args__[1]) for k, v in value.items()}  # type: ignore[attr-defined]
        assert all(type(k) is str for k in got)
    else:
        assert got == [str(v) if isinstance(v, str) else v for v in value]  # type: ignore[attr-defined]
        assert all(type(v) in (int, str) for v in got)


@pytest.mark.parametrize(
    ("value", "tp", "says"),
    [
        ((1, True), tuple[int, ...], "expected int, got bool"),
        ((1, "2"), tuple[int, ...], "expected int, got str"),
        (("a", 1), tuple[str, ...], "expected str, got int"),
        ({"a": (1,), 2: (3,)}, dict[str, tuple[int, ...]], "expected a str key, got int"),
        ({"a": (1, None)}, dict[str, tuple[int, ...]], "expected int, got NoneType"),
        ({"a": (1,), "b": (2, True)}, dict[str, tuple[int, ...]], "expected int, got bool"),
        ({"a": (1,), "b": [2]}, dict[str, tuple[int, ...]], "expected a tuple, got list"),
    ],
)
def test_the_one_pass_paths_refuse_what_the_walk_refused(value: object, tp: object, says: str) -> None:
    with pytest.raises(snapshot.SnapshotError, match=says):
        snapshot.encode(value, tp)


@dataclass
class _Then:
    n: int


@dataclass
class _Now:
    n: int
    queued: dict[str, list[str]] = field(default_factory=dict)
    in_order: bool = False


@dataclass
class _Required:
    n: int
    m: int


def test_a_field_added_since_with_a_default_reads_an_older_snapshot() -> None:
    """A state that gained fields with defaults (audit's, issue #31) reads a snapshot written before:
    the new fields take their defaults (no rebuild from the log on upgrade); a new field without a
    default, or a field the class does not have, is still refused."""
    old = snapshot.dumps(_Then(3), _Then)
    assert snapshot.decode(json.loads(old), _Now) == _Now(3, {}, False)
    with pytest.raises(snapshot.SnapshotError):
        snapshot.decode(json.loads(old), _Required)
    with pytest.raises(snapshot.SnapshotError):
        snapshot.decode({"n": 1, "stranger": 2}, _Now)
