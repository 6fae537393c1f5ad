"""Honest players with real habits, for measuring the monitor against the world (issue #29).

Nothing here knows a detector: the module imports no part of :mod:`services.monitor`, and the habits
below are what surveillance staff and the gaming literature describe, not what a test would pass.
A population plays through the simulator's adversary hook (:class:`Crowd`, an
:class:`~services.simulation.adversaries.Adversary` that replaces the simulator's own bettors), so its bets go
through the real pipeline: terminal ``PlaceBet`` requests, the wallet, the dealer with real 8-deck
shoes, settlement and the monitor.

**Habits** (:class:`Habit`), each player one of each:

* side: ``banker`` or ``player`` (side loyalty: many players never switch), ``streak`` (bets on the side
  that won the last decided coup), ``chop`` (against it), ``random`` (a coin each coup), ``tie`` (a
  whale's tie bets beside a big banker bet).
* sizing: ``flat`` (the same stake every coup, often the table minimum), ``martingale`` (double after
  a loss, back to one unit after a win, capped at the table maximum), ``paroli`` (double after a win,
  up to three wins, back to one unit after a loss or the third win), ``units`` (a stake drawn from
  1, 2, 3, 5, 10 or 25 units each coup).
* presence: the chance of betting in a given coup (players sit out coups), and the tables played (one
  player at several tables at once).

**Timing** (the assumption the monitor's late-bet test rests on, docs/monitoring.md): the lead of a bet
before the close of betting (the ``CloseBetting`` time minus the terminal's ``PlaceBet`` time).

* Live table (dealer calls "no more bets", window :data:`LIVE_WINDOW_S`): 97 % of bets are placed
  1 s + an exponential time of mean 4 s before the close (capped by the window), 3 % between 0.5 and
  1 s before it; none in the last 0.5 s (a human cannot react to the call faster).
* Online table (a countdown, window :data:`ONLINE_WINDOW_S`): 95 % at 1 s + an exponential time of
  mean 3 s, 4 % between 0.5 and 1 s, 1 % between 0.1 and 0.5 s (a click as the timer runs out).

So at most 5 % of honest bets come in the last second, and none in its last half at a live table.

**The cage** (:func:`cage_amount`): customers depositing cash at the cashier's cage, a few a coup, each
from a pool of regulars: round amounts (what people carry: 100 to 20,000, 9,000 and 9,500 among them),
salaries and wages (uneven amounts of 1,200 to 4,800), and winnings or savings brought back (any amount
of 50 to 20,000). Some land just under the cash-reporting threshold (10,000) by chance: about 4 %.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, ClassVar

from services.simulation.adversaries import Adversary, Bets, _bet
from services.simulation.simulator import EPOCH, TableSpec

if TYPE_CHECKING:
    from services.simulation.simulator import Session, TablePlay

LIVE_WINDOW_S = 20
"""Seconds a live table's betting window stays open."""

ONLINE_WINDOW_S = 12
"""Seconds an online table's countdown runs."""

SIDES = ("banker", "player")

ROUND_AMOUNTS = (100, 200, 500, 1_000, 1_000, 2_000, 2_000, 3_000, 5_000, 5_000, 10_000, 20_000)
"""Round cash deposits (major units), repeated by how often they come."""

CAGE_REGULARS = 400
"""Customers the cage's deposits come from."""


def stamp(at: datetime) -> str:
    """An RFC 3339 UTC time with milliseconds."""
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def honest_lead(rng: random.Random, online: bool, window: float) -> float:
    """Seconds before the close at which an honest human's bet is placed (see the module docstring)."""
    u = rng.random()
    if online and u < 0.01:
        return rng.uniform(0.1, 0.5)
    if u < (0.05 if online else 0.03):
        return rng.uniform(0.5, 1.0)
    return min(window - 0.2, 1.0 + rng.expovariate(1 / (3.0 if online else 4.0)))


def cage_amount(rng: random.Random) -> int:
    """An honest cash deposit in minor units (see the module docstring)."""
    u = rng.random()
    if u < 0.03:
        return rng.choice((9_000, 9_500)) * 100
    if u < 0.60:
        return rng.choice(ROUND_AMOUNTS) * 100
    if u < 0.85:
        return rng.randint(120_000, 480_000)
    return rng.randint(5_000, 2_000_000)


