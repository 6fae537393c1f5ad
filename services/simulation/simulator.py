"""The seeded table simulator behind ``casino-ledger demo``: players, an operator, smart decisions.

It is an *outside party* to the pipeline: it writes what cashiers, terminals and the table operator
would write (``Deposit``, ``PlaceBet`` on ``casino.wallet.requests``; ``OpenTable``, ``OpenShoe``,
``OpenBetting``, ``CloseBetting``, ``DealCoup``, ``Decision``, ``CloseShoe`` on ``casino.table.inbox``)
and reads the dealer's events to know when a decision is due or a coup is over. Everything is derived
from ``seed``: its ids, its clock (one simulated second per command), its players' choices (a
``random.Random(seed)``) and the shoe ids (the dealer derives each shoe's secret seed from its key and
the shoe id). The same seed and the same keyring therefore write the same log, byte for byte. Each
record is authenticated as the outside principal that would write it (:attr:`Session.keyring`):
deposits as the cashier, bets as a terminal, table commands as the operator.

The tables play concurrently (:meth:`Session.play`): each table's coup is a generator that yields a
:class:`Wait` wherever it needs a record, and the session runs them in a fixed round robin. The order
of the writes (and so the ids, the clock and the draws) depends on that schedule only, never on how
soon a record comes: the embedded, in-memory and Kafka buses, lockstep or not, write the same log
(``tests/integration/test_concurrent_tables.py`` plays it on a bus of random timings).
"""

from __future__ import annotations

import hashlib
import random
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from services.core import topics
from services.core.baccarat import Decide, Wager, get_variant, start
from services.core.baccarat.coup import Coup, coup_opened, evolve
from services.core.baccarat.engine import TableConfig, Variant
from services.core.boundary import DEALER_FOR
from services.core.contract import BettingOpened, CoupResolved, DecisionRequested, payload_as, read_payload
from services.core.envelope import Envelope, name_id, request
from services.core.trust import Principal, authenticate
from services.runtime.keyring import Keyring, demo_keyring

EPOCH = datetime(2026, 11, 22, 20, 0, 0, tzinfo=UTC)
CURRENCY = "EUR"


class Bus(Protocol):
    """Where the simulator writes and reads: the embedded log or Kafka."""

    def publish(self, envelopes: list[Envelope]) -> None:
        """Append outside records (requests, commands)."""

    def drain(self) -> None:
        """Let every processor run until nothing is left to do (a bus may also offer ``advance()``: let
        the processors a table waits for run, observers possibly later; the simulator calls it between
        the steps of a coup and ``drain()`` only at the end)."""

    def read(self, topic: str, key: str) -> list[Envelope]:
        """The records on ``topic`` under ``key`` not yet returned by an earlier call."""

    # Optional: ``advance(envelopes)`` (see Session.advance), and
    # ``event_driven`` with ``wait(topic, key, match)`` (the first record on ``topic`` under ``key``
    # that ``match`` accepts, once written: see Session.event_driven; ``match`` is a :class:`Match`,
    # whose hints a bus may use to look at fewer records).


@dataclass(frozen=True, slots=True)
class TableSpec:
    """A table the demo opens: its variant, engine options and limits per spot."""

    table_id: str
    variant: str
    options: dict[str, Any] = field(default_factory=dict)
    min_minor: int = 1_000
    max_minor: int = 500_000


DEFAULT_TABLES = (
    TableSpec("T01-punto-banco", "punto_banco"),
    TableSpec("T02-ez-baccarat", "ez_baccarat"),
    TableSpec("T03-chemin-de-fer", "chemin_de_fer"),
    TableSpec("T04-baccarat-banque", "baccarat_banque"),
    TableSpec("T05-french-club", "french_club"),
    TableSpec("T06-russian-classic", "russian_classic"),
    TableSpec("T07-super6", "super6"),
)


def demo_tables(count: int | None = None) -> list[TableSpec]:
    """``count`` tables (default: one of each variant): the defaults in order, then further tables of
    the same variants in turn (``T08-punto-banco``, ``T09-ez-baccarat``, …)."""
    n = len(DEFAULT_TABLES) if count is None else count
    if n < 1:
        raise ValueError("a session needs at least one table")
    out = list(DEFAULT_TABLES[:n])
    for i in range(len(out), n):
        base = DEFAULT_TABLES[i % len(DEFAULT_TABLES)]
        out.append(replace(base, table_id=f"T{i + 1:02d}-{base.table_id.split('-', 1)[1]}"))
    return out


