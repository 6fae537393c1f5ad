"""The fraud and anomaly monitor: pure detectors over a table's event stream (docs/architecture.md).

Input: ``casino.table.events`` (keyed by table; docs/architecture.md: one ordered input per stateful
processor) and ``casino.deadletter`` (stateless: one alert per record refused at the input).
Output: ``AnomalyDetected`` on ``casino.monitor.alerts``, keyed by the same table_id and
chained. Every alert's payload (:class:`~services.core.contract.AnomalyDetected`) holds ``detector`` (a
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
* **refused record** (docs/trust.md) — a record refused at the input (``unauthenticated``,
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

import heapq
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import field
from datetime import datetime
from fractions import Fraction
from typing import Any, ClassVar, Final, NamedTuple, TypeVar

from pydantic import ValidationError

from services.core import topics
from services.core.baccarat import CoupResult, TableConfig, Variant, get_variant
from services.core.baccarat.coup import Coup, coup_opened, result_of, wager_of
from services.core.contract import (
    PAYLOADS,
    AnomalyDetected,
    BetAccepted,
    BetRefused,
    BettingClosed,
    BettingOpened,
    CardDealt,
    CommandRefused,
    CoupResolved,
    DeadLetter,
    Payload,
    ShoeClosed,
    ShoeOpened,
    TableOpened,
    read_payload,
    to_draft,
)
from services.core.envelope import Draft, Envelope
from services.core.errors import DomainError, Reason
from services.core.ledger import BPS, Wager, settle
from services.core.processor import Event, Reactor
from services.core.reasons import CATEGORY, Detector, Severity
from services.core.trust import PRIMARY_CONSUMER, REFUSALS
from services.core.values import immutable, replace
from services.monitor.sequential import (
    MICRO,
    bet_increments,
    binomial_tail,
    binomial_threshold,
    cusums,
    level,
    mixture_threshold,
    nats,
    run_length,
    run_probability,
    share,
)

# --- thresholds -----------------------------------------------------------------------------------

LATE_REASONS: Final = frozenset({Reason.BETTING_CLOSED.value, Reason.WRONG_COUP.value})
"""Refusal reasons that mean a bet arrived after its window: the signature of past posting."""

PAST_POSTING_WINDOW_COUPS: Final = 50
"""Late attempts by one account count together when they fall within this many coups of the table
(about half an 8-deck shoe). One late bet is often terminal latency; several in half a shoe are not."""

PAST_POSTING_HONEST_RATE: Final = Fraction(1, 20)
"""An upper bound on how often an honest account's bet arrives late, per coup of the table: one coup
in twenty (terminal latency; the simulator sends a late bet after 5 % of coups, from any account)."""

PAST_POSTING_WARNING_AT: Final = binomial_threshold(
    PAST_POSTING_WINDOW_COUPS, PAST_POSTING_HONEST_RATE, 10_000 // 20
)
"""Late attempts within the window from which an alert is a ``warning`` (fewer are ``info``): the
least ``k`` with ``500 · P(Binomial(50, 1/20) ≥ k) ≤ 1/10`` — one check per late bet, at most 500
late bets per 10 000 honest coups, a tenth of the false-alarm goal (:mod:`.sequential`): 10."""

PAST_POSTING_CRITICAL_AT: Final = PAST_POSTING_WARNING_AT + 2
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


@immutable
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
    sort: tuple[int, ...] = ()
    """``edge_sorting``: the stake-weighted CUSUMs (micro-nats), one per :data:`SORT_LAMBDAS`, and the
    unweighted one (:data:`SORT_FLAT`)."""
    edge_bets: tuple[str, ...] = ()
    bot: tuple[tuple[str, int, int], ...] = ()
    faced: str = ""
    faced_run: tuple[str, ...] = ()
    edge: tuple[int, ...] = ()
    """``account_edge``: the CUSUMs (micro-nats), one per alternative of :data:`EDGE_LAMBDAS`."""
    edge_run: tuple[tuple[str, str], ...] = ()
    """``account_edge``: the decided even-money bets ``(coup id, bet id)`` since the CUSUMs last stood at
    zero (the last :data:`EVIDENCE_MAX`) and ``edge_count`` how many in all."""
    edge_count: int = 0
    max_stake: int = 0
    """The largest even-money stake the account has placed at the table (its stake weights' scale)."""
    lead: tuple[int, ...] = ()
    """``late_bet``: the CUSUMs on bets placed in the last second before the close."""
    lead_run: tuple[tuple[str, str], ...] = ()
    lead_count: int = 0
    habit: tuple[int, int, int, int] = (0, 0, 0, 0)
    """Own side habit: banker bets and even-money bets after a banker win, then after a player win."""


@immutable
class ShoeWatch:
    """One shoe: copies of each card dealt, the last position and the event that dealt it."""

    shoe_id: str
    decks: int | None
    counts: Mapping[str, int] = field(default_factory=dict)
    last_position: int | None = None
    last_event_id: str | None = None
    not_due: int = 0


@immutable
class TableWatch:
    """What the monitor knows of one table. ``config`` is ``None`` until a readable ``TableOpened``."""

    table_id: str
    config: TableConfig | None = None
    max_minor: Mapping[str, int] = field(default_factory=dict)
    coups: int = 0
    coup: Coup | None = None
    """The open coup (:mod:`services.core.baccarat.coup`), numbered by this table's coup clock."""
    hedged: frozenset[str] = frozenset()
    """The accounts already flagged as hedged in the open coup."""
    delays: Mapping[str, int] = field(default_factory=dict)
    """Each account's first bet's delay after the open coup's window opened (ms)."""
    shoe: ShoeWatch | None = None
    punters: Mapping[str, Punter] = field(default_factory=dict)
    bias: tuple[tuple[int, ...], ...] = ((), ())
    """``shoe_bias``: per side (banker, player) the CUSUMs over the table's decided coups."""
    bias_run: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    bias_count: tuple[int, int] = (0, 0)
    opened_at: str = ""
    first_card: str = ""
    pairs: Mapping[str, Link] = field(default_factory=dict)
    """``linked_hedge``: the pairs of accounts followed, by ``"a|b"``."""
    crowd: int = 1
    """The crowd level (:func:`~services.monitor.sequential.level`) of the bets of a coup: the most the
    table has seen, rounded up to a power of two (the thresholds per bet follow from it)."""
    pair_crowd: int = 1
    """The crowd level of pairs tested in a coup."""
    last_winner: str = ""
    """The side that won the table's last decided coup."""
    bet_at: Mapping[str, int] = field(default_factory=dict)
    """The open coup's bets' times (ms), by bet id, until the close."""
    group: tuple[int, ...] = ()
    """``group_edge``: the CUSUMs over the suspects' majority side."""
    group_run: tuple[str, ...] = ()
    group_count: int = 0
    group_members: Mapping[str, int] = field(default_factory=dict)
    cobet: Mapping[str, int] = field(default_factory=dict)
    """``group_edge``'s co-betting links: per account, how many of the group's coups in a row it bet
    the group's side (an opposite bet breaks the run); from :data:`COBET_LINK` on, it is in the group."""

    def punter(self, account_id: str) -> Punter:
        """The account's record at this table (empty when new)."""
        return self.punters.get(account_id) or Punter()

    def with_punter(self, account_id: str, punter: Punter) -> TableWatch:
        """A copy with ``punter`` stored (seen now), forgetting the stalest account over the cap."""
        punters = dict(self.punters)
        punters[account_id] = replace(punter, seen=self.coups)
        if len(punters) > MAX_ACCOUNTS_PER_TABLE:
            STALEST.evict(self.table_id, self.punters, punters, account_id)
        else:
            STALEST.follow(self.table_id, self.punters, punters, account_id)
        return replace(self, punters=punters)


class Stalest:
    """The stalest account of a table's punters (the least ``(seen, account id)``: the one
    :meth:`TableWatch.with_punter` forgets once a table holds more than :data:`MAX_ACCOUNTS_PER_TABLE`),
    without looking at every account each time.

    A speed table's 5,000 players overflow the 4,096 kept, and every new bettor then forgot the least of
    4,096 accounts, found by a scan (docs/performance.md#monitor-stalest-account). Here a heap of
    ``(seen, account id)`` per table answers in O(log n).

    A cache beside the state, never part of it (the state stays immutable and snapshots unchanged): per
    table it keeps the heap of the one punters mapping it last saw, holding an entry for every account
    of that mapping (and entries no longer true, dropped when they reach the top: an account seen again
    or forgotten). It follows the mappings :meth:`TableWatch.with_punter` derives from that one (the
    account's new entry pushed); for any other mapping (a restored snapshot, an older or a diverging
    state) it builds the heap afresh. So :meth:`evict` answers what the scan answers, for any state
    (``tests/unit/test_monitor_caches.py``)."""

    KEPT: ClassVar[int] = 64
    """Tables whose heap is kept (the one seen longest ago goes first)."""

    def __init__(self) -> None:
        self._tables: dict[str, tuple[Mapping[str, Punter], list[tuple[int, str]]]] = {}

    def _followed(
        self, table_id: str, before: Mapping[str, Punter], after: Mapping[str, Punter], account: str
    ) -> list[tuple[int, str]] | None:
        known = self._tables.pop(table_id, None)
        if known is None or known[0] is not before or len(known[1]) > 2 * len(after) + 64:
            return None  # another mapping, or mostly entries no longer true
        heap = known[1]
        heapq.heappush(heap, (after[account].seen, account))
        return heap

    def _keep(self, table_id: str, punters: Mapping[str, Punter], heap: list[tuple[int, str]]) -> None:
        tables = self._tables
        if len(tables) >= self.KEPT:
            del tables[next(iter(tables))]
        tables[table_id] = (punters, heap)

    def follow(
        self, table_id: str, before: Mapping[str, Punter], after: Mapping[str, Punter], account: str
    ) -> None:
        """``after`` is ``before`` with ``account`` (re)set: keep the heap of ``before`` (if it is the
        one kept for the table) as the heap of ``after``."""
        heap = self._followed(table_id, before, after, account)
        if heap is not None:
            self._keep(table_id, after, heap)

    def evict(
        self, table_id: str, before: Mapping[str, Punter], after: dict[str, Punter], account: str
    ) -> None:
        """``after`` is ``before`` with ``account`` (re)set: remove its stalest account from it."""
        heap = self._followed(table_id, before, after, account)
        if heap is None:
            heap = [(p.seen, a) for a, p in after.items()]
            heapq.heapify(heap)
        while True:
            seen, stalest = heap[0]
            punter = after.get(stalest)
            if punter is not None and punter.seen == seen:
                break
            heapq.heappop(heap)  # no longer true: the account was forgotten or seen again since
        del after[stalest]  # its entry, left in the heap, is no longer true
        self._keep(table_id, after, heap)


STALEST: Final = Stalest()
"""The monitor's :class:`Stalest` cache (every answer it gives is checked against the state)."""


@immutable
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
    honest_probability: str | None = None,
    key: str | None = None,
    accounts: list[str] | None = None,
) -> Alert:
    """An ``AnomalyDetected`` for the table's alert stream (``table_id`` is its key, unless ``key``
    names another: the account stage keys its alerts by account). ``honest_probability``: how
    likely what was seen is under honest play (a bound, as a decimal string), where one is known."""
    given: dict[str, Any] = {} if honest_probability is None else {"honest_probability": honest_probability}
    if accounts is None:  # every account the subject names (both of a pair), so a filter finds it from either
        named = subject.get("account_ids") or [subject.get("account_id")]
        accounts = [str(a) for a in named if a]
    if accounts:
        given["account_ids"] = list(dict.fromkeys(accounts))
    found = AnomalyDetected(
        detector=detector.value, category=CATEGORY[detector].value, severity=severity, table_id=table_id,
        subject=dict(subject), observed=dict(observed), threshold=dict(threshold),
        detail=detail[:DETAIL_MAX_CHARS], **given,
    )  # fmt: skip
    return Alert(key or table_id, found)


