"""Plain-text output at the terminal's width: long lines wrap between words, never inside one, so a
money figure, an id or a path is never cut (docs/cli.md)."""

from __future__ import annotations

import shutil
import textwrap


def fit(text: str, width: int | None = None) -> str:
    """``text`` with every line longer than ``width`` (default: the terminal's, ``COLUMNS``, else 80)
    wrapped at spaces; continuation lines are indented four more than the line they continue."""
    width = width or shutil.get_terminal_size((80, 24)).columns
    out: list[str] = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip(" ")))
        out.extend(textwrap.wrap(line, width, subsequent_indent=indent + "    ",
                                 break_long_words=False, break_on_hyphens=False))  # fmt: skip
    return "\n".join(out)
