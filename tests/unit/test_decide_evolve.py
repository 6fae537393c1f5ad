"""Decide/evolve (issue #11, docs/architecture.md §Processors): per processor, folding what it wrote
gives the state its runner holds, and deciding is pure (same state and input, same events; the state
passed in is left as it was)."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from services.core import topics
from services.core.baccarat import TableConfig, get_variant
from services.core.contract import Transfer, dump_payload, read_payload, to_draft
from services.core.envelope import Envelope, request
from services.core.processor import Event, Private, Reactor, initial_state, step
from services.dealer.processor import Dealer, DealingBegan, Reached, ShoeSeeded
from services.monitor.accounts import AccountMonitor
from services.monitor.processor import Monitor
from services.settlement.payout_stage import PayoutStage
from services.settlement.wallet_stage import WalletStage
from services.simulation.simulator import DEFAULT_TABLES, Session
from tests.helpers.membus import MemBus

AT = "2026-11-23T17:00:00.000Z"


def session(seed: int, first: int, coups: int = 2) -> MemBus:
    """A seeded simulator session on two tables (their variants picked by ``first``)."""
    bus = MemBus()
    tables = [DEFAULT_TABLES[first], DEFAULT_TABLES[(first + 3) % len(DEFAULT_TABLES)]]
    Session(bus, seed=seed).run(tables, coups)
    return bus


def inbox(bus: MemBus) -> list[Envelope]:
    """The table inbox of a session, in log order."""
    return [e for e in bus.log if e.topic == topics.TABLE_INBOX]


def the(bus: MemBus, name: str) -> Any:
    """The session's processor of stage ``name`` (its keys and settings as the session ran it)."""
    return next(p for p, _ in bus.procs if p.stage_name() == name)


# --- the dealer: an aggregate -------------------------------------------------------------------------


@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), first=st.integers(0, len(DEFAULT_TABLES) - 1))
def test_folding_the_dealers_recorded_events_gives_the_state_it_holds(seed: int, first: int) -> None:
    """A fresh dealer stepped through a session's inbox: after every input, ``evolve`` over the table
    events it has recorded so far (read back from the records, as any reader would) equals its state.
    (RNG shoes with seeds from the dealer's key: no private fact is needed to rebuild them.)"""
    bus = session(seed, first)
    dealer: Dealer = the(bus, "dealer")
    state = initial_state(dealer)
    folded = dealer.initial()
    for rec in inbox(bus):
        for env in step(dealer, state, rec):
            if env.topic == topics.TABLE_EVENTS:
                folded = dealer.evolve(folded, Event.recorded(env))
        assert folded == state.inner
    assert len(bus.of_type("CoupResolved")) == 4
    assert len(state.inner.tables) == 2


@settings(max_examples=3, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), first=st.integers(0, len(DEFAULT_TABLES) - 1))
def test_the_dealers_decide_is_pure(seed: int, first: int) -> None:
    """Deciding twice on the same state and input gives the same events, and the state is unchanged."""
    bus = session(seed, first, coups=1)
    dealer: Dealer = the(bus, "dealer")
    state = initial_state(dealer)
    decided = 0
    for rec in inbox(bus):
        before = copy.deepcopy(state.inner)
        payload = read_payload(rec)
        first_events = dealer.decide(state.inner, rec, payload)
        assert dealer.decide(state.inner, rec, payload) == first_events
        assert state.inner == before
        decided += len(first_events)
        step(dealer, state, rec)
    assert decided > 20


class Table:
    """One table's inbox fed to a dealer in test mode (it may choose its shoes' seeds): the events each
    record caused (private facts included) and the state after it."""

    def __init__(self) -> None:
        self.dealer = Dealer(allow_seed_hex=True)
        self.state = self.dealer.initial()
        self.events: list[Event] = []
        self.n = 0

    def send(self, type_: str, payload: dict[str, Any]) -> list[Event]:
        """Decide on one inbox record, then apply it as :func:`step` does; the events decided."""
        self.n += 1
        rec = request(
            type_, topics.TABLE_INBOX, "T1", {"table_id": "T1", **payload}, event_id=f"de/{self.n}",
            occurred_at=AT, producer="operator",
        )  # fmt: skip
        payload_in = read_payload(rec)
        events = self.dealer.decide(self.state, rec, payload_in)
        self.state, drafts = self.dealer.apply(self.state, rec, payload_in)
        assert [d.type for d in drafts] == [type(e.payload).__name__ for e in events if not _private(e)]
        self.events += events
        return events

    def coup(self, shoe: dict[str, Any], cards: tuple[str, ...] = ()) -> list[Event]:
        """Open ``shoe``, then one coup with a bet, dealt (from ``cards`` read by a smart shoe)."""
        out = self.send("OpenShoe", {"shoe_id": "S1", **shoe})
        out += self.send("OpenBetting", {})
        out += self.send("BetPlaced", {
            "bet_id": "b1", "account_id": "p1", "coup_id": None, "spot": "banker", "stake_minor": 100,
            "currency": "EUR",
        })  # fmt: skip
        out += self.send("CloseBetting", {})
        out += self.send("DealCoup", {})
        for card in cards:
            out += self.send("CardRead", {"card": card})
        return out