class Alert(NamedTuple):
    """An alert a detector raised: the key of the stream it goes to and the ``AnomalyDetected``."""

    key: str
    found: AnomalyDetected

    def event(self, occurred_at: str) -> Event:
        """The monitor's output event of this alert (sealed at its input's time)."""
        return Event(self.key, occurred_at, self.found)


@immutable
class Seen:
    """The event a detector fires on, as its alert names it: its id, its key (the table: the alert's
    key), and the coup and shoe it belongs to where it names them."""

    event_id: str
    key: str
    occurred_at: str
    coup_id: str | None = None
    shoe_id: str | None = None


Alerts = list[Alert]

# --- detectors: small pure functions ----------------------------------------------------------------


def past_posting(punter: Punter, coup_number: int, refused: BetRefused, rec: Seen) -> tuple[Punter, Alerts]:
    """A late bet (refused as ``betting_closed``/``wrong_coup``): one alert, its severity by how many
    late attempts the account made within :data:`PAST_POSTING_WINDOW_COUPS` coups."""
    reason = refused.reason.value
    if reason not in LATE_REASONS:
        return punter, []
    since = coup_number - PAST_POSTING_WINDOW_COUPS
    late = (*(c for c in punter.late if c > since), coup_number)[-PAST_POSTING_WINDOW_COUPS:]
    n = len(late)
    severity = (
        Severity.CRITICAL if n >= PAST_POSTING_CRITICAL_AT
        else Severity.WARNING if n >= PAST_POSTING_WARNING_AT
        else Severity.INFO
    )  # fmt: skip
    account = refused.account_id
    subject = {"event_ids": [rec.event_id], "bet_ids": [refused.bet_id], "account_id": account,
               "coup_id": refused.coup_id}  # fmt: skip
    observed = {"reason": reason, "attempts_in_window": n}
    threshold = {"window_coups": PAST_POSTING_WINDOW_COUPS, "warning_at": PAST_POSTING_WARNING_AT,
                 "critical_at": PAST_POSTING_CRITICAL_AT,
                 "honest_late_rate": str(PAST_POSTING_HONEST_RATE)}  # fmt: skip
    chance = binomial_tail(PAST_POSTING_WINDOW_COUPS, PAST_POSTING_HONEST_RATE, n)
    detail = f"{account} bet after the window ({reason}); {n} late attempt(s) in the window"
    found = alert(
        Detector.PAST_POSTING, severity, rec.key, subject=subject, observed=observed,
        threshold=threshold, detail=detail, honest_probability=f"{float(chance):.3g}",
    )  # fmt: skip
    return replace(punter, late=late), [found]


NOT_DUE: Final[Mapping[Reason, Detector]] = {
    Reason.CARD_NOT_DUE: Detector.CARD_NOT_DUE,
    Reason.DECISION_NOT_DUE: Detector.LATE_DECISION,
}
"""Refused commands that change a coup late: a card nobody asked for (a card slid in), a decision
sent after the coup moved on (a dealer changing a decision). An honest operator and shoe never send
either, so the first is a ``warning`` (probability under honest play: none but a slip)."""


def card_not_due(
    shoe: ShoeWatch | None, refused: CommandRefused, rec: Seen
) -> tuple[ShoeWatch | None, Alerts]:
    """A card read refused as not due: a card the rules never asked the shoe for."""
    detector = NOT_DUE.get(refused.reason)
    if detector is None:
        return shoe, []
    count = (shoe.not_due if shoe else 0) + 1
    severity = Severity.CRITICAL if count >= CARD_NOT_DUE_CRITICAL_AT else Severity.WARNING
    subject = {"event_ids": [rec.event_id, refused.command_id],
               "shoe_id": shoe.shoe_id if shoe else None}  # fmt: skip
    detail = f"a {refused.command} was refused: {refused.detail}"
    out = alert(
        detector, severity, rec.key, subject=subject, observed={"in_shoe": count},
        threshold={"critical_at": CARD_NOT_DUE_CRITICAL_AT}, detail=detail, honest_probability="0",
    )  # fmt: skip
    return (replace(shoe, not_due=count) if shoe else None), [out]


def card_overcount(shoe: ShoeWatch, card: str, rec: Seen) -> tuple[ShoeWatch, Alerts]:
    """Count ``card`` in its shoe; alert when it appears more often than the shoe's decks hold."""
    n = shoe.counts.get(card, 0) + 1
    shoe = replace(shoe, counts={**shoe.counts, card: n})
    if shoe.decks is None or n <= shoe.decks:
        return shoe, []
    subject = {"event_ids": [rec.event_id], "shoe_id": shoe.shoe_id, "coup_id": rec.coup_id}
    detail = f"{card} dealt {n} times from shoe {shoe.shoe_id} of {shoe.decks} deck(s)"
    found = alert(
        Detector.CARD_OVERCOUNT, Severity.CRITICAL, rec.key, subject=subject,
        observed={"card": card, "copies": n}, threshold={"copies_max": shoe.decks}, detail=detail,
    )  # fmt: skip
    return shoe, [found]