@dataclass(slots=True)
class Session:
    """One seeded demo session over a :class:`Bus`."""

    bus: Bus
    seed: int
    players: int = 12
    deposit_minor: int = 5_000_000
    deposits: bool = True
    """Whether the players deposit first (not with a seamless wallet: the operator's accounts are funded)."""
    clock: int = 0
    counter: int = 0
    keyring: Keyring = field(default_factory=demo_keyring)
    """The outside principals' keys the session writes with (terminal, cashier, operator, shoe)."""
    rng: random.Random = field(init=False)
    stats: dict[str, int] = field(default_factory=dict)
    adversaries: list[Any] = field(default_factory=list)
    """Cheating strategies the session consults (:mod:`services.simulation.adversaries`; hook only)."""
    outbox: list[Envelope] = field(default_factory=list)
    """Records written but not yet published: they go to the bus in one call when the session next
    waits for the pipeline (:meth:`advance`), not one append per record."""
    lockstep: bool = False
    """Settle every processor between the steps even where the bus offers ``advance()`` or is event
    driven (the closed loop the open one is measured and checked against)."""
    event_driven: bool = field(init=False)
    """Whether the session waits for each record it needs (``bus.wait``) instead of for the pipeline
    (``advance``/``drain``) between its steps: on a bus that says it is ``event_driven`` (Kafka, where
    polling every consumer group after every step is what costs), unless :attr:`lockstep`.

    What it waits for keeps every stream's order as the lockstep session writes it (there, everything
    written is processed before the next record): a table's next answer from the dealer before it acts
    on it; a bet's outcome (``StakeReserved`` or ``BetRejected``) and, if reserved, its ``BetPlaced``
    on the table's inbox before the next record to that table (the bets reach the dealer in the order
    placed); before any record that may write to an account's wallet, settlement's requests for it
    (payouts, refunds) that the records already written cause (:meth:`settle_due`); and before a shoe
    closes, every bet's wallet event at the table (see :meth:`TablePlay.close_shoe`). Observers (audit,
    monitor) are waited for only by the ``drain()`` at the end."""
    owed: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)
    """Event driven: each account's bets (table id, coup id, bet id) written and not known to be closed
    (rejected by the wallet, or paid or refunded): see :meth:`settle_due`."""
    found: dict[tuple[str, str], Envelope] = field(default_factory=dict)
    """Event driven: the records :meth:`_due` found for an owed bet, by (``"answer"`` or
    ``"verdict"``, bet id), until the bet is no longer owed. A wait returns the first record its match
    accepts, and a record found stays the first, so asking again would return the same record: an
    owed bet is looked at about four times before it closes, and this spares the waits that would only
    find again a record already read (docs/performance.md#simulator-waits)."""
    plays: dict[str, TablePlay] = field(default_factory=dict)
    """The tables in play by id (event driven: :meth:`settle_due` asks where a table's coup stands)."""
    side_bets: list[Envelope] = field(default_factory=list)
    """Bets the adversaries wrote themselves, not yet taken by their table (:meth:`side_bet`)."""
    resolved: set[str] = field(default_factory=set)
    """Event driven: the coups known to be resolved (their payouts are on their way)."""

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.event_driven = not self.lockstep and bool(getattr(self.bus, "event_driven", False))

    # -- writing -----------------------------------------------------------------------------
    def _now(self) -> str:
        self.clock += 1
        return (EPOCH + timedelta(seconds=self.clock)).strftime("%Y-%m-%dT%H:%M:%S.000Z")

    def _id(self) -> str:
        self.counter += 1
        return name_id("sim", str(self.seed), str(self.counter))

    def command(
        self, type_: str, table_id: str, payload: dict[str, Any], occurred_at: str | None = None
    ) -> None:
        """Write one table command to the table's inbox, as the operator (a card read: as the shoe);
        ``occurred_at``: its own time (a population's close of betting,
        :mod:`services.simulation.populations`)."""
        play = self.plays.get(table_id) if type_ in RESOLVING else None
        if play is not None and play.in_play is not None and self.event_driven:
            # the coup may resolve: every payout due to its bettors elsewhere goes first (settle_due)
            for account in [a for a, bets in self.owed.items() if any(c == play.coup_id for _, c, _ in bets)]:
                self.settle_due(account, besides=table_id)
        who = Principal.SHOE if type_ == "CardRead" else Principal.OPERATOR
        env = request(type_, topics.TABLE_INBOX, table_id, {"table_id": table_id, **payload},
                      event_id=self._id(), occurred_at=occurred_at or self._now(),
                      producer=who.value)  # fmt: skip
        self.outbox.append(authenticate(env, self.keyring.key(who)))
        if play is not None and play.in_play is not None and not (type_ == "DealCoup" and play.smart):
            play.resolving = env.event_id  # a smart shoe's deal deals nothing: its cards resolve

    def wallet(self, type_: str, account: str, payload: dict[str, Any]) -> None:
        """Write one wallet request for ``account``: a deposit or withdrawal as the cashier, a bet as
        a terminal."""
        self.settle_due(account)
        who = Principal.CASHIER if type_ in ("Deposit", "Withdraw") else Principal.TERMINAL
        env = request(type_, topics.WALLET_REQUESTS, account, {"account_id": account, **payload},
                      event_id=self._id(), occurred_at=self._now(), producer=who.value)  # fmt: skip
        self.outbox.append(authenticate(env, self.keyring.key(who)))

    def flush(self) -> None:
        """Publish what the session wrote since the last flush, in one call and in the order written."""
        if self.outbox:
            out, self.outbox = self.outbox, []
            self.bus.publish(out)

    def advance(self) -> None:
        """Publish what was written, then let the table's next events come: event driven, only publish
        (the session then waits for what it needs); else the bus's ``advance(envelopes)`` where it has
        one (it publishes them and runs the stages a table waits for; observers may lag), else
        ``publish()`` and ``drain()``."""
        if self.event_driven:
            self.flush()
            return
        advance = None if self.lockstep else getattr(self.bus, "advance", None)
        if advance is None:
            self.drain()
            return
        out, self.outbox = self.outbox, []
        advance(out)

    def drain(self) -> None:
        """Publish what was written and let every processor run until nothing is left to do."""
        self.flush()
        self.bus.drain()

    # -- event driven: waiting for records -----------------------------------------------------
    def _wait(self, topic: str, key: str, match: Callable[[Envelope], bool]) -> Envelope:
        found: Envelope = self.bus.wait(topic, key, match)  # type: ignore[attr-defined]
        return found

    def side_bet(self, bet: Envelope) -> None:
        """Write a bet an adversary made itself (:func:`services.simulation.adversaries._bet`): the table
        waits for it as for its own (:meth:`TablePlay.coup`)."""
        self.outbox.append(bet)
        self.side_bets.append(bet)

    def take_side_bets(self) -> list[Envelope]:
        """The adversaries' bets written since the last call."""
        out, self.side_bets = self.side_bets, []
        return out

    def owe(self, account: str, table_id: str, coup_id: str, bet_id: str) -> None:
        """Event driven: a bet was written (see :meth:`settle_due`)."""
        if self.event_driven:
            self.owed.setdefault(account, []).append((table_id, coup_id, bet_id))

    def settle_due(self, account: str, besides: str | None = None, *, applied: bool = False) -> None:
        """Event driven: wait until every wallet event for ``account`` that the records written so far
        cause is on its way: the payout of a bet whose coup they resolved, the refund of a bet the
        dealer refused. Called before any record that may write to the account's wallet (its own
        requests, and a command that may resolve a coup it bet in), it makes the account's wallet
        chain the one the lockstep session writes (where everything written is processed before the
        next record), whatever the timing: an earlier bet whose coup is still open stays owed, and its
        payout comes after, as in lockstep. ``besides``: a table whose bets are left out (before its own
        resolving command: settlement reads a table's events in order, so a refund its dealer caused
        reaches the wallet before the payouts of the coup, without a wait).

        On its way: the payout or refund *request* (``PayoutIssued``, ``BetRefundDue``) on the account's
        wallet requests, not the wallet event it becomes (``PayoutApplied``, ``StakeRefunded``): the
        wallet stage applies an account's requests in their order on the log (the seamless adapter
        queues them per wallet in that order too), so a request written after it is applied after it,
        and the wait is one hop shorter (the wallet stage's). ``applied``: wait for the wallet event
        itself (before a shoe closes: see :meth:`TablePlay.close_shoe`)."""
        if not self.event_driven or not self.owed.get(account):
            return
        self.flush()  # what is waited for may hang on a record written in this very turn
        left = []
        for table_id, coup_id, bet_id in self.owed.pop(account, []):
            due = None if table_id == besides else self._due(account, table_id, coup_id, bet_id)
            if due is None:
                left.append((table_id, coup_id, bet_id))
                continue
            self.found.pop(("answer", bet_id), None)
            self.found.pop(("verdict", bet_id), None)
            if due and applied:
                self._wait(topics.WALLET_EVENTS, account, _settles(bet_id))
            elif due:
                self._wait(topics.WALLET_REQUESTS, account, _closes(bet_id))
        if left:
            self.owed[account] = left

    def _due(self, account: str, table_id: str, coup_id: str, bet_id: str) -> bool | None:
        """Whether the bet's closing wallet event is caused by what was written (True), will never come
        (False: the wallet rejected the bet) or is not caused yet (None)."""
        found = self.found
        outcome = found.get(("answer", bet_id))
        if outcome is None:
            outcome = found["answer", bet_id] = self._wait(topics.WALLET_EVENTS, account, _answers(bet_id))
        if outcome.type != "StakeReserved":
            return False
        if coup_id in self.resolved:
            return True
        verdict = found.get(("verdict", bet_id))
        if verdict is None:
            verdict = found["verdict", bet_id] = self._wait(topics.TABLE_EVENTS, table_id, _verdict(bet_id))
        if verdict.type == "BetRefused":
            return True
        play = self.plays[table_id]
        if play.resolving is None:  # nothing written since the table's last answer resolves its coup
            return None
        answer = self._wait(topics.TABLE_EVENTS, table_id, _answer(coup_id, play.resolving))
        if answer.type == "CoupResolved" and answer.payload.get("coup_id") == coup_id:
            self.resolved.add(coup_id)
            return True
        return None

    def play(self, tables: list[Turn]) -> None:
        """Play the tables concurrently, in a fixed round robin: each table runs until it must wait for a
        record (its request then goes out), then the next; once every table has had its turn, the
        first's wait is resolved and it runs on, and so on. What is written, and in which order (and
        so the ids, the clock and the draws), depends on this schedule only, never on how soon a
        record comes: every bus, and lockstep, write the same log. Event driven, a wait is
        ``bus.wait``, while the other tables' requests are in flight; otherwise the session advances
        the bus when a table yields (every record written is processed before the next table runs)
        and the table reads what came."""
        waiting = [(t, w) for t in tables if (w := self._resume(t, None, first=True)) is not None]
        while waiting:
            turn, waiting = waiting, []
            for table, wait in turn:
                got = self._wait(wait.topic, wait.key, wait.match) if self.event_driven else None
                if (nxt := self._resume(table, got)) is not None:
                    waiting.append((table, nxt))

    def _resume(self, table: Turn, value: Envelope | None, *, first: bool = False) -> Wait | None:
        try:
            wait: Wait = next(table) if first else table.send(value)
        except StopIteration:
            return None
        self._turn_ends()
        return wait

    def _turn_ends(self) -> None:
        """A table waits: what it wrote goes out (event driven), or is processed (elsewhere)."""
        if self.event_driven:
            self.flush()
        elif self.outbox:
            self.advance()

    def finish(self, turn: Turn) -> Any:
        """Play one table's ``turn`` alone to its end (each wait resolved as it comes); what it returns."""
        try:
            wait = next(turn)
            while True:
                self._turn_ends()
                wait = turn.send(self._wait(wait.topic, wait.key, wait.match) if self.event_driven else None)
        except StopIteration as stop:
            return stop.value

    # -- the session -------------------------------------------------------------------------
    def accounts(self) -> list[str]:
        """The players' wallet account ids."""
        return [f"player:{n:03d}" for n in range(1, self.players + 1)]

    def run(self, tables: list[TableSpec], coups: int, progress: Any = None) -> None:
        """Open the tables, fund the players, play ``coups`` coups at each table, close the shoes."""
        for account in self.accounts() if self.deposits else ():
            self.wallet("Deposit", account, {"amount_minor": self.deposit_minor, "currency": CURRENCY})
        plays = [TablePlay(self, spec) for spec in tables]
        for adversary in self.adversaries:  # hook: adversaries see every table and fund their accounts
            adversary.start(self, plays)
        for play in plays:
            play.open()
        self.advance()
        self.play([play.coups(coups, progress) for play in plays])
        for play in plays:
            play.close_shoe()
        self.drain()


