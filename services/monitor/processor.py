"""The fraud and anomaly monitor: pure detectors over a table's event stream (DESIGN §4).

Input: ``casino.table.events`` (keyed by table; DESIGN §1.5: one ordered input per stateful
processor) and ``casino.deadletter`` (stateless: one alert per record refused at the input).
Output: ``AnomalyDetected`` on ``casino.monitor.alerts``, keyed by the same table_id and
chained. Every alert's payload (:class:`~services.core.events.AnomalyDetected`) holds ``detector`` (a
stable :class:`Detector` code), ``category`` (the detector's family), ``severity``, ``table_id``,
``subject`` (the ids concerned: ``event_ids``, ``bet_ids``, ``account_id``, ``coup_id``, ``shoe_id``
where they apply), ``observed``, ``threshold`` and ``detail``. No float is written: probabilities are
exact fractions as strings, and the one reported z value is a string.

Detectors (each a small pure function below; thresholds are named constants with their reasons):

* **past posting** — a bet the dealer refused as ``betting_closed`` or ``wrong_coup``: a stake sent
  after the window closed or aimed at another coup. Repeated attempts by one account within
  :data:`PAST_POSTING_WINDOW_COUPS` coups escalate from ``info`` to ``warning`` to ``critical``.
* **shoe tampering** — a card read the rules did not ask for (``CommandRefused`` with
  ``card_not_due``); a card dealt more often in one shoe than the shoe's decks hold; a ``CardDealt``
  whose ``shoe_position`` repeats or goes backwards within its shoe.
* **win streak / statistical outlier** — each accepted even-money bet (:data:`EVEN_MONEY_SPOTS`) is
  graded by the variant's own ``grade()`` when its coup resolves. A run of
  :data:`WIN_STREAK_LENGTH` decided wins (computed from :data:`WIN_PROBABILITY_MAX` and
  :data:`STREAK_PROBABILITY_MAX`), and a net result over the last :data:`OUTLIER_WINDOW_BETS` decided
  bets more than :data:`OUTLIER_Z` standard deviations above the most the game allows, are flagged.
* **refused record** (DESIGN §9) — a record refused at the input (``unauthenticated``,
  ``not_permitted``, ``key_mismatch``: a forgery or a writer beyond its rights), read from its dead
  letter. Several processors read some topics and each dead-letters the record, so only the dead
  letter of the topic's primary consumer (:data:`services.core.trust.PRIMARY_CONSUMER`) raises one.
  The alert is keyed by the refused record's topic (the dead letter's own key), so its chain is fed by
  one ordered input and never interleaves with a table's alerts; ``subject`` names the refused record
  (id, type, key) and its dead letter.
* **bet pattern** — one account on both sides (``player`` and ``banker``) of one coup (a hedge that
  turns comps or laundered cash over at almost no risk); and stakes just under a spot's maximum,
  repeatedly (structuring: keeping each bet below the limit that would draw attention).

Interpretations (written here because the brief leaves them open):

* Everything about an account is counted **per table**. The monitor's only ordered input is one
  table's stream; counting across tables would make an alert depend on how partitions interleave,
  which breaks the determinism contract.
* Pushes neither extend nor break a streak and are left out of the net-result window: a push moves no
  money and carries no evidence. Only the variants whose even-money sides follow punto banco's
  forced tableau (:data:`STATISTICAL_VARIANTS`) are tested statistically: there the chance of either
  side winning a decided coup is known and bounded; where players choose (chemin de fer, baccarat
  banque) or the rules differ (the seed-001/000 games) no honest bound exists.
* An alert consumes its evidence: a streak or outlier window is cleared when it fires, and the
  near-limit bets of a structuring alert are forgotten, so each alert rests on bets no earlier alert
  of the same detector used.
* A record the monitor cannot read (a field missing or of the wrong type) is itself an anomaly
  (``unreadable_event``); the monitor never raises and never stops the stream. Through
  :func:`services.core.processor.step` a payload that breaks the event contract is dead-lettered at
  the edge first; what reaches ``unreadable_event`` is valid by the contract yet unusable here (a
  configuration the variant registry refuses, say).

State is bounded: one open coup and one shoe per table, fixed-length windows per account, at most
:data:`MAX_ACCOUNTS_PER_TABLE` accounts per table (the least recently seen is forgotten first).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from fractions import Fraction
from typing import Any, Final

from services.core import topics
from services.core.baccarat import CoupResult, TableConfig, Variant, Wager, get_variant
from services.core.baccarat.engine import result_from_dict
from services.core.envelope import Draft, Envelope
from services.core.errors import DomainError, Reason
from services.core.events import Severity
from services.core.money import BPS, settle
from services.core.processor import Processor
from services.core.trust import PRIMARY_CONSUMER, REFUSALS


class Detector(StrEnum):
    """Stable codes of what the monitor detects (part of the event contract: add, never rename)."""

    PAST_POSTING = "past_posting"
    CARD_NOT_DUE = "card_not_due"
    CARD_OVERCOUNT = "card_overcount"
    SHOE_POSITION = "shoe_position"
    WIN_STREAK = "win_streak"
    NET_RESULT_OUTLIER = "net_result_outlier"
    HEDGED_BETS = "hedged_bets"
    STRUCTURING = "structuring"
    UNREADABLE_EVENT = "unreadable_event"
    INTERNAL_ERROR = "internal_error"
    REFUSED_RECORD = "refused_record"


CATEGORY: Final[Mapping[Detector, str]] = {
    Detector.PAST_POSTING: "past_posting",
    Detector.CARD_NOT_DUE: "shoe_tampering",
    Detector.CARD_OVERCOUNT: "shoe_tampering",
    Detector.SHOE_POSITION: "shoe_tampering",
    Detector.WIN_STREAK: "statistical_outlier",
    Detector.NET_RESULT_OUTLIER: "statistical_outlier",
    Detector.HEDGED_BETS: "bet_pattern",
    Detector.STRUCTURING: "bet_pattern",
    Detector.UNREADABLE_EVENT: "integrity",
    Detector.INTERNAL_ERROR: "integrity",
    Detector.REFUSED_RECORD: "trust",
}
"""The family of each detector, for the back office to group alerts."""

# --- thresholds -----------------------------------------------------------------------------------

LATE_REASONS: Final = frozenset({Reason.BETTING_CLOSED.value, Reason.WRONG_COUP.value})
"""Refusal reasons that mean a bet arrived after its window: the signature of past posting."""

PAST_POSTING_WINDOW_COUPS: Final = 50
"""Late attempts by one account count together when they fall within this many coups of the table
(about half an 8-deck shoe). One late bet is often terminal latency; several in half a shoe are not."""

PAST_POSTING_WARNING_AT: Final = 2
"""Late attempts within the window from which an alert is a ``warning`` (the first is ``info``)."""

PAST_POSTING_CRITICAL_AT: Final = 3
"""Late attempts within the window from which an alert is ``critical``: a pattern, not an accident."""

CARD_NOT_DUE_CRITICAL_AT: Final = 2
"""Unasked card reads in one shoe from which the alert is ``critical``. One may be a dealer's slip
(a card pulled early); two in one shoe point at a shoe that feeds cards of its own accord."""

EVEN_MONEY_SPOTS: Final = ("player", "banker")
"""The spots whose streaks and net results are tested: the even-money sides of the coup."""

STATISTICAL_VARIANTS: Final = frozenset({"punto_banco", "ez_baccarat", "super6"})
"""Variants played with punto banco's forced tableau, where the bound below is known to hold."""

