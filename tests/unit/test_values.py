"""The core's cheap immutable values (:mod:`services.core.values`) behave as the frozen dataclasses they
replaced: equality and hash by fields, slots, ``replace``, and a snapshot round trip."""

from __future__ import annotations

import dataclasses

import pytest

from services.core.baccarat.coup import Coup
from services.core.baccarat.engine import CoupState, Deal, TableConfig
from services.core.envelope import ChainHead
from services.core.ledger import Wager
from services.core.processor import Event
from services.core.values import fast_replace, immutable, replace
from services.dealer.processor import DealerState, Shoe, Table
from services.monitor.accounts import AccountsState, Player
from services.monitor.alerts import Seen
from services.monitor.state import MonitorState, Punter, ShoeWatch, TableWatch
from services.runtime.embedded import snapshot
from services.settlement.payout_stage import PayoutState, PayoutTable
from services.settlement.wallet_stage import WalletState


@immutable
class Point:
    """A value for the tests."""

    x: int
    y: str = "a"


def test_equal_values_are_equal_and_hash_alike_and_differ_by_any_field() -> None:
    """Two values of the same fields are equal with one hash (usable as dict keys); another field
    value makes them unequal."""
    assert Point(1) == Point(1, "a")
    assert hash(Point(1)) == hash(Point(1, "a"))
    assert {Point(1): "p"}[Point(1)] == "p"
    assert Point(1) != Point(2)
    assert Point(1) != Point(1, "b")


def test_a_value_is_a_slotted_dataclass_that_replace_copies() -> None:
    """No instance ``__dict__`` (slots), a dataclass for the snapshot codec, ``replace`` gives a new value
    and leaves the old one as it was."""
    p = Point(1)
    assert not hasattr(p, "__dict__")
    assert dataclasses.is_dataclass(p)
    q = dataclasses.replace(p, y="b")
    assert (p.y, q.y) == ("a", "b")


HOT = [Coup, CoupState, Deal, ChainHead, Wager, Event, DealerState, Shoe, Table, AccountsState, Player,
       MonitorState, Punter, Seen, ShoeWatch, TableWatch, PayoutState, PayoutTable, WalletState]  # fmt: skip


@pytest.mark.parametrize("cls", HOT)
def test_the_hot_values_are_immutable_dataclasses_with_slots(cls: type) -> None:
    """Each hot value class of the core and the processors is a slotted dataclass with a field hash."""
    assert dataclasses.is_dataclass(cls)
    assert "__slots__" in cls.__dict__
    assert cls.__hash__ is not None


def test_a_dealer_table_round_trips_a_snapshot() -> None:
    """A table with a coup in play encodes and decodes to an equal table (the codec reads dataclasses)."""
    config = TableConfig("punto_banco", 8)
    coup = Coup("T1/S1/1", 1, "betting", "2026-01-01T00:00:00Z", (Wager("b1", "a1", "player", 100),))
    table = Table("T1", config, "EUR", {"player": (1, 1000)}, None, coup, 0)
    state = DealerState({"T1": table})
    assert snapshot.loads(snapshot.dumps(state, DealerState), DealerState) == state


@dataclasses.dataclass(frozen=True)
class _Frozen:
    """A standard frozen dataclass, with a field outside ``__init__``."""

    a: int
    b: tuple[int, ...] = ()
    c: int = dataclasses.field(init=False, default=7)


@dataclasses.dataclass
class _One:
    only: str


@pytest.mark.parametrize(
    ("value", "changes"),
    [
        (Point(1), {}),
        (Point(1), {"y": "b"}),
        (Point(1, "z"), {"x": 3, "y": "q"}),
        (_Frozen(1, (2,)), {"b": (3, 4)}),
        (_One("x"), {"only": "y"}),
        (_One("x"), {}),
        (TableWatch("T1", coups=4), {"coups": 5, "punters": {"a": Punter(seen=2)}}),
        (Punter(streak=("b1",)), {"seen": 9}),
    ],
)
def test_fast_replace_gives_what_dataclasses_replace_gives(value: object, changes: dict[str, object]) -> None:
    """:func:`~services.core.values.fast_replace` (what ``replace`` is at run time): a new value of the
    same class equal to the standard library's, every unchanged field the very same object."""
    got, want = fast_replace(value, **changes), dataclasses.replace(value, **changes)  # type: ignore[type-var]
    assert type(got) is type(want) and got == want and got is not value
    for f in dataclasses.fields(value):  # type: ignore[arg-type]
        if f.name not in changes:
            assert getattr(got, f.name) is getattr(value, f.name)
    assert replace is fast_replace


def test_fast_replace_refuses_what_dataclasses_replace_refuses() -> None:
    """An unknown field, or one outside ``__init__``: ``TypeError``/``ValueError`` as the standard one."""
    with pytest.raises(TypeError):
        dataclasses.replace(Point(1), z=2)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        fast_replace(Point(1), z=2)
    with pytest.raises(TypeError):
        fast_replace(_Frozen(1), c=2)


def test_the_states_changed_in_place_say_so_in_their_type() -> None:
    """One state discipline: every processor state is immutable except the holders declared
    ``@owned_in_place`` (ADR 0005), and those are exactly the two whose history is too big to copy.
    A new in-place state must be declared, and so shows up here."""
    import ast  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    from services.core.seamless import SeamlessState  # noqa: PLC0415

    root = Path(__file__).resolve().parents[2] / "services"
    declared = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                names = {d.id for d in node.decorator_list if isinstance(d, ast.Name)}
                if "owned_in_place" in names:
                    declared.add(node.name)
    assert declared == {"WalletState", "SeamlessState"}
    assert WalletState.IN_PLACE and SeamlessState.IN_PLACE  # type: ignore[attr-defined]
    for state in (DealerState, PayoutState, MonitorState, AccountsState):
        assert not getattr(state, "IN_PLACE", False), state