@dataclass(frozen=True, slots=True)
class Wait:
    """What a table waits for (:meth:`Session.play`): the first record on ``topic`` under ``key`` that
    ``match`` accepts."""

    topic: str
    key: str
    match: Callable[[Envelope], bool]


Turn = Generator[Wait, "Envelope | None", Any]
"""A table's play: it yields at every point where it needs a record (see :meth:`Session.play`)."""

RESOLVING = frozenset({"DealCoup", "Decision", "CardRead"})
"""Table commands that may resolve the coup in play (and so start its payouts)."""

TERMINAL = frozenset({"DecisionRequested", "CoupResolved", "CommandRefused"})
"""The last event of the dealer's answer to a resolving command."""

OPENED = frozenset({"BettingOpened"})
"""The dealer's event a table waits for after ``OpenBetting``."""

DECIDED = frozenset({"DecisionRequested", "CoupResolved"})
"""The dealer's events a table waits for while a coup is dealt: a decision is due, or the coup is over."""


@dataclass(slots=True)
class Match:
    """What a wait accepts (``accepts``, called with each record of the stream in order), with what a
    bus may use to look at fewer records: the same answer, without scanning a stream from its start
    on every wait (a bus that ignores them, or a plain callable given instead, scans it all). Not
    frozen: a frozen dataclass's ``__init__`` (``object.__setattr__`` per field) is dear for the
    thousands of matches a session builds (docs/performance.md#simulator-waits)."""

    accepts: Callable[[Envelope], bool]
    among: tuple[tuple[str, str], ...] = ()
    """When given, only a record that carries one of these (field, value) pairs can match. Fields:
    ``bet_id`` and ``coup_id`` (of the payload), ``causation_id`` (of the envelope)."""
    after_seq: int | None = None
    """When set, only a record whose ``seq`` is above this one can match."""

    def __call__(self, env: Envelope) -> bool:
        return self.accepts(env)