WIN_PROBABILITY_MAX: Final = Fraction(51, 100)
"""An upper bound on the chance that an even-money bet wins a coup it does not push. The best such
bet, banker in punto banco or Super 6, wins 45.86 % of coups and ties 9.52 % with 8 decks (Wizard of
Odds), so 50.68 % of the coups it does not push; exact enumeration (:mod:`services.core.baccarat.odds`)
gives at most 50.71 % (1 deck) over every deck count of :data:`STATISTICAL_VARIANTS`. The bound is
rounded up so that every test below errs towards silence."""

STREAK_PROBABILITY_MAX: Final = Fraction(1, 10_000)
"""A win streak is flagged once its probability under :data:`WIN_PROBABILITY_MAX` is below this."""


def streak_length(win_probability: Fraction, probability_max: Fraction) -> int:
    """The shortest run of wins whose probability ``win_probability ** n`` is below ``probability_max``."""
    if not 0 < win_probability < 1 or probability_max <= 0:
        raise ValueError("a probability strictly between 0 and 1 and a positive bound are needed")
    n, run = 1, win_probability
    while run >= probability_max:
        n, run = n + 1, run * win_probability
    return n


WIN_STREAK_LENGTH: Final = streak_length(WIN_PROBABILITY_MAX, STREAK_PROBABILITY_MAX)
"""Consecutive decided even-money wins that raise ``win_streak``: 14, as (51/100)^14 ≈ 8.1e-5 <
1/10 000 ≤ (51/100)^13 ≈ 1.6e-4."""

