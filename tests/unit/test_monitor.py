"""The fraud and anomaly monitor over genuine dealer events (the dealer fed inbox commands via step)."""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from functools import cache
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.core import topics
from services.core.baccarat import VARIANTS, get_variant, resolve
from services.core.baccarat.odds import enumerate_coups, grade_counts
from services.core.contract import AnomalyDetected, dump_payload, payload_as
from services.core.envelope import Envelope, canonical, name_id, request, sha256_hex
from services.core.processor import initial_state, step
from services.core.reasons import Detector
from services.dealer.processor import Dealer, DealerState
from services.monitor.detectors import (
    EVEN_MONEY_SPOTS,
    OUTLIER_MIN_BETS,
    OUTLIER_WINDOW_BETS,
    OUTLIER_Z,
    PAST_POSTING_CRITICAL_AT,
    PAST_POSTING_WARNING_AT,
    PAST_POSTING_WINDOW_COUPS,
    STATISTICAL_VARIANTS,
    STREAK_PROBABILITY_MAX,
    STRUCTURING_WINDOW_COUPS,
    WIN_PROBABILITY_MAX,
    WIN_STREAK_LENGTH,
)
from services.monitor.processor import Monitor
from services.monitor.sequential_detectors import EVIDENCE_MAX
from services.simulation.simulator import DEFAULT_TABLES, Session
from tests.helpers.membus import MemBus

EPOCH = datetime(2026, 11, 22, 20, 0, 0, tzinfo=UTC)
MAX_MINOR = 500_000
MIN_MINOR = 1_000


# --- a table driven through the real dealer ---------------------------------------------------------


@dataclass
class TableRun:
    """One table: operator commands and bets go to the real dealer; its table events are kept."""

    table_id: str = "T1"
    decks: int = 8
    smart: bool = False
    seed: int = 1
    dealer: Dealer = field(default_factory=lambda: Dealer(allow_seed_hex=True))
    events: list[Envelope] = field(default_factory=list)
    n: int = 0
    shoes: int = 0
    coup_id: str = ""
    jitter: bool = True
    """Whether each record's milliseconds wander (a human's timing); off: exactly 5 s apart."""

    def __post_init__(self) -> None:
        self.state = initial_state(self.dealer)
        limits = {s: {"min_minor": MIN_MINOR, "max_minor": MAX_MINOR} for s in ("player", "banker", "tie")}
        table = {"variant": "punto_banco", "currency": "EUR", "decks": self.decks, "limits": limits}
        self.send("OpenTable", table)
        self.open_shoe()

    def send(self, type_: str, payload: dict[str, Any], offset_ms: int = 0) -> list[Envelope]:
        """Write one inbox record and return the table events it caused (records 5 s apart, each at
        ``offset_ms`` more)."""
        self.n += 1
        at = EPOCH + timedelta(seconds=5 * self.n, milliseconds=offset_ms)
        wander = int(sha256_hex(str(self.n).encode())[:6], 16) if self.jitter else 0
        env = request(
            type_, topics.TABLE_INBOX, self.table_id, {"table_id": self.table_id, **payload},
            event_id=name_id("monitor-test", self.table_id, str(self.seed), str(self.n)),
            # a human's timing: milliseconds that wander from record to record (not a bot's)
            occurred_at=at.strftime("%Y-%m-%dT%H:%M:%S.")
            + f"{(at.microsecond // 1000 + wander) % 1000:03d}Z",
            producer="operator",
        )  # fmt: skip
        out = step(self.dealer, self.state, env)
        assert all(e.topic == topics.TABLE_EVENTS for e in out), [e.payload for e in out]
        self.events += out
        return out

    def open_shoe(self) -> None:
        """A new shoe: RNG from a seed derived from the run's seed, or a smart shoe."""
        self.shoes += 1
        shoe_id = f"{self.table_id}-S{self.shoes}"
        if self.smart:
            self.send("OpenShoe", {"shoe_id": shoe_id, "mode": "smart"})
        else:
            seed = hashlib.sha256(f"monitor-test/{self.seed}/{shoe_id}".encode()).hexdigest()
            self.send("OpenShoe", {"shoe_id": shoe_id, "mode": "rng", "seed_hex": seed})

    def open_betting(self) -> str:
        """Open the next coup's window; its coup id."""
        (opened,) = self.send("OpenBetting", {})
        self.coup_id = str(opened.payload["coup_id"])
        return self.coup_id

    def bet(self, account: str, spot: str, stake: int, coup_id: str | None = None, offset_ms: int = 0) -> str:
        """Place a bet (funds held); its bet id."""
        bet_id = name_id("bet", self.table_id, str(self.seed), str(self.n + 1))
        self.send("BetPlaced", {
            "bet_id": bet_id, "account_id": account, "coup_id": coup_id or self.coup_id, "spot": spot,
            "stake_minor": stake, "currency": "EUR",
        }, offset_ms)  # fmt: skip
        return bet_id

    def deal(self, cards: tuple[str, ...] = ()) -> dict[str, Any]:
        """Close betting and deal (RNG, or the given smart-shoe reads); the ``CoupResolved`` payload."""
        self.send("CloseBetting", {})
        out = self.send("DealCoup", {})
        for card in cards:
            out = self.send("CardRead", {"card": card})
        resolved = [e for e in out if e.type == "CoupResolved"]
        assert resolved, "the coup did not resolve"
        payload = resolved[0].payload
        if payload["stop_card_reached"]:
            self.send("CloseShoe", {})
            self.open_shoe()
        return payload

    def coup(self, bets: list[tuple[str, str, int]], cards: tuple[str, ...] = ()) -> tuple[list[str], str]:
        """One whole coup with ``bets``: (bet ids, outcome)."""
        self.open_betting()
        ids = [self.bet(a, s, k) for a, s, k in bets]
        return ids, str(self.deal(cards)["outcome"])

    def foresee(self) -> str:
        """The next coup's outcome, read from the dealer's own shoe (what a leaked seed would give)."""
        assert isinstance(self.state.inner, DealerState)
        table = self.state.inner.tables[self.table_id]
        assert table.shoe is not None
        return resolve(table.config, table.shoe.order[table.shoe.position :]).outcome


