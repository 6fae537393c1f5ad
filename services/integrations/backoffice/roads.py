"""The five baccarat scoreboard roads, computed from a shoe's outcomes (pure: no I/O, no clock).

* **Bead plate** — every coup in order, ties included, filling a 6-row grid column by column.
* **Big road** — banker and player wins only: a new column each time the winner changes, down the
  column while it repeats. A tie is not an entry: it is counted on the entry before it (ties before
  the first entry are counted on the first entry). A column that reaches the sixth row, or finds the
  cell below taken, turns right along its row (the "dragon tail").
* **Big eye boy, small road, cockroach pig** — the derived roads, comparing the big road with itself
  1, 2 and 3 columns back (``k``). For each big-road entry at logical column ``c``, row ``r``:
  a new column (``r == 0``) is red when columns ``c-1`` and ``c-1-k`` have the same length, blue
  otherwise; a repeat (``r > 0``) is red when column ``c-k`` has a row ``r``, blue when it ends exactly
  at row ``r-1`` (length ``r``), red when it is shorter still. A road starts with the first entry for
  which the columns it compares exist (for the big eye boy: column 2 row 2, else column 3 row 1).
  Each derived road is drawn like the big road, red and blue in place of banker and player.

Outcomes are the variants' names: ``banker``/``bank`` count as banker, ``player``/``ponte`` as player,
``tie`` as a tie; other outcomes (multi-hand games) are not on these roads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ROWS = 6
"""Rows of every road."""

_SIDE = {"banker": "B", "bank": "B", "player": "P", "ponte": "P", "tie": "T"}

DERIVED = {"big_eye_boy": 1, "small_road": 2, "cockroach_pig": 3}
"""Each derived road and how many columns back it compares."""


def side_of(outcome: str) -> str | None:
    """``B``, ``P`` or ``T`` for a coup's outcome, None when it is not a banker/player/tie outcome."""
    return _SIDE.get(outcome)


@dataclass(frozen=True, slots=True)
class Cell:
    """One mark on a road: its grid position, its value (``B``/``P``/``T`` or ``red``/``blue``) and,
    on the big road, the ties counted on it."""

    col: int
    row: int
    value: str
    ties: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return {"col": self.col, "row": self.row, "value": self.value, "ties": self.ties}


def bead_plate(outcomes: list[str], rows: int = ROWS) -> list[Cell]:
    """Every banker/player/tie outcome in order, column by column."""
    sides = [x for x in (side_of(o) for o in outcomes) if x]
    return [Cell(i // rows, i % rows, x) for i, x in enumerate(sides)]


def columns(values: list[str]) -> list[list[str]]:
    """Values grouped into logical columns: a new column whenever the value changes."""
    out: list[list[str]] = []
    for v in values:
        if out and out[-1][-1] == v:
            out[-1].append(v)
        else:
            out.append([v])
    return out


def plot(values: list[str], rows: int = ROWS) -> list[tuple[int, int]]:
    """Grid positions of ``values`` drawn big-road style, dragon tails included."""
    taken: set[tuple[int, int]] = set()
    out: list[tuple[int, int]] = []
    start = -1
    for column in columns(values):
        x = start + 1
        while (x, 0) in taken:
            x += 1
        start = x
        y, turned = 0, False
        for i in range(len(column)):
            if i:
                if not turned and y + 1 < rows and (x, y + 1) not in taken:
                    y += 1
                else:
                    turned = True
                    x += 1
            taken.add((x, y))
            out.append((x, y))
    return out


def big_road_entries(outcomes: list[str]) -> list[tuple[str, int]]:
    """(``B``/``P``, ties counted on it) of each big-road entry, in order."""
    entries: list[list[Any]] = []
    leading = 0
    for o in outcomes:
        x = side_of(o)
        if x == "T":
            if entries:
                entries[-1][1] += 1
            else:
                leading += 1
        elif x:
            entries.append([x, leading if not entries else 0])
    return [(str(v), int(t)) for v, t in entries]


def big_road(outcomes: list[str], rows: int = ROWS) -> list[Cell]:
    """The big road's cells."""
    entries = big_road_entries(outcomes)
    spots = plot([v for v, _ in entries], rows)
    return [Cell(c, r, v, t) for (c, r), (v, t) in zip(spots, entries, strict=True)]


def derived_colours(sides: list[str], k: int) -> list[str]:
    """The red/blue sequence of the derived road ``k`` columns back, from big-road sides (``B``/``P``)."""
    out: list[str] = []
    lengths: list[int] = []
    for i, v in enumerate(sides):
        if i and sides[i - 1] == v:
            lengths[-1] += 1
        else:
            lengths.append(1)
        c, r = len(lengths) - 1, lengths[-1] - 1
        if r == 0:
            if c - 1 - k < 0:
                continue
            out.append("red" if lengths[c - 1] == lengths[c - 1 - k] else "blue")
        else:
            if c - k < 0:
                continue
            length = lengths[c - k]
            out.append("blue" if r == length else "red")
    return out


def derived_road(outcomes: list[str], k: int, rows: int = ROWS) -> list[Cell]:
    """The cells of the derived road comparing ``k`` columns back."""
    colours = derived_colours([v for v, _ in big_road_entries(outcomes)], k)
    return [Cell(c, r, v) for (c, r), v in zip(plot(colours, rows), colours, strict=True)]


def roads(outcomes: list[str], rows: int = ROWS) -> dict[str, list[dict[str, Any]]]:
    """All five roads as JSON: ``bead_plate``, ``big_road``, ``big_eye_boy``, ``small_road``,
    ``cockroach_pig``."""
    out = {
        "bead_plate": [c.to_dict() for c in bead_plate(outcomes, rows)],
        "big_road": [c.to_dict() for c in big_road(outcomes, rows)],
    }
    for name, k in DERIVED.items():
        out[name] = [c.to_dict() for c in derived_road(outcomes, k, rows)]
    return out
