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

import bisect
import heapq
import json
import math
from collections.abc import Callable, Iterator, Mapping
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
    FALSE_ALARMS_PER_10K_TARGET,
    binomial_tail,
    binomial_threshold,
    cusum_step,
    cusum_threshold,
    llr_micro,
    nats,
    run_length,
    run_probability,
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
    edge_micro: int = 0
    edge_bets: tuple[str, ...] = ()
    bot: tuple[tuple[str, int, int], ...] = ()
    faced: str = ""
    faced_run: tuple[str, ...] = ()


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
    bias_micro: tuple[int, int] = (0, 0)
    bias_coups: tuple[int, int] = (0, 0)
    opened_at: str = ""
    first_card: str = ""
    pairs: Mapping[str, tuple[int, ...]] = field(default_factory=dict)

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
    4,096 accounts, found by a scan (``min`` with a key function, about 0.4 ms a bet): 7 of the 28
    profiled seconds the observers took over two coups of ``bench speed``. Here a heap of
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
) -> Alert:
    """An ``AnomalyDetected`` for the table's alert stream (``table_id`` is its key, unless ``key``
    names another: the account stage keys its alerts by account). ``honest_probability``: how
    likely what was seen is under honest play (a bound, as a decimal string), where one is known."""
    given = {} if honest_probability is None else {"honest_probability": honest_probability}
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
        Detector.WIN_STREAK, Severity.WARNING, rec.key, subject=subject,
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
        Detector.NET_RESULT_OUTLIER, Severity.WARNING, rec.key,
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

BIAS_P0: Final = WIN_PROBABILITY_MAX
"""Honest bound on either side's share of decided coups (see :data:`WIN_PROBABILITY_MAX`: exact
enumeration gives at most 50.71 % for banker, 49.32 % for player)."""

BIAS_P1: Final = Fraction(3, 4)
"""The share of decided coups a stacked or biased shoe is tested for (one side winning 3 in 4)."""

BIAS_H_MICRO: Final = cusum_threshold(2 * 10_000)
"""``shoe_bias`` CUSUM threshold: two one-sided CUSUMs (banker, player), at most one decided coup per
coup each, so 20 000 observations per 10 000 coups; ``h = ln(20 000 / (1/10)) ≈ 12.21`` nats gives
at most 1/10 false alarm per 10 000 honest coups (Lorden: ARL₀ ≥ e^h)."""

BIAS_UP: Final = llr_micro(BIAS_P1, BIAS_P0)
BIAS_DOWN: Final = llr_micro(1 - BIAS_P1, 1 - BIAS_P0)

EDGE_RANKS: Final = frozenset("789")
"""First cards that favour player (a 7, 8 or 9 to player's first hand): what an edge sorter sees."""

EDGE_P0: Final = Fraction(3, 10)
"""Honest bound on the chance that a coup's first card is a 7, 8 or 9: 12/52 = 23.1 % in a full
shoe; rounded up to 30 % so that a depleted shoe stays within it. Bets are placed before the deal,
so an honest player bet is independent of the first card."""

EDGE_P1: Final = Fraction(9, 10)
"""The edge sorter's player bets: nine in ten come with a 7, 8 or 9 first card."""

EDGE_H_MICRO: Final = cusum_threshold(8 * 10_000)
"""``edge_sorting`` CUSUM threshold per account: at most 8 player bets per coup, so 80 000
observations per 10 000 coups; ``h = ln(800 000) ≈ 13.59`` nats (≤ 1/10 false alarm per 10 000)."""

EDGE_UP: Final = llr_micro(EDGE_P1, EDGE_P0)
EDGE_DOWN: Final = llr_micro(1 - EDGE_P1, 1 - EDGE_P0)

BOT_JITTER_MS: Final = 50
"""Delays after the window opened that differ by at most this are "the same timing"."""

BOT_REPEAT_MAX: Final = Fraction(1, 4)
"""Honest bound on the chance that a player's bet repeats the previous coup's exact stake *and*
timing to within :data:`BOT_JITTER_MS` (each at most 1/2; a human's reaction time varies by far more
than 50 ms)."""

BOT_RUN: Final = run_length(BOT_REPEAT_MAX, 8 * 10_000)
"""Consecutive identical (stake, timing) bets that raise ``bot_regularity``: the least ``k`` with
``80 000 · (1/4)^k ≤ 1/10`` (one check per bet, at most 8 per coup): 10."""