@dataclass(slots=True)
class Habit:
    """One honest player: an account, a side habit, a sizing habit, a unit (in table minimums), the
    chance of playing a coup and the tables (indices into the population's tables) played."""

    account: str
    side: str
    sizing: str = "flat"
    unit: int = 1
    presence: float = 1.0
    tables: tuple[int, ...] = (0,)
    level: int = 0
    """Progression state: doublings so far (martingale: losses in a row; paroli: wins in a row)."""
    last: dict[str, tuple[str, int]] = field(default_factory=dict)
    """Per table: the side and stake of the player's bet in the coup in play (to grade it after)."""

    def choose_side(self, rng: random.Random, last_winner: str) -> str:
        if self.side in SIDES:
            return self.side
        if self.side == "streak" and last_winner in SIDES:
            return last_winner
        if self.side == "chop" and last_winner in SIDES:
            return SIDES[1 - SIDES.index(last_winner)]
        return rng.choice(SIDES)

    def stake(self, rng: random.Random, lo: int, hi: int) -> int:
        units = self.unit
        if self.sizing in {"martingale", "paroli"}:
            units = self.unit * 2**self.level
        elif self.sizing == "units":
            units = self.unit * rng.choice((1, 2, 3, 5, 10, 25))
        return max(lo, min(hi, lo * units))

    def graded(self, won: bool | None, lo: int, hi: int) -> None:
        """Move the progression after a decided coup (``None``: a push, nothing moves)."""
        if won is None:
            return
        if self.sizing == "martingale":
            self.level = 0 if won or lo * self.unit * 2 ** (self.level + 1) > hi else self.level + 1
        elif self.sizing == "paroli":
            self.level = self.level + 1 if won and self.level < 2 else 0


@dataclass(slots=True)
class Crowd(Adversary):
    """A population at its tables: replaces the simulator's own bettors with :class:`Habit` players,
    each bet timed before the close as a human's (:func:`honest_lead`). ``online``: per table."""

    name: ClassVar[str] = "crowd"
    habits: list[Habit] = field(default_factory=list)
    online: tuple[bool, ...] = (False,)
    specs: tuple[TableSpec, ...] = ()
    deposits: int = 0
    """Cash deposits at the cage a coup (at the first table's pace), from :data:`CAGE_REGULARS`."""

    def start(self, session: Session, plays: Sequence[TablePlay]) -> None:
        """Fund every player (as the cashier) and learn the tables."""
        self.tables = tuple(p.spec.table_id for p in plays)
        for h in self.habits:
            session.wallet("Deposit", h.account, {"amount_minor": 500_000_000, "currency": "EUR"})

    def bets(self, play: TablePlay, bets: Bets) -> Bets:
        """The population's bets at this table, each at its own time; the close follows them."""
        index = self.tables.index(play.spec.table_id)
        online = self.online[index % len(self.online)]
        window = ONLINE_WINDOW_S if online else LIVE_WINDOW_S
        lo, hi = play.spec.min_minor, play.spec.max_minor
        s = play.session
        self._grade(play, index, lo, hi)
        for _ in range(self.deposits if index == 0 else 0):
            who = f"cust:{self.rng.randrange(CAGE_REGULARS):03d}"
            s.wallet("Deposit", who, {"amount_minor": cage_amount(self.rng), "currency": "EUR"})
        close = max(s.clock + 1, _seconds(play) + window)
        timed: list[tuple[float, str, str, int]] = []
        for h in self.habits:
            if index not in h.tables or self.rng.random() >= h.presence:
                h.last.pop(play.spec.table_id, None)
                continue
            side = h.choose_side(self.rng, play.last_outcome)
            stake = h.stake(self.rng, lo, hi)
            lead = honest_lead(self.rng, online, window)
            if h.side == "tie":
                timed.append((lead, h.account, "banker", min(hi, lo * 100)))
                if self.rng.random() < 0.3:
                    timed.append((lead + 0.3, h.account, "tie", min(hi, lo * 50)))
                continue
            h.last[play.spec.table_id] = (side, stake)
            timed.append((lead, h.account, side, stake))
        for lead, account, spot, stake in sorted(timed, key=lambda b: -b[0]):  # earliest first
            _bet(play, account, spot, stake, stamp(EPOCH + timedelta(seconds=close - lead)))
        play.close_at = stamp(EPOCH + timedelta(seconds=close))
        s.clock = max(s.clock, close)
        return []

    def _grade(self, play: TablePlay, index: int, lo: int, hi: int) -> None:
        """Grade each player's bet of the table's last coup (for the progressions)."""
        outcome = play.last_outcome
        for h in self.habits:
            last = h.last.get(play.spec.table_id)
            if last is None or not outcome:
                continue
            h.graded(None if outcome == "tie" else outcome == last[0], lo, hi)


