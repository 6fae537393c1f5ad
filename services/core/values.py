"""Immutable values that are cheap to build: :func:`immutable`.

The core's state is immutable (docs/architecture.md: a processor's ``decide``/``evolve`` never change
the state they are given), and each transition builds new values: the dealer builds a coup, a shoe,
a table and the engine's coup state for every card, twice (its look-ahead, then the fold), a wager
and an event for every bet. ``@dataclass(frozen=True)`` enforces immutability at run time by writing
each field in ``__init__`` through ``object.__setattr__``, which makes building one several times
dearer than an ordinary slotted dataclass (docs/performance.md#immutable-values).

:func:`immutable` keeps the guarantee where this code base checks everything else, in the type checker:
``mypy --strict`` (``make lint``, CI) sees the class as frozen (``dataclass_transform(frozen_default=
True)``) and refuses any assignment to a field, while at run time it is a plain slotted dataclass with
equality and a hash over its fields, exactly as the frozen one had (``tests/unit/test_values.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Any, TypeVar, dataclass_transform

__all__ = ["fast_replace", "immutable", "owned_in_place", "replace"]

T = TypeVar("T")


@dataclass_transform(frozen_default=True)
def immutable(cls: type[T]) -> type[T]:
    """``cls`` as a slotted dataclass frozen to the type checker, built without ``object.__setattr__``:
    fields in ``__init__`` order, ``==`` and ``hash`` by fields (see the module docstring)."""
    return dataclass(slots=True, unsafe_hash=True)(cls)


@dataclass_transform(frozen_default=True)
def owned_in_place(cls: type[T]) -> type[T]:
    """The one exception to immutable state (docs/adr/0005-mutable-state.md), said in the type: a state
    holder frozen to the type checker, as :func:`immutable`, whose maps its processor changes in place
    (their history would cost O(history) to copy per record), only once a request passed every check and
    every event is built, so a refused request leaves it as it was; :func:`services.core.processor.step`
    owns the holder. The class carries ``IN_PLACE = True``: a test lists the holders."""
    made = dataclass(slots=True, unsafe_hash=True)(cls)
    made.IN_PLACE = True  # type: ignore[attr-defined]
    return made


_INIT_FIELDS: dict[type, tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]] = {}
"""Per dataclass: the names of its ``__init__`` fields and one getter of all their values."""


def _init_fields(cls: type) -> tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]:
    names = tuple(f.name for f in dataclasses.fields(cls) if f.init)
    if len(names) > 1:
        get: Callable[[Any], tuple[Any, ...]] = attrgetter(*names)
    else:  # attrgetter of one name gives the value itself, of none is not allowed
        get = lambda obj: tuple(getattr(obj, n) for n in names)  # noqa: E731
    _INIT_FIELDS[cls] = names, get
    return names, get


def fast_replace(obj: T, /, **changes: Any) -> T:
    """``dataclasses.replace(obj, **changes)``: a new instance of ``obj``'s dataclass, its ``__init__``
    fields taken from ``obj`` unless ``changes`` names them (an unknown name: ``TypeError`` from
    ``__init__``, as there; ``tests/unit/test_values.py`` compares the two). The fields are read by one
    ``attrgetter`` and passed as one dict, where the standard library walks ``fields()`` in Python
    (docs/performance.md#immutable-values)."""
    cls = type(obj)
    names, get = _INIT_FIELDS.get(cls) or _init_fields(cls)
    args = dict(zip(names, get(obj), strict=True))
    args.update(changes)
    made: T = cls(**args)
    return made


if TYPE_CHECKING:  # the type checker checks the changes' names and types against the fields
    from dataclasses import replace
else:
    replace = fast_replace
