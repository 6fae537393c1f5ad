"""Coups per second through the rules engine against a bare loop, and the exact-odds enumeration time.

Every contender resolves every coup of the same shuffled 8-deck shoes (dealt from the top, no burn or
stop card, until fewer than 6 cards are left):

* **bare loop** — the baseline: a minimal hand-written punto banco resolver over int point values
  (the shoe turned into ints once), counting outcomes and nothing else;
* **engine deal** — :meth:`TwoHandGame.deal`, the engine's fast path for forced tableaux, on the card
  strings: each coup's hands, totals and natural flag as a tuple;
* **engine play** — :meth:`TwoHandGame.play`: the same plus the full frozen :class:`CoupResult` of
  every coup (what the dealer records);
* **engine state machine** — :func:`engine.resolve` (start / next_step / apply_card), the path the
  dealer takes, on a fraction of the coups.

Each contender runs ``--repeats`` times, interleaved, and keeps its best time (the machine may be busy).
All must agree on the outcome counts (checked). Then the time of the exact odds enumeration of punto
banco with 8 decks. Run: ``python -m bench engine`` (``--shoes N``, ``--repeats N``).
"""

from __future__ import annotations

import argparse
import hashlib
import time
from collections import Counter
from collections.abc import Sequence

from services.core.baccarat import engine
from services.core.baccarat import odds as odds_module
from services.core.baccarat.variants import get_variant
from services.core.baccarat.variants.punto_banco import TwoHandGame
from services.core.cards import CARD_POINTS, Card, shoe_cards
from services.core.shoe import shuffle

DECKS = 8


def shoes(count: int, seed: str = "bench-engine") -> list[tuple[Card, ...]]:
    """``count`` shuffled 8-deck shoes, each from its own recorded seed."""
    cards = shoe_cards(DECKS)
    return [shuffle(hashlib.sha256(f"{seed}/{i}".encode()).digest(), cards) for i in range(count)]


def bare_loop(all_shoes: Sequence[tuple[Card, ...]]) -> tuple[int, Counter[str]]:
    """The baseline: punto banco over int values, outcome counts only."""
    draws = [[b <= 2 or (b == 3 and x != 8) or (b == 4 and 2 <= x <= 7) or (b == 5 and 4 <= x <= 7)
              or (b == 6 and 6 <= x <= 7) for x in range(10)] + [b <= 5] for b in range(8)]  # fmt: skip
    player = banker = tie = 0
    for shoe in all_shoes:
        v = [CARD_POINTS[c] for c in shoe]
        end = len(v) - 6
        i = 0
        while i <= end:
            p = (v[i] + v[i + 2]) % 10
            b = (v[i + 1] + v[i + 3]) % 10
            i += 4
            if p < 8 and b < 8:
                if p <= 5:
                    x = v[i]
                    i += 1
                    p = (p + x) % 10
                else:
                    x = 10
                if draws[b][x]:
                    b = (b + v[i]) % 10
                    i += 1
            if p > b:
                player += 1
            elif b > p:
                banker += 1
            else:
                tie += 1
    return player + banker + tie, Counter(player=player, banker=banker, tie=tie)


def fast_deal(variant: TwoHandGame, all_shoes: Sequence[tuple[Card, ...]]) -> tuple[int, Counter[str]]:
    """The engine's fast path without the result object: :meth:`TwoHandGame.deal` per coup."""
    player = banker = tie = 0
    deal = variant.deal
    for shoe in all_shoes:
        end = len(shoe) - 6
        pos = 0
        while pos <= end:
            pc, bc, p, b, _ = deal(shoe, pos)
            pos += len(pc) + len(bc)
            if p > b:
                player += 1
            elif b > p:
                banker += 1
            else:
                tie += 1
    return player + banker + tie, Counter(player=player, banker=banker, tie=tie)


def fast_path(variant: TwoHandGame, all_shoes: Sequence[tuple[Card, ...]]) -> tuple[int, Counter[str]]:
    """The engine's fast path: one full :class:`CoupResult` per coup (:meth:`TwoHandGame.play`)."""
    outcomes: Counter[str] = Counter()
    play = variant.play
    for shoe in all_shoes:
        end = len(shoe) - 6
        pos = 0
        while pos <= end:
            result = play(shoe, pos)
            pos += result.cards_used
            outcomes[result.outcome] += 1
    return sum(outcomes.values()), outcomes