def run_monitor(events: list[Envelope]) -> list[Envelope]:
    """Every alert the monitor raises over ``events``, through the real step (sealing, chaining)."""
    monitor = Monitor()
    state = initial_state(monitor)
    out: list[Envelope] = []
    for env in events:
        out += step(monitor, state, env)
    for a in out:
        if a.topic == topics.MONITOR_ALERTS:
            # every alert keeps the event contract, strictly, and is exactly its model's dump
            assert dump_payload(payload_as(a, AnomalyDetected)) == a.payload
            assert Detector(a.payload["detector"]).value == a.payload["detector"]
    return out


def retamper(env: Envelope, **changes: Any) -> Envelope:
    """``env`` with payload fields changed and its hash redone (a forger who knows the hash rule)."""
    body = env.body() | {"payload": {**env.payload, **changes}}
    return Envelope(**body, hash=sha256_hex(canonical(body)))


def normal_bets(rng: random.Random, accounts: int = 12) -> list[tuple[str, str, int]]:
    """A coup's bets as a floor plays them: 2–8 distinct players, one bet each, ordinary stakes."""
    players = rng.sample([f"player:{i:03d}" for i in range(accounts)], k=rng.randint(2, 8))
    spots = ("player", "banker", "banker", "player", "tie")
    return [(a, rng.choice(spots), MIN_MINOR * rng.choice((1, 2, 3, 5, 10, 25))) for a in players]


# --- past posting -----------------------------------------------------------------------------------

Expected = list[tuple[str, str, list[str]]]
"""Per alert, in order: (severity, account, bet ids)."""


def late_after_close(t: TableRun) -> Expected:
    t.open_betting()
    t.bet("A", "player", 5_000)
    t.send("CloseBetting", {})
    late = t.bet("A", "banker", 5_000)
    t.send("DealCoup", {})
    return [("info", "A", [late])]


def aimed_at_earlier_coup(t: TableRun) -> Expected:
    first = t.open_betting()
    t.deal()
    t.open_betting()
    late = t.bet("A", "player", 5_000, coup_id=first)
    t.deal()
    return [("info", "A", [late])]


