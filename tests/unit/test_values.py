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
from services.core.values import immutable
from services.dealer.processor import DealerState, Shoe, Table
from services.monitor.accounts import AccountsState, Player
from services.monitor.processor import MonitorState, Punter, Seen, ShoeWatch, TableWatch
from services.runtime.embedded import snapshot
from services.settlement.processor import PayoutState, PayoutTable, WalletState


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
