"""Cheaters for the simulator (issue #13): named, seeded strategies that play inside the rules.

Each adversary is consulted by :class:`services.simulation.simulator.Session` through a small hook
(``start``, ``shoe``, ``bets``, ``closed``, ``dealt``, ``resolved``) and writes its records as the
outside principal that would write them, with the session's keyring: bets as a terminal, deposits
as the cashier, card reads as the shoe, table commands and decisions as the operator. They are
cheats, not forgers (a forgery is refused by the trust layer before any detector sees it).

Every adversary draws its choices from its own ``random.Random`` seeded from the session's seed and
its name, so a run is reproducible and the honest players' choices are unchanged by its presence.
``accounts`` names the accounts it plays with (empty for a shoe or a dealer: then its ``tables``),
``detectors`` the monitor detector codes expected to catch it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar

from services.core import topics
from services.core.baccarat import apply_card, start
from services.core.baccarat.engine import Deal, Resolved, next_step
from services.core.boundary import DEALER_FOR
from services.core.cards import shoe_cards
from services.core.envelope import request
from services.core.reasons import Detector
from services.core.shoe import play_window, shuffle
from services.core.trust import Principal, authenticate
from services.monitor.accounts import REPORTING_THRESHOLD_MINOR

if TYPE_CHECKING:
    from services.simulation.simulator import Session, TablePlay

Bets = list[tuple[str, str, int]]
CURRENCY = "EUR"
STATISTICAL = frozenset({"punto_banco", "super6"})
"""Tables where the even-money sides follow punto banco's tableau with no decision to make."""


@dataclass(slots=True)
class Adversary:
    """A no-op strategy: the hook's every method, doing nothing. Subclasses override some."""

    seed: int
    rng: random.Random = field(init=False)
    name: ClassVar[str] = "honest"
    detectors: ClassVar[frozenset[str]] = frozenset()
    variants: ClassVar[tuple[str, ...]] = ("punto_banco",)
    """The tables (by variant) a run with this adversary needs."""
    accounts: tuple[str, ...] = ()
    tables: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.rng = random.Random(f"{self.name}/{self.seed}")

    def start(self, session: Session, plays: Sequence[TablePlay]) -> None:
        """Before the first coup: fund the adversary's accounts (as the cashier)."""
        for account in self.accounts:
            session.wallet("Deposit", account, {"amount_minor": 50_000_000, "currency": CURRENCY})

    def shoe(self, play: TablePlay, payload: dict[str, Any]) -> dict[str, Any]:
        """The ``OpenShoe`` payload (unchanged by default)."""
        return payload

    def bets(self, play: TablePlay, bets: Bets) -> Bets:
        """This coup's bets (unchanged by default)."""
        return bets

    def closed(self, play: TablePlay) -> None:
        """After ``CloseBetting``."""

    def dealt(self, play: TablePlay) -> None:
        """After ``DealCoup``."""

    def resolved(self, play: TablePlay) -> None:
        """After the coup resolved."""


def _bet(play: TablePlay, account: str, spot: str, stake: int, at: str | None = None) -> None:
    """A ``PlaceBet`` for the open coup, as a terminal (``at``: its own occurred_at). The table then
    waits for it as for its own bets (:meth:`TablePlay.coup`: in turn; after ``CloseBetting``, once the
    deal is on the log)."""
    s = play.session
    s.settle_due(account)  # its earlier bets' payouts first, as the session's own bets (Session.settle_due)
    payload = {"account_id": account, "bet_id": s._id(), "table_id": play.spec.table_id,
               "coup_id": play.coup_id, "spot": spot, "stake_minor": stake, "currency": CURRENCY}  # fmt: skip
    env = request("PlaceBet", topics.WALLET_REQUESTS, account, payload, event_id=s._id(),
                  occurred_at=at or s._now(), producer=Principal.TERMINAL.value)  # fmt: skip
    s.side_bet(authenticate(env, s.keyring.key(Principal.TERMINAL)))