def repeated(severities: list[str], gap_coups: int) -> Callable[[TableRun], Expected]:
    """Account A bets on the previous coup once per entry of ``severities``, ``gap_coups`` + 2 coups apart."""

    def script(t: TableRun) -> Expected:
        out: Expected = []
        for i, severity in enumerate(severities):
            for j in range(gap_coups if i else 0):  # stakes vary: a human, not a bot
                t.coup([("B", "player", 5_000 + 100 * (i + j))])
            prev = t.open_betting()
            t.deal()
            t.open_betting()
            out.append((severity, "A", [t.bet("A", "banker", 5_000, coup_id=prev)]))
            t.deal()
        return out

    return script


def ladder(attempts: int) -> list[str]:
    """The severities of ``attempts`` late bets in one window: info, then warning and critical from the
    derived thresholds (:data:`PAST_POSTING_WARNING_AT`, :data:`PAST_POSTING_CRITICAL_AT`)."""
    return [
        "critical" if n >= PAST_POSTING_CRITICAL_AT else "warning" if n >= PAST_POSTING_WARNING_AT else "info"
        for n in range(1, attempts + 1)
    ]


def two_accounts_late(t: TableRun) -> Expected:
    prev = t.open_betting()
    t.deal()
    t.open_betting()
    a = t.bet("A", "player", 5_000, coup_id=prev)
    b = t.bet("B", "player", 5_000, coup_id=prev)
    t.deal()
    return [("info", "A", [a]), ("info", "B", [b])]


def in_window(t: TableRun) -> Expected:
    t.coup([("A", "player", 5_000), ("B", "banker", 5_000)])
    return []


def over_limit(t: TableRun) -> Expected:
    t.coup([("A", "player", MAX_MINOR + 1)])
    return []


@pytest.mark.parametrize(
    "script",
    [
        late_after_close,
        aimed_at_earlier_coup,
        repeated(ladder(PAST_POSTING_WARNING_AT), 0),
        repeated(ladder(PAST_POSTING_CRITICAL_AT), 0),
        repeated(ladder(PAST_POSTING_CRITICAL_AT + 1), 1),
        repeated(["info", "info"], PAST_POSTING_WINDOW_COUPS - 1),
        two_accounts_late,
        in_window,
        over_limit,
    ],
    ids=[
        "betting_closed", "wrong_coup", "twice_warning", "thrice_critical", "four_in_window",
        "twice_far_apart", "two_accounts_apart", "bet_in_window", "over_limit_is_not_late",
    ],
)  # fmt: skip
def test_past_posting(script: Callable[[TableRun], Expected]) -> None:
    """A bet refused as betting_closed or wrong_coup is raised with its bet id; repeated attempts by one
    account within the window escalate info → warning → critical; bets in the window raise nothing."""
    t = TableRun()
    expected = script(t)
    alerts = run_monitor(t.events)
    got = [(a.payload["severity"], a.payload["subject"]["account_id"], a.payload["subject"]["bet_ids"])
           for a in alerts]  # fmt: skip
    assert [a.payload["detector"] for a in alerts] == ["past_posting"] * len(expected)
    assert got == expected
    refused = {e.payload["bet_id"]: e.event_id for e in t.events if e.type == "BetRefused"}
    for a in alerts:
        assert a.payload["subject"]["event_ids"] == [refused[a.payload["subject"]["bet_ids"][0]]]


# --- shoe tampering ---------------------------------------------------------------------------------

NATURAL_PLAYER = ("4S", "2H", "5D", "3C")  # player 4+5 = 9, banker 2+3 = 5: a natural, four cards


def unasked_reads(t: TableRun) -> tuple[list[tuple[str, str]], list[list[str]]]:
    t.coup([("A", "player", 5_000)], NATURAL_PLAYER)
    out: list[list[str]] = []
    for card in ("9S", "8H"):
        (refused,) = t.send("CardRead", {"card": card})
        assert refused.payload["reason"] == "card_not_due"
        out.append([refused.event_id, refused.payload["command_id"]])
    return [("card_not_due", "warning"), ("card_not_due", "critical")], out


