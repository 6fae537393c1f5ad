"""The five scoreboard roads, against worked examples computed by hand and as properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.integrations.backoffice import roads

B, P, T = "banker", "player", "tie"


def cells(road: list[roads.Cell]) -> list[tuple[int, int, str]]:
    return [(c.col, c.row, c.value) for c in road]


def test_bead_plate_fills_columns_of_six_ties_included() -> None:
    """The bead plate lists every coup, ties included, six to a column."""
    got = cells(roads.bead_plate([B, P, T, B, B, P, T, "punters"]))
    assert got == [(0, 0, "B"), (0, 1, "P"), (0, 2, "T"), (0, 3, "B"), (0, 4, "B"), (0, 5, "P"), (1, 0, "T")]


def test_big_road_columns_and_ties() -> None:
    """Same winner goes down, a change starts a column, ties are counted on the entry before them
    (a leading tie on the first entry)."""
    got = roads.big_road([T, B, T, T, B, P, P, T, B])
    assert [(c.col, c.row, c.value, c.ties) for c in got] == [
        (0, 0, "B", 3), (0, 1, "B", 0), (1, 0, "P", 0), (1, 1, "P", 1), (2, 0, "B", 0),
    ]  # fmt: skip


def test_big_road_dragon_tail_turns_right_and_blocks_the_next_column() -> None:
    """A streak longer than six turns right along the bottom row; the next column, blocked by that
    tail, turns right one row higher; the column after starts at the top of the next free column."""
    got = cells(roads.big_road([B] * 8 + [P] * 7 + [B]))
    assert got == [
        *[(0, r, "B") for r in range(6)], (1, 5, "B"), (2, 5, "B"),
        *[(1, r, "P") for r in range(5)], (2, 4, "P"), (3, 4, "P"),
        (2, 0, "B"),
    ]  # fmt: skip


# Big road columns of lengths 1, 2, 1, 3, 2, 1 (B, PP, B, PPP, BB, P); worked by hand with the rule
# in the module docstring (red: same length / cell to the left filled / both left cells empty).
EXAMPLE = [B, P, P, B, P, P, P, B, B, P]


@pytest.mark.parametrize(
    ("k", "colours"),
    [
        (1, ["blue", "blue", "blue", "blue", "red", "blue", "red", "blue"]),  # big eye boy from (1,1)
        (2, ["red", "red", "blue", "blue", "blue", "blue"]),  # small road from (3,0): no (2,1)
        (3, ["blue", "red", "blue", "red", "red"]),  # cockroach pig from (3,1)
    ],
)
def test_derived_roads_worked_example(k: int, colours: list[str]) -> None:
    """Big eye boy, small road and cockroach pig of a worked example, entry by entry."""
    sides = [v for v, _ in roads.big_road_entries(EXAMPLE)]
    assert roads.derived_colours(sides, k) == colours


def test_derived_road_short_example_and_its_drawing() -> None:
    """B B P P P B: the big eye boy is red, blue, blue, drawn as a red column then a blue one; the small
    road and the cockroach pig have not started."""
    out = roads.roads([B, B, P, P, P, B])
    assert [(c["col"], c["row"], c["value"]) for c in out["big_eye_boy"]] == [
        (0, 0, "red"), (1, 0, "blue"), (1, 1, "blue"),
    ]  # fmt: skip
    assert out["small_road"] == [] and out["cockroach_pig"] == []


def test_ties_do_not_change_derived_roads() -> None:
    """Derived roads read the big road only: ties anywhere leave them unchanged."""
    with_ties = [T, B, P, T, P, B, T, T, P, P, P, B, B, P, T]
    plain = [o for o in with_ties if o != T]
    for name in roads.DERIVED:
        assert roads.roads(with_ties)[name] == roads.roads(plain)[name]


outcomes = st.lists(st.sampled_from([B, P, T, "bank", "ponte", "punters"]), max_size=120)


@given(outcomes)
def test_roads_properties(seq: list[str]) -> None:
    """Counts are kept (bead plate: every B/P/T; big road: every B/P, ties summed on it), no two marks
    share a cell, every mark is within six rows, and each derived road has one mark per big-road entry
    from its starting point on."""
    out = roads.roads(seq)
    sides = [roads.side_of(o) for o in seq]
    assert len(out["bead_plate"]) == sum(x is not None for x in sides)
    assert len(out["big_road"]) == sum(x in ("B", "P") for x in sides)
    if out["big_road"]:
        assert sum(c["ties"] for c in out["big_road"]) == sides.count("T")
    entries = [v for v, _ in roads.big_road_entries(seq)]
    for name, road in out.items():
        spots = [(c["col"], c["row"]) for c in road]
        assert len(set(spots)) == len(spots), name
        assert all(0 <= r < roads.ROWS for _, r in spots), name
    for name, k in roads.DERIVED.items():
        cols = roads.columns(entries)
        expected = 0
        for c, column in enumerate(cols):
            for r in range(len(column)):
                expected += (c - 1 - k >= 0) if r == 0 else (c - k >= 0)
        assert len(out[name]) == expected, name
        assert {c["value"] for c in out[name]} <= {"red", "blue"}
