"""The layout the docs show is the tree's, the folders do not grow more dependent on each other, and no
function is longer than a screen."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import grimp

from services.tools import layout

ROOT = Path(__file__).resolve().parents[2]

ARROWS_AT_MOST = 70
"""Import arrows between folders (packages) of ``services`` when this test was written: a change may lower
it (then lower this too), never raise it (issue #32: a layout shows the architecture only if folders do
not all import each other)."""

TOP_LEVEL_ARROWS_AT_MOST = 25
"""Import arrows between the top-level folders (the floors of the layers contract in pyproject.toml) after
issue #32's moves (29 before them): the same ratchet."""

FUNCTION_LINES_AT_MOST = 70
EXEMPT = {"services/integrations/backoffice/migrations/versions/0001_initial.py"}
"""A migration is one schema in one function."""


def arrows() -> Counter[tuple[str, str]]:
    """(folder, folder it imports) for every direct import between two packages of ``services``."""
    graph = grimp.build_graph("services")

    def folder(module: str) -> str:
        return module if graph.find_children(module) else module.rsplit(".", 1)[0]

    found: Counter[tuple[str, str]] = Counter()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            a, b = folder(module), folder(imported)
            if a != b:
                found[(a, b)] += 1
    return found


def test_the_docs_show_the_tree_as_it_is() -> None:
    """The layout blocks of docs/architecture.md and the README are what ``python -m services.tools.layout``
    makes of the tree now: a module moved, added or removed without the docs fails here."""
    for doc, with_modules in layout.DOCS.items():
        assert layout.current(doc.read_text()) == layout.block(with_modules=with_modules), doc.name


def test_every_package_says_what_it_is_for() -> None:
    """Each package's docstring gives the layout its line."""
    empty = [str(p.relative_to(ROOT)) for p in layout.packages() if not layout.summary(p)]
    assert not empty


def test_the_folders_import_each_other_no_more_than_before() -> None:
    """The count of import arrows between folders is a ratchet: it may fall, never rise."""
    found = arrows()
    assert found, "no import between folders found: the graph was not built"
    assert len(found) <= ARROWS_AT_MOST, sorted(found)


def test_the_top_level_folders_import_each_other_no_more_than_before() -> None:
    """The arrows between top-level folders (``services.cli`` → ``services.runtime``, …): a ratchet too."""
    top = {(a.split(".")[1], b.split(".")[1]) for a, b in arrows()}
    top = {(a, b) for a, b in top if a != b}
    assert top, "no import between top-level folders found"
    assert len(top) <= TOP_LEVEL_ARROWS_AT_MOST, sorted(top)


def test_no_function_is_longer_than_a_screen() -> None:
    """No function (or method) over 70 lines outside the migrations: a long one holds several concerns."""
    long: list[str] = []
    for path in sorted((ROOT / "services").rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if rel in EXEMPT:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > FUNCTION_LINES_AT_MOST:
                    long.append(f"{rel}:{node.lineno} {node.name} ({lines} lines)")
    assert not long
