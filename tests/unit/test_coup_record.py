"""The coup record (:mod:`services.core.baccarat.coup`): folding a table's events with ``coup_opened`` and
``evolve`` gives, at each ``CoupResolved``, the coup the dealer resolved (it makes the same transitions
from the commands), whatever the variant and the session."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from services.core import topics
from services.core.baccarat import TableConfig
from services.core.baccarat.coup import Coup, coup_opened, evolve
from services.core.contract import BettingOpened, CoupResolved, TableOpened, payload_of
from services.core.envelope import Envelope
from services.core.processor import initial_state, step
from services.simulation.simulator import DEFAULT_TABLES, Session
from tests.helpers.membus import MemBus


class TableFold:
    """A table stream folded record by record with ``coup_opened``/``evolve``: each table's
    configuration and the coup it holds (none between a ``CoupResolved`` and the next opening)."""

    def __init__(self) -> None:
        self.held: dict[str, Coup] = {}
        self.configs: dict[str, TableConfig] = {}

    def feed(self, env: Envelope) -> tuple[Coup, CoupResolved] | None:
        """Fold one record; at a ``CoupResolved``, the coup held until then with that record."""
        if env.topic != topics.TABLE_EVENTS:
            return None
        event = payload_of(env)
        if isinstance(event, TableOpened):
            self.configs[env.key] = TableConfig.from_dict(event.config.model_dump(mode="json"))
        elif isinstance(event, BettingOpened):
            self.held[env.key] = coup_opened(event, env.occurred_at)
        elif isinstance(event, CoupResolved):
            return self.held.pop(env.key), event
        elif env.key in self.held:
            self.held[env.key] = evolve(self.held[env.key], event, self.configs[env.key])
        return None


def resolved_coups(log: list[Envelope]) -> list[tuple[Coup, CoupResolved]]:
    """Each table's stream folded: the coup held when each ``CoupResolved`` came, with that record."""
    fold = TableFold()
    return [pair for env in log if (pair := fold.feed(env)) is not None]


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), first=st.integers(0, len(DEFAULT_TABLES) - 1))
def test_folding_the_table_events_gives_the_coup_each_coup_resolved_records(seed: int, first: int) -> None:
    bus = MemBus()
    tables = [DEFAULT_TABLES[first], DEFAULT_TABLES[(first + 3) % len(DEFAULT_TABLES)]]
    Session(bus, seed=seed).run(tables, 3)
    coups = resolved_coups(bus.log)
    assert len(coups) == 6
    for coup, resolved in coups:
        assert (coup.coup_id, coup.number, coup.phase) == (resolved.coup_id, resolved.coup_number, "dealing")
        assert coup.started_at == resolved.started_at
        assert tuple(w.bet_id for w in coup.wagers) == resolved.bet_ids
        assert coup.state is not None
        assert {h: tuple(cards) for h, cards in coup.state.hands if cards} == {
            h: tuple(r.cards) for h, r in resolved.hands.items()
        }
        assert coup.state.decisions == tuple((d.hand, d.choice) for d in resolved.decisions)


@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), first=st.integers(0, len(DEFAULT_TABLES) - 1))
def test_the_dealers_coup_is_the_fold_of_the_events_it_wrote(seed: int, first: int) -> None:
    """A fresh dealer stepped through a session's table inbox: after every input, each table's coup in
    its state is what folding its own events so far with ``coup_opened``/``evolve`` gives."""
    bus = MemBus()
    tables = [DEFAULT_TABLES[first], DEFAULT_TABLES[(first + 2) % len(DEFAULT_TABLES)]]
    Session(bus, seed=seed).run(tables, 2)
    dealer = next(p for p, _ in bus.procs if p.name == "dealer")
    state = initial_state(dealer)
    fold = TableFold()
    for rec in (e for e in bus.log if e.topic == topics.TABLE_INBOX):
        for env in step(dealer, state, rec):
            fold.feed(env)
        held = {t: table.coup for t, table in state.inner.tables.items()}
        assert held == {t: fold.held.get(t) for t in held}
    assert len(bus.of_type("CoupResolved")) == 4
