"""Plain-text output at the terminal's width: long lines wrap between words, never inside one, so a
money figure, an id or a path is never cut (docs/cli.md)."""

from __future__ import annotations

import shutil
import textwrap
from typing import Any


def fit(text: str, width: int | None = None) -> str:
    """``text`` with every line longer than ``width`` (default: the terminal's, ``COLUMNS``, else 80)
    wrapped at spaces; continuation lines are indented four more than the line they continue. Every line
    is made :func:`printable` first: nothing printed through here drives the terminal."""
    width = width or shutil.get_terminal_size((80, 24)).columns
    out: list[str] = []
    for line in printable_lines(text).split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip(" ")))
        out.extend(textwrap.wrap(line, width, subsequent_indent=indent + "    ",
                                 break_long_words=False, break_on_hyphens=False))  # fmt: skip
    return "\n".join(out)


def _escaped(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(value: object) -> str:
    """``str(value)`` safe to print to a terminal: every character that is not printable (C0 and C1
    controls — ESC, CR, backspace, newline, tab, DEL —, bidi and other format characters, line and
    paragraph separators, unassigned code points) written as its Python escape (``\\x1b``, ``\\u202e``),
    so text from a log can neither drive the terminal (ANSI sequences that clear the screen, a CR
    that overwrites a line) nor start a line of its own (docs/trust.md). The one escaping function every
    text our command line prints from log data goes through."""
    text = value if isinstance(value, str) else str(value)
    if text.isprintable():  # the common case: one C-level scan
        return text
    return "".join(ch if ch.isprintable() else _escaped(ch) for ch in text)


def printable_lines(text: str) -> str:
    """``text`` with each of its lines made :func:`printable` (its own newlines kept): for text already
    composed, at the sink."""
    if text.isprintable():
        return text
    return "\n".join(printable(line) for line in text.split("\n"))


def printable_data(data: Any) -> Any:
    """``data`` (JSON-like: dicts, lists, tuples, strings, numbers) with every string, keys included,
    made :func:`printable`: what a text renderer interpolates from a report built from a log."""
    if isinstance(data, str):
        return printable(data)
    if isinstance(data, dict):
        return {printable_data(k): printable_data(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [printable_data(v) for v in data]
    return data


def printable_json(text: str) -> str:
    """JSON text (as ``json.dumps(..., ensure_ascii=False)`` writes it) with every unprintable character
    but its own newlines written as a JSON escape (``\\u009b``; a surrogate pair beyond the BMP): the
    same JSON value, which a terminal prints as written. ``json.dumps`` escapes only C0 controls; C1
    controls (U+009B is a CSI), bidi overrides and separators it writes raw. Outside strings a JSON text
    holds only spaces and newlines, so every character escaped here is inside a string."""
    if all(line.isprintable() for line in text.split("\n")):
        return text
    out: list[str] = []
    for ch in text:
        if ch == "\n" or ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            high, low = divmod(ord(ch) - 0x10000, 0x400)
            out.append(f"\\u{0xD800 + high:04x}\\u{0xDC00 + low:04x}")
    return "".join(out)
