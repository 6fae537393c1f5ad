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
"""

from __future__ import annotations

import hashlib
import random
from collections import deque
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from services.core import topics
from services.core.baccarat import CoupState, Decide, Wager, apply_card, apply_decision, get_variant, start
from services.core.baccarat.engine import TableConfig, Variant
from services.core.envelope import Envelope, name_id, request
from services.core.trust import Principal, authenticate
from services.runtime.keyring import Keyring, demo_keyring

EPOCH = datetime(2026, 11, 22, 20, 0, 0, tzinfo=UTC)
CURRENCY = "EUR"


class Bus(Protocol):
    """Where the simulator writes and reads: the embedded log or Kafka."""

    def publish(self, envelopes: list[Envelope]) -> None:
        """Append outside records (requests, commands)."""

    def settle(self) -> None:
        """Let every processor run until nothing is left to do (a bus may also offer ``advance()``: let
        the processors a table waits for run, observers possibly later; the simulator calls it between
        the steps of a coup and ``settle()`` only at the end)."""

    def read(self, topic: str, key: str) -> list[Envelope]:
        """The records on ``topic`` under ``key`` not yet returned by an earlier call."""

    # Optional: ``ordered`` (True when records published in one call reach every consumer in the order
    # published, whatever their keys: one log) and ``advance(envelopes)`` (see Session.advance).


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
    """Cheating strategies the session consults (:mod:`services.app.adversaries`; hook only)."""
    outbox: list[Envelope] = field(default_factory=list)
    """Records written but not yet published: they go to the bus in one call when the session next
    waits for the pipeline (:meth:`advance`), not one append per record."""

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    # -- writing -----------------------------------------------------------------------------
    def _now(self) -> str:
        self.clock += 1
        return (EPOCH + timedelta(seconds=self.clock)).strftime("%Y-%m-%dT%H:%M:%S.000Z")

    def _id(self) -> str:
        self.counter += 1
        return name_id("sim", str(self.seed), str(self.counter))

    def command(self, type_: str, table_id: str, payload: dict[str, Any]) -> None:
        """Write one table command to the table's inbox, as the operator (a card read: as the shoe)."""
        who = Principal.SHOE if type_ == "CardRead" else Principal.OPERATOR
        env = request(type_, topics.TABLE_INBOX, table_id, {"table_id": table_id, **payload},
                      event_id=self._id(), occurred_at=self._now(), producer=who.value)  # fmt: skip
        self.outbox.append(authenticate(env, self.keyring.key(who)))

    def wallet(self, type_: str, account: str, payload: dict[str, Any]) -> None:
        """Write one wallet request for ``account``: a deposit or withdrawal as the cashier, a bet as
        a terminal."""
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
        """Publish what was written, then let the table's next events come: the bus's
        ``advance(envelopes)`` where it has one (it publishes them and runs the stages a table waits
        for; observers may lag), else ``publish()`` and ``settle()``."""
        advance = getattr(self.bus, "advance", None)
        if advance is None:
            self.settle()
            return
        out, self.outbox = self.outbox, []
        advance(out)

    def settle(self) -> None:
        """Publish what was written and let every processor run until nothing is left to do."""
        self.flush()
        self.bus.settle()

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
        for _ in range(coups):
            for play in plays:
                play.coup()
                if progress is not None:
                    progress()
        for play in plays:
            play.close_shoe()
        self.settle()