def shoe_position(shoe: ShoeWatch, position: int, rec: Seen) -> tuple[ShoeWatch, Alerts]:
    """Alert when a card's ``shoe_position`` repeats or goes back: a card put back or re-dealt."""
    last, last_id = shoe.last_position, shoe.last_event_id
    shoe = replace(shoe, last_position=position, last_event_id=rec.event_id)
    if last is None or position > last:
        return shoe, []
    kind = "repeats" if position == last else "goes backwards"
    subject = {"event_ids": [last_id, rec.event_id], "shoe_id": shoe.shoe_id,
               "coup_id": rec.coup_id}  # fmt: skip
    detail = f"shoe {shoe.shoe_id}: position {position} {kind} (last was {last})"
    found = alert(
        Detector.SHOE_POSITION, Severity.CRITICAL, rec.key, subject=subject,
        observed={"shoe_position": position}, threshold={"after": last}, detail=detail,
    )  # fmt: skip
    return shoe, [found]


def win_streak(punter: Punter, wager: Wager, won: bool, rec: Seen) -> tuple[Punter, Alerts]:
    """Extend or break the account's run of decided wins; alert (and restart) at :data:`WIN_STREAK_LENGTH`."""
    if not won:
        return replace(punter, streak=()), []
    streak = (*punter.streak, wager.bet_id)
    if len(streak) < WIN_STREAK_LENGTH:
        return replace(punter, streak=streak), []
    n = len(streak)
    subject = {"event_ids": [rec.event_id], "bet_ids": list(streak), "account_id": wager.account_id,
               "coup_id": rec.coup_id}  # fmt: skip
    threshold = {"consecutive_wins": WIN_STREAK_LENGTH, "win_probability_max": str(WIN_PROBABILITY_MAX),
                 "run_probability_max": str(STREAK_PROBABILITY_MAX)}  # fmt: skip
    detail = f"{wager.account_id} won {n} even-money bets in a row (chance < {STREAK_PROBABILITY_MAX})"
    found = alert(
        Detector.WIN_STREAK, Severity.INFO, rec.key, subject=subject,
        observed={"consecutive_wins": n}, threshold=threshold, detail=detail,
    )  # fmt: skip
    return replace(punter, streak=()), [found]


def net_outlier(punter: Punter, wager: Wager, net_minor: int, rec: Seen) -> tuple[Punter, Alerts]:
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
               "account_id": wager.account_id, "coup_id": rec.coup_id}  # fmt: skip
    observed = {"net_minor": net, "bets": len(window), "staked_minor": staked, "z": z}
    threshold = {"z": str(float(OUTLIER_Z)), "expected_net_minor_max": math.ceil(expected),
                 "win_probability_max": str(WIN_PROBABILITY_MAX), "window_bets": OUTLIER_WINDOW_BETS,
                 "min_bets": OUTLIER_MIN_BETS}  # fmt: skip
    detail = f"{wager.account_id} is {net} ahead over {len(window)} bets, z = {z}"
    found = alert(
        Detector.NET_RESULT_OUTLIER, Severity.INFO, rec.key,
        subject=subject, observed=observed, threshold=threshold, detail=detail,
    )  # fmt: skip
    return replace(punter, window=()), [found]


HEDGE_SIDES: Final = frozenset({"player", "banker"})
"""Opposite sides of one coup: one account on both risks only the commission (and a tie)."""


class CoupBets:
    """Each account's bets in a coup's wagers, so that a new bet's earlier bets in the coup are found
    without scanning every bet before it: on a speed table (5,000 bets a coup) that scan, once per
    player or banker bet, was quadratic in the coup's bets (12.5 million comparisons a coup).

    A cache beside the state, never part of it (as the dealer's ``AcceptedBets``): per coup it indexes
    the wagers tuple it last saw and follows the tuples that extend it (``Coup.accept`` copies the
    references before the new one, so a tuple holding the same wager object at the same position
    shares the whole prefix); any other tuple (a restored snapshot, an older or a diverging state) is
    indexed afresh. :meth:`of` answers what the scan answers, for any state
    (``tests/unit/test_monitor_caches.py``)."""

    KEPT: ClassVar[int] = 64
    """Coups whose index is kept (the open coups of as many tables)."""

    def __init__(self) -> None:
        self._coups: dict[str, tuple[tuple[Wager, ...], dict[str, list[int]]]] = {}

    def of(self, coup: Coup, account_id: str) -> list[Wager]:
        """``account_id``'s wagers in ``coup``, in the coup's order."""
        wagers = coup.wagers
        known = self._coups.pop(coup.coup_id, None)
        if known is None or not _same_prefix(wagers, known[0]):
            positions: dict[str, list[int]] = {}
            for i, wager in enumerate(wagers):
                positions.setdefault(wager.account_id, []).append(i)
            known = wagers, positions
        elif len(wagers) > len(known[0]):
            positions = known[1]
            for i in range(len(known[0]), len(wagers)):
                positions.setdefault(wagers[i].account_id, []).append(i)
            known = wagers, positions
        if len(self._coups) >= self.KEPT:
            del self._coups[next(iter(self._coups))]  # the coup seen longest ago
        self._coups[coup.coup_id] = known
        n = len(wagers)  # an index of a longer tuple (a later state) knows later bets too
        return [wagers[i] for i in known[1].get(account_id, ()) if i < n]


def _same_prefix(wagers: tuple[Wager, ...], known: tuple[Wager, ...]) -> bool:
    """Whether the shorter tuple is the start of the longer (the same wager object at its last place)."""
    n = min(len(wagers), len(known))
    return n == 0 or wagers[n - 1] is known[n - 1]


COUP_BETS: Final = CoupBets()
"""The monitor's :class:`CoupBets` cache."""


def hedged_bets(coup: Coup, hedged: frozenset[str], wager: Wager, rec: Seen) -> tuple[frozenset[str], Alerts]:
    """Alert (once per account and coup: ``hedged`` are those already flagged) when an account holds
    bets on both hedge sides."""
    if wager.spot not in HEDGE_SIDES or wager.account_id in hedged:
        return hedged, []
    others = HEDGE_SIDES - {wager.spot}
    other = [w for w in COUP_BETS.of(coup, wager.account_id) if w.spot in others]
    if not other:
        return hedged, []
    bets = [*other, wager]
    subject = {"event_ids": [rec.event_id], "bet_ids": [w.bet_id for w in bets],
               "account_id": wager.account_id, "coup_id": coup.coup_id}  # fmt: skip
    observed = {w.spot: sum(b.stake_minor for b in bets if b.spot == w.spot) for w in bets}
    detail = f"{wager.account_id} bet on both player and banker in coup {coup.coup_id}"
    found = alert(
        Detector.HEDGED_BETS, Severity.WARNING, rec.key, subject=subject,
        observed={"stakes_minor": observed}, threshold={"sides": sorted(HEDGE_SIDES)}, detail=detail,
    )  # fmt: skip
    return hedged | {wager.account_id}, [found]


def near_limit(stake_minor: int, max_minor: int) -> bool:
    """``stake_minor`` is below ``max_minor`` by at most :data:`STRUCTURING_BAND_BPS`."""
    return stake_minor < max_minor and stake_minor * BPS >= max_minor * (BPS - STRUCTURING_BAND_BPS)


def structuring(
    punter: Punter, wager: Wager, max_minor: int | None, coup_number: int, rec: Seen
) -> tuple[Punter, Alerts]:
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
               "account_id": wager.account_id, "coup_id": str(rec.coup_id)}  # fmt: skip
    threshold = {"max_minor": max_minor, "band_bps": STRUCTURING_BAND_BPS,
                 "bets": STRUCTURING_MIN_BETS, "window_coups": STRUCTURING_WINDOW_COUPS}  # fmt: skip
    detail = f"{wager.account_id} staked just under the {wager.spot} maximum {len(recent)} times"
    found = alert(
        Detector.STRUCTURING, Severity.WARNING, rec.key, subject=subject,
        observed={"bets": len(recent), "stake_minor": wager.stake_minor}, threshold=threshold, detail=detail,
    )  # fmt: skip
    return replace(punter, near_limit=()), [found]


# --- sequential and pattern detectors (issue #13) ----------------------------------------------------

EVIDENCE_MAX: Final = 32
"""Ids of coups and bets an alert lists as its evidence (the latest; ``evidence_count`` says how many
there were in all)."""

SIDE_P0: Final[Mapping[str, float]] = {"banker": 0.51, "player": 0.497}
"""Honest bounds on the chance that a side wins a decided coup: banker 50.68 %, player 49.32 % with 8
decks (:mod:`services.core.baccarat.odds`; 50.71 % for banker with one deck), rounded up by about
0.3 % for the small swings of a shoe's composition as it is dealt. Every test below errs towards
silence for any honest chance below these."""

EDGE_LAMBDAS: Final = (0.16, 0.28, 0.45, 0.8, 1.5)
"""Bet fractions of the betting martingales ``Π(1 + λ·w·(x − p0))`` run as CUSUMs over an account's,
a table's or a group's decided even-money outcomes: each is the growth-optimal one against a win rate
of about 55, 57, 60, 65 and 75-90 % (``λ* = (p1 − p0) / (p0 (1 − p0))``), so an edge anywhere in that
range is found at close to the best rate possible (a CUSUM over several alternatives)."""

