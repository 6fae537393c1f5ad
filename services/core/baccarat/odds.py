"""Exact odds of every bet, by full enumeration of the shoe, in integers and fractions.

**What is counted.** A shoe of ``decks`` 52-card decks holds ``N = 52 × decks`` distinct cards. A coup
uses at most ``K`` of them (6 in the two-hand games). Every ordered sequence of ``K`` distinct cards
from the shoe is equally likely to be the top of a freshly shuffled shoe, and each decides one coup
(the cards a coup does not use are simply the rest of the sequence). ``total`` is the number of those
sequences, ``N × (N − 1) × … × (N − K + 1)``, and every count below is a number of them. This is the
convention of the classic published tables: for punto banco with 8 decks ``total`` is
4,998,398,275,503,360 = 416!/410!, of which the banker wins 2,292,252,566,437,888, the player
2,230,518,282,592,256 and 475,627,426,473,216 tie (Wizard of Odds, baccarat appendix 1).

**How.** Two enumerators, both exact (Python integers, :class:`~fractions.Fraction`):

* :func:`enumerate_two_hand` for the forced punto banco tableau (``punto_banco``, ``ez_baccarat``,
  ``super6``: any :class:`~.variants.punto_banco.TwoHandGame` that does not override the tableau)
  walks point values with their multiplicities, dealing without replacement: the first four cards
  (10⁴ value sequences) are grouped by the two totals and the remaining composition, and the third
  cards are enumerated once per group. 8 decks take a few tens of milliseconds.
* :func:`enumerate_generic` drives any variant's own ``next_step`` over card classes (point values by
  default, or ranks), taking every decision with the variant's named default strategy (its
  ``default_strategy`` attribute, else the first of ``strategies()``). It is exponential in the cards a
  coup uses; ``max_nodes`` bounds it.

Both group the coups they find by their *shape* (outcome, natural, versus, events, and every hand's
total and number of cards) and grade one representative result per shape, so a spot's grade must
depend on the result only through its shape. That holds for every spot here except the pair bets
(they look at ranks), which are computed analytically instead: two given slots of an exchangeable
sequence hold a pair with probability ``Σ n_r (n_r − 1) / (N (N − 1))`` (``n_r`` cards of rank ``r``),
whatever the rest of the coup does, so the pair wins in ``(N − 2)…(N − K + 1) × Σ n_r (n_r − 1)``
sequences.

**House edge** is minus the expected net result per unit staked, pushes included (the convention of
the published tables: banker 1.0579 %, player 1.2351 %, tie at 8:1 14.3596 % with 8 decks).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from functools import lru_cache
from typing import Any, Final

from services.core.baccarat.engine import (
    CoupResult,
    CoupState,
    Decide,
    HandResult,
    Resolved,
    Strategy,
    TableConfig,
    Variant,
)
from services.core.baccarat.variants import get_variant
from services.core.baccarat.variants.punto_banco import BANKER_DRAW_TABLE, STOOD, TwoHandGame
from services.core.cards import Card, shoe_cards
from services.core.errors import DomainError, Reason
from services.core.ledger import BPS, Grade

PAIR_SPOTS: Final[Mapping[str, str]] = {"player_pair": "player", "banker_pair": "banker"}
"""Spots that look at ranks (the first two cards of the hand named), computed analytically."""

MAX_DECKS: Final = 8
"""The largest shoe the odds are computed for (as :func:`~services.core.cards.shoe_cards` allows)."""

Shape = tuple[Any, ...]
"""What grading may depend on: ``(outcome, natural, versus, events, ((hand, total, cards), …))``."""


def falling(n: int, k: int) -> int:
    """``n × (n − 1) × … × (n − k + 1)``: ordered choices of ``k`` out of ``n`` (1 when ``k`` is 0)."""
    out = 1
    for i in range(k):
        out *= n - i
    return out


@dataclass(frozen=True, slots=True)
class Enumeration:
    """Every coup a shoe can deal, grouped by shape.

    ``shapes`` pairs one representative :class:`CoupResult` per shape with the number of the ``total``
    equally likely ordered sequences of ``slots`` cards that give that shape; the counts sum to
    ``total``. ``rank_counts`` is how many cards of each rank the shoe holds (for the pair bets);
    ``nodes`` how many coup states the generic enumerator visited (0 for the fast one).
    """

    variant: str
    decks: int
    config: TableConfig
    slots: int
    total: int
    shapes: tuple[tuple[CoupResult, int], ...]
    rank_counts: tuple[tuple[str, int], ...]
    method: str
    strategy: str | None = None
    nodes: int = 0

    def outcome_counts(self) -> dict[str, int]:
        """Sequences per outcome, by outcome name (sorted)."""
        counts: dict[str, int] = defaultdict(int)
        for result, count in self.shapes:
            counts[result.outcome] += count
        return dict(sorted(counts.items()))


def shape_of(result: CoupResult) -> Shape:
    """The part of ``result`` that grading other than the pair bets may look at."""
    hands = tuple((h.name, h.total, len(h.cards)) for h in result.hands)
    return (result.outcome, result.natural, result.versus, result.events, hands)


def odds_config(variant: Variant, decks: int, **overrides: Any) -> TableConfig:
    """The variant's table with ``decks`` decks and ``overrides``: only a deck count the variant is
    offered with (its ``decks`` setting), so a figure is always one a real table can have."""
    return variant.config(**{**overrides, "decks": decks})


def _rank_counts(decks: int) -> tuple[tuple[str, int], ...]:
    counts: dict[str, int] = defaultdict(int)
    for card in shoe_cards(decks):
        counts[card[0]] += 1
    return tuple(counts.items())


# --- the forced two-hand tableau over point values ------------------------------------------------

_ZERO_RANKS: Final = "TJQ"
_STANDARD: Final = {"AS": 1, "5S": 5, "9S": 9, "TS": 0, "KS": 0}


def _hand(name: str, total: int, size: int) -> HandResult:
    """A representative hand of ``size`` canonical cards totalling ``total``, never a pair."""
    first = "T" if total == 0 else "A23456789"[total - 1]
    ranks = first + "".join(r for r in _ZERO_RANKS if r != first)
    return HandResult(name, tuple(r + "S" for r in ranks[:size]), total)


Open = dict[tuple[int, int, tuple[int, ...]], int]


def _first_four(counts: list[int]) -> tuple[dict[tuple[int, int], int], Open]:
    """Weights of the first four cards: naturals by totals; the rest by totals and what is left."""
    naturals: dict[tuple[int, int], int] = defaultdict(int)
    open_: Open = defaultdict(int)
    c = counts
    for p1 in range(10):
        w1 = c[p1]
        if not w1:
            continue
        c[p1] -= 1
        for b1 in range(10):
            w2 = w1 * c[b1]
            if not w2:
                continue
            c[b1] -= 1
            for p2 in range(10):
                w3 = w2 * c[p2]
                if not w3:
                    continue
                c[p2] -= 1
                p = (p1 + p2) % 10
                for b2 in range(10):
                    w4 = w3 * c[b2]
                    if not w4:
                        continue
                    b = (b1 + b2) % 10
                    if p >= 8 or b >= 8:
                        naturals[p, b] += w4
                    else:
                        c[b2] -= 1
                        open_[p, b, tuple(c)] += w4
                        c[b2] += 1
                c[p2] += 1
            c[b1] += 1
        c[p1] += 1
    return naturals, open_


def _third_cards(p: int, b: int, c: tuple[int, ...], left: int) -> dict[tuple[int, int, int, int], int]:
    """From two-card totals ``p``, ``b`` (no natural) and ``left`` cards of composition ``c``: the
    number of ordered sequences of the two remaining slots per ``(p, b, player cards, banker cards)``."""
    out: dict[tuple[int, int, int, int], int] = defaultdict(int)
    if p <= 5:
        row = BANKER_DRAW_TABLE[b]
        for x in range(10):
            wx = c[x]
            if not wx:
                continue
            p3 = (p + x) % 10
            if row[x]:
                for y in range(10):
                    wy = c[y] - (x == y)
                    if wy:
                        out[p3, (b + y) % 10, 3, 3] += wx * wy
            else:
                out[p3, b, 3, 2] += wx * (left - 1)
    elif BANKER_DRAW_TABLE[b][STOOD]:
        for y in range(10):
            if c[y]:
                out[p, (b + y) % 10, 2, 3] += c[y] * (left - 1)
    else:
        out[p, b, 2, 2] += left * (left - 1)
    return out


def enumerate_two_hand(
    variant: TwoHandGame, config: TableConfig, counts: Sequence[int] | None = None
) -> Enumeration:
    """Exact enumeration of a forced punto banco tableau over point values (see the module docstring).

    ``counts`` (cards of each point value 0–9) replaces the shoe of ``config.decks`` decks, e.g. to
    compare with :func:`enumerate_generic` on a small shoe (the pair bets then have no rank counts).
    Refuses a variant that overrides the tableau or the card values (use :func:`enumerate_generic`).
    """
    if not variant.forced() or any(variant.card_points[c] != v for c, v in _STANDARD.items()):
        raise DomainError(Reason.BAD_CONFIG, f"{variant.id} does not play the forced punto banco tableau")
    ranks: tuple[tuple[str, int], ...] = ()
    if counts is None:
        ranks = _rank_counts(config.decks)
        counts = [0] * 10
        for card in shoe_cards(config.decks):
            counts[variant.card_points[card]] += 1
    counts = list(counts)
    n = sum(counts)
    naturals, open_ = _first_four(counts)
    weights: dict[tuple[int, int, int, int, bool], int] = defaultdict(int)
    rest = falling(n - 4, 2)
    for (p, b), w in naturals.items():
        weights[p, b, 2, 2, True] += w * rest
    for (p, b, comp), w in open_.items():
        for (pt, bt, pn, bn), count in _third_cards(p, b, comp, n - 4).items():
            weights[pt, bt, pn, bn, False] += w * count
    p_name, b_name = variant.hand_names
    shapes = []
    for (pt, bt, pn, bn, natural), count in sorted(weights.items()):
        outcome = p_name if pt > bt else b_name if bt > pt else "tie"
        hands = (_hand(p_name, pt, pn), _hand(b_name, bt, bn))
        result = CoupResult(variant.id, variant.rules_version, hands, outcome, natural, pn + bn)
        shapes.append((result, count))
    return Enumeration(
        variant=variant.id, decks=config.decks, config=config, slots=6, total=falling(n, 6),
        shapes=tuple(shapes), rank_counts=ranks, method="two_hand_points",
    )  # fmt: skip


# --- any variant, through its own next_step ------------------------------------------------------


def default_strategy(variant: Variant) -> tuple[str, Strategy] | None:
    """The variant's named default strategy: its ``default_strategy`` attribute if it names one of
    ``strategies()``, else the first strategy listed; ``None`` for a variant without choices."""
    strategies = variant.strategies()
    name = getattr(variant, "default_strategy", None)
    if isinstance(name, str) and name in strategies:
        return name, strategies[name]
    for first, strategy in strategies.items():
        return first, strategy
    return None


def card_classes(variant: Variant, decks: int, by: str = "points") -> tuple[tuple[Card, int], ...]:
    """The shoe as ``(representative card, how many)`` classes: cards of one point value under the
    variant's values (``by="points"``) or of one rank (``by="ranks"``), in shoe order."""
    classes: dict[Any, list[Any]] = {}
    for card in shoe_cards(decks):
        key = variant.card_points[card] if by == "points" else card[0]
        if key not in classes:
            classes[key] = [card, 0]
        classes[key][1] += 1
    return tuple((str(c), int(k)) for c, k in classes.values())