@dataclass(slots=True)
class TablePlay:
    """The operator and the players at one table."""

    session: Session
    spec: TableSpec
    variant: Variant = field(init=False)
    config: TableConfig = field(init=False)
    shoe_no: int = 0
    coup_id: str = ""
    stop_reached: bool = False
    pending: deque[Envelope] = field(default_factory=deque)

    def __post_init__(self) -> None:
        self.variant = get_variant(self.spec.variant)
        self.config = self.variant.config(**self.spec.options)

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
        self.session.command("OpenShoe", self.spec.table_id, payload)

    def close_shoe(self) -> None:
        """Close the shoe (the dealer reveals its seed)."""
        self.session.command("CloseShoe", self.spec.table_id, {})

    def coup(self) -> None:
        """One coup: betting window, bets, dealing with decisions, result; a new shoe at the stop card."""
        s, t = self.session, self.spec.table_id
        if self.stop_reached:
            self.close_shoe()
            self.open_shoe()
            self.stop_reached = False
        s.command("OpenBetting", t, {})
        s.advance()
        self.coup_id = self._opened_coup()
        # The bets reach the table in the order written only on a bus that keeps one order across keys
        # (one log). Elsewhere (Kafka: wallet requests are partitioned by account) each bet waits for
        # the one before: a player-banked game's bank must be accepted first and each punter against
        # what it still covers, and in any game the order of acceptance is the table's event chain
        # (and so every later hash, and the alerts that hang on it): the same session, the same log.
        ordered = bool(getattr(s.bus, "ordered", False))
        in_turn = not ordered
        bets = self.bets()
        for adversary in s.adversaries:  # hook: cheaters add or change bets
            bets = adversary.bets(self, bets)
        for account, spot, stake in bets:
            s.wallet("PlaceBet", account, {
                "bet_id": s._id(), "table_id": t, "coup_id": self.coup_id, "spot": spot,
                "stake_minor": stake, "currency": CURRENCY,
            })  # fmt: skip
            if in_turn:
                s.advance()
        if not in_turn:
            s.advance()
        s.command("CloseBetting", t, {})
        if s.rng.random() < 0.05:  # a late bet: the dealer refuses it and settlement refunds it
            account = s.rng.choice(s.accounts())
            spot = self.variant.spots(self.config)[0]
            s.wallet(
                "PlaceBet",
                account,
                {
                    "bet_id": s._id(),
                    "table_id": t,
                    "coup_id": self.coup_id,
                    "spot": spot,
                    "stake_minor": self.spec.min_minor,
                    "currency": CURRENCY,
                },
            )
            if not ordered:  # refused before the deal, not somewhere among its cards
                s.advance()
        for adversary in s.adversaries:  # hook: late bets
            adversary.closed(self)
        s.command("DealCoup", t, {})
        s.advance()
        for adversary in s.adversaries:  # hook: a smart shoe reads its cards
            adversary.dealt(self)
        self._play_out()
        for adversary in s.adversaries:  # hook: late changes after the coup
            adversary.resolved(self)

    def _next(self) -> Envelope | None:
        """The table's next dealer event, strictly in stream order (None when none has come yet).

        Consuming one event at a time, whatever chunks the bus returns them in, is what makes a
        session resumable: restarted from scratch after a crash, it re-publishes its commands (the
        log ignores identical records) and walks the same stream to the same place.
        """
        if not self.pending:
            self.pending.extend(self.session.bus.read(topics.TABLE_EVENTS, self.spec.table_id))
        return self.pending.popleft() if self.pending else None

    def _opened_coup(self) -> str:
        while (env := self._next()) is not None:
            if env.type == "BettingOpened":
                return str(env.payload["coup_id"])
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

    def _play_out(self) -> None:
        """Answer decisions with the variant's default strategy until the coup resolves."""
        s = self.session
        state: CoupState = start(self.config)
        strategies = self.variant.strategies()
        name = getattr(self.variant, "default_strategy", None) or next(iter(strategies), None)
        while (env := self._next()) is not None:
            p = env.payload
            if env.type == "CardDealt":
                state = apply_card(state, str(p["card"]))
            elif env.type == "DecisionMade":
                state = apply_decision(state, str(p["hand"]), str(p["choice"]))
            elif env.type == "DecisionRequested":
                if name is None:
                    raise RuntimeError(f"{self.spec.variant} asks for decisions but has no strategy")
                asked = Decide(str(p["hand"]), tuple(p["options"]), str(p.get("cell", "")))
                choice = strategies[name](state, asked)
                s.command("Decision", self.spec.table_id, {
                    "coup_id": self.coup_id, "hand": asked.hand, "choice": choice,
                    "decided_by": f"strategy:{name}",
                })  # fmt: skip
                s.advance()
            elif env.type == "CoupResolved":
                self.stop_reached = bool(p.get("stop_card_reached"))
                s.stats["coups"] = s.stats.get("coups", 0) + 1
                return
        raise RuntimeError(f"{self.spec.table_id}: coup {self.coup_id} stalled")
