"""What a table of each variant may configure: declarations and a pure validator.

Every variant declares its settings (:meth:`~services.core.baccarat.engine.Variant.settings`): for each
name, the type, the allowed values (a list or an integer range), the default and the sentence of the
rule text or regulation it comes from. :func:`config_errors` checks what a table asks for against those
declarations *before* anything is built, and returns every problem as a precise sentence; nothing is
coerced (``"3"`` is not ``3``, ``True`` is not ``1``). The engine refuses a configuration with errors
(``DomainError(BAD_CONFIG)``); the dealer turns that into ``CommandRefused`` and never opens the table;
the CLI prints one line and exits 2. docs/games.md's per-variant tables are generated from the same
declarations (:func:`settings_table`), and a test keeps them equal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["int", "name", "names"]
"""``int``: an integer (from ``values``, or within ``minimum``..``maximum``); ``name``: one string
from ``values``; ``names``: a list of distinct strings, each from ``values``."""


@dataclass(frozen=True, slots=True)
class Setting:
    """One configurable name of a variant.

    ``values`` lists what is allowed (for ``int`` either ``values`` or the inclusive range
    ``minimum``..``maximum``); ``default`` is the default as shown to people (it may depend on another
    setting, e.g. the levy on the deck count); ``source`` quotes the text it comes from.
    """

    name: str
    kind: Kind
    default: str
    source: str
    values: tuple[Any, ...] = ()
    minimum: int | None = None
    maximum: int | None = None
    allowed_text: str = ""

    def allowed(self) -> str:
        """The allowed values in words (``1, 6, 8``; ``0 to 500``; ``any of: a, b``)."""
        if self.allowed_text:
            return self.allowed_text
        if self.kind == "int" and not self.values:
            return f"{self.minimum} to {self.maximum}"
        shown = ", ".join(str(v) for v in self.values)
        return f"any of: {shown}" if self.kind == "names" else shown

    def errors(self, value: Any) -> list[str]:
        """What is wrong with ``value`` for this setting (empty when it is allowed)."""
        if self.kind == "int":
            if type(value) is not int:
                return [f"{self.name}: must be an integer, not {_shown(value)}"]
            if self.values and value not in self.values:
                return [f"{self.name}: {value} is not allowed (allowed: {self.allowed()})"]
            lo, hi = self.minimum, self.maximum
            if (lo is not None and value < lo) or (hi is not None and value > hi):
                return [f"{self.name}: {value} is out of range (allowed: {self.allowed()})"]
            return []
        if self.kind == "name":
            if not isinstance(value, str):
                return [f"{self.name}: must be a name, not {_shown(value)}"]
            if value not in self.values:
                return [f"{self.name}: {value!r} is not allowed (allowed: {self.allowed()})"]
            return []
        if isinstance(value, str | bytes) or not isinstance(value, Sequence):
            return [f"{self.name}: must be a list of names, not {_shown(value)}"]
        out: list[str] = []
        for item in value:
            if not isinstance(item, str):
                out.append(f"{self.name}: {_shown(item)} is not a name")
            elif item not in self.values:
                out.append(f"{self.name}: {item!r} is not allowed (allowed: {self.allowed()})")
        if len(set(map(str, value))) != len(value):
            out.append(f"{self.name}: a name is listed twice")
        return out


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:40]}"


def config_errors(variant_id: str, settings: Sequence[Setting], given: Mapping[str, Any]) -> tuple[str, ...]:
    """Every problem with the configuration ``given`` for a variant declaring ``settings``.

    Unknown names, wrong types and values outside what is declared are each one sentence
    (``"commission_bps: 30000 is out of range (allowed: 0 to 500)"``); an empty tuple means valid.
    Pure: no coercion, no defaults applied.
    """
    declared = {s.name: s for s in settings}
    out: list[str] = []
    for name in sorted(given, key=str):
        setting = declared.get(name) if isinstance(name, str) else None
        if setting is None:
            known = ", ".join(declared)
            out.append(f"{name}: {variant_id} has no such setting (it has: {known})")
            continue
        out.extend(setting.errors(given[name]))
    return tuple(out)


def settings_table(settings: Sequence[Setting]) -> str:
    """The Markdown table of a variant's settings, as the README shows it."""
    rows = [
        "| setting | allowed | default | from |",
        "|---|---|---|---|",
    ]
    for s in settings:
        source = s.source.replace("|", "\\|")
        rows.append(f"| `{s.name}` | {s.allowed()} | {s.default} | {source} |")
    return "\n".join(rows)