def enumerate_generic(
    variant: Variant,
    config: TableConfig,
    *,
    by: str = "points",
    strategy: str | None = None,
    max_nodes: int = 1_000_000,
    classes: Sequence[tuple[Card, int]] | None = None,
) -> Enumeration:
    """Exact enumeration through ``variant.next_step`` (see the module docstring).

    ``by`` is ``"points"`` (classes of equal point value; valid when the rules look only at point
    values, as every tableau here does) or ``"ranks"``. Decisions come from the strategy named
    ``strategy`` or the variant's default. More than ``max_nodes`` states raise ``BAD_CONFIG``.
    ``classes`` (representative card, how many) replaces the shoe of ``config.decks`` decks (the pair
    bets then have no rank counts).
    """
    chosen = _strategy(variant, strategy)
    ranks = _rank_counts(config.decks) if classes is None else ()
    if classes is None:
        classes = card_classes(variant, config.decks, by)
    reps = [c for c, _ in classes]
    left = [k for _, k in classes]
    n = sum(left)
    found: dict[Shape, list[Any]] = {}
    budget = [max_nodes]

    def visit(state: CoupState, weight: int) -> None:
        budget[0] -= 1
        if budget[0] < 0:
            raise DomainError(Reason.BAD_CONFIG, f"{variant.id}: more than {max_nodes} states to enumerate")
        step = variant.next_step(state)
        if isinstance(step, Resolved):
            key = shape_of(step.result)
            slot = found.get(key)
            if slot is None:
                found[key] = [step.result, {state.cards_used: weight}]
            else:
                slot[1][state.cards_used] = slot[1].get(state.cards_used, 0) + weight
            return
        if isinstance(step, Decide):
            if chosen is None:
                raise DomainError(Reason.DECISION_REQUIRED, f"{variant.id} has no strategy for {step.hand}")
            choice = chosen[1](state, step)
            visit(replace(state, decisions=(*state.decisions, (step.hand, choice))), weight)
            return
        for i, card in enumerate(reps):
            k = left[i]
            if not k:
                continue
            left[i] -= 1
            hands = tuple((h, (*cs, card)) if h == step.hand else (h, cs) for h, cs in state.hands)
            visit(CoupState(state.config, hands, state.decisions, state.cards_used + 1), weight * k)
            left[i] += 1

    visit(CoupState(config=config, hands=tuple((h, ()) for h in variant.hands(config))), 1)
    slots = max(used for _, by_used in found.values() for used in by_used)
    shapes = [
        (result, sum(w * falling(n - used, slots - used) for used, w in by_used.items()))
        for result, by_used in found.values()
    ]
    shapes.sort(key=lambda rc: repr(shape_of(rc[0])))
    return Enumeration(
        variant=variant.id, decks=config.decks, config=config, slots=slots, total=falling(n, slots),
        shapes=tuple(shapes), rank_counts=ranks, method=f"generic_{by}",
        strategy=None if chosen is None else chosen[0], nodes=max_nodes - budget[0],
    )  # fmt: skip