SUSPECT_MICRO: Final = 1_000_000
"""An account whose ``account_edge`` CUSUM is at least 1 nat is a *suspect* for ``group_edge``."""

COBET_LINK: Final = 4
"""``group_edge``: an account that bet the group's side in this many of the group's coups in a row, and
never the other side between, is linked to the group (a co-betting graph, collapsed onto the group): it
is counted with the suspects while the link holds, so a syndicate whose members are each too lucky too
seldom to be suspects is observed in every coup one of them plays. Sound whoever is linked: the links are
fixed before the outcome."""

COBET_MAX: Final = 256
"""Co-betting links a table keeps (the longest runs)."""

LATE_MS: Final = 1_000
"""A bet placed less than this before the close is a last-second bet."""

LATE_P0: Final = 0.06
"""Honest bound on the share of last-second bets (docs/monitoring.md: humans bet seconds before the
close; at most 5 % of bets come in the last second, and none in its last half at a live table)."""

LATE_LAMBDAS: Final = (4.0, 9.0, 14.0)
"""Bet fractions against a last-second share of about 30, 60 and 90 % (``λ < 1/p0``)."""

LINK_MAX_BETTORS: Final = 64
"""Pairs are tested in coups with at most this many single-sided even-money bettors (2 016 pairs); in a
bigger crowd every side is full of strangers and the quadratic scan is left out (docs/monitoring.md)."""

LINK_MIN_HISTORY: Final = 6
"""Bets of an account (after the same previous winner) before its side habit is trusted."""

LINK_Q_MAX: Final = 0.75
"""Pairs whose own habits make opposite sides this likely or more are not tested: two loyal players on
opposite sides are explained by their habits, whatever they do."""

LINK_MARGIN: Final = 0.1
"""Added to the chance of opposite sides predicted by the two habits (an estimate), erring to silence."""

LINK_LAMBDAS: Final = (0.5, 0.95)
"""Fractions of ``1/q`` bet on "opposite" (``q``: the predicted chance)."""

LINK_KEPT: Final = 4096
"""Pairs followed per table; beyond it the longest unseen are forgotten."""


@immutable
class Link:
    """A pair of accounts at a table: the CUSUMs of its dependence test, its last coup number, and its
    evidence (``(coup id, bet id of a, bet id of b)``, the last :data:`EVIDENCE_MAX`) and count."""

    stats: tuple[int, ...] = ()
    seen: int = 0
    run: tuple[tuple[str, str, str], ...] = ()
    count: int = 0


def _evidence(run: tuple[Any, ...], item: Any, stats: tuple[int, ...]) -> tuple[Any, ...]:
    """The run of evidence after one more observation: empty when every CUSUM stands at zero."""
    return (*run, item)[-EVIDENCE_MAX:] if any(stats) else ()


def _bets_subject(
    rec: Seen, account: str, coup_id: str, run: tuple[tuple[str, str], ...], count: int
) -> dict[str, Any]:
    """An alert's subject naming its evidence: the bets (and their coups) of the run, and how many."""
    bets, coups = [b for _, b in run], [c for c, _ in run]
    return {"event_ids": [rec.event_id], "account_id": account, "coup_id": coup_id,
            "bet_ids": bets, "coup_ids": coups, "evidence_count": count}  # fmt: skip


def _stats(stats: tuple[int, ...], n: int) -> tuple[int, ...]:
    return stats or (0,) * n


def account_edge(t: TableWatch, punter: Punter, wager: Wager, won: bool, rec: Seen) -> tuple[Punter, Alerts]:
    """One decided even-money bet into the account's stake-weighted CUSUMs (weight: the stake over the
    account's largest at the table, fixed before the outcome); alert and restart at the threshold."""
    max_stake = max(punter.max_stake, wager.stake_minor)
    weight = wager.stake_minor / max_stake
    incs = bet_increments(EDGE_LAMBDAS, weight, int(won), SIDE_P0[wager.spot])
    stats = cusums(_stats(punter.edge, len(EDGE_LAMBDAS)), incs)
    run = _evidence(punter.edge_run, (str(rec.coup_id), wager.bet_id), stats)
    count = punter.edge_count + 1 if any(stats) else 0
    punter = replace(punter, edge=stats, edge_run=run, edge_count=count, max_stake=max_stake)
    h = mixture_threshold(len(EDGE_LAMBDAS), t.crowd, Detector.ACCOUNT_EDGE)
    if max(stats) < h:
        return punter, []
    account = wager.account_id
    subject = _bets_subject(rec, account, str(rec.coup_id), run, count)
    observed = {"cusum_nats": nats(max(stats)), "bets": count}
    threshold = {"cusum_nats": nats(h), "p0": {k: str(v) for k, v in SIDE_P0.items()},
                 "lambdas": [str(x) for x in EDGE_LAMBDAS], "crowd_level": t.crowd,
                 "false_alarms_per_10k": str(share(Detector.ACCOUNT_EDGE))}  # fmt: skip
    detail = f"{account} wins more even-money bets than the odds allow: {count} bets, {nats(max(stats))} nats"
    found = alert(
        Detector.ACCOUNT_EDGE, Severity.WARNING, rec.key, subject=subject, observed=observed,
        threshold=threshold, detail=detail, honest_probability=f"{math.exp(-max(stats) / MICRO):.3g}",
        accounts=[account],
    )  # fmt: skip
    return replace(punter, edge=(), edge_run=(), edge_count=0), [found]


def shoe_bias(t: TableWatch, winner: str, rec: Seen) -> tuple[TableWatch, Alerts]:
    """The table's decided coups into two sets of CUSUMs (banker, player), kept across shoes: a stacked
    or slowly biased shoe makes one side win more than the odds allow. Alerts and restarts."""
    if winner not in EVEN_MONEY_SPOTS:
        return t, []
    out: Alerts = []
    bias, runs, counts = list(t.bias), list(t.bias_run), list(t.bias_count)
    h = mixture_threshold(len(EDGE_LAMBDAS), 2, Detector.SHOE_BIAS)
    for i, side in enumerate(EVEN_MONEY_SPOTS):
        incs = bet_increments(EDGE_LAMBDAS, 1.0, int(winner == side), SIDE_P0[side])
        stats = cusums(_stats(bias[i], len(EDGE_LAMBDAS)), incs)
        runs[i] = _evidence(runs[i], str(rec.coup_id), stats)
        counts[i] = counts[i] + 1 if any(stats) else 0
        bias[i] = stats
        if max(stats) < h:
            continue
        subject = {"event_ids": [rec.event_id], "coup_id": rec.coup_id, "shoe_id": rec.shoe_id,
                   "coup_ids": list(runs[i]), "evidence_count": counts[i]}  # fmt: skip
        observed = {"side": side, "cusum_nats": nats(max(stats)), "coups_in_run": counts[i]}
        threshold = {"cusum_nats": nats(h), "p0": str(SIDE_P0[side]),
                     "lambdas": [str(x) for x in EDGE_LAMBDAS],
                     "false_alarms_per_10k": str(share(Detector.SHOE_BIAS))}  # fmt: skip
        detail = (
            f"{side} wins more decided coups than the odds allow ({counts[i]} coups, {nats(max(stats))} nats)"
        )
        out.append(alert(
            Detector.SHOE_BIAS, Severity.WARNING, rec.key, subject=subject, observed=observed,
            threshold=threshold, detail=detail, honest_probability=f"{math.exp(-max(stats) / MICRO):.3g}",
        ))  # fmt: skip
        bias[i], runs[i], counts[i] = (), (), 0
    return replace(t, bias=(bias[0], bias[1]), bias_run=(runs[0], runs[1]),
                   bias_count=(counts[0], counts[1])), out  # fmt: skip


def _group_sides(t: TableWatch, coup: Coup) -> tuple[dict[str, int], dict[str, list[str]]]:
    """The stakes and accounts on each even-money side of the group: the suspects (accounts whose own
    edge CUSUM stands at :data:`SUSPECT_MICRO` or more) and the accounts linked to the group by
    co-betting (:data:`COBET_LINK`), all as they stood before the coup."""
    stakes = {"banker": 0, "player": 0}
    members: dict[str, list[str]] = {"banker": [], "player": []}
    for w in coup.wagers:
        if w.spot in stakes:
            p = t.punters.get(w.account_id)
            suspect = p is not None and bool(p.edge) and max(p.edge) >= SUSPECT_MICRO
            if suspect or t.cobet.get(w.account_id, 0) >= COBET_LINK:
                stakes[w.spot] += w.stake_minor
                members[w.spot].append(w.account_id)
    return stakes, members


