"""The variant registry: every game the engine runs, by id.

Each module in :data:`MODULES` defines ``VARIANT``, one instance of its :class:`Variant` subclass.
"""

from __future__ import annotations

from importlib import import_module
from typing import Final

from services.core.baccarat.engine import VARIANTS, Variant, get_variant

__all__ = ["MODULES", "VARIANTS", "get_variant"]

MODULES: Final = (
    "punto_banco",
    "ez_baccarat",
    "super6",
    "chemin_de_fer",
    "baccarat_banque",
    "french_club",
    "russian_classic",
)


def _load() -> dict[str, Variant]:
    found: dict[str, Variant] = {}
    for name in MODULES:
        variant = getattr(import_module(f"{__name__}.{name}"), "VARIANT", None)
        if variant is not None:
            found[variant.id] = variant
    return found


VARIANTS.update(_load())
"""(:data:`~services.core.baccarat.engine.VARIANTS`: every registered variant, by id, in the order of
:data:`MODULES`; :func:`~services.core.baccarat.engine.get_variant` looks one up.)"""
