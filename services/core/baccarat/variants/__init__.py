"""The variant registry: every game the engine runs, by id.

Each module in :data:`MODULES` defines ``VARIANT``, one instance of its :class:`Variant` subclass.
"""

from __future__ import annotations

from importlib import import_module
from typing import Final

from services.core.baccarat.engine import Variant
from services.core.errors import DomainError, Reason

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


VARIANTS: Final[dict[str, Variant]] = _load()
"""Every registered variant, by id, in the order of :data:`MODULES`."""


def get_variant(variant_id: str) -> Variant:
    """The variant called ``variant_id``; ``DomainError(UNKNOWN_VARIANT)`` otherwise."""
    try:
        return VARIANTS[variant_id]
    except KeyError:
        known = ", ".join(VARIANTS)
        raise DomainError(
            Reason.UNKNOWN_VARIANT, f"unknown variant {variant_id!r} (known: {known})"
        ) from None