LINK_BAND_BPS: Final = 500
"""Two stakes are "matched" when they differ by at most 5 % of the larger."""

LINK_P0: Final = Fraction(1, 8)
"""Honest bound on the chance that two given accounts at a coup stand on opposite even-money sides
with matched stakes (each side at most 1/2 for each, a matched stake at most 1/2)."""

LINK_WINDOW_COUPS: Final = 50
"""Matched opposite stakes by one pair count together within this many coups."""

LINK_AT: Final = binomial_threshold(LINK_WINDOW_COUPS, LINK_P0, 4 * 10_000)
"""Matched opposite coups of one pair within the window that raise ``linked_hedge``: the least ``k``
with ``40 000 · P(Binomial(50, 1/8) ≥ k) ≤ 1/10`` (at most 4 matched pairs checked per coup): 20."""

PAIR_REPEAT_MAX: Final = Fraction(1, 2)
"""Honest bound on the chance that a punter at a player-banked game faces the same banker as at his
previous coup there (the bank passes from player to player)."""

PAIR_RUN: Final = run_length(PAIR_REPEAT_MAX, 8 * 10_000)
"""Consecutive coups against the same banker that raise ``paired_play`` (chip dumping): the least
``k`` with ``80 000 · (1/2)^k ≤ 1/10``: 20."""


def shoe_bias(t: TableWatch, winner: str, rec: Seen) -> tuple[TableWatch, Alerts]:
    """Two one-sided CUSUMs on the decided coups' winner (banker, player): a stacked or slowly biased
    shoe makes one side win far more than the exact odds allow. Alerts and restarts at the threshold."""
    if winner not in EVEN_MONEY_SPOTS:
        return t, []
    out: Alerts = []
    stats, coups = list(t.bias_micro), list(t.bias_coups)
    for i, side in enumerate(EVEN_MONEY_SPOTS):
        s = cusum_step(stats[i], BIAS_UP if winner == side else BIAS_DOWN)
        coups[i] = coups[i] + 1 if s > 0 else 0
        stats[i] = s
        if s >= BIAS_H_MICRO:
            subject = {"event_ids": [rec.event_id], "coup_id": rec.coup_id,
                       "shoe_id": rec.shoe_id}  # fmt: skip
            observed = {"side": side, "cusum_nats": nats(s), "coups_in_run": coups[i]}
            threshold = {"cusum_nats": nats(BIAS_H_MICRO), "p0": str(BIAS_P0), "p1": str(BIAS_P1),
                         "false_alarms_per_10k": str(FALSE_ALARMS_PER_10K_TARGET)}  # fmt: skip
            detail = f"{side} wins far more decided coups than the odds allow (CUSUM {nats(s)} nats)"
            out.append(alert(
                Detector.SHOE_BIAS, Severity.WARNING, rec.key, subject=subject, observed=observed,
                threshold=threshold, detail=detail, honest_probability=f"{math.exp(-s / 1e6):.3g}",
            ))  # fmt: skip
            stats[i], coups[i] = 0, 0
    return replace(t, bias_micro=(stats[0], stats[1]), bias_coups=(coups[0], coups[1])), out


def edge_sorting(punter: Punter, wager: Wager, first_card: str, rec: Seen) -> tuple[Punter, Alerts]:
    """CUSUM over an account's player bets: does the coup's first card (dealt after the bet) favour
    player far more often than chance? Alerts and restarts at :data:`EDGE_H_MICRO`."""
    hit = first_card[:1] in EDGE_RANKS
    s = cusum_step(punter.edge_micro, EDGE_UP if hit else EDGE_DOWN)
    bets = (*punter.edge_bets, wager.bet_id)[-64:] if s > 0 else ()
    if s < EDGE_H_MICRO:
        return replace(punter, edge_micro=s, edge_bets=bets), []
    subject = {"event_ids": [rec.event_id], "bet_ids": list(bets), "account_id": wager.account_id,
               "coup_id": rec.coup_id}  # fmt: skip
    observed = {"cusum_nats": nats(s), "bets_in_run": len(bets), "first_card": first_card}
    threshold = {"cusum_nats": nats(EDGE_H_MICRO), "p0": str(EDGE_P0), "p1": str(EDGE_P1),
                 "ranks": sorted(EDGE_RANKS)}  # fmt: skip
    detail = f"{wager.account_id}'s player bets come with a 7, 8 or 9 first card far too often"
    found = alert(
        Detector.EDGE_SORTING, Severity.WARNING, rec.key, subject=subject, observed=observed,
        threshold=threshold, detail=detail, honest_probability=f"{math.exp(-s / 1e6):.3g}",
    )  # fmt: skip
    return replace(punter, edge_micro=0, edge_bets=()), [found]