OUTLIER_WINDOW_BETS: Final = 100
"""The net-result test looks at an account's last this many decided even-money bets at a table."""

OUTLIER_MIN_BETS: Final = 30
"""No net-result verdict on fewer decided bets: below this a lucky run is the streak test's job."""

OUTLIER_Z: Final = Fraction(43, 10)
"""Standard deviations above the game's best expectation that flag a net result. Each bet's net lies
in ``[-stake, +stake]``, so Hoeffding's inequality bounds the chance of exceeding the expectation by
``z·sqrt(Σ stake²)`` by ``exp(-z²/2)`` whatever the stakes: for z = 4.3 that is 9.7e-5 < 1/10 000."""

STRUCTURING_BAND_BPS: Final = 500
"""A stake is "just under" a spot's maximum when below it by at most 5 %: close enough to say the
bettor aims at the limit, far enough from the usual round stakes below it."""

STRUCTURING_MIN_BETS: Final = 3
"""Near-limit bets by one account that make a pattern (two can be a player who likes big bets)."""

STRUCTURING_WINDOW_COUPS: Final = 20
"""Near-limit bets count together within this many coups of the table (a quarter of a shoe)."""

MAX_ACCOUNTS_PER_TABLE: Final = 4096
"""Accounts remembered per table; beyond it the least recently seen (then lowest id) is dropped."""

DETAIL_MAX_CHARS: Final = 300
"""Longest ``detail`` sentence written (an unreadable record's error text is cut to this)."""

# --- state ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Punter:
    """What the monitor remembers of one account at one table.

    ``streak``: bet ids of the current run of decided even-money wins (shorter than the alert
    length). ``window``: ``(bet_id, net_minor, stake_minor)`` of the last decided even-money bets.
    ``late``: coup numbers of late bet attempts. ``near_limit``: ``(coup number, bet_id)`` of stakes
    just under a maximum. ``seen``: the table's coup number when the account last appeared.
    """

    streak: tuple[str, ...] = ()
    window: tuple[tuple[str, int, int], ...] = ()
    late: tuple[int, ...] = ()
    near_limit: tuple[tuple[int, str], ...] = ()
    seen: int = 0


@dataclass(frozen=True, slots=True)
class ShoeWatch:
    """One shoe: copies of each card dealt, the last position and the event that dealt it."""

    shoe_id: str
    decks: int | None
    counts: Mapping[str, int] = field(default_factory=dict)
    last_position: int | None = None
    last_event_id: str | None = None
    not_due: int = 0


@dataclass(frozen=True, slots=True)
class CoupWatch:
    """The table's open coup: its accepted bets in order, and the accounts already flagged as hedged."""

    coup_id: str
    number: int
    wagers: tuple[Wager, ...] = ()
    hedged: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class TableWatch:
    """What the monitor knows of one table. ``config`` is ``None`` until a readable ``TableOpened``."""

    table_id: str
    config: TableConfig | None = None
    max_minor: Mapping[str, int] = field(default_factory=dict)
    coups: int = 0
    coup: CoupWatch | None = None
    shoe: ShoeWatch | None = None
    punters: Mapping[str, Punter] = field(default_factory=dict)

    def punter(self, account_id: str) -> Punter:
        """The account's record at this table (empty when new)."""
        return self.punters.get(account_id) or Punter()

    def with_punter(self, account_id: str, punter: Punter) -> TableWatch:
        """A copy with ``punter`` stored (seen now), forgetting the stalest account over the cap."""
        punters = dict(self.punters)
        punters[account_id] = replace(punter, seen=self.coups)
        if len(punters) > MAX_ACCOUNTS_PER_TABLE:
            stalest = min(punters, key=lambda a: (punters[a].seen, a))
            del punters[stalest]
        return replace(self, punters=punters)


@dataclass(frozen=True, slots=True)
class MonitorState:
    """Every table watched, by id."""

    tables: Mapping[str, TableWatch] = field(default_factory=dict)


# --- alerts -----------------------------------------------------------------------------------------


