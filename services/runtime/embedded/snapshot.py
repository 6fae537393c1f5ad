"""Processor state as data: a typed JSON codec for snapshots (docs/trust.md: never pickles).

A snapshot is read back by the *types in the code*, never by names in the data: :func:`decode` walks
the state's type annotations (dataclasses, named tuples, ``dict``/``Mapping``, ``tuple``, ``list``,
``set``/``frozenset``, ``deque``, ``Literal``, enums, unions, ``int``/``str``/``bool``/``None``, ``Any`` for
plain JSON) and builds exactly those objects, refusing anything that does not fit (an unknown field,
a missing one the class gives no default, a string where an int belongs, a bool for an int, a value
outside a ``Literal``). A field the class gained since a snapshot was written, with a default, takes its
default: a state that grows a field does not make every snapshot written before unreadable.
Nothing in a snapshot can choose a class to instantiate or code to run, so a crafted snapshot is at
worst refused — the runner then rebuilds the state from the log.

The encoding is plain JSON: a dataclass is an object of its fields; a ``dict`` with string keys an
object (insertion order kept), any other ``dict`` a list of ``[key, value]`` pairs; tuples, lists
and named tuples are arrays; sets are arrays in a stable order. ``Any`` holds JSON values only (a
tuple there comes back as a list, so a state should type what it keeps). A
:class:`~services.core.kept.Kept` map is the object of its in-memory entries (none once a store holds
them): the very encoding of the ``dict[str, str]`` it replaced, so an older snapshot's map reads back.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import json
import sys
import types
import typing
from collections import deque
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from collections.abc import Set as AbstractSet
from functools import cache
from itertools import chain
from typing import Any, Final, Literal, Union, get_args, get_origin

import orjson

from services.core.kept import Kept

MAX_SNAPSHOT_BYTES = 1 << 30
"""A snapshot larger than this is not read (the state is rebuilt from the log instead)."""


class SnapshotError(ValueError):
    """A value does not fit its type: while encoding, a state the codec cannot write; while decoding,
    a snapshot that is not what the code expects (foreign, corrupt or crafted)."""


def dumps(value: Any, tp: Any) -> bytes:
    """``value`` (of type ``tp``) as compact JSON bytes."""
    return to_bytes(encode(value, tp))


def to_bytes(data: Any) -> bytes:
    """Data that :func:`encode` produced as compact UTF-8 JSON.

    Written by orjson (the standard library's bytes for this data, about ten times faster: a wallet
    stage's snapshot is megabytes); what orjson refuses (an integer beyond 64 bits, nesting past its
    limit) by the standard library, which also refuses a NaN or an infinity (orjson would write
    ``null``; :func:`encode` never produces a float: :func:`_plain` refuses them)."""
    try:
        return orjson.dumps(data)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        pass
    try:
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    except ValueError as exc:  # a NaN or an infinity
        raise SnapshotError(str(exc)) from None


def loads(blob: bytes, tp: Any) -> Any:
    """The ``tp`` value that :func:`dumps` wrote; :class:`SnapshotError` for anything else."""
    if len(blob) > MAX_SNAPSHOT_BYTES:
        raise SnapshotError(f"snapshot of {len(blob)} bytes exceeds {MAX_SNAPSHOT_BYTES}")
    try:
        data = json.loads(blob, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise SnapshotError(f"not JSON: {type(exc).__name__}") from None
    return decode(data, tp)


def _no_constant(name: str) -> Any:
    raise SnapshotError(f"{name} is not a JSON number")


# --- encoding -----------------------------------------------------------------------------------


def encode(value: Any, tp: Any) -> Any:
    """``value`` as JSON-ready data, directed by its type ``tp``.

    The walk over ``tp`` is done once per type (:func:`_encoder` compiles it into a function, cached),
    not once per value: a wallet stage of 5,000 accounts snapshots in a fraction of the time."""
    return _encoder(tp)(value)


Encoder = Callable[[Any], Any]

_building: set[Any] = set()
"""Types whose encoder is being compiled (a recursive type refers to itself: resolved lazily)."""


def _encoder(tp: Any) -> Encoder:
    try:
        return _compiled(tp)
    except TypeError:  # an unhashable annotation: compiled afresh each time
        return _compile(tp)


@cache
def _compiled(tp: Any) -> Encoder:
    return _compile(tp)


def _child(tp: Any) -> Encoder:
    """The encoder of a type inside ``tp``: compiled now, or on first use when it is being compiled."""
    try:
        pending = tp in _building
    except TypeError:
        pending = False
    if not pending:
        return _encoder(tp)
    box: list[Encoder] = []

    def lazy(value: Any) -> Any:
        if not box:
            box.append(_encoder(tp))
        return box[0](value)

    return lazy


def _compile(tp: Any) -> Encoder:
    with contextlib.suppress(TypeError):  # an unhashable type is not looked up in it either
        _building.add(tp)
    try:
        return _compile_kind(tp)
    finally:
        with contextlib.suppress(TypeError):
            _building.discard(tp)


def _compile_kind(tp: Any) -> Encoder:  # one branch per kind of type, as decode
    origin, args = get_origin(tp), get_args(tp)
    if tp is Any:
        return _plain
    if tp is Kept:
        return _encode_kept
    if tp is None or tp is type(None):
        return _encode_none
    if origin is Literal:

        def literal(value: Any) -> Any:
            if value not in args:
                raise SnapshotError(f"{value!r} is not one of {args}")
            return _plain(value)

        return literal
    if origin in (Union, types.UnionType):
        return _union_encoder(args)
    if origin is typing.Annotated:
        return _child(args[0])
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return lambda value: _plain(tp(value).value)
    if tp in (int, bool):
        return _exact_scalar(tp)
    if tp is str:
        return _string
    if tp is float:
        return lambda value: _scalar(value, float)
    if _is_namedtuple(tp):
        hints = _hints(tp)
        fields = [(name, _child(hints[name])) for name in tp._fields]
        return lambda value: [enc(getattr(value, name)) for name, enc in fields]
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _dataclass_encoder(tp)
    if origin is tuple or tp is tuple:
        return _tuple_encoder(args)
    if origin in (list, Sequence, deque) or tp in (list, deque):
        item = _child(args[0] if args else Any)

        def sequence(value: Any) -> Any:
            if not isinstance(value, (list, tuple, deque)):
                raise SnapshotError(f"expected a sequence, got {type(value).__name__}")
            return [item(v) for v in value]

        return sequence
    if origin in (set, frozenset, AbstractSet):
        member = _child(args[0] if args else Any)

        def unordered(value: Any) -> Any:
            if not isinstance(value, (set, frozenset)):
                raise SnapshotError(f"expected a set, got {type(value).__name__}")
            encoded = [member(v) for v in value]
            return sorted(encoded, key=lambda e: json.dumps(e, sort_keys=True))

        return unordered
    if origin in (dict, Mapping, MutableMapping) or tp is dict:
        return _mapping_encoder(args)

    def unknown(value: Any) -> Any:
        raise SnapshotError(f"no snapshot encoding for type {tp!r}")

    return unknown


def _encode_kept(value: Any) -> Any:
    """A :class:`~services.core.kept.Kept` map: the JSON object of its in-memory entries (none once a
    store is bound: the store holds them, not the snapshot)."""
    if not isinstance(value, Kept):
        raise SnapshotError(f"expected Kept, got {type(value).__name__}")
    return _FLAT_STR(value.entries)


def _encode_none(value: Any) -> None:
    if value is not None:
        raise SnapshotError(f"expected None, got {type(value).__name__}")


def _string(value: Any) -> Any:
    return value if type(value) is str else _scalar(value, str)


def _exact_scalar(tp: type) -> Encoder:
    """``int`` or ``bool``: the value itself when its type is exactly ``tp`` (as :func:`_scalar`)."""

    def scalar(value: Any) -> Any:
        if type(value) is not tp:
            raise SnapshotError(f"expected {tp.__name__}, got {type(value).__name__}")
        return value

    return scalar


def _dataclass_encoder(tp: type) -> Encoder:
    hints = _hints(tp)
    fields = [(f.name, _child(hints[f.name])) for f in dataclasses.fields(tp)]

    def dataclass(value: Any) -> Any:
        if not isinstance(value, tp):
            raise SnapshotError(f"expected {tp.__name__}, got {type(value).__name__}")
        return {name: enc(getattr(value, name)) for name, enc in fields}

    return dataclass


def _union_encoder(args: tuple[Any, ...]) -> Encoder:
    optional = type(None) in args
    arms = [_child(arm) for arm in args if arm is not type(None)]

    def union(value: Any) -> Any:
        if value is None and optional:
            return None
        for arm in arms:
            try:
                return arm(value)
            except SnapshotError:
                continue
        raise SnapshotError(f"{type(value).__name__} fits no arm of {args}")

    return union


def _tuple_encoder(args: tuple[Any, ...]) -> Encoder:
    """A tuple's encoder. A homogeneous one of exact ``int`` or ``str`` items (and, in
    :func:`_mapping_encoder`, a map of exact ``str`` keys) is checked in one pass over the item types
    and copied as it is, and a map of such tuples by exact ``str`` keys in one pass over all of them
    (:func:`_mapping_encoder`), the same data and refusals as the walk item by item, and faster on the
    monitor's large state (docs/performance.md#snapshot-encoder)."""
    if not args or (len(args) == 2 and args[1] is Ellipsis):
        item_tp = args[0] if args else Any
        item = _child(item_tp)
        exact = {item_tp} if item_tp in _FLAT else None

        def homogeneous(value: Any) -> Any:
            if not isinstance(value, tuple):
                raise SnapshotError(f"expected a tuple, got {type(value).__name__}")
            if exact is not None and set(map(type, value)) <= exact:  # each item is itself: as is
                return list(value)
            return [item(v) for v in value]

        return homogeneous
    if args == ((),):
        args = ()
    items = [_child(t) for t in args]

    def fixed(value: Any) -> Any:
        if not isinstance(value, tuple):
            raise SnapshotError(f"expected a tuple, got {type(value).__name__}")
        if len(value) != len(items):
            raise SnapshotError(f"expected {len(items)} items, got {len(value)}")
        return [enc(v) for v, enc in zip(value, items, strict=True)]

    return fixed