def _private(event: Event) -> bool:
    return isinstance(event.payload, Private)


def test_a_smart_shoes_first_card_is_due_after_deal_coup() -> None:
    """Regression (found while converting the dealer): a smart shoe's ``DealCoup`` writes no event, so
    without the private ``DealingBegan`` the folded coup stayed "closed" and its first ``CardRead`` was
    refused ``card_not_due``. Each card is taken, the coup resolves, and folding every decided event
    (the private one included) gives the state held."""
    t = Table()
    t.send("OpenTable", {"variant": "punto_banco", "currency": "EUR"})
    events = t.coup({"mode": "smart"}, ("9H", "8D", "KH", "KC"))
    kinds = [type(e.payload).__name__ for e in events]
    assert "CommandRefused" not in kinds
    assert kinds.count("CardDealt") == 4
    assert kinds[-1] == "CoupResolved"
    assert [e.payload for e in events if isinstance(e.payload, DealingBegan)] == [DealingBegan("T1/S1/1")]
    reached = [e.payload for e in events if isinstance(e.payload, Reached)]
    assert len(reached) == 5  # after DealCoup and each card: the table the look-ahead reached
    assert reached[-1].table.coup is not None and reached[-1].table.shoe is not None
    assert t.dealer.fold(t.events) == t.state
    recorded_only = [e for e in t.events if not _private(e)]
    assert t.dealer.fold(recorded_only) == t.state  # once the first card is dealt, it says as much


def test_a_smart_shoe_waiting_for_its_first_card_needs_the_private_fact() -> None:
    """Between ``DealCoup`` and the first ``CardRead`` only ``DealingBegan`` tells that a card is due."""
    t = Table()
    t.send("OpenTable", {"variant": "punto_banco", "currency": "EUR"})
    t.coup({"mode": "smart"})
    table = t.state.tables["T1"]
    assert table.coup is not None and table.coup.phase == "dealing"
    assert t.dealer.fold(t.events) == t.state
    assert t.dealer.fold([e for e in t.events if not _private(e)]) != t.state


def test_a_seed_the_command_chose_is_a_private_fact_and_revealed_at_the_close() -> None:
    """An ``OpenShoe`` with its own ``seed_hex`` (test mode): ``ShoeSeeded`` carries it (never recorded:
    ``ShoeOpened`` only commits to it), the shoe is dealt from it, and ``ShoeClosed`` reveals it."""
    seed_hex = "ab" * 32
    t = Table()
    t.send("OpenTable", {"variant": "punto_banco", "currency": "EUR"})
    events = t.coup({"mode": "rng", "seed_hex": seed_hex})
    assert [e.payload for e in events if isinstance(e.payload, ShoeSeeded)] == [ShoeSeeded(seed_hex)]
    assert t.dealer.fold(t.events) == t.state
    shoe = t.state.tables["T1"].shoe
    assert shoe is not None and shoe.seed_hex == seed_hex
    assert t.dealer.fold([e for e in t.events if not _private(e)]) != t.state  # the key's seed instead
    (closed,) = t.send("CloseShoe", {})
    assert getattr(closed.payload, "seed_hex", None) == seed_hex


def test_a_refusal_changes_nothing_when_folded() -> None:
    """A refused command is an event; ``evolve`` folds it without effect."""
    t = Table()
    t.send("OpenTable", {"variant": "punto_banco", "currency": "EUR"})
    before = t.state
    (refused,) = t.send("OpenBetting", {})
    assert type(refused.payload).__name__ == "CommandRefused"
    assert t.state == before
    assert t.dealer.evolve(before, refused) is before


# --- TableConfig as recorded ---------------------------------------------------------------------------


def test_a_table_config_read_back_from_its_record_is_the_one_written() -> None:
    """Bug (found folding ``TableOpened``): ``from_dict`` read list options (``side_bets``,
    ``optional_cells``) back as lists where the variant makes tuples: the configuration read back was
    unequal to the one written, and unhashable."""
    for variant, options in [
        ("ez_baccarat", {"side_bets": ["dragon_7"]}),
        ("punto_banco", {}),
        ("chemin_de_fer", {}),
    ]:
        config = get_variant(variant).config(**options)
        recorded = json.loads(json.dumps(config.to_dict()))
        back = TableConfig.from_dict(recorded)
        assert back == config, variant
        assert hash(back) == hash(config)
    listed = get_variant("ez_baccarat").config(side_bets=["dragon_7"])
    assert listed.option("side_bets") == ("dragon_7",)  # the case above does hold a list option