def state_machine(
    config: engine.TableConfig, all_shoes: Sequence[tuple[Card, ...]]
) -> tuple[int, Counter[str]]:
    """The dealer's path: :func:`engine.resolve` per coup."""
    outcomes: Counter[str] = Counter()
    for shoe in all_shoes:
        end = len(shoe) - 6
        pos = 0
        while pos <= end:
            result = engine.resolve(config, shoe[pos : pos + 6])
            pos += result.cards_used
            outcomes[result.outcome] += 1
    return sum(outcomes.values()), outcomes


Contenders = dict[str, tuple[object, tuple[object, ...]]]


def best_of(repeats: int, contenders: Contenders) -> dict[str, tuple[float, int, Counter[str]]]:
    """Run every contender ``repeats`` times, interleaved (so a busy machine slows all alike); keep each
    one's best time. Returns label → (seconds, coups, outcome counts)."""
    best: dict[str, tuple[float, int, Counter[str]]] = {}
    for _ in range(repeats):
        for label, (run, args) in contenders.items():
            started = time.perf_counter()
            coups, outcomes = run(*args)  # type: ignore[operator]
            seconds = time.perf_counter() - started
            if label not in best or seconds < best[label][0]:
                best[label] = (seconds, coups, outcomes)
    return best


def main(argv: Sequence[str] | None = None) -> None:
    """Print the figures (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m bench engine")
    parser.add_argument("--shoes", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args([] if argv is None else argv)
    variant = get_variant("punto_banco")
    assert isinstance(variant, TwoHandGame)
    all_shoes = shoes(args.shoes)
    sm_shoes = all_shoes[: max(1, args.shoes // 20)]
    print(f"{args.shoes} shuffled {DECKS}-deck shoes, every coup dealt from the top; best of {args.repeats}")
    best = best_of(args.repeats, {
        "bare loop (baseline)": (bare_loop, (all_shoes,)),
        "engine deal (tuple)": (fast_deal, (variant, all_shoes)),
        "engine play (CoupResult)": (fast_path, (variant, all_shoes)),
        "engine state machine": (state_machine, (variant.config(), sm_shoes)),
    })  # fmt: skip
    rates = {}
    for label, (seconds, coups, _) in best.items():
        rates[label] = coups / seconds
        print(f"{label:<26}{coups:>10,} coups {seconds:>8.3f} s {rates[label]:>12,.0f} coups/s")
    full = [best[label][2] for label in list(best)[:3]]
    machine = best["engine state machine"][2]
    if not full[0] == full[1] == full[2] or machine != bare_loop(sm_shoes)[1]:
        raise AssertionError(f"contenders disagree: {full} / {machine}")
    bare = rates["bare loop (baseline)"]
    print(f"engine deal / bare loop   {rates['engine deal (tuple)'] / bare:.2f}  (goal >= 0.5)")
    print(
        f"engine play / bare loop   {rates['engine play (CoupResult)'] / bare:.2f}  "
        "(+ one frozen CoupResult and two HandResults per coup)"
    )
    print(f"state machine / bare loop {rates['engine state machine'] / bare:.3f}")
    odds_module._enumerate_cached.cache_clear()
    started = time.perf_counter()
    enum = odds_module.enumerate_two_hand(variant, odds_module.odds_config(variant, DECKS))
    enum_s = time.perf_counter() - started
    started = time.perf_counter()
    odds_module._enumerate_cached.cache_clear()
    report = odds_module.odds_report("punto_banco", DECKS)
    report_s = time.perf_counter() - started
    print(
        f"exact enumeration, punto banco {DECKS} decks: {enum_s * 1000:.0f} ms "
        f"({len(enum.shapes)} shapes, total {enum.total:,}); full odds report {report_s * 1000:.0f} ms"
    )
    edges = {spot: report["bets"][spot]["house_edge"] for spot in ("banker", "player", "tie")}
    print("house edge " + ", ".join(f"{spot} {edge:.4%}" for spot, edge in edges.items()))


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