def duplicate_card_one_deck(t: TableRun) -> tuple[list[tuple[str, str]], list[list[str]]]:
    t.coup([], ("4C", "2D", "5H", "3S"))  # player 4+5 = 9: a natural
    # the dealer now refuses a second 4S from a one-deck shoe (card_not_in_shoe); a forger who rewrites
    # the dealt card afterwards is what the monitor still has to catch
    t.open_betting()
    t.send("CloseBetting", {})
    t.send("DealCoup", {})
    (refused,) = t.send("CardRead", {"card": "4C"})
    assert refused.payload["reason"] == "card_not_in_shoe"
    for card in ("6S", "KH", "KD", "8C"):  # banker 8, a natural
        t.send("CardRead", {"card": card})
    i = next(i for i, e in enumerate(t.events) if e.type == "CardDealt" and e.payload["card"] == "6S")
    t.events[i] = second = retamper(t.events[i], card="4C")
    return [("card_overcount", "critical")], [[second.event_id]]


def position_repeats(t: TableRun) -> tuple[list[tuple[str, str]], list[list[str]]]:
    t.coup([])
    dealt = [i for i, e in enumerate(t.events) if e.type == "CardDealt"]
    first, second = t.events[dealt[0]], t.events[dealt[1]]
    t.events[dealt[1]] = forged = retamper(second, shoe_position=first.payload["shoe_position"])
    return [("shoe_position", "critical")], [[first.event_id, forged.event_id]]


def position_backwards(t: TableRun) -> tuple[list[tuple[str, str]], list[list[str]]]:
    t.coup([])
    t.coup([])
    dealt = [i for i, e in enumerate(t.events) if e.type == "CardDealt"]
    before, third = t.events[dealt[1]], t.events[dealt[2]]
    t.events[dealt[2]] = forged = retamper(third, shoe_position=t.events[dealt[0]].payload["shoe_position"])
    return [("shoe_position", "critical")], [[before.event_id, forged.event_id]]


def honest_rng_shoe(t: TableRun) -> tuple[list[tuple[str, str]], list[list[str]]]:
    for _ in range(30):
        t.coup([("A", "player", 5_000)])
    return [], []


def honest_smart_shoe(t: TableRun) -> tuple[list[tuple[str, str]], list[list[str]]]:
    t.coup([("A", "banker", 5_000)], NATURAL_PLAYER)
    t.coup([("A", "banker", 5_000)], ("4H", "KH", "KD", "8C"))
    return [], []


@pytest.mark.parametrize(
    ("script", "smart", "decks"),
    [
        (unasked_reads, True, 8),
        (duplicate_card_one_deck, True, 1),
        (position_repeats, False, 8),
        (position_backwards, False, 8),
        (honest_rng_shoe, False, 8),
        (honest_smart_shoe, True, 1),
    ],
    ids=["card_not_due", "card_overcount", "position_repeats", "position_backwards", "honest_rng",
         "honest_smart"],
)  # fmt: skip
def test_shoe_tampering(script: Callable[[TableRun], Any], smart: bool, decks: int) -> None:
    """An unasked card read, a card dealt more often than the shoe's decks hold, and a shoe position that
    repeats or goes back are raised with the event ids that prove them; honest shoes raise nothing."""
    t = TableRun(smart=smart, decks=decks)
    expected, ids = script(t)
    alerts = run_monitor(t.events)
    assert [(a.payload["detector"], a.payload["severity"]) for a in alerts] == expected
    assert [a.payload["subject"]["event_ids"] for a in alerts] == ids
    assert all(a.payload["category"] == "shoe_tampering" for a in alerts)


# --- win streak and net-result outlier --------------------------------------------------------------


def oracle_session(coups: int, lose_every: int | None, stake: int = 10_000) -> tuple[TableRun, list[str]]:
    """An account that reads the shoe bets the coming winner (or, every ``lose_every``-th coup, the
    loser); the ids of its decided bets (a tie pushes its player bet) in order."""
    t = TableRun(seed=5)
    decided: list[str] = []
    for i in range(coups):
        outcome = t.foresee()
        side = outcome if outcome != "tie" else "player"
        if lose_every and (i + 1) % lose_every == 0:
            side = {"player": "banker", "banker": "player"}[side]
        (bet, _), got = t.coup([("oracle", side, stake), ("floor", "tie", MIN_MINOR)])
        assert got == outcome
        if outcome != "tie":
            decided.append(bet)
    return t, decided


def test_streak_length_follows_from_the_probability() -> None:
    """The streak length is the shortest run whose chance under the bound is below 1 in 10,000."""
    p, n = WIN_PROBABILITY_MAX, WIN_STREAK_LENGTH
    assert p**n < STREAK_PROBABILITY_MAX <= p ** (n - 1)