def _of_bet(kinds: tuple[str, ...], bet_id: str) -> Match:
    """A record of one of ``kinds`` about the bet ``bet_id``."""
    return Match(lambda e: e.type in kinds and e.payload.get("bet_id") == bet_id, among=(("bet_id", bet_id),))


def _answers(bet_id: str) -> Match:
    """The wallet's answer to a bet: its stake reserved or the bet rejected."""
    return _of_bet(("StakeReserved", "BetRejected"), bet_id)


def _settles(bet_id: str) -> Match:
    """The wallet event that closes a reserved bet: its payout applied (or refused) or its stake refunded."""
    return _of_bet(("PayoutApplied", "StakeRefunded", "TransferRefused"), bet_id)


def _closes(bet_id: str) -> Match:
    """Settlement's request that closes a reserved bet on its account's wallet: its payout or its refund."""
    return _of_bet(("PayoutIssued", "BetRefundDue"), bet_id)


def _verdict(bet_id: str) -> Match:
    """The dealer's answer to a bet on its inbox: accepted or refused."""
    return _of_bet(("BetAccepted", "BetRefused"), bet_id)


def _answer(coup_id: str, command_id: str) -> Match:
    """The coup's resolution, or else the end of the dealer's answer to the command (the chain holds the
    resolution first if anything written up to the command resolved the coup)."""
    return Match(
        lambda e: (
            (e.type == "CoupResolved" and e.payload.get("coup_id") == coup_id)
            or (e.causation_id == command_id and e.type in TERMINAL)
        ),
        among=(("coup_id", coup_id), ("causation_id", command_id)),
    )