def alert(
    detector: Detector,
    severity: Severity,
    table_id: str,
    *,
    subject: Mapping[str, Any],
    observed: Mapping[str, Any],
    threshold: Mapping[str, Any],
    detail: str,
) -> Draft:
    """An ``AnomalyDetected`` draft on the table's alert stream (``table_id`` is its key)."""
    payload = {
        "detector": detector.value, "category": CATEGORY[detector], "severity": severity.value,
        "table_id": table_id, "subject": dict(subject), "observed": dict(observed),
        "threshold": dict(threshold), "detail": detail[:DETAIL_MAX_CHARS],
    }  # fmt: skip
    return Draft("AnomalyDetected", topics.MONITOR_ALERTS, table_id, payload)


Drafts = list[Draft]

# --- detectors: small pure functions ----------------------------------------------------------------


def past_posting(punter: Punter, coup_number: int, rec: Envelope) -> tuple[Punter, Drafts]:
    """A late bet (refused as ``betting_closed``/``wrong_coup``): one alert, its severity by how many
    late attempts the account made within :data:`PAST_POSTING_WINDOW_COUPS` coups."""
    p = rec.payload
    reason = str(p["reason"])
    if reason not in LATE_REASONS:
        return punter, []
    since = coup_number - PAST_POSTING_WINDOW_COUPS
    late = (*(c for c in punter.late if c > since), coup_number)[-PAST_POSTING_CRITICAL_AT:]
    n = len(late)
    severity = (
        Severity.CRITICAL if n >= PAST_POSTING_CRITICAL_AT
        else Severity.WARNING if n >= PAST_POSTING_WARNING_AT
        else Severity.INFO
    )  # fmt: skip
    account = str(p["account_id"])
    subject = {"event_ids": [rec.event_id], "bet_ids": [str(p["bet_id"])], "account_id": account,
               "coup_id": p.get("coup_id")}  # fmt: skip
    observed = {"reason": reason, "attempts_in_window": n}
    threshold = {"window_coups": PAST_POSTING_WINDOW_COUPS, "warning_at": PAST_POSTING_WARNING_AT,
                 "critical_at": PAST_POSTING_CRITICAL_AT}  # fmt: skip
    detail = f"{account} bet after the window ({reason}); {n} late attempt(s) in the window"
    found = alert(
        Detector.PAST_POSTING, severity, rec.key,
        subject=subject, observed=observed, threshold=threshold, detail=detail,
    )  # fmt: skip
    return replace(punter, late=late), [found]


def card_not_due(shoe: ShoeWatch | None, rec: Envelope) -> tuple[ShoeWatch | None, Drafts]:
    """A card read refused as not due: a card the rules never asked the shoe for."""
    p = rec.payload
    if str(p["reason"]) != Reason.CARD_NOT_DUE.value:
        return shoe, []
    count = (shoe.not_due if shoe else 0) + 1
    severity = Severity.CRITICAL if count >= CARD_NOT_DUE_CRITICAL_AT else Severity.WARNING
    subject = {"event_ids": [rec.event_id, str(p.get("command_id"))],
               "shoe_id": shoe.shoe_id if shoe else None}  # fmt: skip
    detail = f"a {p.get('command')} was refused: {p.get('detail')}"
    out = alert(
        Detector.CARD_NOT_DUE, severity, rec.key, subject=subject, observed={"in_shoe": count},
        threshold={"critical_at": CARD_NOT_DUE_CRITICAL_AT}, detail=detail,
    )  # fmt: skip
    return (replace(shoe, not_due=count) if shoe else None), [out]


def card_overcount(shoe: ShoeWatch, card: str, rec: Envelope) -> tuple[ShoeWatch, Drafts]:
    """Count ``card`` in its shoe; alert when it appears more often than the shoe's decks hold."""
    n = shoe.counts.get(card, 0) + 1
    shoe = replace(shoe, counts={**shoe.counts, card: n})
    if shoe.decks is None or n <= shoe.decks:
        return shoe, []
    subject = {"event_ids": [rec.event_id], "shoe_id": shoe.shoe_id, "coup_id": rec.payload.get("coup_id")}
    detail = f"{card} dealt {n} times from shoe {shoe.shoe_id} of {shoe.decks} deck(s)"
    found = alert(
        Detector.CARD_OVERCOUNT, Severity.CRITICAL, rec.key, subject=subject,
        observed={"card": card, "copies": n}, threshold={"copies_max": shoe.decks}, detail=detail,
    )  # fmt: skip
    return shoe, [found]


