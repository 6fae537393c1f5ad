"""The engine and the variant registry import one way: the variants depend on the engine, never the
reverse (no import inside a function to get round a circle)."""

from __future__ import annotations

import ast
from pathlib import Path

from services.core.baccarat import VARIANTS, engine, get_variant
from services.core.baccarat.variants import MODULES

ENGINE = Path(engine.__file__)


def test_the_engine_imports_nothing_of_the_variants() -> None:
    tree = ast.parse(ENGINE.read_text(encoding="utf-8"))
    imported = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
    assert not [m for m in imported if m.startswith("services.core.baccarat.variants")]


def test_every_variant_module_is_registered_with_the_engine() -> None:
    """The registry the engine reads is the one the variants package fills, every module's variant."""
    assert engine.VARIANTS is VARIANTS and len(VARIANTS) == len(MODULES)
    assert all(get_variant(v.id) is v for v in VARIANTS.values())
