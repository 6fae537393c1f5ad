"""A seeded simulation of punto banco agrees with the exact odds.

120,000+ coups dealt from 1,500 shuffled 8-deck shoes (the documented shuffle, seeds derived from a fixed
label, so the run is the same every time and never flaky) through the engine's fast path; the frequency
of every outcome and of the side-bet events must lie within 5 standard deviations of the exact
probability computed by :mod:`services.core.baccarat.odds`. Coups are dealt from the top of each shoe
until fewer than 6 cards are left; successive coups of one shoe are slightly dependent, which the 5σ
bound (a chance of about 6 in 10 million for an independent sample) covers with room to spare.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from functools import cache

import pytest

from services.core.baccarat import odds
from services.core.baccarat.engine import CoupResult
from services.core.baccarat.variants.ez_baccarat import VARIANT as EZ
from services.core.baccarat.variants.punto_banco import VARIANT as PUNTO
from services.core.cards import shoe_cards
from services.core.shoe import shuffle

SHOES = 1_500
SIGMAS = 5.0
SPOT_EVENTS = [
    ("punto_banco", "player_pair"),
    ("punto_banco", "banker_pair"),
    ("punto_banco", "dragon_bonus_player"),
    ("punto_banco", "dragon_bonus_banker"),
    ("ez_baccarat", "dragon_7"),
    ("ez_baccarat", "panda_8"),
]


@cache
def simulate() -> tuple[int, Counter[str]]:
    """Every coup of the seeded shoes: how many, and how often each outcome and side bet won."""
    cards = shoe_cards(8)
    seen: Counter[str] = Counter()
    coups = 0
    punto_cfg, ez_cfg = PUNTO.config(), EZ.config()
    for i in range(SHOES):
        order = shuffle(hashlib.sha256(f"test_simulation/{i}".encode()).digest(), cards)
        pos = 0
        while pos <= len(order) - 6:
            result: CoupResult = PUNTO.play(order, pos)
            pos += result.cards_used
            coups += 1
            seen[result.outcome] += 1
            for variant_id, spot in SPOT_EVENTS:
                variant, config = (PUNTO, punto_cfg) if variant_id == "punto_banco" else (EZ, ez_cfg)
                if variant.grade(result, spot, config).result == "win":
                    seen[spot] += 1
    return coups, seen


def within(observed: int, n: int, p: float) -> tuple[bool, float]:
    """Whether ``observed`` successes in ``n`` trials lie within :data:`SIGMAS` of ``n p``, and the z."""
    z = (observed - n * p) / math.sqrt(n * p * (1 - p))
    return abs(z) <= SIGMAS, z


def test_enough_coups() -> None:
    """The simulation plays at least 100,000 coups."""
    coups, seen = simulate()
    assert coups >= 100_000
    assert seen["banker"] + seen["player"] + seen["tie"] == coups


@pytest.mark.parametrize("outcome", ["banker", "player", "tie"])
def test_outcome_frequency(outcome: str) -> None:
    """Banker, player and tie come up as often as the exact 8-deck probabilities say (within 5σ)."""
    coups, seen = simulate()
    p = odds.odds_report("punto_banco", 8)["outcomes"][outcome]["probability"]
    ok, z = within(seen[outcome], coups, p)
    assert ok, f"{outcome}: {seen[outcome]} of {coups}, expected p={p:.6f}, z={z:.2f}"


@pytest.mark.parametrize(("variant_id", "spot"), SPOT_EVENTS)
def test_side_bet_frequency(variant_id: str, spot: str) -> None:
    """Each side bet wins as often as its exact 8-deck probability says (within 5σ)."""
    coups, seen = simulate()
    p = odds.odds_report(variant_id, 8)["bets"][spot]["probability_win"]
    ok, z = within(seen[spot], coups, p)
    assert ok, f"{spot}: {seen[spot]} of {coups}, expected p={p:.6f}, z={z:.2f}"