def _strategy(variant: Variant, name: str | None) -> tuple[str, Strategy] | None:
    if name is None:
        return default_strategy(variant)
    strategies = variant.strategies()
    if name not in strategies:
        raise DomainError(Reason.BAD_CONFIG, f"{variant.id} has no strategy {name!r} ({list(strategies)})")
    return name, strategies[name]


# --- grading and the report ----------------------------------------------------------------------


def enumerate_coups(
    variant_id: str, decks: int, strategy: str | None = None, **overrides: Any
) -> Enumeration:
    """The enumeration for ``variant_id`` with ``decks`` decks: the point-value fast path where the
    variant plays the forced two-hand tableau, the generic enumerator otherwise."""
    return _enumerate_cached(variant_id, decks, strategy, tuple(sorted(overrides.items())))


@lru_cache(maxsize=64)
def _enumerate_cached(
    variant_id: str, decks: int, strategy: str | None, overrides: tuple[tuple[str, Any], ...]
) -> Enumeration:
    variant = get_variant(variant_id)
    if not variant.enumerable:
        raise DomainError(
            Reason.BAD_CONFIG,
            f"{variant_id} has too many hands to enumerate exactly here (see its docstring); "
            "use the seeded simulation instead",
        )
    config = odds_config(variant, decks, **dict(overrides))
    if isinstance(variant, TwoHandGame) and variant.forced() and strategy is None:
        try:
            return enumerate_two_hand(variant, config)
        except DomainError:
            pass
    return enumerate_generic(variant, config, strategy=strategy)