_FLAT: Final = (str, int)
"""The value types of a flat ``dict[str, ...]`` (a wallet's balances, currencies and transfer
fingerprints: tens of thousands of entries) that :func:`_flat_encoder` and :func:`_decode_mapping` check
with one pass over the types instead of a call per entry."""


def _flat_encoder(val_tp: type) -> Encoder:
    """``dict[str, val_tp]`` with ``val_tp`` in :data:`_FLAT`: the same refusals as the per-entry walk
    (a key that is no ``str``; a value whose type is not exactly ``val_tp``, so no ``bool`` for an
    ``int``), the same data, about ten times faster."""

    def flat(value: Any) -> Any:
        if not isinstance(value, Mapping):
            raise SnapshotError(f"expected a mapping, got {type(value).__name__}")
        out = dict(value)
        if not set(map(type, out)) <= {str}:
            bad = next(k for k in out if not isinstance(k, str))
            raise SnapshotError(f"expected a str key, got {type(bad).__name__}")
        if not set(map(type, out.values())) <= {val_tp}:
            bad = next(v for v in out.values() if type(v) is not val_tp)
            raise SnapshotError(f"expected {val_tp.__name__}, got {type(bad).__name__}")
        return out

    return flat


_FLAT_STR: Final[Encoder] = _flat_encoder(str)


