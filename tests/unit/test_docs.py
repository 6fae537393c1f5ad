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


README = (ROOT / "README.md").read_text()
MADE_BY_THE_OPERATOR = ("deploy/secrets/",)
"""Paths the docs tell an operator to create (git-ignored: secrets never go in the repository)."""


def test_the_readme_is_a_guide_not_a_diary() -> None:
    """The README stays a user's guide (about 200 lines at most); measurements and history live in
    docs/performance.md and CHANGELOG.md, which exist."""
    assert len(README.splitlines()) <= 200
    assert (ROOT / "docs" / "performance.md").is_file() and (ROOT / "CHANGELOG.md").is_file()
    guide = README.split("## Speed")[0]
    assert not re.search(r"\b[0-9a-f]{7,40}\b", guide), "commit hashes belong in the changelog"


@pytest.mark.parametrize("doc", [ROOT / "README.md", ROOT / "CHANGELOG.md", *DOCS], ids=lambda p: p.name)
def test_every_path_a_doc_names_exists(doc: Path) -> None:
    """Every relative link, and every repository path written in backticks (``services/…``, ``docs/…``,
    ``tests/…``, ``bench/…``, ``deploy/…``, ``schemas/…``), names a file or folder that exists."""
    text = doc.read_text()
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
        assert (doc.parent / target).exists(), (doc.name, target)
    for path in re.findall(r"`((?:services|docs|tests|bench|deploy|schemas)/[A-Za-z0-9_./-]*)`", text):
        if not path.startswith(MADE_BY_THE_OPERATOR):
            assert (ROOT / path.rstrip("/")).exists(), (doc.name, path)