def bot_regularity(punter: Punter, wager: Wager, delay_ms: int, rec: Seen) -> tuple[Punter, Alerts]:
    """An account's first bet of each coup: the same stake and the same timing after the window opened
    (within :data:`BOT_JITTER_MS`) :data:`BOT_RUN` coups in a row."""
    run = punter.bot
    if run and (run[-1][1] != wager.stake_minor or abs(run[-1][2] - delay_ms) > BOT_JITTER_MS):
        run = ()
    run = (*run, (wager.bet_id, wager.stake_minor, delay_ms))[-BOT_RUN:]
    if len(run) < BOT_RUN:
        return replace(punter, bot=run), []
    subject = {"event_ids": [rec.event_id], "bet_ids": [b for b, _, _ in run],
               "account_id": wager.account_id, "coup_id": rec.coup_id}  # fmt: skip
    observed = {"bets": len(run), "stake_minor": wager.stake_minor, "delays_ms": [d for _, _, d in run]}
    threshold = {"run": BOT_RUN, "jitter_ms": BOT_JITTER_MS, "repeat_probability_max": str(BOT_REPEAT_MAX)}
    detail = (
        f"{wager.account_id} bet {wager.stake_minor} about {delay_ms} ms after the window opened, "
        f"{len(run)} coups in a row"
    )
    found = alert(
        Detector.BOT_REGULARITY, Severity.WARNING, rec.key, subject=subject, observed=observed,
        threshold=threshold, detail=detail, honest_probability=run_probability(BOT_REPEAT_MAX, BOT_RUN - 1),
    )  # fmt: skip
    return replace(punter, bot=()), [found]


def _matched(a: int, b: int) -> bool:
    return abs(a - b) * BPS <= max(a, b) * LINK_BAND_BPS


def _opposite_matched(single: Mapping[str, tuple[str, int]]) -> Iterator[tuple[str, str]]:
    """Every pair ``(a, b)``, ``a < b``, of accounts on different sides with matched stakes
    (``single``: each account's one side and stake), in the order of ``a``, then ``b``: the pairs a
    scan of all ``(a, b)`` keeps, found through the accounts of each side and stake instead (a speed
    table's 4,300 single-sided players are 9.2 million pairs to scan a coup, of which 526,000 match:
    1.35 CPU s a coup, most of the monitor's time there). One way for every coup: keeping the scan for
    a demo's few bettors saved 0.24 % of ``bench pipeline``'s instructions, not worth a second
    algorithm to keep equal to this one."""
    by_stake: dict[tuple[str, int], list[str]] = {}
    for account, side_stake in single.items():
        by_stake.setdefault(side_stake, []).append(account)
    for accounts in by_stake.values():
        accounts.sort()
    groups = sorted(by_stake.items())
    for a in sorted(single):
        sa, ma = single[a]
        after = [accounts[bisect.bisect_right(accounts, a) :] for (sb, mb), accounts in groups
                 if sb != sa and _matched(ma, mb)]  # fmt: skip
        yield from ((a, b) for b in (after[0] if len(after) == 1 else heapq.merge(*after)))