def _mapping_encoder(args: tuple[Any, ...]) -> Encoder:
    key_tp, val_tp = args if args else (Any, Any)
    if key_tp is str and val_tp in _FLAT:
        return _flat_encoder(val_tp)
    key, val = _child(key_tp), _child(val_tp)
    if _str_keyed(key_tp):
        plain_keys = key_tp is str
        items = get_args(val_tp) if get_origin(val_tp) is tuple else ()
        flat_items = {items[0]} if len(items) == 2 and items[1] is Ellipsis and items[0] in _FLAT else None

        def str_keyed(value: Any) -> Any:
            if not isinstance(value, Mapping):
                raise SnapshotError(f"expected a mapping, got {type(value).__name__}")
            if plain_keys and set(map(type, value)) <= {str}:  # each key is itself: one pass, no calls
                values = value.values()
                if (
                    flat_items is not None  # tuples of exact ints or strs (the monitor's pairs): as they are
                    and set(map(type, values)) <= {tuple}
                    and set(map(type, chain.from_iterable(values))) <= flat_items
                ):
                    return {k: list(v) for k, v in value.items()}
                return {k: val(v) for k, v in value.items()}
            out: dict[str, Any] = {}
            for k, v in value.items():
                if not isinstance(k, str):
                    raise SnapshotError(f"expected a str key, got {type(k).__name__}")
                out[str(key(k))] = val(v)
            return out

        return str_keyed

    def pairs(value: Any) -> Any:
        if not isinstance(value, Mapping):
            raise SnapshotError(f"expected a mapping, got {type(value).__name__}")
        return [[key(k), val(v)] for k, v in value.items()]

    return pairs


def _scalar(value: Any, tp: type) -> Any:
    if tp is int and (type(value) is not int):
        raise SnapshotError(f"expected int, got {type(value).__name__}")
    if tp is bool and type(value) is not bool:
        raise SnapshotError(f"expected bool, got {type(value).__name__}")
    if tp is str and not isinstance(value, str):
        raise SnapshotError(f"expected str, got {type(value).__name__}")
    if tp is float and type(value) not in (int, float):
        raise SnapshotError(f"expected float, got {type(value).__name__}")
    return _plain(value)