def _statistical(play: TablePlay) -> bool:
    return play.spec.variant in STATISTICAL


@dataclass(slots=True)
class PastPoster(Adversary):
    """Sends a bet after the window closed in half the coups at the first table."""

    name: ClassVar[str] = "past_poster"
    detectors: ClassVar[frozenset[str]] = frozenset({Detector.PAST_POSTING})
    accounts: tuple[str, ...] = ("adv:past-poster",)

    def closed(self, play: TablePlay) -> None:
        """A late bet on player, one time in two."""
        if self.rng.random() < 0.5:
            _bet(play, self.accounts[0], "player", play.spec.min_minor * 10)


@dataclass(slots=True)
class Hedger(Adversary):
    """Holds both even-money sides: one account at one table (``same``), or two linked accounts at one
    table (``linked``: which takes which side is drawn each coup, else two loyal players would be
    indistinguishable from it), or one account at two tables in the same round (``cross``: no hedge,
    two tables' coups are independent; not drawn since issue #29); the mode is drawn from the seed."""

    name: ClassVar[str] = "hedger"
    detectors: ClassVar[frozenset[str]] = frozenset({Detector.HEDGED_BETS, Detector.LINKED_HEDGE})
    variants: ClassVar[tuple[str, ...]] = ("punto_banco", "punto_banco")
    accounts: tuple[str, ...] = ("adv:hedger-a", "adv:hedger-b")
    mode: str = ""

    def __post_init__(self) -> None:
        Adversary.__post_init__(self)
        self.mode = self.mode or self.rng.choice(("same", "linked"))

    def bets(self, play: TablePlay, bets: Bets) -> Bets:
        """Add the hedge at the statistical tables."""
        if not _statistical(play):
            return bets
        a, b = self.accounts
        stake = play.spec.min_minor * self.rng.choice((10, 20, 50))
        first = play.spec.table_id == self.tables[0] if self.tables else True
        if self.mode == "same" and first:
            return [*bets, (a, "player", stake), (a, "banker", stake)]
        if self.mode == "linked" and first:
            x, y = ("player", "banker") if self.rng.random() < 0.5 else ("banker", "player")
            return [*bets, (a, x, stake), (b, y, stake)]
        if self.mode == "cross":
            if first:
                self.cross_stake = stake
                return [*bets, (a, "player", stake)]
            return [*bets, (a, "banker", self.cross_stake or stake)]
        return bets

    def start(self, session: Session, plays: Sequence[TablePlay]) -> None:
        """Fund both accounts; remember the statistical tables (the first is where it starts)."""
        Adversary.start(self, session, plays)
        self.tables = tuple(p.spec.table_id for p in plays if _statistical(p))

    cross_stake: int = 0


@dataclass(slots=True)
class Structurer(Adversary):
    """Deposits just under the reporting threshold every third coup and stakes just under the table
    maximum one coup in two, at the first table."""

    name: ClassVar[str] = "structurer"
    detectors: ClassVar[frozenset[str]] = frozenset({Detector.STRUCTURING, Detector.DEPOSIT_STRUCTURING})
    accounts: tuple[str, ...] = ("adv:structurer",)
    coups: int = 0

    def bets(self, play: TablePlay, bets: Bets) -> Bets:
        """A deposit under the threshold now and then; a stake under the maximum one time in two."""
        if not _statistical(play):
            return bets
        self.coups += 1
        account = self.accounts[0]
        if self.coups % 3 == 0:
            amount = REPORTING_THRESHOLD_MINOR - self.rng.randint(1, 60) * 500
            play.session.wallet("Deposit", account, {"amount_minor": amount, "currency": CURRENCY})
        if self.rng.random() < 0.5:
            stake = play.spec.max_minor - self.rng.randint(1, 40) * 500
            return [*bets, (account, self.rng.choice(("player", "banker")), stake)]
        return bets