def linked_hedge(t: TableWatch, coup: Coup, rec: Seen) -> tuple[TableWatch, Alerts]:
    """At the coup's end: pairs of accounts on opposite even-money sides with matched stakes; a pair
    matched :data:`LINK_AT` times within :data:`LINK_WINDOW_COUPS` coups is a linked hedge."""
    sides: dict[str, dict[str, int]] = {}
    for w in coup.wagers:
        if w.spot in HEDGE_SIDES:
            sides.setdefault(w.account_id, {}).setdefault(w.spot, 0)
            sides[w.account_id][w.spot] += w.stake_minor
    single = {a: next(iter(s.items())) for a, s in sides.items() if len(s) == 1}
    if len(single) < 2:
        return t, []
    pairs = dict(t.pairs)
    out: Alerts = []
    since = coup.number - LINK_WINDOW_COUPS
    for a, b in _opposite_matched(single):
        key = f"{a}|{b}"
        seen = (*(c for c in pairs.get(key, ()) if c > since), coup.number)
        pairs[key] = seen
        if len(seen) < LINK_AT:
            continue
        del pairs[key]
        subject = {"event_ids": [rec.event_id], "account_ids": [a, b], "account_id": a,
                   "coup_id": coup.coup_id}  # fmt: skip
        observed = {"matched_coups": len(seen), "window_coups": LINK_WINDOW_COUPS}
        threshold = {"matched_coups": LINK_AT, "p0": str(LINK_P0), "band_bps": LINK_BAND_BPS}
        chance = binomial_tail(LINK_WINDOW_COUPS, LINK_P0, len(seen))
        detail = f"{a} and {b} took opposite sides with matched stakes {len(seen)} times"
        out.append(alert(
            Detector.LINKED_HEDGE, Severity.WARNING, rec.key, subject=subject, observed=observed,
            threshold=threshold, detail=detail, honest_probability=f"{float(chance):.3g}",
        ))  # fmt: skip
    for key in [k for k, v in pairs.items() if v[-1] <= since]:
        del pairs[key]
    return replace(t, pairs=pairs), out


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
                   first_card=""), []  # fmt: skip


def on_bet_accepted(t: TableWatch, bet: BetAccepted, rec: Seen) -> tuple[TableWatch, Alerts]:
    """Keep the bet for grading; look for a hedge in the coup and for structuring."""
    wager = wager_of(bet)
    if t.coup is None or t.coup.coup_id != bet.coup_id:  # its BettingOpened not seen: a coup of its own
        t = replace(t, coup=Coup(bet.coup_id, t.coups, "betting", ""), hedged=frozenset(), delays={})
    assert t.coup is not None
    hedged, out = hedged_bets(t.coup, t.hedged, wager, rec)
    t = replace(t, coup=t.coup.accept(wager), hedged=hedged)
    max_minor = t.max_minor.get(wager.spot)
    punter, more = structuring(t.punter(wager.account_id), wager, max_minor, t.coups, rec)
    if wager.account_id not in t.delays and t.opened_at and wager.spot in HEDGE_SIDES:
        delay = millis(rec.occurred_at) - millis(t.opened_at)
        t = replace(t, delays={**t.delays, wager.account_id: delay})
        punter, bot = bot_regularity(punter, wager, delay, rec)
        more = more + bot
    return t.with_punter(wager.account_id, punter), out + more


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
    t, more = linked_hedge(t, coup, rec)
    out += more
    t, more = shoe_bias(t, resolved.outcome, rec)
    out += more
    variant = get_variant(config.variant)
    result = result_of(resolved, variant.hands(config))
    for wager in coup.wagers:
        if wager.spot == "player" and t.first_card:
            punter, found = edge_sorting(t.punter(wager.account_id), wager, t.first_card, rec)
            t = t.with_punter(wager.account_id, punter)
            out += found
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


HANDLERS: Final[Mapping[type[Payload], Handler[Any]]] = {
    TableOpened: on_table_opened,
    ShoeOpened: on_shoe_opened,
    ShoeClosed: on_shoe_closed,
    BettingOpened: on_betting_opened,
    BetAccepted: on_bet_accepted,
    BetRefused: on_bet_refused,
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
    original record's key (the table, or the account) when it is readable, else by the source topic.
    The monitor's own dead letters raise nothing: a failure on a dead letter must not feed itself."""
    found = DEAD_LETTER_ALERTS.get(dead.reason)
    if found is None or rec.producer == own_name:
        return []
    key = dead.source_topic
    try:
        original = json.loads(dead.original or "")
        if isinstance(original, dict) and isinstance(original.get("key"), str) and original["key"].strip():
            key = original["key"]
    except (ValueError, RecursionError):
        pass
    key = "".join(key.split())[:256] or rec.key
    detector, severity = found
    original_id = dead.original_event_id
    subject = {"event_ids": [rec.event_id, *([original_id] if original_id else [])]}
    source = dead.source_topic
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