def _plain(value: Any) -> Any:
    """A JSON value as it is (``Any``, literals, enum values): tuples become lists."""
    if value is None or type(value) in (bool, int, str):
        return value
    if isinstance(value, enum.Enum):
        return _plain(value.value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
        return {str(k): _plain(v) for k, v in value.items()}
    raise SnapshotError(f"{type(value).__name__} is not plain JSON (give it a type in the state)")


# --- decoding -----------------------------------------------------------------------------------


def decode(data: Any, tp: Any) -> Any:
    """The value of type ``tp`` that :func:`encode` turned into ``data``; :class:`SnapshotError` when
    ``data`` does not fit ``tp`` exactly."""
    if (tp is str or tp is int) and type(data) is tp:  # most values of a state: no walk over the type
        return data
    origin, args = _shape(tp)
    if tp is Any:
        return _check_plain(data)
    if tp is Kept:  # a JSON object of str, as a dict[str, str] field was written before Kept existed
        return Kept(_decode_mapping(data, (str, str)))
    if tp is None or tp is type(None):
        if data is not None:
            raise SnapshotError(f"expected null, got {type(data).__name__}")
        return None
    if origin is Literal:
        for arg in args:
            if type(arg) is type(data) and arg == data:
                return arg
        raise SnapshotError(f"{data!r} is not one of {args}")
    if origin in (Union, types.UnionType):
        return _decode_union(data, args)
    if origin is typing.Annotated:
        return decode(data, args[0])
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(data)
        except ValueError:
            raise SnapshotError(f"{data!r} is not a {tp.__name__}") from None
    if tp in (int, str, bool, float):
        return _scalar(data, tp)
    if _is_namedtuple(tp):
        hints = _hints(tp)
        items = _array(data, len(tp._fields))
        return tp(*(decode(v, hints[name]) for v, name in zip(items, tp._fields, strict=True)))
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _decode_dataclass(data, tp)
    if origin is tuple or tp is tuple:
        return _decode_tuple(data, args)
    if origin is deque or tp is deque:  # an ordered window (audit's recently settled bets)
        item = args[0] if args else Any
        return deque(decode(v, item) for v in _array(data))
    if origin in (list, Sequence) or tp is list:
        item = args[0] if args else Any
        values = [decode(v, item) for v in _array(data)]
        return values if origin is list or tp is list else tuple(values)
    if origin in (set, frozenset, AbstractSet):
        item = args[0] if args else Any
        values = [decode(v, item) for v in _array(data)]
        return set(values) if origin is set else frozenset(values)
    if origin in (dict, Mapping, MutableMapping) or tp is dict:
        return _decode_mapping(data, args)
    raise SnapshotError(f"no snapshot decoding for type {tp!r}")


def _decode_union(data: Any, args: tuple[Any, ...]) -> Any:
    if data is None and type(None) in args:
        return None
    fits: list[Any] = []
    for arm in args:
        if arm is type(None):
            continue
        try:
            fits.append(decode(data, arm))
        except SnapshotError:
            continue
        if not (dataclasses.is_dataclass(arm) or _is_namedtuple(arm)):
            return fits[0]  # scalars and containers: the first arm that fits, as encode chose it
    if len(fits) == 1:
        return fits[0]
    raise SnapshotError(f"data fits {len(fits)} arms of {args}, not exactly one")


def _decode_dataclass(data: Any, tp: type) -> Any:
    if not isinstance(data, dict):
        raise SnapshotError(f"expected an object for {tp.__name__}, got {type(data).__name__}")
    fields = dataclasses.fields(tp)
    names = {f.name for f in fields}
    if set(data) != names and not _added_since(fields, data):
        raise SnapshotError(f"{tp.__name__} has fields {sorted(names)}, the snapshot {sorted(data)[:20]}")
    hints = _hints(tp)
    values = {f.name: decode(data[f.name], hints[f.name]) for f in fields if f.name in data}
    values.update({f.name: _default(f) for f in fields if f.name not in data})
    obj = tp(**{f.name: values[f.name] for f in fields if f.init})
    for f in fields:
        if not f.init:
            object.__setattr__(obj, f.name, values[f.name])
    return obj


def _added_since(fields: tuple[dataclasses.Field[Any], ...], data: Mapping[str, Any]) -> bool:
    """Whether ``data`` is the object of an earlier version of the class: no field it does not have, and
    every field it lacks one the class gives a default (a field added since, with its default)."""
    names = {f.name for f in fields}
    missing = [f for f in fields if f.name not in data]
    return set(data) <= names and all(_has_default(f) for f in missing)


def _has_default(f: dataclasses.Field[Any]) -> bool:
    return f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING


def _default(f: dataclasses.Field[Any]) -> Any:
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def _decode_tuple(data: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
    if not args or (len(args) == 2 and args[1] is Ellipsis):
        item = args[0] if args else Any
        values = _array(data)
        if item in _FLAT and set(map(type, values)) <= {item}:  # each item is itself: one pass, no calls
            return tuple(values)
        return tuple(decode(v, item) for v in values)
    if args == ((),):
        args = ()
    items = _array(data, len(args))
    return tuple(decode(v, t) for v, t in zip(items, args, strict=True))


_SHAPES: dict[Any, tuple[Any, tuple[Any, ...]]] = {}
"""``(get_origin(tp), get_args(tp))`` by type: :func:`decode` asks for every value it reads."""


def _shape(tp: Any) -> tuple[Any, tuple[Any, ...]]:
    try:
        return _SHAPES[tp]
    except KeyError:
        shape = _SHAPES[tp] = (get_origin(tp), get_args(tp))
        return shape
    except TypeError:  # an unhashable annotation
        return get_origin(tp), get_args(tp)


def _decode_mapping(data: Any, args: tuple[Any, ...]) -> dict[Any, Any]:
    key_tp, val_tp = args if args else (Any, Any)
    if _str_keyed(key_tp):
        if not isinstance(data, dict):
            raise SnapshotError(f"expected an object, got {type(data).__name__}")
        if key_tp is str and val_tp in _FLAT and set(map(type, data.values())) <= {val_tp}:
            return dict(data)  # JSON keys are strings: every entry fits as it is (checked in one pass)
        return {decode(k, key_tp): decode(v, val_tp) for k, v in data.items()}
    out: dict[Any, Any] = {}
    for pair in _array(data):
        k, v = _array(pair, 2)
        out[_hashable(decode(k, key_tp))] = decode(v, val_tp)
    return out


def _array(data: Any, length: int | None = None) -> list[Any]:
    if not isinstance(data, list):
        raise SnapshotError(f"expected an array, got {type(data).__name__}")
    if length is not None and len(data) != length:
        raise SnapshotError(f"expected {length} items, got {len(data)}")
    return data


def _hashable(key: Any) -> Any:
    try:
        hash(key)
    except TypeError:
        raise SnapshotError(f"a {type(key).__name__} cannot be a key") from None
    return key


def _check_plain(data: Any) -> Any:
    if data is None or type(data) in (bool, int, str):
        return data
    if isinstance(data, list):
        return [_check_plain(v) for v in data]
    if isinstance(data, dict):
        return {k: _check_plain(v) for k, v in data.items()}
    raise SnapshotError(f"{type(data).__name__} is not plain JSON")


# --- types --------------------------------------------------------------------------------------


def _str_keyed(key_tp: Any) -> bool:
    if key_tp is str:
        return True
    if get_origin(key_tp) is Literal:
        return all(isinstance(a, str) for a in get_args(key_tp))
    return isinstance(key_tp, type) and issubclass(key_tp, enum.Enum) and issubclass(key_tp, str)


def _is_namedtuple(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, tuple) and hasattr(tp, "_fields")


@cache
def _hints(tp: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(tp, globalns=vars(sys.modules[tp.__module__]), include_extras=False)
    except (NameError, TypeError, KeyError) as exc:
        raise SnapshotError(f"the fields of {tp.__qualname__} have no readable types: {exc}") from None


def class_names(processor: Any) -> tuple[str, ...]:
    """The names a snapshot of ``processor`` may carry for its class: ``module.Qualname`` where it is
    defined now (the one written), then where it was before a move (``Processor.formerly``)."""
    cls = type(processor)
    modules = (cls.__module__, *getattr(cls, "formerly", ()))
    return tuple(f"{module}.{cls.__qualname__}" for module in modules)


def state_type(processor: Any) -> Any:
    """The type of a processor's own state: the ``S`` of its ``Processor[S]`` base, else the class of
    its initial state."""
    for cls in type(processor).__mro__:
        for base in getattr(cls, "__orig_bases__", ()):
            args = get_args(base)
            named = getattr(get_origin(base), "__name__", "") == "Processor"
            if named and args and not isinstance(args[0], (str, typing.ForwardRef, typing.TypeVar)):
                return args[0]
    return type(processor.initial())