@dataclass(slots=True)
class ChipDumper(Adversary):
    """At a player-banked game, one account (the dumper) always punts against its partner's bank,
    passing money to it coup after coup."""

    name: ClassVar[str] = "chip_dumper"
    detectors: ClassVar[frozenset[str]] = frozenset({Detector.PAIRED_PLAY})
    variants: ClassVar[tuple[str, ...]] = ("chemin_de_fer",)
    accounts: tuple[str, ...] = ("adv:dumper", "adv:receiver")

    def bets(self, play: TablePlay, bets: Bets) -> Bets:
        """The receiver holds the bank; the dumper takes the first punter's seat with a big stake."""
        bank = [b for b in bets if b[1] == "bank"]
        if not bank:
            return bets
        dumper, receiver = self.accounts
        amount = bank[0][2]
        out: Bets = [(receiver, "bank", amount)]
        out += [(receiver, x, m) for _, x, m in bets if x == "bank_cover"]
        spots = [x for x in play.variant.spots(play.config) if x not in ("bank", "bank_cover")]
        spot = next((x for x in spots if x.startswith(("punter", "ponte", "player"))), spots[0])
        stake = max(play.spec.min_minor, amount // 2)
        if play._coverable(out, dumper, spot, stake):
            out.append((dumper, spot, stake))
        taken = {x for _, x, _ in out}
        for b in bets:
            free = b[1] not in ("bank", "bank_cover") and b[0] not in self.accounts and b[1] not in taken
            if free and play._coverable(out, b[0], b[1], b[2]):
                out.append(b)
        return out


def _coup_cards(config: Any, cards: Sequence[str]) -> tuple[int, str] | None:
    """How many of ``cards`` a coup takes and its outcome (None if it needs a decision)."""
    state = start(config)
    used = 0
    while True:
        step = next_step(state)
        if isinstance(step, Resolved):
            return used, step.result.outcome
        if not isinstance(step, Deal) or used >= len(cards):
            return None
        state = apply_card(state, cards[used])
        used += 1


@dataclass(slots=True)
class PresetShoe(Adversary):
    """A smart shoe reading a stacked deck at the first statistical table: the cards of each coup are
    arranged (from what is left of a real 8-deck shoe) so that banker wins, with probability
    :meth:`rigged` per coup (always, for the preset shoe)."""

    name: ClassVar[str] = "preset_shoe"
    detectors: ClassVar[frozenset[str]] = frozenset({Detector.SHOE_BIAS})
    accounts: tuple[str, ...] = ()
    left: list[str] = field(default_factory=list)
    coups: int = 0

    def start(self, session: Session, plays: Sequence[TablePlay]) -> None:
        """Rig the first statistical table."""
        self.tables = tuple(p.spec.table_id for p in plays if _statistical(p))[:1]

    def shoe(self, play: TablePlay, payload: dict[str, Any]) -> dict[str, Any]:
        """A smart shoe (cards read one by one) over a fresh deck."""
        if play.spec.table_id not in self.tables:
            return payload
        self.left = list(shoe_cards(play.config.decks))
        self.rng.shuffle(self.left)
        return {**payload, "mode": "smart"}

    def rigged(self) -> float:
        """The chance that this coup's cards are arranged."""
        return 1.0

    def favoured(self) -> str:
        """The side the arranged coups are won by."""
        return "banker"

    def dealt(self, play: TablePlay) -> None:
        """Read the coup's cards: arranged for :meth:`favoured`, or the next ones of the deck."""
        if play.spec.table_id not in self.tables:
            return
        self.coups += 1
        cards: list[str] = []
        if self.rng.random() < self.rigged():
            for _ in range(200):
                idx = self.rng.sample(range(len(self.left)), 6)
                pick = [self.left[i] for i in idx]
                done = _coup_cards(play.config, pick)
                if done is not None and done[1] == self.favoured():
                    cards = pick[: done[0]]
                    break
        if not cards:
            done = _coup_cards(play.config, self.left[:6])
            cards = self.left[: done[0] if done else 6]
        for card in cards:
            self.left.remove(card)
            play.session.command("CardRead", play.spec.table_id, {"card": card})
        play.session.advance()


@dataclass(slots=True)
class BiasedShoe(PresetShoe):
    """A slowly biased smart shoe: the chance that a coup is arranged for banker grows by 1 % a coup
    up to 60 %."""

    name: ClassVar[str] = "biased_shoe"

    def rigged(self) -> float:
        """Grows slowly with the coups played."""
        return min(0.6, self.coups / 100)


@dataclass(slots=True)
class CollusiveDealer(Adversary):
    """After a coup resolved, one time in four, slides in a late card (as the shoe) or sends a late
    decision change (as the operator) at the first table."""

    name: ClassVar[str] = "colluding_dealer"
    detectors: ClassVar[frozenset[str]] = frozenset({Detector.CARD_NOT_DUE, Detector.LATE_DECISION})
    accounts: tuple[str, ...] = ()

    def start(self, session: Session, plays: Sequence[TablePlay]) -> None:
        """Work the first table."""
        self.tables = (plays[0].spec.table_id,)

    def resolved(self, play: TablePlay) -> None:
        """A late card or decision now and then."""
        if play.spec.table_id not in self.tables or self.rng.random() >= 0.25:
            return
        if self.rng.random() < 0.5:
            card = self.rng.choice(shoe_cards(1))
            play.session.command("CardRead", play.spec.table_id, {"card": card})
        else:
            play.session.command("Decision", play.spec.table_id, {
                "coup_id": play.coup_id, "hand": "player", "choice": self.rng.choice(("draw", "stand")),
                "decided_by": DEALER_FOR,
            })  # fmt: skip
        play.session.advance()


@dataclass(slots=True)
class EdgeSorter(Adversary):
    """Knows each coup's first card (it reads the backs of sorted cards; simulated by knowing the
    shoe's order) and bets player on a 7, 8 or 9, banker otherwise, at the statistical tables."""

    name: ClassVar[str] = "edge_sorter"
    detectors: ClassVar[frozenset[str]] = frozenset({Detector.EDGE_SORTING})
    accounts: tuple[str, ...] = ("adv:edge-sorter",)
    order: dict[str, tuple[str, ...]] = field(default_factory=dict)
    pos: dict[str, int] = field(default_factory=dict)

    def shoe(self, play: TablePlay, payload: dict[str, Any]) -> dict[str, Any]:
        """Learn the shoe's order (a demo-mode seed stands for the sorted backs)."""
        if not _statistical(play):
            return payload
        seed = self.rng.randbytes(32)
        order = shuffle(seed, shoe_cards(play.config.decks))
        first, _ = play_window(order, play.variant.shoe_rules_for(play.config))
        t = play.spec.table_id
        self.order[t], self.pos[t] = order, first
        return {**payload, "seed_hex": seed.hex()}

    def bets(self, play: TablePlay, bets: Bets) -> Bets:
        """Bet on the side the first card favours."""
        t = play.spec.table_id
        if t not in self.order:
            return bets
        first = self.order[t][self.pos[t]]
        spot = "player" if first[0] in "789" else "banker"
        return [*bets, (self.accounts[0], spot, play.spec.min_minor * 10)]

    def resolved(self, play: TablePlay) -> None:
        """Move past the coup's cards."""
        t = play.spec.table_id
        if t in self.order:
            done = _coup_cards(play.config, self.order[t][self.pos[t] : self.pos[t] + 6])
            self.pos[t] += done[0] if done else 6


@dataclass(slots=True)
class Bot(Adversary):
    """Bets the same stake on banker 800 ms after every window opens, at every statistical table."""

    name: ClassVar[str] = "bot"
    detectors: ClassVar[frozenset[str]] = frozenset({Detector.BOT_REGULARITY})
    accounts: tuple[str, ...] = ("adv:bot",)

    def bets(self, play: TablePlay, bets: Bets) -> Bets:
        """Its own bet, timed to the millisecond (the window opened at the session's last second)."""
        if _statistical(play):
            from services.simulation.simulator import EPOCH  # noqa: PLC0415 (the simulator imports us)

            at = EPOCH + timedelta(seconds=play.session.clock, milliseconds=800)
            _bet(play, self.accounts[0], "banker", play.spec.min_minor * 7,
                 at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z")  # fmt: skip
        return bets


ADVERSARIES: dict[str, type[Adversary]] = {
    a.name: a for a in (PastPoster, Hedger, Structurer, ChipDumper, PresetShoe, BiasedShoe,
                        CollusiveDealer, EdgeSorter, Bot)
}  # fmt: skip
"""Every adversary by name."""


# --- parameterised adversaries for the evaluation against honest populations (issue #29) ------------


def _timed(play: TablePlay, bets: Bets, mine: list[tuple[str, str, int, float]], rng: random.Random) -> None:
    """Write ``bets`` (the other players': seconds before the close) and ``mine`` (each with its own
    lead in seconds) with their own times, and set the coup's close after them."""
    from services.simulation.simulator import EPOCH  # noqa: PLC0415 (the simulator imports us)

    s = play.session
    close = s.clock + 20
    timed = [(rng.uniform(2.0, 15.0), a, x, m) for a, x, m in bets] + [
        (lead, a, x, m) for a, x, m, lead in mine
    ]
    for lead, account, spot, stake in sorted(timed, key=lambda b: -b[0]):
        _bet(play, account, spot, stake, _fmt(EPOCH + timedelta(seconds=close - lead)))
    play.close_at = _fmt(EPOCH + timedelta(seconds=close))
    s.clock = close


def _fmt(at: Any) -> str:
    return str(at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z")


@dataclass(slots=True)
class Oracle(Adversary):
    """Knows each coup's outcome (the shoe's order, as an edge sorter or a dealer's signal would give
    it) and bets the winning side of a decided coup with probability :attr:`edge`, flat, at the first
    statistical table; its accounts (:attr:`members`) each bet a coup with probability
    :attr:`presence`, all on the one signalled side."""

    name: ClassVar[str] = "oracle"
    detectors: ClassVar[frozenset[str]] = frozenset({Detector.ACCOUNT_EDGE})
    accounts: tuple[str, ...] = ("adv:oracle",)
    edge: float = 0.57
    presence: float = 1.0
    lead: float = 0.0
    """Seconds before the close within which its bets come (0: with the crowd, at no set time)."""
    order: dict[str, tuple[str, ...]] = field(default_factory=dict)
    pos: dict[str, int] = field(default_factory=dict)

    def start(self, session: Session, plays: Sequence[TablePlay]) -> None:
        Adversary.start(self, session, plays)
        self.tables = tuple(p.spec.table_id for p in plays if _statistical(p))[:1]

    def shoe(self, play: TablePlay, payload: dict[str, Any]) -> dict[str, Any]:
        if play.spec.table_id not in self.tables:
            return payload
        seed = self.rng.randbytes(32)
        order = shuffle(seed, shoe_cards(play.config.decks))
        first, _ = play_window(order, play.variant.shoe_rules_for(play.config))
        t = play.spec.table_id
        self.order[t], self.pos[t] = order, first
        return {**payload, "seed_hex": seed.hex()}

    def bets(self, play: TablePlay, bets: Bets) -> Bets:
        t = play.spec.table_id
        if t not in self.order:
            return bets
        done = _coup_cards(play.config, self.order[t][self.pos[t] : self.pos[t] + 6])
        outcome = done[1] if done else "banker"
        if outcome in ("banker", "player"):
            other = "player" if outcome == "banker" else "banker"
            side = outcome if self.rng.random() < self.edge else other
        else:
            side = self.rng.choice(("banker", "player"))
        players = [a for a in self.accounts if self.rng.random() < self.presence]
        if self.lead:
            mine = [(a, side, play.spec.min_minor * 10, self.rng.uniform(0.05, self.lead)) for a in players]
            _timed(play, bets, mine, self.rng)
            return []
        return [*bets, *((a, side, play.spec.min_minor * 10) for a in players)]

    def resolved(self, play: TablePlay) -> None:
        t = play.spec.table_id
        if t in self.order:
            done = _coup_cards(play.config, self.order[t][self.pos[t] : self.pos[t] + 6])
            self.pos[t] += done[0] if done else 6


@dataclass(slots=True)
class Syndicate(Oracle):
    """:class:`Oracle` played by several accounts taking turns (each bets a coup one time in two)."""

    name: ClassVar[str] = "syndicate"
    detectors: ClassVar[frozenset[str]] = frozenset({Detector.GROUP_EDGE, Detector.ACCOUNT_EDGE})
    presence: float = 0.5


@dataclass(slots=True)
class LastSecond(Oracle):
    """Past posting that gets through: every bet in the last :attr:`lead` seconds before the close,
    winning :attr:`edge` of the decided coups (it saw what the others had not)."""

    name: ClassVar[str] = "last_second"
    detectors: ClassVar[frozenset[str]] = frozenset({Detector.LATE_BET, Detector.ACCOUNT_EDGE})
    edge: float = 0.84
    lead: float = 1.0


@dataclass(slots=True)
class RangedShoe(PresetShoe):
    """A smart shoe arranged for :attr:`side` in a share of coups such that it wins :attr:`share` of
    the decided coups (banker wins 45.86 % of coups and ties 9.52 % with 8 decks)."""

    name: ClassVar[str] = "biased_shoe_range"
    share: float = 0.6
    side: str = "banker"

    def rigged(self) -> float:
        win = 0.4586 if self.side == "banker" else 0.4462
        return max(0.0, (self.share * 0.9048 - win) / (1 - win - 0.0952 * self.share))

    def favoured(self) -> str:
        return self.side


@dataclass(slots=True)
class Dumper(Adversary):
    """Linked accounts on opposite sides of every coup at the first table, sides drawn each coup, the
    stakes apart by :attr:`gap` (6-12 % escapes a 5 % "matched" band); ``split``: the dumping side's
    stake split over two accounts."""

    name: ClassVar[str] = "dumper"
    detectors: ClassVar[frozenset[str]] = frozenset({Detector.LINKED_HEDGE})
    accounts: tuple[str, ...] = ("adv:dump-a", "adv:dump-b", "adv:dump-c")
    gap: float = 0.06
    split: bool = False

    def start(self, session: Session, plays: Sequence[TablePlay]) -> None:
        Adversary.start(self, session, plays)
        self.tables = tuple(p.spec.table_id for p in plays if _statistical(p))[:1]

    def bets(self, play: TablePlay, bets: Bets) -> Bets:
        if play.spec.table_id not in self.tables:
            return bets
        a, b, c = self.accounts
        side = self.rng.choice(("banker", "player"))
        other = "player" if side == "banker" else "banker"
        stake = play.spec.min_minor * self.rng.choice((10, 20, 30))
        far = int(stake * (1 + self.gap))
        if self.split:
            return [*bets, (a, side, stake), (b, other, far // 2), (c, other, far - far // 2)]
        return [*bets, (a, side, stake), (b, other, far)]


@dataclass(slots=True)
class InAndOut(Adversary):
    """Deposits :attr:`total` in chunks under the reporting threshold, stakes a little, withdraws."""

    name: ClassVar[str] = "cash_in_out"
    detectors: ClassVar[frozenset[str]] = frozenset({Detector.IN_AND_OUT})
    accounts: tuple[str, ...] = ("adv:in-out",)
    total: int = 5_900_000
    coups: int = 0

    def start(self, session: Session, plays: Sequence[TablePlay]) -> None:
        self.tables = tuple(p.spec.table_id for p in plays if _statistical(p))[:1]

    def bets(self, play: TablePlay, bets: Bets) -> Bets:
        if play.spec.table_id not in self.tables:
            return bets
        self.coups += 1
        account = self.accounts[0]
        s = play.session
        if self.coups <= 6:
            s.wallet("Deposit", account, {"amount_minor": self.total // 6, "currency": CURRENCY})
            return bets
        if self.coups <= 10:
            return [*bets, (account, "banker", play.spec.min_minor)]
        if self.coups == 11:
            s.wallet("Withdraw", account, {"amount_minor": self.total - 4 * play.spec.min_minor,
                                           "currency": CURRENCY})  # fmt: skip
        return bets


@dataclass(slots=True)
class Smurfs(Adversary):
    """Structuring across accounts: :attr:`members` accounts each depositing :attr:`times` amounts just
    under the reporting threshold (9,000 to 9,900), one deposit every :attr:`every` coups, among the
    cage's honest customers (the evaluation plays them beside: ``populations`` "cage")."""

    name: ClassVar[str] = "smurfs"
    detectors: ClassVar[frozenset[str]] = frozenset({Detector.CAGE_STRUCTURING})
    members: int = 8
    times: int = 2
    every: int = 1
    coups: int = 0
    queue: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        Adversary.__post_init__(self)
        self.accounts = tuple(f"adv:smurf-{i:02d}" for i in range(self.members))
        self.queue = [a for _ in range(self.times) for a in self.accounts]

    def start(self, session: Session, plays: Sequence[TablePlay]) -> None:
        self.tables = tuple(p.spec.table_id for p in plays)[:1]

    def bets(self, play: TablePlay, bets: Bets) -> Bets:
        if play.spec.table_id not in self.tables:
            return bets
        self.coups += 1
        if self.queue and self.coups % self.every == 0:
            amount = REPORTING_THRESHOLD_MINOR - self.rng.randint(1, 10) * 10_000
            play.session.wallet("Deposit", self.queue.pop(0), {"amount_minor": amount, "currency": CURRENCY})
        return bets


@dataclass(slots=True)
class Sorter(EdgeSorter):
    """:class:`EdgeSorter` hiding its edge: on a 7, 8 or 9 it bets player with a stake drawn from 5 to
    :attr:`top` table minimums; otherwise, one time in :attr:`decoys`, a decoy player bet of one minimum
    (else banker, as the plain sorter), so that most of its player bets are ordinary."""

    name: ClassVar[str] = "edge_sorter_range"
    decoys: float = 0.5
    top: int = 25

    def start(self, session: Session, plays: Sequence[TablePlay]) -> None:
        Adversary.start(self, session, plays)
        self.tables = tuple(p.spec.table_id for p in plays if _statistical(p))[:1]

    def bets(self, play: TablePlay, bets: Bets) -> Bets:
        t = play.spec.table_id
        if t not in self.order or t not in self.tables:
            return bets
        lo = play.spec.min_minor
        if self.order[t][self.pos[t]][0] in "789":
            return [*bets, (self.accounts[0], "player", lo * self.rng.randint(5, self.top))]
        if self.rng.random() < self.decoys:
            return [*bets, (self.accounts[0], "player", lo)]
        return [*bets, (self.accounts[0], "banker", lo * 10)]


@dataclass(slots=True)
class Signalled(Oracle):
    """Big bets on a dealer's signal: in a share :attr:`signal` of the coups the dealer signals the
    outcome (he sees the cards: a peek, a marked shoe) and the player stakes :attr:`big` table minimums
    on the winning side; every other coup he bets one minimum on a side drawn at random."""

    name: ClassVar[str] = "signalled"
    accounts: tuple[str, ...] = ("adv:signalled",)
    signal: float = 0.2
    big: int = 25

    def bets(self, play: TablePlay, bets: Bets) -> Bets:
        t = play.spec.table_id
        if t not in self.order:
            return bets
        done = _coup_cards(play.config, self.order[t][self.pos[t] : self.pos[t] + 6])
        outcome = done[1] if done else "tie"
        lo = play.spec.min_minor
        if outcome in ("banker", "player") and self.rng.random() < self.signal:
            return [*bets, (self.accounts[0], outcome, lo * self.big)]
        return [*bets, (self.accounts[0], self.rng.choice(("banker", "player")), lo)]