@pytest.mark.parametrize(
    ("variant", "decks"),
    [(v, d) for v in sorted(STATISTICAL_VARIANTS) for d in get_variant(v).allowed_decks],
)
def test_win_probability_bound_holds(variant: str, decks: int) -> None:
    """Neither even-money side of a statistically tested variant wins more than the bound of the coups
    it does not push (exact enumeration of the shoe)."""
    enum = enumerate_coups(variant, decks)
    for spot in EVEN_MONEY_SPOTS:
        counts = grade_counts(enum, spot)
        wins = sum(n for g, n in counts.items() if g.result == "win")
        losses = sum(n for g, n in counts.items() if g.result == "lose")
        assert wins and losses
        assert Fraction(wins, wins + losses) < WIN_PROBABILITY_MAX, (
            spot,
            float(Fraction(wins, wins + losses)),
        )


@pytest.mark.parametrize(
    ("coups", "lose_every", "info"),
    [(WIN_STREAK_LENGTH + 14, None, "win_streak"), (140, 4, "net_result_outlier")],
    ids=["always_wins", "wins_three_in_four"],
)
def test_statistical_outliers(coups: int, lose_every: int | None, info: str) -> None:
    """An account that always wins, or wins three in four, is flagged by its stake-weighted CUSUMs
    (``account_edge``, a warning naming the bets and coups behind it); the streak and the net-result
    window are kept as ``info`` (issue #29: they spend no false-alarm budget)."""
    t, decided = oracle_session(coups, lose_every)
    alerts = [a.payload for a in run_monitor(t.events)]
    streaks = [a for a in alerts if a["detector"] == info]
    assert streaks and all(a["severity"] == "info" for a in streaks)
    if info == "win_streak":
        assert streaks[0]["subject"]["bet_ids"] == decided[:WIN_STREAK_LENGTH]
    else:
        bet_ids = streaks[0]["subject"]["bet_ids"]
        assert OUTLIER_MIN_BETS <= len(bet_ids) <= OUTLIER_WINDOW_BETS
        assert bet_ids == decided[: len(bet_ids)]
        assert float(streaks[0]["observed"]["z"]) > float(OUTLIER_Z)
    edges = [a for a in alerts if a["detector"] == "account_edge"]
    assert edges, [a["detector"] for a in alerts]
    found = edges[0]
    assert found["severity"] == "warning" and found["account_ids"] == ["oracle"]
    subject = found["subject"]
    assert subject["account_id"] == "oracle"
    assert 0 < len(subject["bet_ids"]) <= EVIDENCE_MAX <= subject["evidence_count"] or (
        len(subject["bet_ids"]) == subject["evidence_count"]
    )
    assert subject["bet_ids"] == [b for b in decided if b in set(subject["bet_ids"])]
    assert len(subject["coup_ids"]) == len(subject["bet_ids"])
    resolved = {e.payload["coup_id"]: e.event_id for e in t.events if e.type == "CoupResolved"}
    assert subject["event_ids"] == [resolved[subject["coup_id"]]]
    assert subject["coup_ids"][-1] == subject["coup_id"]


def _longest_run(t: TableRun) -> int:
    """The longest run of decided even-money wins of any one account, read from the dealer's events."""
    spot_of: dict[str, tuple[str, str]] = {}
    runs: dict[str, int] = {}
    best = 0
    for e in t.events:
        p = e.payload
        if e.type == "BetAccepted":
            spot_of[p["bet_id"]] = (p["account_id"], p["spot"])
        elif e.type == "CoupResolved" and p["outcome"] != "tie":
            for bet_id in p["bet_ids"]:
                account, spot = spot_of[bet_id]
                if spot in ("player", "banker"):
                    runs[account] = runs.get(account, 0) + 1 if spot == p["outcome"] else 0
                    best = max(best, runs[account])
    return best


def test_normal_session_raises_nothing() -> None:
    """A seeded session of 300 punto banco coups of ordinary play raises no alert at all."""
    rng = random.Random(20261122)
    t = TableRun(seed=11)
    for _ in range(300):
        t.coup(normal_bets(rng))
    assert sum(1 for e in t.events if e.type == "CoupResolved") == 300
    assert sum(1 for e in t.events if e.type == "ShoeOpened") >= 4
    assert 0 < _longest_run(t) < WIN_STREAK_LENGTH
    assert run_monitor(t.events) == []