def _cobet(t: TableWatch, coup: Coup, side: str) -> dict[str, int]:
    """The co-betting runs after a group coup on ``side``: one more for each account on it, broken for
    each account on the other side; the longest :data:`COBET_MAX` kept."""
    runs = dict(t.cobet)
    for w in coup.wagers:
        if w.spot == side:
            runs[w.account_id] = min(runs.get(w.account_id, 0) + 1, 1 << 20)
        elif w.spot in EVEN_MONEY_SPOTS:
            runs.pop(w.account_id, None)
    if len(runs) > COBET_MAX:
        runs = dict(sorted(runs.items(), key=lambda kv: (-kv[1], kv[0]))[:COBET_MAX])
    return runs


def group_edge(t: TableWatch, coup: Coup, winner: str, rec: Seen) -> tuple[TableWatch, Alerts]:
    """The group's majority side (the group: suspects and the accounts co-betting with them,
    :func:`_group_sides`; weight: the stake margin of that side over the other) into the table's group
    CUSUMs: a syndicate whose members each stay under their own threshold pools its evidence here.
    Sound whoever is in the group: it is fixed before the outcome and one coup is one observation,
    however many bet it."""
    if winner not in EVEN_MONEY_SPOTS:
        return t, []
    stakes, members = _group_sides(t, coup)
    total = stakes["banker"] + stakes["player"]
    if total == 0:
        return t, []
    side = "banker" if stakes["banker"] >= stakes["player"] else "player"
    weight = abs(stakes["banker"] - stakes["player"]) / total
    incs = bet_increments(EDGE_LAMBDAS, weight, int(winner == side), SIDE_P0[side])
    stats = cusums(_stats(t.group, len(EDGE_LAMBDAS)), incs)
    run = _evidence(t.group_run, str(rec.coup_id), stats)
    count = t.group_count + 1 if any(stats) else 0
    group = dict(t.group_members) if any(stats) else {}
    for a in members[side]:
        group[a] = group.get(a, 0) + 1
    if len(group) > 4 * EVIDENCE_MAX:
        group = dict(sorted(group.items(), key=lambda kv: (-kv[1], kv[0]))[:EVIDENCE_MAX])
    t = replace(
        t, group=stats, group_run=run, group_count=count, group_members=group, cobet=_cobet(t, coup, side)
    )
    h = mixture_threshold(len(EDGE_LAMBDAS), 1, Detector.GROUP_EDGE)
    if max(stats) < h:
        return t, []
    named = [a for a, _ in sorted(group.items(), key=lambda kv: (-kv[1], kv[0]))][:EVIDENCE_MAX]
    subject = {"event_ids": [rec.event_id], "coup_id": rec.coup_id, "coup_ids": list(run),
               "evidence_count": count, "account_ids": named,
               "account_id": named[0] if named else None}  # fmt: skip
    observed = {
        "cusum_nats": nats(max(stats)),
        "coups": count,
        "bets_by_account": {a: group[a] for a in named},
    }
    threshold = {"cusum_nats": nats(h), "suspect_nats": nats(SUSPECT_MICRO),
                 "lambdas": [str(x) for x in EDGE_LAMBDAS],
                 "false_alarms_per_10k": str(share(Detector.GROUP_EDGE))}  # fmt: skip
    detail = (
        f"accounts betting together win more than the odds allow: {', '.join(named[:6])} over {count} coups"
    )
    found = alert(
        Detector.GROUP_EDGE, Severity.WARNING, rec.key, subject=subject, observed=observed,
        threshold=threshold, detail=detail, honest_probability=f"{math.exp(-max(stats) / MICRO):.3g}",
        accounts=named,
    )  # fmt: skip
    return replace(t, group=(), group_run=(), group_count=0, group_members={}, cobet={}), [found]


def late_bets(t: TableWatch, closed_ms: int, rec: Seen) -> tuple[TableWatch, Alerts]:
    """At the close of betting: each accepted bet's lead before the close into its account's CUSUMs on
    last-second bets (under :data:`LATE_MS`); alert and restart at the threshold."""
    coup = t.coup
    if coup is None or not t.bet_at:
        return t, []
    out: Alerts = []
    h = mixture_threshold(len(LATE_LAMBDAS), t.crowd, Detector.LATE_BET)
    for w in coup.wagers:
        at = t.bet_at.get(w.bet_id)
        if at is None:
            continue
        lead = closed_ms - at
        p = t.punter(w.account_id)
        stats = cusums(
            _stats(p.lead, len(LATE_LAMBDAS)), bet_increments(LATE_LAMBDAS, 1.0, int(lead < LATE_MS), LATE_P0)
        )
        run = _evidence(p.lead_run, (coup.coup_id, w.bet_id), stats)
        count = p.lead_count + 1 if any(stats) else 0
        if max(stats) < h:
            if any(stats) or any(p.lead):  # an honest bettor's CUSUMs mostly stay at zero: nothing to keep
                t = t.with_punter(w.account_id, replace(p, lead=stats, lead_run=run, lead_count=count))
            continue
        subject = _bets_subject(rec, w.account_id, coup.coup_id, run, count)
        observed = {"cusum_nats": nats(max(stats)), "bets": count, "lead_ms": lead}
        threshold = {"cusum_nats": nats(h), "late_ms": LATE_MS, "p0": str(LATE_P0),
                     "false_alarms_per_10k": str(share(Detector.LATE_BET))}  # fmt: skip
        detail = f"{w.account_id} bets in the last second before the close far too often ({count} bets)"
        out.append(alert(
            Detector.LATE_BET, Severity.WARNING, rec.key, subject=subject, observed=observed,
            threshold=threshold, detail=detail, honest_probability=f"{math.exp(-max(stats) / MICRO):.3g}",
            accounts=[w.account_id],
        ))  # fmt: skip
        t = t.with_punter(w.account_id, replace(p, lead=(), lead_run=(), lead_count=0))
    return replace(t, bet_at={}), out


EDGE_RANKS: Final = frozenset("789")
"""First cards that favour player (a 7, 8 or 9 to player's first hand): what an edge sorter sees."""

EDGE_P0: Final = Fraction(3, 10)
"""Honest bound on the chance that a coup's first card is a 7, 8 or 9: 12/52 = 23.1 % in a full
shoe; rounded up to 30 % so that a depleted shoe stays within it. Bets are placed before the deal,
so an honest player bet is independent of the first card."""

P_SORT: Final = float(EDGE_P0)

SORT_LAMBDAS: Final = (0.6, 1.2, 2.0, 2.85)
"""Bet fractions of ``edge_sorting``'s martingales ``Π(1 + λ·w·(x − 3/10))`` (``x``: the first card
is a 7, 8 or 9; ``w``: the stake over the account's largest, fixed before the deal), below
``1/p0 = 10/3``: growth-optimal against about 40, 50, 65 and 90 % of (stake-weighted) player bets
with such a card. 2.85 is issue #13's single test (9/10 against 3/10); the lower ones find an edge
sorter who dilutes his bets with small decoys or only sometimes knows the card."""

SORT_FLAT: Final = 2.85
"""One more martingale at issue #13's fraction, every player bet weighing 1 (stake ignored): a sorter
whose stakes vary without telling anything is found by it about as fast as before the weighting."""

BOT_JITTER_MS: Final = 50
"""Delays after the window opened that differ by at most this are "the same timing"."""

BOT_REPEAT_MAX: Final = Fraction(1, 4)
"""Honest bound on the chance that a player's bet repeats the previous coup's exact stake *and*
timing to within :data:`BOT_JITTER_MS` (each at most 1/2; a human's reaction time varies by far more
than 50 ms)."""

BOT_RUN: Final = run_length(BOT_REPEAT_MAX, 8 * 10_000, share(Detector.BOT_REGULARITY))
"""Consecutive identical (stake, timing) bets that raise ``bot_regularity`` at a table of up to 8 bets
a coup: the least ``k`` with ``80 000 · (1/4)^k ≤ 1/20`` (its share of the budget; one check per bet):
11. A more crowded table needs more (the crowd level's count of checks)."""

PAIR_REPEAT_MAX: Final = Fraction(1, 2)
"""Honest bound on the chance that a punter at a player-banked game faces the same banker as at his
previous coup there (the bank passes from player to player)."""

PAIR_RUN: Final = run_length(PAIR_REPEAT_MAX, 8 * 10_000, share(Detector.PAIRED_PLAY))
"""Consecutive coups against the same banker that raise ``paired_play`` (chip dumping): the least
``k`` with ``80 000 · (1/2)^k ≤ 1/20`` (its share of the budget): 21."""