def net(grade: Grade) -> Fraction:
    """The net result of one unit staked under ``grade``: the win less commission, 0, or −1."""
    if grade.result == "lose":
        return Fraction(-1)
    if grade.result == "push":
        return Fraction(0)
    win = Fraction(*grade.win_ratio)
    base = win if grade.commission_base == "win" else Fraction(1)
    return win - base * Fraction(grade.commission_bps, BPS)


def _pair_grades(variant: Variant, enum: Enumeration, spot: str) -> tuple[Grade, Grade]:
    """The grades of ``spot`` with and without a pair, read from the variant on representative hands."""
    result = enum.shapes[0][0]
    hand = PAIR_SPOTS[spot]

    def with_cards(cards: tuple[Card, ...]) -> CoupResult:
        hands = tuple(replace(h, cards=cards + h.cards[2:]) if h.name == hand else h for h in result.hands)
        return replace(result, hands=hands)

    paired = variant.grade(with_cards(("AS", "AH")), spot, enum.config)
    unpaired = variant.grade(with_cards(("AS", "2H")), spot, enum.config)
    return paired, unpaired


def grade_counts(enum: Enumeration, spot: str) -> dict[Grade, int]:
    """How many of the ``total`` sequences give each :class:`Grade` to a bet on ``spot``."""
    variant = get_variant(enum.variant)
    counts: dict[Grade, int] = defaultdict(int)
    if spot in PAIR_SPOTS and by_points(enum):
        if not enum.rank_counts:
            raise DomainError(Reason.BAD_CONFIG, f"{spot} needs the shoe's ranks, not a point composition")
        paired, unpaired = _pair_grades(variant, enum, spot)
        same = sum(k * (k - 1) for _, k in enum.rank_counts)
        n = sum(k for _, k in enum.rank_counts)
        wins = falling(n - 2, enum.slots - 2) * same
        counts[paired] += wins
        counts[unpaired] += enum.total - wins
        return dict(counts)
    for result, count in enum.shapes:
        counts[variant.odds_grade(result, spot, enum.config)] += count
    return dict(counts)