def shoe_position(shoe: ShoeWatch, position: int, rec: Envelope) -> tuple[ShoeWatch, Drafts]:
    """Alert when a card's ``shoe_position`` repeats or goes back: a card put back or re-dealt."""
    last, last_id = shoe.last_position, shoe.last_event_id
    shoe = replace(shoe, last_position=position, last_event_id=rec.event_id)
    if last is None or position > last:
        return shoe, []
    kind = "repeats" if position == last else "goes backwards"
    subject = {"event_ids": [last_id, rec.event_id], "shoe_id": shoe.shoe_id,
               "coup_id": rec.payload.get("coup_id")}  # fmt: skip
    detail = f"shoe {shoe.shoe_id}: position {position} {kind} (last was {last})"
    found = alert(
        Detector.SHOE_POSITION, Severity.CRITICAL, rec.key, subject=subject,
        observed={"shoe_position": position}, threshold={"after": last}, detail=detail,
    )  # fmt: skip
    return shoe, [found]


def win_streak(punter: Punter, wager: Wager, won: bool, rec: Envelope) -> tuple[Punter, Drafts]:
    """Extend or break the account's run of decided wins; alert (and restart) at :data:`WIN_STREAK_LENGTH`."""
    if not won:
        return replace(punter, streak=()), []
    streak = (*punter.streak, wager.bet_id)
    if len(streak) < WIN_STREAK_LENGTH:
        return replace(punter, streak=streak), []
    n = len(streak)
    subject = {"event_ids": [rec.event_id], "bet_ids": list(streak), "account_id": wager.account_id,
               "coup_id": rec.payload.get("coup_id")}  # fmt: skip
    threshold = {"consecutive_wins": WIN_STREAK_LENGTH, "win_probability_max": str(WIN_PROBABILITY_MAX),
                 "run_probability_max": str(STREAK_PROBABILITY_MAX)}  # fmt: skip
    detail = f"{wager.account_id} won {n} even-money bets in a row (chance < {STREAK_PROBABILITY_MAX})"
    found = alert(
        Detector.WIN_STREAK, Severity.WARNING, rec.key, subject=subject,
        observed={"consecutive_wins": n}, threshold=threshold, detail=detail,
    )  # fmt: skip
    return replace(punter, streak=()), [found]


def net_outlier(punter: Punter, wager: Wager, net_minor: int, rec: Envelope) -> tuple[Punter, Drafts]:
    """Add one decided bet to the account's window; alert (and clear it) when its net result exceeds
    the best expectation by more than :data:`OUTLIER_Z` standard deviations (see there)."""
    window = (*punter.window, (wager.bet_id, net_minor, wager.stake_minor))[-OUTLIER_WINDOW_BETS:]
    punter = replace(punter, window=window)
    if len(window) < OUTLIER_MIN_BETS:
        return punter, []
    net = sum(n for _, n, _ in window)
    staked = sum(s for _, _, s in window)
    variance = sum(s * s for _, _, s in window)
    expected = (2 * WIN_PROBABILITY_MAX - 1) * staked
    excess = net - expected
    if excess <= 0 or excess * excess <= OUTLIER_Z * OUTLIER_Z * variance:
        return punter, []
    z = f"{float(excess) / math.sqrt(variance):.2f}"
    subject = {"event_ids": [rec.event_id], "bet_ids": [b for b, _, _ in window],
               "account_id": wager.account_id, "coup_id": rec.payload.get("coup_id")}  # fmt: skip
    observed = {"net_minor": net, "bets": len(window), "staked_minor": staked, "z": z}
    threshold = {"z": str(float(OUTLIER_Z)), "expected_net_minor_max": math.ceil(expected),
                 "win_probability_max": str(WIN_PROBABILITY_MAX), "window_bets": OUTLIER_WINDOW_BETS,
                 "min_bets": OUTLIER_MIN_BETS}  # fmt: skip
    detail = f"{wager.account_id} is {net} ahead over {len(window)} bets, z = {z}"
    found = alert(
        Detector.NET_RESULT_OUTLIER, Severity.WARNING, rec.key,
        subject=subject, observed=observed, threshold=threshold, detail=detail,
    )  # fmt: skip
    return replace(punter, window=()), [found]


HEDGE_SIDES: Final = frozenset({"player", "banker"})
"""Opposite sides of one coup: one account on both risks only the commission (and a tie)."""