def edge_sorting(
    punter: Punter, wager: Wager, first_card: str, rec: Seen, crowd: int = 8
) -> tuple[Punter, Alerts]:
    """Stake-weighted CUSUMs over an account's player bets: does the coup's first card (dealt after
    the bet) favour player far more often than chance, on the bets it stakes most? Weight: the stake
    over the account's largest even-money stake at the table (fixed before the deal, so that honest
    bets, independent of the card, keep every martingale's mean at most 1). Alerts and restarts at
    ``h = ln(K · crowd · 10 000 / share)`` (``K``: the weighted CUSUMs and the unweighted one)."""
    hit = int(first_card[:1] in EDGE_RANKS)
    weight = wager.stake_minor / max(punter.max_stake, wager.stake_minor)
    incs = bet_increments(SORT_LAMBDAS, weight, hit, P_SORT) + bet_increments((SORT_FLAT,), 1.0, hit, P_SORT)
    stats = cusums(_stats(punter.sort, len(incs)), incs)
    s = max(stats)
    bets = (*punter.edge_bets, wager.bet_id)[-64:] if s > 0 else ()
    h = mixture_threshold(len(incs), crowd, Detector.EDGE_SORTING)
    if s < h:
        return replace(punter, sort=stats, edge_bets=bets), []
    subject = {"event_ids": [rec.event_id], "bet_ids": list(bets), "account_id": wager.account_id,
               "coup_id": rec.coup_id}  # fmt: skip
    observed = {"cusum_nats": nats(s), "bets_in_run": len(bets), "first_card": first_card}
    threshold = {"cusum_nats": nats(h), "p0": str(EDGE_P0), "lambdas": [str(x) for x in SORT_LAMBDAS],
                 "ranks": sorted(EDGE_RANKS), "crowd_level": crowd}  # fmt: skip
    detail = f"{wager.account_id}'s player bets come with a 7, 8 or 9 first card far too often"
    found = alert(
        Detector.EDGE_SORTING, Severity.WARNING, rec.key, subject=subject, observed=observed,
        threshold=threshold, detail=detail, honest_probability=f"{math.exp(-s / 1e6):.3g}",
    )  # fmt: skip
    return replace(punter, sort=(), edge_bets=()), [found]


def bot_regularity(
    punter: Punter, wager: Wager, delay_ms: int, rec: Seen, crowd: int = 8
) -> tuple[Punter, Alerts]:
    """An account's first bet of each coup: the same stake and the same timing after the window opened
    (within :data:`BOT_JITTER_MS`) :data:`BOT_RUN` coups in a row."""
    run = punter.bot
    if run and (run[-1][1] != wager.stake_minor or abs(run[-1][2] - delay_ms) > BOT_JITTER_MS):
        run = ()
    needed = max(BOT_RUN, run_length(BOT_REPEAT_MAX, crowd * 10_000, share(Detector.BOT_REGULARITY)))
    run = (*run, (wager.bet_id, wager.stake_minor, delay_ms))[-needed:]
    if len(run) < needed:
        return replace(punter, bot=run), []
    subject = {"event_ids": [rec.event_id], "bet_ids": [b for b, _, _ in run],
               "account_id": wager.account_id, "coup_id": rec.coup_id}  # fmt: skip
    observed = {"bets": len(run), "stake_minor": wager.stake_minor, "delays_ms": [d for _, _, d in run]}
    threshold = {"run": needed, "jitter_ms": BOT_JITTER_MS, "repeat_probability_max": str(BOT_REPEAT_MAX)}
    detail = (
        f"{wager.account_id} bet {wager.stake_minor} about {delay_ms} ms after the window opened, "
        f"{len(run)} coups in a row"
    )
    found = alert(
        Detector.BOT_REGULARITY, Severity.WARNING, rec.key, subject=subject, observed=observed,
        threshold=threshold, detail=detail, honest_probability=run_probability(BOT_REPEAT_MAX, needed - 1),
    )  # fmt: skip
    return replace(punter, bot=()), [found]


def _banker_share(habit: tuple[int, int, int, int], after: str) -> float | None:
    """The account's own chance of betting banker after ``after`` won (Laplace), or ``None`` if it has
    not bet often enough in that case."""
    b, n = (habit[0], habit[1]) if after == "banker" else (habit[2], habit[3])
    return None if n < LINK_MIN_HISTORY else (b + 1) / (n + 2)


def _with_habit(habit: tuple[int, int, int, int], after: str, side: str) -> tuple[int, int, int, int]:
    banker = int(side == "banker")
    if after == "banker":
        return (habit[0] + banker, habit[1] + 1, habit[2], habit[3])
    if after == "player":
        return (habit[0], habit[1], habit[2] + banker, habit[3] + 1)
    return habit


def _link_alert(pair: tuple[str, str], link: Link, *, q: float, h: int, coup_id: str, rec: Seen) -> Alert:
    """The ``linked_hedge`` alert of the pair ``a``, ``b`` (both named, with the bets of the run)."""
    (a, b), run, count = pair, link.run, link.count
    subject = {"event_ids": [rec.event_id], "account_ids": [a, b], "account_id": a, "coup_id": coup_id,
               "coup_ids": [c for c, _, _ in run], "bet_ids": [x for _, p, r in run for x in (p, r)],
               "evidence_count": count}  # fmt: skip
    stat = max(link.stats)
    observed = {"cusum_nats": nats(stat), "coups": count, "opposite_predicted": f"{q - LINK_MARGIN:.3f}"}
    threshold = {"cusum_nats": nats(h), "margin": str(LINK_MARGIN), "q_max": str(LINK_Q_MAX),
                 "false_alarms_per_10k": str(share(Detector.LINKED_HEDGE))}  # fmt: skip
    detail = f"{a} and {b} take opposite sides far more often than their habits explain ({count} coups)"
    return alert(
        Detector.LINKED_HEDGE, Severity.WARNING, rec.key, subject=subject, observed=observed,
        threshold=threshold, detail=detail, honest_probability=f"{math.exp(-stat / MICRO):.3g}",
        accounts=[a, b],
    )  # fmt: skip


def _singles(coup: Coup) -> dict[str, tuple[str, int, str]]:
    """The coup's accounts on one even-money side only: their side, stake and (last) bet id."""
    single: dict[str, tuple[str, int, str]] = {}
    both: set[str] = set()
    for w in coup.wagers:
        if w.spot in HEDGE_SIDES:
            known = single.get(w.account_id)
            if known is not None and known[0] != w.spot:
                both.add(w.account_id)
            stake = w.stake_minor + (known[1] if known else 0)
            single[w.account_id] = (w.spot, stake, w.bet_id)
    return {a: v for a, v in single.items() if a not in both}


def linked_hedge(t: TableWatch, coup: Coup, rec: Seen) -> tuple[TableWatch, Alerts]:
    """At the coup's end: for each pair of single-sided even-money bettors, whether they stood on
    opposite sides, against the chance their own habits give it (each account's share of banker bets
    after the same previous winner, independent of the other's): a CUSUM per pair on the excess, the
    stakes left aside (a dumper's stake may be split or set apart from its partner's). Two loyal
    players on opposite sides, or two
    players following the last winner, are explained by their habits and never tested. (Each account's
    habit is then updated by :func:`on_coup_resolved` with the coup's other per-bet updates.)"""
    single = _singles(coup)
    after = t.last_winner
    if after not in EVEN_MONEY_SPOTS or not 2 <= len(single) <= LINK_MAX_BETTORS:
        return t, []
    return _test_pairs(t, single, after, coup, rec)


