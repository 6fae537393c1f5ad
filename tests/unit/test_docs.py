"""The project docs in docs/ exist wherever the code points at them, and say what the code has."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from services.runtime.kafka.metrics import METRICS
from services.runtime.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").glob("*.md"))
OPERATIONS = (ROOT / "docs" / "operations.md").read_text()
SOURCES = [
    p
    for folder in ("services", "tests", "bench", "deploy")
    for p in (ROOT / folder).rglob("*")
    if p.suffix in {".py", ".md", ".yaml", ".yml", ".json"} and p.is_file()
] + [ROOT / "README.md", ROOT / "docker-compose.yml"]


def test_the_three_project_docs_exist() -> None:
    """docs/ holds the architecture, the event contract and the operations runbook."""
    assert {p.name for p in DOCS} >= {"architecture.md", "event-contract.md", "operations.md"}


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_docs_reference_in_the_repository_names_a_file_that_exists(source: Path) -> None:
    """A ``docs/<name>.md`` mentioned in code, tests, deploy files or the README is a file in docs/."""
    for name in re.findall(r"docs/([A-Za-z0-9_.-]+\.md)", source.read_text(errors="replace")):
        assert (ROOT / "docs" / name).is_file(), (source, name)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_relative_links_in_the_docs_resolve(doc: Path) -> None:
    """Every relative Markdown link in a doc points at an existing file or folder."""
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", doc.read_text()):
        assert (doc.parent / target).exists(), (doc.name, target)


@pytest.mark.parametrize("field", sorted(Settings.model_fields))
def test_the_runbook_lists_every_setting(field: str) -> None:
    """docs/operations.md's settings table has a row for each CASINO_ variable the code reads."""
    assert f"| `CASINO_{field.upper()}` |" in OPERATIONS


@pytest.mark.parametrize("metric", sorted(METRICS))
def test_the_runbook_lists_every_metric(metric: str) -> None:
    """docs/operations.md names each metric family a worker exposes."""
    assert f"`{metric}`" in OPERATIONS