# --- settlement: two reactors --------------------------------------------------------------------------


@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), first=st.integers(0, len(DEFAULT_TABLES) - 1))
def test_the_payout_stage_is_the_fold_of_its_inputs_and_decides_purely(seed: int, first: int) -> None:
    """A fresh payout stage stepped through a session's table events: after each, ``evolve`` over the
    events so far gives its state; ``decide`` twice gives the same payouts and leaves the state as it was;
    and every coup's bets are forgotten once paid."""
    bus = session(seed, first)
    payout: PayoutStage = the(bus, "settlement.payout")
    state = initial_state(payout)
    folded = payout.initial()
    paid = 0
    for rec in (e for e in bus.log if e.topic == topics.TABLE_EVENTS):
        payload = read_payload(rec)
        before = copy.deepcopy(state.inner)
        decided = payout.decide(state.inner, rec, payload)
        assert payout.decide(state.inner, rec, payload) == decided
        assert state.inner == before
        out = step(payout, state, rec)
        assert [e.payload for e in out] == [to_draft(d.payload, d.key).payload for d in decided]  # type: ignore[arg-type]
        paid += len(out)
        folded = payout.evolve(folded, rec.key, payload)
        assert folded == state.inner
    assert paid > 0
    assert all(not table.wagers for table in state.inner.tables.values())


@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), first=st.integers(0, len(DEFAULT_TABLES) - 1))
def test_each_wallet_is_the_fold_of_the_wallet_stages_own_transfers(seed: int, first: int) -> None:
    """A fresh wallet stage stepped through a session's wallet requests: folding the transfers it wrote
    (each one's ``balance_after_minor`` and currency, by account; its transfer id) gives its balances,
    currencies and the ids it remembers — refusals and retries moved nothing."""
    bus = session(seed, first)
    wallet: WalletStage = the(bus, "settlement.wallet")
    state = initial_state(wallet)
    balances: dict[str, int] = {}
    currencies: dict[str, str] = {}
    ids: set[str] = set()
    for rec in (e for e in bus.log if e.topic == topics.WALLET_REQUESTS):
        for env in step(wallet, state, rec):
            event = read_payload(env)
            if isinstance(event, Transfer):
                balances[env.key] = event.balance_after_minor
                currencies[env.key] = event.currency
                ids.add(event.transfer_id)
    assert dict(state.inner.balances) == balances
    assert dict(state.inner.currencies) == currencies
    assert set(state.inner.transfers) == ids
    assert len(ids) > 10


def test_a_wallet_request_refused_or_retried_leaves_the_state_equal() -> None:
    """The wallet stage's one in-place change happens only for a transfer applied: a refusal and a
    retry leave the maps as they were (compared with a copy taken before)."""
    wallet = WalletStage()
    state = initial_state(wallet)

    def deposit(n: int, amount: int, currency: str = "EUR") -> list[Envelope]:
        body = {"account_id": "p1", "currency": currency, "amount_minor": amount, "transfer_id": f"t{n}"}
        rec = request("Deposit", topics.WALLET_REQUESTS, "p1", body, event_id=f"w/{n}/{amount}/{currency}",
                      occurred_at=AT, producer="cashier")  # fmt: skip
        return step(wallet, state, rec)

    assert [e.type for e in deposit(1, 500)] == ["FundsDeposited"]
    before = copy.deepcopy(state.inner)
    assert deposit(1, 500) == []  # the same transfer again: nothing
    assert [e.type for e in deposit(1, 600)] == ["TransferRefused"]  # same id, other content
    assert [e.type for e in deposit(2, 5, "USD")] == ["TransferRefused"]  # another currency
    assert state.inner == before


# --- the monitor: a reactor ----------------------------------------------------------------------------


@settings(max_examples=3, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), first=st.integers(0, len(DEFAULT_TABLES) - 1))
def test_the_monitors_react_is_pure(seed: int, first: int) -> None:
    """The table monitor and the account stage stepped through a session: reacting twice on the same
    state and input gives the same state and alerts, the state passed in is unchanged, and what ``step``
    writes is exactly the alerts ``react`` decided."""
    bus = session(seed, first, coups=3)
    reactors: list[Reactor[Any]] = [Monitor(), AccountMonitor()]
    reacted = 0
    for reactor in reactors:
        state = initial_state(reactor)
        for rec in (e for e in bus.log if e.topic in reactor.inputs):
            payload = read_payload(rec)
            before = copy.deepcopy(state.inner)
            after, events = reactor.react(state.inner, rec, payload)
            assert reactor.react(state.inner, rec, payload) == (after, events)
            assert state.inner == before
            out = step(reactor, state, rec)
            assert [(e.key, e.payload) for e in out] == [(v.key, dump_payload(v.payload)) for v in events]  # type: ignore[arg-type]
            assert state.inner == after
            reacted += 1
    assert reacted > 50