def by_points(enum: Enumeration) -> bool:
    """True when the enumeration's representative cards stand for point values, not ranks."""
    return enum.method != "generic_ranks"


def _grade_label(grade: Grade) -> str:
    num, den = grade.win_ratio
    label = f"{num}:{den}"
    if grade.commission_bps:
        label += f" less {grade.commission_bps} bps of the {grade.commission_base}"
    return label


def bet_figures(enum: Enumeration, spot: str) -> dict[str, Any]:
    """One spot's figures: win probability, house edge (float and exact), counts per grade."""
    counts = grade_counts(enum, spot)
    total = enum.total
    wins = sum(c for g, c in counts.items() if g.result == "win")
    edge = -sum((net(g) * c for g, c in counts.items()), Fraction(0)) / total
    by_result: dict[str, Any] = {"win": {}, "push": 0, "lose": 0}
    for grade, count in sorted(counts.items(), key=lambda gc: (-net(gc[0]), repr(gc[0]))):
        if grade.result == "win":
            label = _grade_label(grade)
            by_result["win"][label] = by_result["win"].get(label, 0) + count
        else:
            by_result[grade.result] += count
    return {
        "probability_win": wins / total,
        "house_edge": float(edge),
        "house_edge_exact": f"{edge.numerator}/{edge.denominator}",
        "counts": by_result,
        "includes": get_variant(enum.variant).odds_includes(spot, enum.config),
    }


def odds_report(variant_id: str, decks: int, strategy: str | None = None, **overrides: Any) -> dict[str, Any]:
    """docs/cli.md's ``odds --json`` object for ``variant_id`` with ``decks`` decks.

    ``total`` is the number of equally likely ordered sequences of ``cards_per_sequence`` cards (see
    the module docstring); ``outcomes`` counts them per coup outcome; ``bets`` gives, per spot of the
    variant's default table (with ``overrides``), the probability that the bet wins and its house
    edge (also exact, as a fraction, with the counts per grade). Extra keys: ``cards_per_sequence``,
    ``method``, ``strategy``.
    """
    enum = enumerate_coups(variant_id, decks, strategy, **overrides)
    variant = get_variant(variant_id)
    outcomes = {
        name: {"count": count, "probability": count / enum.total}
        for name, count in enum.outcome_counts().items()
    }
    bets = {spot: bet_figures(enum, spot) for spot in variant.spots(enum.config)}
    return {
        "variant": variant_id,
        "decks": decks,
        "total": enum.total,
        "outcomes": outcomes,
        "bets": bets,
        "cards_per_sequence": enum.slots,
        "method": enum.method,
        "strategy": enum.strategy,
    }


def odds_text(variant_id: str, decks: int, strategy: str | None = None, **overrides: Any) -> str:
    """The report of :func:`odds_report` as a table for people."""
    report = odds_report(variant_id, decks, strategy, **overrides)
    lines = [
        f"{variant_id}, {decks} deck{'s' if decks > 1 else ''}: {report['total']:,} equally likely ordered "
        f"sequences of {report['cards_per_sequence']} cards ({report['method']}"
        + (f", strategy {report['strategy']})" if report["strategy"] else ")"),
        "",
        f"{'outcome':<22}{'sequences':>28}{'probability':>14}",
    ]
    for name, row in report["outcomes"].items():
        lines.append(f"{name:<22}{row['count']:>28,}{row['probability']:>14.6f}")
    lines += ["", f"{'bet':<22}{'P(win)':>12}{'house edge':>14}"]
    for spot, row in report["bets"].items():
        lines.append(f"{spot:<22}{row['probability_win']:>12.6f}{row['house_edge'] * 100:>13.4f}%")
    lines += ["", "house edge = minus the bettor's expected net per unit staked; each figure includes:"]
    lines += [f"  {spot}: {row['includes']}" for spot, row in report["bets"].items()]
    return "\n".join(lines)