def _seconds(play: TablePlay) -> int:
    """The session second at which the coup's betting opened."""
    coup = play.in_play
    if coup is None:
        return play.session.clock
    opened = datetime.fromisoformat(coup.started_at.replace("Z", "+00:00"))
    return math.ceil((opened - EPOCH).total_seconds())


@dataclass(frozen=True, slots=True)
class Population:
    """A named honest population: its tables (``online`` per table) and a builder of its players."""

    name: str
    description: str
    tables: tuple[bool, ...]
    players: Callable[[random.Random], list[Habit]]
    weight: int = 1
    """Relative cost of a coup (bets per coup), so that the evaluation can size its runs."""
    deposits: int = 0
    """Cash deposits at the cage a coup (:attr:`Crowd.deposits`)."""

    def specs(self) -> list[TableSpec]:
        kinds = ("L", "O")
        return [
            TableSpec(f"H{i + 1:02d}{kinds[o]}-punto-banco", "punto_banco") for i, o in enumerate(self.tables)
        ]

    def crowd(self, seed: int) -> Crowd:
        rng = random.Random(f"population/{self.name}/{seed}")
        return Crowd(seed=seed, habits=self.players(rng), online=self.tables, deposits=self.deposits)


MIXED_SIDES = ("banker", "banker", "player", "streak", "chop", "random", "random")
MIXED_SIZING = ("flat", "flat", "flat", "units", "martingale", "paroli")


def mixed(n: int, prefix: str, tables: tuple[int, ...] = (0,)) -> Callable[[random.Random], list[Habit]]:
    """``n`` players of every habit, drawn as a real table's mix (loyal sides and flat stakes commonest)."""

    def build(rng: random.Random) -> list[Habit]:
        return [
            Habit(f"{prefix}:{i:03d}", rng.choice(MIXED_SIDES), rng.choice(MIXED_SIZING),
                  rng.choice((1, 1, 2, 5)), rng.choice((1.0, 0.9, 0.7)), (rng.choice(tables),))
            for i in range(n)
        ]  # fmt: skip

    return build


def _loyal_pair(rng: random.Random) -> list[Habit]:
    return [Habit("loyal:banker", "banker"), Habit("loyal:player", "player")]


def _progressions(rng: random.Random) -> list[Habit]:
    return [
        Habit("prog:mart-1", "banker", "martingale"), Habit("prog:mart-2", "player", "martingale"),
        Habit("prog:paroli-1", "banker", "paroli"), Habit("prog:paroli-2", "random", "paroli"),
        Habit("prog:streak-1", "streak", "flat", 2), Habit("prog:streak-2", "streak", "flat", 2),
        Habit("prog:chop", "chop", "flat", 2),
    ]  # fmt: skip


def _multi_table(rng: random.Random) -> list[Habit]:
    return [
        Habit("multi:1", "banker", tables=(0, 1)), Habit("multi:2", "player", tables=(0, 1)),
        Habit("multi:3", "random", tables=(0, 1)), Habit("multi:4", "streak", tables=(0, 1)),
    ]  # fmt: skip


def _whales(rng: random.Random) -> list[Habit]:
    return [
        Habit("whale:1", "tie"), Habit("whale:2", "tie", presence=0.8),
        Habit("small:1", "banker"), Habit("small:2", "player", "units"), Habit("small:3", "random", "units"),
    ]  # fmt: skip


POPULATIONS: tuple[Population, ...] = (
    Population("small-tables", "2 live tables, 8 players each of mixed habits", (False, False),
               mixed(16, "mix", (0, 1)), 2),
    Population("loyal-pair", "2 flat minimum bettors, one always banker, one always player", (False,),
               _loyal_pair, 1),
    Population("progressions", "Martingale, Paroli, streak chasers and a chop player", (False,),
               _progressions, 2),
    Population("multi-table", "4 flat players each at the same 2 tables at once", (False, False),
               _multi_table, 2),
    Population("whales", "whales betting ties and big banker beside small players", (False,), _whales, 2),
    Population("live-60", "a crowded live table of 60 players", (False,), mixed(60, "live"), 20),
    Population("online-300", "an online table of 300 players", (True,), mixed(300, "web"), 100),
    Population("cage", "a deposit a coup at the cage from 400 regulars (about 4 % just under the "
               "reporting threshold by chance), 8 players at a live table", (False,), mixed(8, "cage-t"),
               2, 1),
)  # fmt: skip
"""Every honest population of the evaluation, by name."""


def population(name: str) -> Population:
    """The population called ``name``."""
    for p in POPULATIONS:
        if p.name == name:
            return p
    raise KeyError(name)


__all__ = ["POPULATIONS", "Crowd", "Habit", "Population", "honest_lead", "population"]