# --- bet patterns -----------------------------------------------------------------------------------


def hedge(t: TableRun) -> list[tuple[str, list[str]]]:
    (a, b, _), _ = t.coup([("A", "player", 5_000), ("A", "banker", 5_000), ("B", "player", 5_000)])
    return [("hedged_bets", [a, b])]


def hedge_thrice(t: TableRun) -> list[tuple[str, list[str]]]:
    (a, b, _), _ = t.coup([("A", "banker", 5_000), ("A", "player", 7_000), ("A", "banker", 5_000)])
    return [("hedged_bets", [a, b])]


def player_and_tie(t: TableRun) -> list[tuple[str, list[str]]]:
    t.coup([("A", "player", 5_000), ("A", "tie", 5_000)])
    return []


def two_accounts_opposite(t: TableRun) -> list[tuple[str, list[str]]]:
    t.coup([("A", "player", 5_000), ("B", "banker", 5_000)])
    return []


def under_limit(
    stake: int, times: int, flagged: bool, gap: int = 0
) -> Callable[[TableRun], list[tuple[str, list[str]]]]:
    """Account A stakes ``stake`` on banker ``times`` times, ``gap`` + 1 coups apart."""

    def script(t: TableRun) -> list[tuple[str, list[str]]]:
        ids = []
        for i in range(times):
            for _ in range(gap if i else 0):
                t.coup([("B", "player", 5_000)])
            (bet,), _ = t.coup([("A", "banker", stake)])
            ids.append(bet)
        return [("structuring", ids)] if flagged else []

    return script


