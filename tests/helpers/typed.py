"""A decoded JSON value with every scalar's type beside it: ``1`` and ``1.0`` and ``True`` differ, NaN
equals NaN, and keys keep the order they were read in (two readers compared value for value)."""

from __future__ import annotations

import math
from typing import Any


def typed(value: Any) -> Any:
    """``value`` with types made explicit (see the module)."""
    if isinstance(value, dict):
        return [(k, typed(v)) for k, v in value.items()]  # in the order read
    if isinstance(value, list):
        return [typed(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")
    return (type(value).__name__, value)