def hedged_bets(coup: CoupWatch, wager: Wager, rec: Envelope) -> tuple[CoupWatch, Drafts]:
    """Alert (once per account and coup) when an account holds bets on both hedge sides."""
    if wager.spot not in HEDGE_SIDES or wager.account_id in coup.hedged:
        return coup, []
    others = HEDGE_SIDES - {wager.spot}
    other = [w for w in coup.wagers if w.account_id == wager.account_id and w.spot in others]
    if not other:
        return coup, []
    bets = [*other, wager]
    subject = {"event_ids": [rec.event_id], "bet_ids": [w.bet_id for w in bets],
               "account_id": wager.account_id, "coup_id": coup.coup_id}  # fmt: skip
    observed = {w.spot: sum(b.stake_minor for b in bets if b.spot == w.spot) for w in bets}
    detail = f"{wager.account_id} bet on both player and banker in coup {coup.coup_id}"
    found = alert(
        Detector.HEDGED_BETS, Severity.WARNING, rec.key, subject=subject,
        observed={"stakes_minor": observed}, threshold={"sides": sorted(HEDGE_SIDES)}, detail=detail,
    )  # fmt: skip
    return replace(coup, hedged=coup.hedged | {wager.account_id}), [found]


def near_limit(stake_minor: int, max_minor: int) -> bool:
    """``stake_minor`` is below ``max_minor`` by at most :data:`STRUCTURING_BAND_BPS`."""
    return stake_minor < max_minor and stake_minor * BPS >= max_minor * (BPS - STRUCTURING_BAND_BPS)


def structuring(
    punter: Punter, wager: Wager, max_minor: int | None, coup_number: int, rec: Envelope
) -> tuple[Punter, Drafts]:
    """Alert when :data:`STRUCTURING_MIN_BETS` stakes just under the spot's maximum fall within
    :data:`STRUCTURING_WINDOW_COUPS` coups; the bets of an alert are then forgotten."""
    if max_minor is None or not near_limit(wager.stake_minor, max_minor):
        return punter, []
    since = coup_number - STRUCTURING_WINDOW_COUPS
    recent = (*((c, b) for c, b in punter.near_limit if c > since), (coup_number, wager.bet_id))
    recent = recent[-STRUCTURING_MIN_BETS:]
    if len(recent) < STRUCTURING_MIN_BETS:
        return replace(punter, near_limit=recent), []
    subject = {"event_ids": [rec.event_id], "bet_ids": [b for _, b in recent],
               "account_id": wager.account_id, "coup_id": str(rec.payload.get("coup_id"))}  # fmt: skip
    threshold = {"max_minor": max_minor, "band_bps": STRUCTURING_BAND_BPS,
                 "bets": STRUCTURING_MIN_BETS, "window_coups": STRUCTURING_WINDOW_COUPS}  # fmt: skip
    detail = f"{wager.account_id} staked just under the {wager.spot} maximum {len(recent)} times"
    found = alert(
        Detector.STRUCTURING, Severity.WARNING, rec.key, subject=subject,
        observed={"bets": len(recent), "stake_minor": wager.stake_minor}, threshold=threshold, detail=detail,
    )  # fmt: skip
    return replace(punter, near_limit=()), [found]


# --- handlers: fold one event into a table, calling the detectors -----------------------------------

Handler = Callable[[TableWatch, Envelope], tuple[TableWatch, Drafts]]


def on_table_opened(t: TableWatch, rec: Envelope) -> tuple[TableWatch, Drafts]:
    """Remember the configuration (checked against the registry) and each spot's maximum stake."""
    p = rec.payload
    config = TableConfig.from_dict(p["config"])
    get_variant(config.variant)
    limits = {str(s): int(v["max_minor"]) for s, v in dict(p.get("limits") or {}).items()}
    return replace(t, config=config, max_minor=limits), []


def on_shoe_opened(t: TableWatch, rec: Envelope) -> tuple[TableWatch, Drafts]:
    """A new shoe: fresh card counts and positions."""
    p = rec.payload
    decks = p.get("decks", t.config.decks if t.config else None)
    return replace(t, shoe=ShoeWatch(str(p["shoe_id"]), None if decks is None else int(decks))), []


def on_shoe_closed(t: TableWatch, rec: Envelope) -> tuple[TableWatch, Drafts]:
    """The shoe is done: forget it."""
    return replace(t, shoe=None), []


def on_betting_opened(t: TableWatch, rec: Envelope) -> tuple[TableWatch, Drafts]:
    """The next coup: the table's coup clock advances; an unresolved earlier coup is dropped."""
    number = t.coups + 1
    return replace(t, coups=number, coup=CoupWatch(str(rec.payload["coup_id"]), number)), []


