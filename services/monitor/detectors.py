"""The monitor's rule detectors and their thresholds: past posting, shoe tampering (a card not due, a card
dealt more often than the shoe holds, a shoe position repeated or going backwards), win streaks,
net-result outliers, hedged bets and structuring. Each a small pure function: what an account or a shoe
remembers and the event seen in, what it remembers after and its alerts out."""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import ClassVar, Final

from services.core.baccarat.coup import Coup
from services.core.contract import BetRefused, CommandRefused
from services.core.errors import Reason
from services.core.ledger import BPS, Wager
from services.core.reasons import Detector, Severity
from services.core.values import replace
from services.monitor.alerts import Alerts, Seen, alert
from services.monitor.sequential import binomial_tail, binomial_threshold
from services.monitor.state import Punter, ShoeWatch

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
