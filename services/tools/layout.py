"""The code's layout as the docs show it, generated from the tree: every package under ``services/`` with
the first sentence of its docstring and its modules.

``python -m services.tools.layout`` rewrites the block between the layout markers in docs/architecture.md
(folders and modules) and in the README (top-level folders); a test checks that both equal what this
module makes of the tree now, so a moved, added or removed module shows in the docs or fails the test.
"""

from __future__ import annotations

import ast
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BEGIN, END = "<!-- layout:begin (python -m services.tools.layout) -->", "<!-- layout:end -->"
DOCS = {ROOT / "docs" / "architecture.md": True, ROOT / "README.md": False}
"""Each document with a layout block, and whether it lists the modules (else top-level folders only)."""

WIDTH = 108
COLUMN = 30


def summary(package: Path) -> str:
    """The first sentence of the package's docstring (its ``__init__.py``), on one line."""
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    text = " ".join(doc.split())
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


def packages(root: Path = ROOT) -> list[Path]:
    """Every package under ``services/`` (a folder with an ``__init__.py``), in path order."""
    return sorted(p.parent for p in (root / "services").rglob("__init__.py") if "__pycache__" not in p.parts)


def modules(package: Path) -> list[str]:
    """The package's modules, ``__init__`` and ``__main__`` left out."""
    return sorted(p.name for p in package.glob("*.py") if p.stem not in ("__init__", "__main__"))


def block(*, with_modules: bool, root: Path = ROOT) -> str:
    """The layout as a code block: a line per package with its modules below, or (``with_modules``
    false) a line per top-level package, its summary cut to the line."""
    lines: list[str] = []
    for package in packages(root):
        rel = package.relative_to(root)
        depth = len(rel.parts) - 1
        if not with_modules and depth > 1:
            continue
        name = "  " * max(depth - 1, 0) + (f"{rel}/" if depth <= 1 else f"{package.name}/")
        head = name.ljust(COLUMN - 1) + " "
        if not with_modules:
            lines.append(head + textwrap.shorten(summary(package), WIDTH - COLUMN, placeholder=" …"))
            continue
        lines += textwrap.wrap(summary(package), WIDTH, initial_indent=head, subsequent_indent=" " * COLUMN)
        names, indent = "  ".join(modules(package)), " " * COLUMN
        lines += textwrap.wrap(names, WIDTH, initial_indent=indent, subsequent_indent=indent)
    return "```\n" + "\n".join(lines) + "\n```"


def rewritten(text: str, body: str) -> str:
    """``text`` with the layout block between its markers replaced by ``body``."""
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return f"{text[:start]}\n{body}\n{text[end:]}"


def current(text: str) -> str:
    """The layout block between the markers of ``text``."""
    return text[text.index(BEGIN) + len(BEGIN) : text.index(END)].strip()


def main() -> int:
    """Rewrite the layout blocks of the docs from the tree."""
    for doc, with_modules in DOCS.items():
        doc.write_text(rewritten(doc.read_text(), block(with_modules=with_modules)))
        print(f"wrote the layout in {doc.relative_to(ROOT)}")  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())