def _wager(p: Mapping[str, Any]) -> Wager:
    stake = p["stake_minor"]
    if not isinstance(stake, int) or isinstance(stake, bool):
        raise TypeError(f"stake_minor is an integer, not {stake!r}")
    return Wager(str(p["bet_id"]), str(p["account_id"]), str(p["spot"]), stake)


def on_bet_accepted(t: TableWatch, rec: Envelope) -> tuple[TableWatch, Drafts]:
    """Keep the bet for grading; look for a hedge in the coup and for structuring."""
    wager = _wager(rec.payload)
    coup_id = str(rec.payload["coup_id"])
    coup = t.coup if t.coup is not None and t.coup.coup_id == coup_id else CoupWatch(coup_id, t.coups)
    coup, out = hedged_bets(coup, wager, rec)
    coup = replace(coup, wagers=(*coup.wagers, wager))
    max_minor = t.max_minor.get(wager.spot)
    punter, more = structuring(t.punter(wager.account_id), wager, max_minor, t.coups, rec)
    return replace(t, coup=coup).with_punter(wager.account_id, punter), out + more


def on_bet_refused(t: TableWatch, rec: Envelope) -> tuple[TableWatch, Drafts]:
    """A refused bet: past posting when it came too late."""
    account = str(rec.payload["account_id"])
    punter, out = past_posting(t.punter(account), t.coups, rec)
    return (t.with_punter(account, punter) if out else t), out


def on_command_refused(t: TableWatch, rec: Envelope) -> tuple[TableWatch, Drafts]:
    """A refused command: shoe tampering when it was a card nobody asked for."""
    shoe, out = card_not_due(t.shoe, rec)
    return replace(t, shoe=shoe), out


def on_card_dealt(t: TableWatch, rec: Envelope) -> tuple[TableWatch, Drafts]:
    """Count the card in its shoe and check its position."""
    p = rec.payload
    shoe_id, card, position = str(p["shoe_id"]), str(p["card"]), p["shoe_position"]
    if not isinstance(position, int) or isinstance(position, bool):
        raise TypeError(f"shoe_position is an integer, not {position!r}")
    shoe = t.shoe
    if shoe is None or shoe.shoe_id != shoe_id:
        shoe = ShoeWatch(shoe_id, t.config.decks if t.config else None)
    shoe, out = card_overcount(shoe, card, rec)
    shoe, more = shoe_position(shoe, position, rec)
    return replace(t, shoe=shoe), out + more


def on_coup_resolved(t: TableWatch, rec: Envelope) -> tuple[TableWatch, Drafts]:
    """Grade the coup's even-money bets and run the streak and net-result tests per account."""
    coup_id = str(rec.payload["coup_id"])
    coup, t = t.coup, replace(t, coup=None)
    if coup is None or coup.coup_id != coup_id or t.config is None:
        return t, []
    config = t.config
    if config.variant not in STATISTICAL_VARIANTS:
        return t, []
    variant = get_variant(config.variant)
    result = result_from_dict(rec.payload, variant.hands(config))
    out: Drafts = []
    for wager in coup.wagers:
        if wager.spot not in EVEN_MONEY_SPOTS:
            continue
        net = _net_minor(variant, config, result, wager)
        if net is None:
            continue
        punter, a = win_streak(t.punter(wager.account_id), wager, net > 0, rec)
        punter, b = net_outlier(punter, wager, net, rec)
        t = t.with_punter(wager.account_id, punter)
        out += a + b
    return t, out


def _net_minor(variant: Variant, config: TableConfig, result: CoupResult, wager: Wager) -> int | None:
    """The bet's net result in minor units by the variant's own grade, or ``None`` for a push."""
    grade = variant.grade(result, wager.spot, config)
    if grade.result == "push":
        return None
    s = settle(wager.stake_minor, grade, config.commission_rounding)
    return s.credit_minor - s.stake_minor


HANDLERS: Final[Mapping[str, Handler]] = {
    "TableOpened": on_table_opened,
    "ShoeOpened": on_shoe_opened,
    "ShoeClosed": on_shoe_closed,
    "BettingOpened": on_betting_opened,
    "BetAccepted": on_bet_accepted,
    "BetRefused": on_bet_refused,
    "CommandRefused": on_command_refused,
    "CardDealt": on_card_dealt,
    "CoupResolved": on_coup_resolved,
}
"""The table events the monitor reads; every other type passes without effect."""

DEAD_LETTER_ALERTS: Final[Mapping[str, tuple[Detector, Severity]]] = {
    "internal_error": (Detector.INTERNAL_ERROR, Severity.CRITICAL),
}
"""Dead-letter reasons that raise an alert: a processor failed on a record (a bug or a hole in
validation that a record found) — the record is set aside and play goes on, so someone must look."""