def _chained_after(seq: int) -> Match:
    """The next event of a chain (one writer per key, ``seq`` 0, 1, 2, ...)."""
    return Match(lambda e: e.seq == seq + 1, after_seq=seq)


def _forwards(bet_id: str) -> Match:
    """The wallet stage's ``BetPlaced`` of a bet on the table's inbox."""
    return _of_bet(("BetPlaced",), bet_id)


@dataclass(slots=True)
class TablePlay:
    """The operator and the players at one table."""

    session: Session
    spec: TableSpec
    variant: Variant = field(init=False)
    config: TableConfig = field(init=False)
    shoe_no: int = 0
    coup_id: str = ""
    in_play: Coup | None = None
    """The coup in play as the table's events tell it (:mod:`services.core.baccarat.coup`)."""
    stop_reached: bool = False
    pending: deque[Envelope] = field(default_factory=deque)
    last_seq: int = -1
    """Event driven: the ``seq`` of the last table event the play has read (the dealer's chain)."""
    smart: bool = False
    """Whether the shoe in play is a smart shoe (its cards are read, not dealt)."""
    resolving: str | None = None
    """The last command written that may resolve the coup in play and whose answer the play has not
    read yet (:meth:`Session.settle_due`)."""
    close_at: str | None = None
    """The time of this coup's ``CloseBetting`` when a hook set one (bets timed before the close)."""
    last_outcome: str = ""
    """The outcome of the table's last resolved coup (``banker``, ``player``, ``tie``; hooks read it)."""

    def __post_init__(self) -> None:
        self.variant = get_variant(self.spec.variant)
        self.config = self.variant.config(**self.spec.options)
        self.session.plays[self.spec.table_id] = self

    def open(self) -> None:
        """Open the table and its first shoe."""
        spots = self.variant.spots(self.config)
        limits = {s: {"min_minor": self.spec.min_minor, "max_minor": self.spec.max_minor} for s in spots}
        if "bank" in limits:
            limits["bank"]["max_minor"] = self.spec.max_minor * 10
        self.session.command("OpenTable", self.spec.table_id, {
            "variant": self.spec.variant, "currency": CURRENCY, "limits": limits,
            "options": dict(self.spec.options), "decks": self.config.decks,
        })  # fmt: skip
        self.open_shoe()

    def open_shoe(self) -> None:
        """Open a new RNG shoe; the dealer derives its seed from its secret key and the shoe id."""
        self.shoe_no += 1
        tag = hashlib.sha256(str(self.session.seed).encode()).hexdigest()[:8]
        shoe_id = f"{self.spec.table_id}-{tag}-S{self.shoe_no}"
        payload: dict[str, Any] = {"shoe_id": shoe_id, "mode": "rng"}
        for adversary in self.session.adversaries:  # hook: a rigged shoe
            payload = adversary.shoe(self, payload)
        self.smart = payload.get("mode") == "smart"
        self.session.command("OpenShoe", self.spec.table_id, payload)

    def close_shoe(self) -> None:
        """Close the shoe (the dealer reveals its seed). Event driven, once every bet placed at the table
        so far is paid or refunded: audit checkpoints a table's completed rounds when its shoe closes,
        and a round completes with its payouts, so a shoe closed earlier would sign fewer rounds than
        in lockstep. (Every coup of the table is resolved by now: those payouts are due.)"""
        s = self.session
        for account in [a for a, bets in s.owed.items() if any(t == self.spec.table_id for t, _, _ in bets)]:
            s.settle_due(account, applied=True)
        s.command("CloseShoe", self.spec.table_id, {})

    def coups(self, coups: int, progress: Any = None) -> Turn:
        """Play ``coups`` coups (see :meth:`Session.play`)."""
        for _ in range(coups):
            yield from self.coup()
            if progress is not None:
                progress()

    def coup(self) -> Turn:
        """One coup: betting window, bets, dealing with decisions, result; a new shoe at the stop card.

        A generator: it yields a :class:`Wait` wherever the table needs a record (the next event of its
        chain, a bet's outcome) and the session plays the tables in turn (:meth:`Session.play`). The
        bets reach the table one after the other, each once the one before is on the inbox, on every
        bus (Kafka's wallet requests are partitioned by account): a player-banked game's bank must be
        accepted first and each punter against what it still covers, and in any game the order of
        acceptance is the table's event chain (and so every later hash, and the alerts that hang on
        it): the same session, the same log."""
        s, t = self.session, self.spec.table_id
        if self.stop_reached:
            self.close_shoe()
            self.open_shoe()
            self.stop_reached = False
        s.command("OpenBetting", t, {})
        self.resolving = None
        self.coup_id = yield from self._opened_coup()
        bets = self.bets()
        for adversary in s.adversaries:  # hook: cheaters add or change bets (or write their own)
            bets = adversary.bets(self, bets)
        for env in s.take_side_bets():  # in turn too
            yield from self._placed(env.key, str(env.payload["bet_id"]))
        for account, spot, stake in bets:
            yield from self._bet(account, spot, stake)
        s.command("CloseBetting", t, {}, occurred_at=self.close_at)
        self.close_at = None
        late: tuple[str, Envelope] | None = None
        if s.rng.random() < 0.05:  # a late bet: the dealer refuses it and settlement refunds it
            account = s.rng.choice(s.accounts())
            spot = self.variant.spots(self.config)[0]
            s.wallet("PlaceBet", account, {
                "bet_id": s._id(), "table_id": t, "coup_id": self.coup_id, "spot": spot,
                "stake_minor": self.spec.min_minor, "currency": CURRENCY,
            })  # fmt: skip
            late = (account, s.outbox.pop())  # held back until the deal is on the log (below)
        for adversary in s.adversaries:  # hook: late bets
            adversary.closed(self)
        held = s.take_side_bets()  # held back too
        s.outbox = [e for e in s.outbox if not any(e is h for h in held)]
        s.command("DealCoup", t, {})
        for account, bet in ([late] if late is not None else []) + [(e.key, e) for e in held]:
            yield from self._late(account, bet)
        for adversary in s.adversaries:  # hook: a smart shoe reads its cards
            adversary.dealt(self)
        yield from self._play_out()
        for adversary in s.adversaries:  # hook: late changes after the coup
            adversary.resolved(self)

    def _bet(self, account: str, spot: str, stake: int) -> Turn:
        """Write one bet and let it reach the table before the next record (see :meth:`coup`)."""
        s = self.session
        bet_id = s._id()
        s.wallet("PlaceBet", account, {
            "bet_id": bet_id, "table_id": self.spec.table_id, "coup_id": self.coup_id, "spot": spot,
            "stake_minor": stake, "currency": CURRENCY,
        })  # fmt: skip
        yield from self._placed(account, bet_id)

    def _placed(self, account: str, bet_id: str) -> Turn:
        """Wait for a bet's outcome on the wallet (the table's turn ends) and, if its stake is reserved,
        for its ``BetPlaced`` on the table's inbox (event driven; elsewhere the bus was advanced)."""
        s = self.session
        s.owe(account, self.spec.table_id, self.coup_id, bet_id)
        outcome = yield Wait(topics.WALLET_EVENTS, account, _answers(bet_id))
        if outcome is not None and outcome.type == "StakeReserved":
            s._wait(topics.TABLE_INBOX, self.spec.table_id, _forwards(bet_id))

    def _late(self, account: str, bet: Envelope) -> Turn:
        """Publish a late bet once the deal is on the log, and let it reach the table before any
        decision: the dealer refuses it after the deal's cards, as on one log (the embedded bus, where
        the bet and the deal are published together and the bet reaches the inbox only once the wallet
        has reserved its stake, after the deal).

        Event driven, one race is left: on one log the wallet takes the late bet before the coup's
        payouts (the bet is in the log before the deal); here the bet is published once the deal is
        acknowledged, while a coup the deal resolves at once is paid after two more hops (dealer, then
        payout stage): the bet wins by those hops, not by construction. It matters only when the late
        bettor also bet in the coup (the order of the two in that account's wallet chain).

        Elsewhere the deal and the bet go to the bus together, the bet after the deal, in one
        ``advance`` (one transaction on the embedded log): published apart, a kill between the two
        left the deal on the log alone, and the resumed session's first ``advance`` dealt (and paid) it
        before the late bet was written — another wallet order than the uninterrupted run's."""
        s = self.session
        if s.event_driven:
            s.flush()
        s.outbox.append(bet)
        yield from self._placed(account, str(bet.payload["bet_id"]))

    def _answer(self, kinds: frozenset[str]) -> Turn:
        """The table's turn ends until the dealer's next event of one of ``kinds`` is written, the one
        the table acts on next (:meth:`Session.play`); the events up to it are then read with
        :meth:`_next`. One wait per answer, not per event: a turn that waits for nothing new would
        still cost the other tables a round."""
        after = self.last_seq
        yield Wait(
            topics.TABLE_EVENTS,
            self.spec.table_id,
            Match(
                lambda e: e.type in kinds and (e.seq if e.seq is not None else -1) > after, after_seq=after
            ),
        )

    def _next(self) -> Envelope | None:
        """The table's next dealer event, strictly in stream order (None when none has come yet).

        Consuming one event at a time, whatever chunks the bus returns them in, is what makes a
        session resumable: restarted from scratch after a crash, it re-publishes its commands (the
        log ignores identical records) and walks the same stream to the same place.
        """
        s = self.session
        env: Envelope | None
        if s.event_driven:  # the next event in the table's chain (read already: see _answer)
            env = s._wait(topics.TABLE_EVENTS, self.spec.table_id, _chained_after(self.last_seq))
            self.last_seq = env.seq if env.seq is not None else self.last_seq
        else:
            if not self.pending:
                self.pending.extend(s.bus.read(topics.TABLE_EVENTS, self.spec.table_id))
            env = self.pending.popleft() if self.pending else None
        if env is not None and env.type in DECIDED:
            self.resolving = None
        return env

    def _opened_coup(self) -> Turn:
        yield from self._answer(OPENED)
        while (env := self._next()) is not None:
            if env.type == "BettingOpened":
                event = payload_as(env, BettingOpened)
                self.in_play = coup_opened(event, env.occurred_at)
                return event.coup_id
        raise RuntimeError(f"{self.spec.table_id}: the dealer did not open betting")

    def bets(self) -> list[tuple[str, str, int]]:
        """This coup's bets: a banker's bank first where the game has one, then the punters.

        Players behave as at a real table: a seat taken by one punter is not offered to another, and a
        stake the bank could not cover is not offered at all (each is checked with the variant's own
        :meth:`~services.core.baccarat.engine.Variant.accepts`, the rule the dealer applies), so the
        refusals a session shows are the interesting ones: late bets and over-limit stakes.
        """
        s = self.session
        rng, all_spots = s.rng, self.variant.spots(self.config)
        spots = [x for x in all_spots if x not in ("bank", "bank_cover")]
        lo = self.spec.min_minor
        players = rng.sample(s.accounts(), k=rng.randint(2, min(8, len(s.accounts()))))
        out: list[tuple[str, str, int]] = []
        if "bank" in all_spots:
            bank = lo * rng.choice((20, 50, 100))
            out.append((players[0], "bank", bank))
            if "bank_cover" in all_spots:  # french club: the banker reserves what he may owe (seed 000)
                out.append((players[0], "bank_cover", bank * 2))
            players = players[1:]
        hands = ("player", "banker", "tie", "ponte")
        main = [x for x in spots if x in hands or x.startswith(("punter", "left", "right"))]
        seats = [x for x in main if x.startswith("punter")]  # one stake per seat (russian_classic)
        taken: set[str] = set()  # seats with a stake
        for account in players:
            free = [x for x in (main or spots) if x not in taken]
            if not free:
                break
            spot = rng.choice(free) if rng.random() < 0.85 or seats else rng.choice(spots)
            units = rng.choice((1, 2, 3, 5, 10, 25))
            stake = min(self.spec.max_minor, lo * units) + rng.choice((0, 0, 5, 55))
            if self._coverable(out, account, spot, stake):
                out.append((account, spot, stake))
                if spot in seats:
                    taken.add(spot)
        return out

    def _coverable(self, placed: list[tuple[str, str, int]], account: str, spot: str, stake: int) -> bool:
        """Whether the variant would accept this stake beside those already placed (the bank covers)."""
        wagers = [Wager(str(n), a, x, m) for n, (a, x, m) in enumerate(placed)]
        wager = Wager(str(len(placed)), account, spot, stake)
        return self.variant.accepts(self.config, wagers, wager) is None

    def _play_out(self) -> Turn:
        """Answer decisions with the variant's default strategy until the coup resolves."""
        s = self.session
        strategies = self.variant.strategies()
        name = getattr(self.variant, "default_strategy", None) or next(iter(strategies), None)
        coup = self.in_play
        assert coup is not None, "the coup's betting opened first"
        while True:
            yield from self._answer(DECIDED)
            while (env := self._next()) is not None:
                event = read_payload(env)
                if event is None:
                    continue
                coup = self.in_play = evolve(coup, event, self.config)
                if isinstance(event, DecisionRequested):
                    if name is None:
                        raise RuntimeError(f"{self.spec.variant} asks for decisions but has no strategy")
                    asked = Decide(event.hand, tuple(event.options), event.cell)
                    choice = strategies[name](coup.state or start(self.config), asked)
                    s.command("Decision", self.spec.table_id, {
                        "coup_id": self.coup_id, "hand": asked.hand, "choice": choice,
                        "decided_by": DEALER_FOR,  # the dealer plays the seated player's hand
                    })  # fmt: skip
                    break
                if isinstance(event, CoupResolved):
                    self.stop_reached = event.stop_card_reached
                    self.last_outcome = event.outcome
                    self.in_play = None
                    s.resolved.add(self.coup_id)
                    s.stats["coups"] = s.stats.get("coups", 0) + 1
                    return
            else:
                break
        raise RuntimeError(f"{self.spec.table_id}: coup {self.coup_id} stalled")