def _test_pairs(
    t: TableWatch, single: dict[str, tuple[str, int, str]], after: str, coup: Coup, rec: Seen
) -> tuple[TableWatch, Alerts]:
    """:func:`linked_hedge`'s test of every pair whose habits are known (see there)."""
    shares = {a: f for a in single if (f := _banker_share(t.punter(a).habit, after)) is not None}
    known = sorted(shares)
    pairs = dict(t.pairs)
    out: Alerts = []
    crowd = max(t.pair_crowd, level(len(known) * (len(known) - 1) // 2))
    h = mixture_threshold(len(LINK_LAMBDAS), crowd, Detector.LINKED_HEDGE)
    for i, a in enumerate(known):
        fa, (sa, _, ba) = shares[a], single[a]
        for b in known[i + 1 :]:
            fb, (sb, _, bb) = shares[b], single[b]
            q = fa * (1 - fb) + (1 - fa) * fb
            y = int(sa != sb)
            key = f"{a}|{b}"
            link = pairs.get(key)
            if q > LINK_Q_MAX or (link is None and not y):
                continue
            link = link or Link()
            q = min(1.0, q + LINK_MARGIN)
            incs = tuple(math.floor(math.log1p(lam / q * (y - q)) * MICRO) for lam in LINK_LAMBDAS)
            stats = cusums(_stats(link.stats, len(LINK_LAMBDAS)), incs)
            run = _evidence(link.run, (coup.coup_id, ba, bb), stats)
            found = Link(stats, coup.number, run, link.count + 1 if any(stats) else 0)
            if max(stats) < h:
                pairs[key] = found
                continue
            pairs[key] = Link((), coup.number, (), 0)
            out.append(_link_alert((a, b), found, q=q, h=h, coup_id=coup.coup_id, rec=rec))
    if len(pairs) > LINK_KEPT:
        pairs = dict(sorted(pairs.items(), key=lambda kv: (-kv[1].seen, kv[0]))[: LINK_KEPT * 3 // 4])
    return replace(t, pairs=pairs, pair_crowd=crowd), out


def paired_play(punter: Punter, wager: Wager, banker: str, rec: Seen) -> tuple[Punter, Alerts]:
    """A punter at a player-banked game facing the same banker :data:`PAIR_RUN` coups in a row: money
    can be passed from one to the other by losing on purpose (chip dumping)."""
    run = (*punter.faced_run, wager.bet_id) if punter.faced == banker else (wager.bet_id,)
    run = run[-PAIR_RUN:]
    if len(run) < PAIR_RUN:
        return replace(punter, faced=banker, faced_run=run), []
    subject = {"event_ids": [rec.event_id], "bet_ids": list(run), "account_id": wager.account_id,
               "account_ids": [wager.account_id, banker], "coup_id": rec.coup_id}  # fmt: skip
    threshold = {"run": PAIR_RUN, "repeat_probability_max": str(PAIR_REPEAT_MAX)}
    detail = f"{wager.account_id} played against banker {banker} {len(run)} coups in a row"
    found = alert(
        Detector.PAIRED_PLAY, Severity.WARNING, rec.key, subject=subject,
        observed={"coups": len(run), "banker": banker}, threshold=threshold, detail=detail,
        honest_probability=run_probability(PAIR_REPEAT_MAX, PAIR_RUN - 1),
    )  # fmt: skip
    return replace(punter, faced=banker, faced_run=()), [found]


def millis(timestamp: str) -> int:
    """An RFC 3339 UTC timestamp in milliseconds since the epoch."""
    at = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    return round(at.timestamp() * 1000)


# --- handlers: fold one event into a table, calling the detectors -----------------------------------

E = TypeVar("E", bound=Payload)
Handler = Callable[[TableWatch, E, Seen], tuple[TableWatch, Alerts]]
"""A table event's handler: the table, the typed event and where it was seen; the table after it."""


def on_table_opened(t: TableWatch, opened: TableOpened, rec: Seen) -> tuple[TableWatch, Alerts]:
    """Remember the configuration (checked against the registry) and each spot's maximum stake."""
    config = TableConfig.from_dict(opened.config.model_dump(mode="json"))
    get_variant(config.variant)
    limits = {s: v.max_minor for s, v in opened.limits.items()}
    return replace(t, config=config, max_minor=limits), []


def on_shoe_opened(t: TableWatch, opened: ShoeOpened, rec: Seen) -> tuple[TableWatch, Alerts]:
    """A new shoe: fresh card counts and positions."""
    return replace(t, shoe=ShoeWatch(opened.shoe_id, opened.decks)), []


def on_shoe_closed(t: TableWatch, closed: ShoeClosed, rec: Seen) -> tuple[TableWatch, Alerts]:
    """The shoe is done: forget it."""
    return replace(t, shoe=None), []


def on_betting_opened(t: TableWatch, opened: BettingOpened, rec: Seen) -> tuple[TableWatch, Alerts]:
    """The next coup: the table's coup clock advances; an unresolved earlier coup is dropped."""
    number = t.coups + 1
    coup = replace(coup_opened(opened, rec.occurred_at), number=number)
    return replace(t, coups=number, coup=coup, hedged=frozenset(), delays={}, opened_at=rec.occurred_at,
                   first_card="", bet_at={}), []  # fmt: skip


def on_bet_accepted(t: TableWatch, bet: BetAccepted, rec: Seen) -> tuple[TableWatch, Alerts]:
    """Keep the bet for grading; look for a hedge in the coup and for structuring."""
    wager = wager_of(bet)
    if t.coup is None or t.coup.coup_id != bet.coup_id:  # its BettingOpened not seen: a coup of its own
        t = replace(t, coup=Coup(bet.coup_id, t.coups, "betting", ""), hedged=frozenset(), delays={})
    assert t.coup is not None
    hedged, out = hedged_bets(t.coup, t.hedged, wager, rec)
    at = {**t.bet_at, wager.bet_id: millis(rec.occurred_at)}
    max_minor = t.max_minor.get(wager.spot)
    punter, more = structuring(t.punter(wager.account_id), wager, max_minor, t.coups, rec)
    delays = t.delays
    if wager.account_id not in t.delays and t.opened_at and wager.spot in HEDGE_SIDES:
        delay = at[wager.bet_id] - millis(t.opened_at)
        delays = {**t.delays, wager.account_id: delay}
        punter, bot = bot_regularity(punter, wager, delay, rec, t.crowd)
        more = more + bot
    t = replace(t, coup=t.coup.accept(wager), hedged=hedged, bet_at=at, delays=delays)
    return t.with_punter(wager.account_id, punter), out + more


def on_betting_closed(t: TableWatch, closed: BettingClosed, rec: Seen) -> tuple[TableWatch, Alerts]:
    """The close of betting: each bet's lead before it (last-second bets)."""
    if t.coup is None or t.coup.coup_id != closed.coup_id:
        return replace(t, bet_at={}), []
    t = replace(t, crowd=max(t.crowd, level(len(t.coup.wagers))))
    return late_bets(t, millis(rec.occurred_at), rec)


def on_bet_refused(t: TableWatch, refused: BetRefused, rec: Seen) -> tuple[TableWatch, Alerts]:
    """A refused bet: past posting when it came too late."""
    account = refused.account_id
    punter, out = past_posting(t.punter(account), t.coups, refused, rec)
    return (t.with_punter(account, punter) if out else t), out


def on_command_refused(t: TableWatch, refused: CommandRefused, rec: Seen) -> tuple[TableWatch, Alerts]:
    """A refused command: shoe tampering when it was a card nobody asked for."""
    shoe, out = card_not_due(t.shoe, refused, rec)
    return replace(t, shoe=shoe), out


def on_card_dealt(t: TableWatch, dealt: CardDealt, rec: Seen) -> tuple[TableWatch, Alerts]:
    """Count the card in its shoe and check its position."""
    shoe = t.shoe
    if shoe is None or shoe.shoe_id != dealt.shoe_id:
        shoe = ShoeWatch(dealt.shoe_id, t.config.decks if t.config else None)
    shoe, out = card_overcount(shoe, dealt.card, rec)
    shoe, more = shoe_position(shoe, dealt.shoe_position, rec)
    first = t.first_card or (dealt.card if dealt.hand == "player" else "")
    return replace(t, shoe=shoe, first_card=first), out + more


def on_coup_resolved(t: TableWatch, resolved: CoupResolved, rec: Seen) -> tuple[TableWatch, Alerts]:
    """Grade the coup's even-money bets and run the streak and net-result tests per account."""
    coup, t = t.coup, replace(t, coup=None)
    if coup is None or coup.coup_id != resolved.coup_id or t.config is None:
        return t, []
    config = t.config
    out: Alerts = []
    banks = [w.account_id for w in coup.wagers if w.spot == "bank"]
    if banks:
        for wager in coup.wagers:
            if wager.account_id != banks[0] and wager.spot not in ("bank", "bank_cover"):
                punter, found = paired_play(t.punter(wager.account_id), wager, banks[0], rec)
                t = t.with_punter(wager.account_id, punter)
                out += found
    if config.variant not in STATISTICAL_VARIANTS:
        return t, out
    if len(coup.wagers) > t.crowd:
        t = replace(t, crowd=level(len(coup.wagers)))
    winner = resolved.outcome
    t, more = linked_hedge(t, coup, rec)
    out += more
    t, more = shoe_bias(t, winner, rec)
    out += more
    t, more = group_edge(t, coup, winner, rec)
    out += more
    variant = get_variant(config.variant)
    result = result_of(resolved, variant.hands(config))
    single = _singles(coup) if t.last_winner in EVEN_MONEY_SPOTS else {}
    for wager in coup.wagers:
        if wager.spot not in EVEN_MONEY_SPOTS:
            continue
        punter = t.punter(wager.account_id)
        if wager.account_id in single:  # its side habit, once per coup (linked_hedge's)
            punter = replace(
                punter, habit=_with_habit(punter.habit, t.last_winner, single.pop(wager.account_id)[0])
            )
        if wager.spot == "player" and t.first_card:
            punter, found = edge_sorting(punter, wager, t.first_card, rec, t.crowd)
            out += found
        net = _net_minor(variant, config, result, wager)
        if net is not None:
            punter, found = account_edge(t, punter, wager, net > 0, rec)
            punter, a = win_streak(punter, wager, net > 0, rec)
            punter, b = net_outlier(punter, wager, net, rec)
            out += found + a + b
        t = t.with_punter(wager.account_id, punter)
    if winner in EVEN_MONEY_SPOTS:
        t = replace(t, last_winner=winner)
    return t, out


def _net_minor(variant: Variant, config: TableConfig, result: CoupResult, wager: Wager) -> int | None:
    """The bet's net result in minor units by the variant's own grade, or ``None`` for a push."""
    grade = variant.grade(result, wager.spot, config)
    if grade.result == "push":
        return None
    s = settle(wager.stake_minor, grade, config.commission_rounding)
    return s.credit_minor - s.stake_minor


HANDLERS: Final[Mapping[type[Payload], Handler[Any]]] = {
    TableOpened: on_table_opened,
    ShoeOpened: on_shoe_opened,
    ShoeClosed: on_shoe_closed,
    BettingOpened: on_betting_opened,
    BetAccepted: on_bet_accepted,
    BetRefused: on_bet_refused,
    BettingClosed: on_betting_closed,
    CommandRefused: on_command_refused,
    CardDealt: on_card_dealt,
    CoupResolved: on_coup_resolved,
}
"""The table events the monitor reads; every other type passes without effect."""

DEAD_LETTER_ALERTS: Final[Mapping[Reason, tuple[Detector, Severity]]] = {
    Reason.INTERNAL_ERROR: (Detector.INTERNAL_ERROR, Severity.CRITICAL),
}
"""Dead-letter reasons that raise an alert: a processor failed on a record (a bug or a hole in
validation that a record found) — the record is set aside and play goes on, so someone must look."""


def dead_letter_alert(rec: Envelope, dead: DeadLetter, own_name: str) -> Alerts:
    """The alert a dead letter raises, if its reason is one of :data:`DEAD_LETTER_ALERTS`. Keyed by the
    original record's table when it came from a table-keyed topic (:data:`~services.core.topics.TABLE_KEYED`:
    the table's own alert chain, which this stage writes), else by the source topic: never by an account
    or an alert id, whose chains the account and casework stages write (one writer per chain). An
    account's record names its account in ``account_ids``, so the back office still finds it by account.
    The monitor's own dead letters raise nothing: a failure on a dead letter must not feed itself."""
    found = DEAD_LETTER_ALERTS.get(dead.reason)
    if found is None or rec.producer == own_name:
        return []
    source = dead.source_topic
    named = None
    try:
        original = json.loads(dead.original or "")
        if isinstance(original, dict) and isinstance(original.get("key"), str):
            named = "".join(original["key"].split())[:256] or None
    except (ValueError, RecursionError):
        pass
    key = (named if source in topics.TABLE_KEYED else None) or "".join(source.split())[:256] or rec.key
    detector, severity = found
    original_id = dead.original_event_id
    subject: dict[str, Any] = {"event_ids": [rec.event_id, *([original_id] if original_id else [])]}
    if named and source in topics.ACCOUNT_KEYED:
        subject["account_id"] = named
    observed = {"reason": dead.reason.value, "producer": rec.producer, "source_topic": source}
    return [
        alert(detector, severity, key, subject=subject, observed=observed, threshold={}, detail=dead.detail)
    ]


UNREADABLE: Final = (LookupError, TypeError, ValueError, AttributeError, ArithmeticError, DomainError)
"""What reading a malformed payload can raise; it becomes an ``unreadable_event`` alert instead."""


class Monitor(Reactor[MonitorState]):
    """The fraud and anomaly monitor (see the module docstring): a
    :class:`~services.core.processor.Reactor` to the table events and dead letters of others, in one
    pass (each detector both updates what it remembers and says what it found)."""

    name = "monitor"
    inputs = (topics.TABLE_EVENTS, topics.DEADLETTER)
    repartitioned: ClassVar[tuple[str, ...]] = (topics.DEADLETTER,)
    """The inputs a runtime that splits the state by partition re-keys by :meth:`route` first (the
    dead letters, keyed by source topic, raise alerts on the chain of the table they concern):
    docs/adr/0011-partitioned-audit-monitor.md."""

    def route(self, record: Envelope) -> str:
        """The key of the alerts ``record`` (a dead letter) raises, by the very functions that raise
        them (the table it concerns, else its source topic); its own key when it raises
        none or cannot be read (the key it is handled under then changes nothing)."""
        try:
            payload = read_payload(record)
        except (ValidationError, DomainError):
            return record.key
        if not isinstance(payload, DeadLetter):
            return record.key
        found = refused_record(record, payload) or dead_letter_alert(record, payload, self.name)
        return found[0].key if found else record.key

    def initial(self) -> MonitorState:
        """No tables watched."""
        return MonitorState()

    def handle(self, state: MonitorState, record: Envelope) -> tuple[MonitorState, list[Draft]]:
        """:meth:`apply` to the record's payload, read here: a table event the contract refuses is an
        ``unreadable_event`` alert (the monitor never raises; through ``step`` the edge refuses it first)."""
        try:
            payload = read_payload(record)
        except (ValidationError, DomainError) as exc:
            watched = record.topic != topics.DEADLETTER and PAYLOADS.get(record.type) in HANDLERS
            found = unreadable(record, exc)
            return state, [to_draft(found.found, found.key)] if watched else []
        return self.apply(state, record, payload)

    def react(
        self, state: MonitorState, record: Envelope, payload: Payload | None
    ) -> tuple[MonitorState, list[Event]]:
        """Fold one table event through the detectors, or raise the alert a dead letter calls for (a
        record refused at the input, or a processor's internal error)."""
        at = record.occurred_at
        if record.topic == topics.DEADLETTER:
            if not isinstance(payload, DeadLetter):
                return state, []
            found = refused_record(record, payload) or dead_letter_alert(record, payload, self.name)
            return state, [a.event(at) for a in found]
        handler = None if payload is None else HANDLERS.get(type(payload))
        if handler is None:
            return state, []
        table = state.tables.get(record.key) or TableWatch(record.key)
        seen = Seen(
            record.event_id, record.key, record.occurred_at,
            getattr(payload, "coup_id", None), getattr(payload, "shoe_id", None),
        )  # fmt: skip
        try:
            table, out = handler(table, payload, seen)
        except UNREADABLE as exc:
            return state, [unreadable(record, exc).event(at)]
        return MonitorState({**state.tables, record.key: table}), [a.event(at) for a in out]


def unreadable(record: Envelope, exc: Exception) -> Alert:
    """The ``unreadable_event`` alert of a table event the monitor could not use."""
    detail = f"{record.type} could not be read: {type(exc).__name__}: {exc}"
    return alert(
        Detector.UNREADABLE_EVENT, Severity.WARNING, record.key,
        subject={"event_ids": [record.event_id]}, observed={"type": record.type}, threshold={}, detail=detail,
    )  # fmt: skip


REFUSED_SEVERITY: Final[Mapping[Reason, Severity]] = {
    Reason.UNAUTHENTICATED: Severity.WARNING,
    Reason.NOT_PERMITTED: Severity.CRITICAL,
    Reason.KEY_MISMATCH: Severity.CRITICAL,
    Reason.TRANSFER_ID_NOT_OWN: Severity.CRITICAL,
    Reason.NOT_A_PLAYER_ACCOUNT: Severity.CRITICAL,
}
"""An unauthenticated record is a writer without our key (a stranger, a misconfigured system); a
known principal writing beyond its rights is a compromised or rogue insider: critical."""


def refused_record(rec: Envelope, dead: DeadLetter) -> Alerts:
    """One ``refused_record`` alert for a record refused at the input by its topic's primary consumer
    (see the module docstring); nothing for any other dead letter."""
    reason, source = dead.reason, dead.source_topic
    primary = PRIMARY_CONSUMER.get(source)
    if reason not in REFUSALS or primary is None or rec.producer != primary.value:
        return []
    subject: dict[str, Any] = {
        "event_ids": [str(dead.original_event_id)],
        "dead_letter_id": rec.event_id,
    }
    try:
        original = json.loads(dead.original or "")
    except (ValueError, RecursionError):
        original = None
    if isinstance(original, dict):
        subject.update(
            {k: original[k] for k in ("type", "key", "producer") if isinstance(original.get(k), str)}
        )
    return [alert(
        Detector.REFUSED_RECORD, REFUSED_SEVERITY[reason], source,
        subject=subject, observed={"reason": reason.value}, threshold={},
        detail=f"refused at the input of {source}: {dead.detail}",
    )]  # fmt: skip