def dead_letter_alert(rec: Envelope, own_name: str) -> Drafts:
    """The alert a dead letter raises, if its reason is one of :data:`DEAD_LETTER_ALERTS`. Keyed by the
    original record's key (the table, or the account) when it is readable, else by the source topic.
    The monitor's own dead letters raise nothing: a failure on a dead letter must not feed itself."""
    p = rec.payload
    found = DEAD_LETTER_ALERTS.get(str(p.get("reason")))
    if found is None or rec.producer == own_name:
        return []
    key = str(p.get("source_topic") or rec.key)
    try:
        original = json.loads(str(p.get("original") or ""))
        if isinstance(original, dict) and isinstance(original.get("key"), str) and original["key"].strip():
            key = original["key"]
    except (ValueError, RecursionError):
        pass
    key = "".join(key.split())[:256] or rec.key
    detector, severity = found
    original_id = p.get("original_event_id")
    subject = {"event_ids": [rec.event_id, *([original_id] if original_id else [])]}
    source = str(p.get("source_topic"))
    observed = {"reason": str(p.get("reason")), "producer": rec.producer, "source_topic": source}
    detail = str(p.get("detail") or "")
    return [alert(detector, severity, key, subject=subject, observed=observed, threshold={}, detail=detail)]


UNREADABLE: Final = (LookupError, TypeError, ValueError, AttributeError, ArithmeticError, DomainError)
"""What reading a malformed payload can raise; it becomes an ``unreadable_event`` alert instead."""


class Monitor(Processor[MonitorState]):
    """The fraud and anomaly monitor (see the module docstring)."""

    name = "monitor"
    inputs = (topics.TABLE_EVENTS, topics.DEADLETTER)

    def initial(self) -> MonitorState:
        """No tables watched."""
        return MonitorState()

    def handle(self, state: MonitorState, record: Envelope) -> tuple[MonitorState, list[Draft]]:
        """Fold one table event through the detectors, or raise the alert a dead letter calls for (a
        record refused at the input, or a processor's internal error)."""
        if record.topic == topics.DEADLETTER:
            return state, refused_record(record) or dead_letter_alert(record, self.name)
        handler = HANDLERS.get(record.type)
        if handler is None:
            return state, []
        table = state.tables.get(record.key) or TableWatch(record.key)
        try:
            table, out = handler(table, record)
        except UNREADABLE as exc:
            subject = {"event_ids": [record.event_id]}
            detail = f"{record.type} could not be read: {type(exc).__name__}: {exc}"
            found = alert(
                Detector.UNREADABLE_EVENT, Severity.WARNING, record.key,
                subject=subject, observed={"type": record.type}, threshold={}, detail=detail,
            )  # fmt: skip
            return state, [found]
        return MonitorState({**state.tables, record.key: table}), out


REFUSED_SEVERITY: Final[Mapping[str, Severity]] = {
    Reason.UNAUTHENTICATED.value: Severity.WARNING,
    Reason.NOT_PERMITTED.value: Severity.CRITICAL,
    Reason.KEY_MISMATCH.value: Severity.CRITICAL,
}
"""An unauthenticated record is a writer without our key (a stranger, a misconfigured system); a
known principal writing beyond its rights is a compromised or rogue insider: critical."""


def refused_record(dead: Envelope) -> Drafts:
    """One ``refused_record`` alert for a record refused at the input by its topic's primary consumer
    (see the module docstring); nothing for any other dead letter."""
    p = dead.payload
    reason, source = str(p.get("reason")), str(p.get("source_topic"))
    primary = PRIMARY_CONSUMER.get(source)
    if reason not in REFUSALS or primary is None or dead.producer != primary.value:
        return []
    subject: dict[str, Any] = {
        "event_ids": [str(p.get("original_event_id"))],
        "dead_letter_id": dead.event_id,
    }
    try:
        original = json.loads(str(p.get("original") or ""))
    except (ValueError, RecursionError):
        original = None
    if isinstance(original, dict):
        subject.update(
            {k: original[k] for k in ("type", "key", "producer") if isinstance(original.get(k), str)}
        )
    return [alert(
        Detector.REFUSED_RECORD, REFUSED_SEVERITY[reason], source,
        subject=subject, observed={"reason": reason}, threshold={},
        detail=f"refused at the input of {source}: {p.get('detail', '')}",
    )]  # fmt: skip