@pytest.mark.parametrize(
    "script",
    [
        hedge,
        hedge_thrice,
        player_and_tie,
        two_accounts_opposite,
        under_limit(MAX_MINOR - 1_000, 3, flagged=True),
        under_limit(MAX_MINOR * 95 // 100, 3, flagged=True),
        under_limit(MAX_MINOR, 3, flagged=False),
        under_limit(MAX_MINOR * 94 // 100, 3, flagged=False),
        under_limit(MAX_MINOR - 1_000, 2, flagged=False),
        under_limit(MAX_MINOR - 1_000, 3, flagged=False, gap=STRUCTURING_WINDOW_COUPS // 2),
        under_limit(MAX_MINOR - 1_000, 3, flagged=True, gap=STRUCTURING_WINDOW_COUPS // 2 - 2),
    ],
    ids=[
        "player_and_banker", "hedged_once_per_coup", "player_and_tie", "opposite_sides_two_accounts",
        "three_just_under", "three_at_band_edge", "three_at_max", "three_below_band", "two_just_under",
        "three_spread_out", "three_within_window",
    ],
)  # fmt: skip
def test_bet_patterns(script: Callable[[TableRun], list[tuple[str, list[str]]]]) -> None:
    """One account on player and banker in one coup is raised once with both bet ids; three stakes just
    under the maximum within the window are raised as structuring; at or well below the limit, twice,
    or spread out, nothing is raised."""
    t = TableRun()
    expected = script(t)
    alerts = run_monitor(t.events)
    assert [(a.payload["detector"], a.payload["subject"]["bet_ids"]) for a in alerts] == expected
    assert all(a.payload["subject"]["account_id"] == "A" for a in alerts)
    assert all(a.payload["category"] == "bet_pattern" for a in alerts)


# --- the envelope, unreadable records, never raising, determinism -----------------------------------


def test_alerts_are_a_chained_stream_per_table() -> None:
    """Alerts go to casino.monitor.alerts keyed by table, numbered 0, 1, 2, … and hash-linked."""
    t = TableRun()
    for _ in range(3):
        repeated(["info"], 0)(t)
    alerts = run_monitor(t.events)
    assert len(alerts) == 3
    assert {(a.topic, a.key, a.type, a.producer) for a in alerts} == {
        (topics.MONITOR_ALERTS, "T1", "AnomalyDetected", "monitor")
    }
    assert [a.seq for a in alerts] == [0, 1, 2]
    assert [a.prev_hash for a in alerts] == [None, alerts[0].hash, alerts[1].hash]
    assert topics.MONITOR_ALERTS in topics.EVENT_STREAMS


def test_unreadable_event_is_raised_and_play_goes_on() -> None:
    """A table event the monitor cannot read becomes an unreadable_event alert naming it, the state is
    unchanged, and later events are still watched (through step, the edge dead-letters it first)."""
    t = TableRun()
    late_after_close(t)
    i = next(i for i, e in enumerate(t.events) if e.type == "BetAccepted")
    broken = retamper(t.events[i], stake_minor="lots")
    monitor = Monitor()
    state, drafts = monitor.initial(), []
    for env in [*t.events[:i], broken, *t.events[i + 1 :]]:
        before = state
        state, out = monitor.handle(state, env)
        assert env is not broken or state is before
        drafts += out
    assert [d.payload["detector"] for d in drafts] == ["unreadable_event", "past_posting"]
    assert drafts[0].payload["subject"]["event_ids"] == [broken.event_id]
    through_step = run_monitor([*t.events[:i], broken, *t.events[i + 1 :]])
    assert [(a.topic, a.payload.get("detector")) for a in through_step] == [
        (topics.DEADLETTER, None),
        (topics.MONITOR_ALERTS, "past_posting"),
    ]


@cache
def sample_events() -> tuple[Envelope, ...]:
    """Genuine events of every kind the monitor reads: a smart shoe with refusals, and an RNG shoe."""
    smart = TableRun(table_id="TS", smart=True, decks=1)
    unasked_reads(smart)
    duplicate_card_one_deck(smart)
    rng = TableRun(table_id="TR")
    late_after_close(rng)
    hedge(rng)
    for _ in range(6):
        rng.coup([("A", "banker", MAX_MINOR - 1)])
    return (*smart.events, *rng.events)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


@st.composite
def mangled_streams(draw: st.DrawFn) -> list[Envelope]:
    """Genuine events picked, repeated and reordered, some with a payload field replaced or removed."""
    pool = sample_events()
    out: list[Envelope] = []
    for i in draw(st.lists(st.integers(0, len(pool) - 1), max_size=40)):
        env = pool[i]
        action = draw(st.sampled_from(("keep", "keep", "replace", "drop")))
        if action != "keep" and env.payload:
            name = draw(st.sampled_from(sorted(env.payload)))
            payload = dict(env.payload)
            if action == "replace":
                payload[name] = draw(JSON)
            else:
                del payload[name]
            body = env.body() | {"payload": payload, "event_id": f"{env.event_id}/{len(out)}"}
            env = Envelope(**body, hash=sha256_hex(canonical(body)))
        out.append(env)
    return out


@settings(max_examples=60, deadline=None)
@given(mangled_streams())
def test_never_raises_and_is_deterministic(stream: list[Envelope]) -> None:
    """On any stream of genuine or mangled table events the monitor never raises, never writes a float,
    and the same input twice gives byte-identical alerts."""
    monitor = Monitor()
    state = monitor.initial()
    for env in stream:
        state, drafts = monitor.handle(state, env)
        for d in drafts:
            assert d.topic == topics.MONITOR_ALERTS and d.key == env.key
    first, second = run_monitor(stream), run_monitor(stream)
    assert [a.to_json() for a in first] == [a.to_json() for a in second]
    for a in first:
        assert not _has_float(a.payload)


def _has_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(_has_float(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_float(v) for v in value)
    return False


def test_reported_z_matches_the_window() -> None:
    """The reported z is the window's excess over the bound's expectation in units of sqrt(Σ stake²)."""
    t, _ = oracle_session(140, 4, stake=10_000)
    (found,) = [a.payload for a in run_monitor(t.events) if a.payload["detector"] == "net_result_outlier"]
    bets = len(found["subject"]["bet_ids"])
    expected = float(2 * WIN_PROBABILITY_MAX - 1) * found["observed"]["staked_minor"]
    z = (found["observed"]["net_minor"] - expected) / math.sqrt(bets * 10_000**2)
    assert found["observed"]["z"] == f"{z:.2f}"


def test_demo_session_of_every_variant_raises_only_its_late_bets() -> None:
    """Over the simulator's session at a table of every registered variant, the monitor reads every
    event and raises exactly one past_posting alert per late bet the dealer refused, and nothing else."""
    bus = MemBus()
    Session(bus, seed=7).run([t for t in DEFAULT_TABLES if t.variant in VARIANTS], 20)
    table_events = [e for e in bus.log if e.topic == topics.TABLE_EVENTS]
    assert {e.payload["variant"] for e in table_events if e.type == "TableOpened"} == set(VARIANTS)
    late = sorted(
        e.payload["bet_id"]
        for e in table_events
        if e.type == "BetRefused" and e.payload["reason"] in ("betting_closed", "wrong_coup")
    )
    alerts = run_monitor(table_events)
    assert late and {a.payload["detector"] for a in alerts} == {"past_posting"}
    assert sorted(a.payload["subject"]["bet_ids"][0] for a in alerts) == late


# --- issue #29: habits, linked pairs, last-second bets ------------------------------------------------


def _play(t: TableRun, coups: int, bets: Callable[[int], list[tuple[str, str, int, int]]]) -> None:
    """``coups`` coups whose bets (account, spot, stake, offset in ms) ``bets(i)`` gives."""
    for i in range(coups):
        t.open_betting()
        for account, spot, stake, offset in bets(i):
            t.bet(account, spot, stake, offset_ms=offset)
        t.deal()


def test_two_loyal_flat_bettors_on_opposite_sides_raise_nothing() -> None:
    """One always on banker, one always on player, both at the minimum, 400 coups: their own habits
    explain every coup (the old linked_hedge fired every ~25 coups here, issue #29)."""
    t = TableRun(seed=3)
    _play(t, 400, lambda i: [("loyal-b", "banker", MIN_MINOR, 0), ("loyal-p", "player", MIN_MINOR, 0)])
    assert [a.payload["detector"] for a in run_monitor(t.events)] == []


def test_a_linked_pair_switching_sides_together_is_flagged_with_both_accounts() -> None:
    """Two accounts on opposite sides every coup, the side drawn each coup, stakes 8 % apart: their
    habits say "opposite" half the time, they do it always; the alert names both and lists the bets."""
    rng = random.Random(29)
    t = TableRun(seed=4)

    def bets(i: int) -> list[tuple[str, str, int, int]]:
        side = rng.choice(("banker", "player"))
        other = "player" if side == "banker" else "banker"
        return [
            ("dump-a", side, 10_000, 0),
            ("dump-b", other, 10_800, 0),
            ("floor", rng.choice(("banker", "player")), 2_000, 0),
        ]

    _play(t, 120, bets)
    alerts = [a.payload for a in run_monitor(t.events)]
    linked = [a for a in alerts if a["detector"] == "linked_hedge"]
    assert linked and all(a["account_ids"] == ["dump-a", "dump-b"] for a in linked), alerts
    accepted = {e.payload["bet_id"]: e.payload["account_id"] for e in t.events if e.type == "BetAccepted"}
    bets_named = linked[0]["subject"]["bet_ids"]
    assert {accepted[b] for b in bets_named} == {"dump-a", "dump-b"}
    assert len(bets_named) == 2 * len(linked[0]["subject"]["coup_ids"])
    assert {a["detector"] for a in alerts} <= {"linked_hedge"}


@pytest.mark.parametrize(("offset_ms", "flagged"), [(4_700, True), (4_100, True), (3_500, False), (0, False)])
def test_bets_in_the_last_second_are_flagged_from_the_close(offset_ms: int, flagged: bool) -> None:
    """An account whose every bet comes in the last second before the close (its bet's time against the
    BettingClosed's) is flagged within a few coups; bets seconds before are not."""
    t = TableRun(seed=6, jitter=False)
    _play(t, 30, lambda i: [("early", "player", 5_000, 0), ("late", "banker", 5_000, offset_ms)])
    alerts = [a.payload for a in run_monitor(t.events)]
    late = [a for a in alerts if a["detector"] == "late_bet"]
    assert bool(late) == flagged, alerts
    if flagged:
        assert late[0]["account_ids"] == ["late"] and late[0]["observed"]["lead_ms"] < 1_000
        assert late[0]["subject"]["evidence_count"] == len(late[0]["subject"]["bet_ids"]) <= 10
    assert all(a["subject"]["account_id"] == "late" for a in late)  # (to the second, "early" is a bot)
