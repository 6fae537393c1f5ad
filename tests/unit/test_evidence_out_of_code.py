"""Figures live in docs/performance.md and decisions in docs/adr/, the code links to them (issue #32):
every link resolves, the ADRs are numbered once each, and no dated timing is back in the code."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PERFORMANCE = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
SOURCES = sorted((ROOT / "services").rglob("*.py"))


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_every_link_from_the_code_to_performance_md_resolves() -> None:
    """Each docs/performance.md#anchor named in services/ is a heading of docs/performance.md."""
    anchors = {slug(h) for h in re.findall(r"^#{2,4} (.+)$", PERFORMANCE, re.M)}
    linked = {
        (p.name, a) for p in SOURCES for a in re.findall(r"docs/performance\.md#([\w-]+)", p.read_text())
    }
    assert linked, "the code links to its figures"
    assert {(f, a) for f, a in linked if a not in anchors} == set()


def test_adrs_are_numbered_once_and_every_link_to_one_exists() -> None:
    """One file per ADR number, its title saying that number; every docs/adr/ path named exists."""
    adrs = sorted((ROOT / "docs" / "adr").glob("*.md"))
    numbers = [p.name[:4] for p in adrs]
    assert len(numbers) == len(set(numbers)) >= 6
    for p in adrs:
        assert p.read_text().startswith(f"# ADR {p.name[:4]}:"), p.name
        assert all(f"## {part}" in p.read_text() for part in ("Context", "Decision", "Consequences")), p.name
    texts = [
        p.read_text() for p in [*SOURCES, *(ROOT / "docs").rglob("*.md"), *(ROOT / "tests").rglob("*.py")]
    ]
    named = {m for t in texts for m in re.findall(r"adr/(\d{4}-[\w-]+\.md)", t)}
    assert named and all((ROOT / "docs" / "adr" / n).is_file() for n in named), named


def test_no_dated_timing_or_machine_load_in_the_code() -> None:
    """A date, a machine load or a "measured" aside in a docstring or a comment rots silently: they go to
    docs/performance.md (this test keeps them out)."""
    pattern = re.compile(
        r"20\d\d-\d\d-\d\d\)|\bload \d+(\.\d+)?(-\d+)?\b|\bmeasured[,)]|same run\)|cachegrind"
    )
    lines = [(p, n, line) for p in SOURCES for n, line in enumerate(p.read_text().splitlines(), 1)]
    found = [f"{p.relative_to(ROOT)}:{n}" for p, n, line in lines if pattern.search(line)]
    assert found == []
