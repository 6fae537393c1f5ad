"""EZ Baccarat and Super 6: the commission-free banker bets and their side bets, with exact Grades.

Both are beyond the seeds (docs/architecture.md: ``ez_baccarat`` "commission-free: a banker win with a
three-card 7
pushes; Dragon 7 / Panda 8 side bets"; ``super6`` "commission-free: a banker win on 6 pays 1:2"). Rule
cards as published: Wizard of Odds, EZ Baccarat ("if the banker wins with a three-card total of 7, then
the Banker bet will push"; Dragon 7 pays 40, Panda 8 pays 25); Super 6 ("Unless the Banker's Hand wins
with a point count of 6, it is only paid 50%"; the Super 6 side bet "paid at odds of 12 to 1").
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.core.baccarat import engine
from services.core.baccarat.variants import get_variant
from services.core.baccarat.variants.ez_baccarat import VARIANT as EZ
from services.core.baccarat.variants.super6 import VARIANT as SUPER6
from services.core.cards import shoe_cards
from services.core.errors import DomainError, Reason
from services.core.ledger import LOSE, PUSH, Grade, amounts_of
from services.core.shoe import shuffle

EVEN = Grade("win", (1, 1))

COUPS = {
    # name: cards in deal order (P B P B, player's third, banker's third)
    "banker three-card 7 over 5": ["2S", "TD", "3H", "2C", "KD", "5S"],
    "banker two-card 7 over 6": ["6S", "3D", "KH", "4C"],
    "banker three-card 7 ties three-card 7": ["2S", "TD", "3H", "2C", "2D", "5S"],
    "player three-card 8 over 7": ["2S", "3D", "3H", "4C", "3D"],
    "player two-card 8 (natural) over 0": ["8S", "TD", "KH", "QC"],
    "banker 6 in two cards over 5 in three": ["2S", "3D", "3H", "3C", "KD"],
    "banker 6 in three cards over 3": ["AS", "TD", "2H", "KC", "KD", "6S"],
    "banker natural 9 over 6": ["6S", "9D", "KH", "QC"],
    "player 7 over 6, no pair": ["7S", "6D", "KH", "QC"],
    "tie 6-6": ["6S", "6D", "KH", "QC"],
}

EZ_GRADES = [
    ("banker three-card 7 over 5", "banker", PUSH),
    ("banker three-card 7 over 5", "dragon_7", Grade("win", (40, 1))),
    ("banker three-card 7 over 5", "player", LOSE),
    ("banker three-card 7 over 5", "panda_8", LOSE),
    ("banker two-card 7 over 6", "banker", EVEN),
    ("banker two-card 7 over 6", "dragon_7", LOSE),
    ("banker three-card 7 ties three-card 7", "banker", PUSH),
    ("banker three-card 7 ties three-card 7", "dragon_7", LOSE),
    ("banker three-card 7 ties three-card 7", "tie", Grade("win", (8, 1))),
    ("player three-card 8 over 7", "player", EVEN),
    ("player three-card 8 over 7", "panda_8", Grade("win", (25, 1))),
    ("player three-card 8 over 7", "banker", LOSE),
    ("player two-card 8 (natural) over 0", "panda_8", LOSE),
    ("player two-card 8 (natural) over 0", "player", EVEN),
    ("banker natural 9 over 6", "banker", EVEN),
    ("banker natural 9 over 6", "dragon_7", LOSE),
    ("tie 6-6", "player", PUSH),
    ("tie 6-6", "panda_8", LOSE),
]

SUPER6_GRADES = [
    ("banker 6 in two cards over 5 in three", "banker", Grade("win", (1, 2))),
    ("banker 6 in two cards over 5 in three", "super_6", Grade("win", (12, 1))),
    ("banker 6 in two cards over 5 in three", "player", LOSE),
    ("banker 6 in three cards over 3", "banker", Grade("win", (1, 2))),
    ("banker 6 in three cards over 3", "super_6", Grade("win", (12, 1))),
    ("banker natural 9 over 6", "banker", EVEN),
    ("banker natural 9 over 6", "super_6", LOSE),
    ("banker natural 9 over 6", "dragon_bonus_banker", EVEN),
    ("player 7 over 6, no pair", "player", EVEN),
    ("player 7 over 6, no pair", "super_6", LOSE),
    ("player 7 over 6, no pair", "banker", LOSE),
    ("player 7 over 6, no pair", "player_pair", LOSE),
    ("tie 6-6", "banker", PUSH),
    ("tie 6-6", "super_6", LOSE),
    ("tie 6-6", "tie", Grade("win", (8, 1))),
    ("banker three-card 7 over 5", "banker", EVEN),
]


def coup(variant: engine.Variant, name: str) -> engine.CoupResult:
    """The named coup at a default table of ``variant`` (state machine and fast path agree)."""
    result = engine.resolve(variant.config(), COUPS[name])
    assert variant.play(COUPS[name]) == result  # type: ignore[attr-defined]
    return result


@pytest.mark.parametrize(("name", "spot", "grade"), EZ_GRADES)
def test_ez_grade(name: str, spot: str, grade: Grade) -> None:
    """EZ Baccarat: each spot's grade in each coup is the rule card's exact Grade, commission-free."""
    assert EZ.grade(coup(EZ, name), spot, EZ.config(side_bets=["dragon_7", "panda_8"])) == grade


@pytest.mark.parametrize(("name", "spot", "grade"), SUPER6_GRADES)
def test_super6_grade(name: str, spot: str, grade: Grade) -> None:
    """Super 6: each spot's grade in each coup is the rule card's exact Grade, commission-free."""
    assert SUPER6.grade(coup(SUPER6, name), spot, SUPER6.config()) == grade


def test_coup_fixtures() -> None:
    """The coups are what their names say (totals and card counts)."""
    r = coup(EZ, "banker three-card 7 over 5")
    assert (r.hand("banker").total, len(r.hand("banker").cards), r.hand("player").total) == (7, 3, 5)
    r = coup(EZ, "player three-card 8 over 7")
    assert (r.hand("player").total, len(r.hand("player").cards), r.hand("banker").total) == (8, 3, 7)
    r = coup(SUPER6, "banker 6 in three cards over 3")
    assert (r.hand("banker").total, len(r.hand("banker").cards), r.outcome) == (6, 3, "banker")


def test_super6_half_pay_rounds_down() -> None:
    """A banker win on 6 pays half the stake, rounded down to the minor unit (money's named rule)."""
    grade = SUPER6.grade(coup(SUPER6, "banker 6 in two cards over 5 in three"), "banker", SUPER6.config())
    assert amounts_of(101, grade).credit_minor == 101 + 50


def test_super6_pay_configurable() -> None:
    """The Super 6 side bet pays ``super_6_pays`` to one (12 by default; 15 at some tables)."""
    config = SUPER6.config(super_6_pays=15)
    result = coup(SUPER6, "banker 6 in three cards over 3")
    assert SUPER6.grade(result, "super_6", config) == Grade("win", (15, 1))
    assert SUPER6.paytable(config)["super_6"]["pays"] == [15, 1]


SPOTS = [
    ("ez_baccarat", {}, ("player", "banker", "tie", "dragon_7", "panda_8")),
    ("ez_baccarat", {"side_bets": ["player_pair", "dragon_7"]},
     ("player", "banker", "tie", "dragon_7", "player_pair")),
    ("super6", {}, ("player", "banker", "tie", "super_6", "player_pair", "banker_pair",
                    "dragon_bonus_player", "dragon_bonus_banker")),
    ("super6", {"side_bets": []}, ("player", "banker", "tie")),
]  # fmt: skip


@pytest.mark.parametrize(("variant_id", "options", "spots"), SPOTS)
def test_spots(variant_id: str, options: dict[str, object], spots: tuple[str, ...]) -> None:
    """Each table offers the main bets and the side bets configured (the variant's usual ones by default),
    and the paytable lists exactly those spots."""
    variant = get_variant(variant_id)
    config = variant.config(**options)
    assert variant.spots(config) == spots
    assert tuple(variant.paytable(config)) == spots


@pytest.mark.parametrize("variant_id", ["ez_baccarat", "super6"])
def test_commission_free(variant_id: str) -> None:
    """Both games are commission-free: the default table charges 0 bps, and a commission is refused."""
    variant = get_variant(variant_id)
    assert variant.config().commission_bps == 0
    assert variant.paytable(variant.config())["banker"]["commission_bps"] == 0
    with pytest.raises(DomainError) as err:
        variant.config(commission_bps=500)
    assert err.value.reason is Reason.BAD_CONFIG


@settings(max_examples=10, deadline=None)
@given(seed=st.binary(min_size=32, max_size=32), variant_id=st.sampled_from(["ez_baccarat", "super6"]))
def test_same_tableau_as_punto_banco(seed: bytes, variant_id: str) -> None:
    """Both games deal exactly like punto banco: same hands, totals and outcome from any shoe."""
    order = shuffle(seed, shoe_cards(8))
    variant, punto = get_variant(variant_id), get_variant("punto_banco")
    pos = 0
    for _ in range(20):
        mine, ref = variant.play(order, pos), punto.play(order, pos)  # type: ignore[attr-defined]
        assert (mine.hands, mine.outcome, mine.natural) == (ref.hands, ref.outcome, ref.natural)
        assert mine.variant == variant_id
        pos += ref.cards_used
