"""Exact odds by enumeration, against figures published elsewhere (each test names its source).

Sources (stored copies found with the search tool):
* Wizard of Odds, baccarat appendix 1 (probabilities in 8- and 6-deck baccarat, combinations per
  outcome), as reproduced at casinoexploit.com/baccarat.html;
* excelpunks.com, "Baccarat – An Analysis on Calculations" (416!/410! = 4,998,398,275,503,360) and
  "Baccarat Vs. Non-Commission Baccarat" (house edges 0.010579 / 0.012351 / 0.143596; banker wins on 6:
  269,232,304,455,680 permutations);
* Wizard of Odds, EZ Baccarat (user-casino.com copy): Dragon 7, Panda 8 and banker tables;
* Wizard of Odds, baccarat side bets / appendix 5: Dragon Bonus tables (8 decks) and edges by decks;
* Wizard of Odds, Lucky 6 (wizardofodds.com/games/baccarat/side-bets/lucky-6/): winning banker 6 in
  two and three cards;
* Eliot Jacobson, 888casino blog: "Card Counting the Super Six Baccarat Side Bet" (commission-free
  banker edges 1.0183 % and 1.4581 %) and "Computer-perfect play against the baccarat pairs bet" (pairs
  at 11:1: house edge 10.361 %, hit frequency 7.470 %);
* LeoVegas, "Super 6 side bet" (12:1, house edge 29.98 %);
* baccarat.guru, "The Complete Baccarat Wiki" (single-deck banker and player).
"""

from __future__ import annotations

import json
from functools import cache

import pytest

from services.core.baccarat import odds
from services.core.baccarat.variants import get_variant
from services.core.baccarat.variants.punto_banco import TwoHandGame
from services.core.errors import DomainError, Reason


@cache
def report(variant_id: str, decks: int = 8) -> dict[str, object]:
    """The JSON report, through a JSON round trip (what ``odds --json`` prints); computed once per test
    session for each variant and deck count."""
    return json.loads(json.dumps(odds.odds_report(variant_id, decks)))  # type: ignore[no-any-return]


def bet(variant_id: str, spot: str, decks: int = 8) -> dict[str, object]:
    """One spot's figures."""
    return report(variant_id, decks)["bets"][spot]  # type: ignore[index,no-any-return]


OUTCOME_COUNTS = [
    # Wizard of Odds appendix 1, "Probabilities in 8deck Baccarat" and "Probabilities in 6deck Baccarat"
    (8, "banker", 2_292_252_566_437_888),
    (8, "player", 2_230_518_282_592_256),
    (8, "tie", 475_627_426_473_216),
    (6, "banker", 403_095_751_234_560),
    (6, "player", 392_220_492_728_832),
    (6, "tie", 83_552_962_932_288),
]


@pytest.mark.parametrize(("decks", "outcome", "count"), OUTCOME_COUNTS)
def test_punto_banco_outcome_counts(decks: int, outcome: str, count: int) -> None:
    """Wizard of Odds appendix 1: the number of 6-card sequences giving each outcome, exactly."""
    assert report("punto_banco", decks)["outcomes"][outcome]["count"] == count  # type: ignore[index]


def test_total_is_416_falling_6() -> None:
    """excelpunks: "The total number of permutations for baccarat is 416!/410! = 4,998,398,275,503,360"."""
    out = report("punto_banco", 8)
    assert out["total"] == 4_998_398_275_503_360
    assert sum(row["count"] for row in out["outcomes"].values()) == out["total"]  # type: ignore[attr-defined]


HOUSE_EDGES = [
    # (variant, spot, decks, published edge in %, decimals published)
    ("punto_banco", "banker", 8, 1.0579, 4),  # excelpunks 0.010579; Jacobson 1.0579 %
    ("punto_banco", "player", 8, 1.2351, 4),  # excelpunks 0.012351
    ("punto_banco", "tie", 8, 14.3596, 4),  # excelpunks 0.143596
    ("punto_banco", "banker", 6, 1.06, 2),  # Wizard appendix 1, 6 decks
    ("punto_banco", "player", 6, 1.24, 2),
    ("punto_banco", "tie", 6, 14.44, 2),
    ("punto_banco", "player_pair", 8, 10.361, 3),  # Jacobson, pairs bet
    ("punto_banco", "banker_pair", 8, 10.361, 3),
    ("punto_banco", "dragon_bonus_player", 8, 2.6517, 4),  # Wizard, Dragon Bonus: -0.026517
    ("punto_banco", "dragon_bonus_banker", 8, 9.3731, 4),  # Wizard: -0.093731
    ("punto_banco", "dragon_bonus_player", 6, 2.67, 2),  # Wizard, "Dragon Bonus House Edge" by decks
    ("punto_banco", "dragon_bonus_banker", 6, 9.39, 2),
    ("ez_baccarat", "banker", 8, 1.0183, 4),  # Wizard EZ: -0.010183; Jacobson 1.0183 %
    ("ez_baccarat", "player", 8, 1.2351, 4),
    ("ez_baccarat", "dragon_7", 8, 7.6113, 4),  # Wizard EZ: -0.076113
    ("ez_baccarat", "panda_8", 8, 10.1876, 4),  # Wizard EZ: -0.101876
    ("super6", "banker", 8, 1.4581, 4),  # Jacobson: "Banker winning total of six. House edge = 1.4581%"
    ("super6", "super_6", 8, 29.98, 2),  # LeoVegas: Super 6 at 12:1, 29.98 %
]


@pytest.mark.parametrize(("variant_id", "spot", "decks", "edge", "places"), HOUSE_EDGES)
def test_house_edge(variant_id: str, spot: str, decks: int, edge: float, places: int) -> None:
    """The house edge agrees with the published figure to every decimal it was published with."""
    assert round(bet(variant_id, spot, decks)["house_edge"] * 100, places) == edge  # type: ignore[operator]


SIDE_BET_COUNTS = [
    # Wizard EZ Baccarat: Dragon 7 "Win 40 112,633,011,329,024"; Panda 8 "Win 25 172,660,763,262,976"
    ("ez_baccarat", "dragon_7", "40:1", 112_633_011_329_024),
    ("ez_baccarat", "panda_8", "25:1", 172_660_763_262_976),
    # Wizard Lucky 6: winning banker 6 in two cards 186,173,936,904,192 + in three 83,058,367,551,488
    ("super6", "super_6", "12:1", 186_173_936_904_192 + 83_058_367_551_488),
    ("super6", "banker", "1:2", 269_232_304_455_680),  # excelpunks: banker win on 6
    # Wizard, Dragon Bonus — Player (8 decks)
    ("punto_banco", "dragon_bonus_player", "30:1", 18_409_431_764_992),
    ("punto_banco", "dragon_bonus_player", "10:1", 34_097_645_543_424),
    ("punto_banco", "dragon_bonus_player", "6:1", 89_590_261_473_280),
    ("punto_banco", "dragon_bonus_player", "4:1", 141_238_897_317_888),
    ("punto_banco", "dragon_bonus_player", "2:1", 166_169_165_987_840),
    ("punto_banco", "dragon_bonus_player", "1:1", 186_780_352_174_080 + 812_685_054_124_032),  # 4 + natural
    # Wizard, Dragon Bonus — Banker (8 decks)
    ("punto_banco", "dragon_bonus_banker", "30:1", 15_390_342_909_952),
    ("punto_banco", "dragon_bonus_banker", "10:1", 28_305_092_784_128),
    ("punto_banco", "dragon_bonus_banker", "6:1", 79_517_099_278_336),
    ("punto_banco", "dragon_bonus_banker", "4:1", 119_200_072_366_080),
    ("punto_banco", "dragon_bonus_banker", "2:1", 157_275_882_332_160),
    ("punto_banco", "dragon_bonus_banker", "1:1", 201_147_167_287_296 + 812_685_054_124_032),
]


@pytest.mark.parametrize(("variant_id", "spot", "pays", "count"), SIDE_BET_COUNTS)
def test_winning_combinations(variant_id: str, spot: str, pays: str, count: int) -> None:
    """The number of sequences winning at each pay is the published combination count, exactly."""
    assert bet(variant_id, spot)["counts"]["win"][pays] == count  # type: ignore[index]


@pytest.mark.parametrize("spot", ["dragon_bonus_player", "dragon_bonus_banker"])
def test_dragon_bonus_natural_tie(spot: str) -> None:
    """Wizard, Dragon Bonus: "Natural tie | 0 | 89,325,908,267,520" on either side."""
    assert bet("punto_banco", spot)["counts"]["push"] == 89_325_908_267_520  # type: ignore[index]


def test_ez_banker_push_on_three_card_7() -> None:
    """Wizard EZ: "Banker win on 7 | 0 | 112,633,011,329,024" pushes, "Tie | 0 | 475,627,426,473,216"."""
    assert bet("ez_baccarat", "banker")["counts"]["push"] == 112_633_011_329_024 + 475_627_426_473_216  # type: ignore[index]


def test_pairs_hit_frequency() -> None:
    """Jacobson, pairs bet: "The hit frequency is 7.470%" (8 decks), the same on either hand."""
    player, banker = bet("punto_banco", "player_pair"), bet("punto_banco", "banker_pair")
    assert round(player["probability_win"] * 100, 3) == 7.470  # type: ignore[operator]
    assert player["probability_win"] == banker["probability_win"]
    assert player["house_edge_exact"] == "43/415"  # 1 − 12 × 31/415 with 32 cards of each rank in 416


def test_json_shape() -> None:
    """The report has docs/cli.md's keys; each probability is its count over the total."""
    out = report("punto_banco")
    assert {"variant", "decks", "total", "outcomes", "bets"} <= set(out)
    assert (out["variant"], out["decks"]) == ("punto_banco", 8)
    assert set(out["outcomes"]) == {"banker", "player", "tie"}  # type: ignore[arg-type]
    for row in out["outcomes"].values():  # type: ignore[attr-defined]
        assert set(row) == {"count", "probability"}
        assert row["probability"] == row["count"] / out["total"]  # type: ignore[operator]
    assert set(out["bets"]) == set(get_variant("punto_banco").spots(get_variant("punto_banco").config()))  # type: ignore[arg-type]
    for row in out["bets"].values():  # type: ignore[attr-defined]
        assert {"probability_win", "house_edge"} <= set(row)


@pytest.mark.parametrize(
    ("variant_id", "decks"),
    [("punto_banco", d) for d in (1, 6, 8)]
    + [(v, d) for v in ("ez_baccarat", "super6") for d in range(1, 9)],
)
def test_any_deck_count(variant_id: str, decks: int) -> None:
    """Every deck count a variant is offered with enumerates: outcome counts sum to (52d)!/(52d − 6)!, and
    each bet's grades cover every sequence once."""
    out = report(variant_id, decks)
    n = 52 * decks
    assert out["total"] == n * (n - 1) * (n - 2) * (n - 3) * (n - 4) * (n - 5)
    assert sum(r["count"] for r in out["outcomes"].values()) == out["total"]  # type: ignore[attr-defined]
    for row in out["bets"].values():  # type: ignore[attr-defined]
        counts = row["counts"]
        assert sum(counts["win"].values()) + counts["push"] + counts["lose"] == out["total"]


def test_one_deck_punto_banco() -> None:
    """baccarat.guru wiki: the banker edge "improves to 1.01 percent with a single-deck game"; the player
    bet's "payout rate ... drops slightly to 98.71 percent in a single-deck game" (edge 1.29 %)."""
    assert round(bet("punto_banco", "banker", 1)["house_edge"] * 100, 2) == 1.01  # type: ignore[operator]
    assert round(bet("punto_banco", "player", 1)["house_edge"] * 100, 2) == 1.29  # type: ignore[operator]


SMALL_SHOE = [("TS", 8), ("2S", 3), ("5S", 3), ("6S", 2), ("7S", 2), ("8S", 1), ("9S", 1)]
"""A small shoe by point value (representative card, how many) for comparing the two enumerators."""


def test_generic_enumerator_matches_the_fast_one() -> None:
    """Driving punto banco's own next_step over the same small shoe gives exactly the fast enumeration."""
    variant = get_variant("punto_banco")
    assert isinstance(variant, TwoHandGame)
    config = odds.odds_config(variant, 8)
    counts = [8, 0, 3, 0, 0, 3, 2, 2, 1, 1]
    fast = odds.enumerate_two_hand(variant, config, counts)
    slow = odds.enumerate_generic(variant, config, classes=SMALL_SHOE)
    assert slow.total == fast.total == 20 * 19 * 18 * 17 * 16 * 15
    assert {odds.shape_of(r): c for r, c in slow.shapes} == {odds.shape_of(r): c for r, c in fast.shapes}


def test_generic_enumerator_uses_the_default_strategy() -> None:
    """Chemin de fer with its default strategy ("house_tableau": every free cell as punto banco plays it)
    has punto banco's outcome counts on the same small shoe; "always_stand" changes them."""
    cdf, punto = get_variant("chemin_de_fer"), get_variant("punto_banco")
    assert isinstance(punto, TwoHandGame)
    counts = [8, 0, 3, 0, 0, 3, 2, 2, 1, 1]
    ref = odds.enumerate_two_hand(punto, odds.odds_config(punto, 8), counts).outcome_counts()
    config = odds.odds_config(cdf, 6)
    default = odds.enumerate_generic(cdf, config, classes=SMALL_SHOE)
    assert default.strategy == "house_tableau"
    assert default.outcome_counts() == ref
    standing = odds.enumerate_generic(cdf, config, classes=SMALL_SHOE, strategy="always_stand")
    assert standing.outcome_counts() != ref


def test_generic_enumerator_is_bounded() -> None:
    """The generic enumerator refuses to run past ``max_nodes`` states (BAD_CONFIG), never hangs."""
    variant = get_variant("punto_banco")
    with pytest.raises(DomainError) as err:
        odds.enumerate_generic(variant, odds.odds_config(variant, 8), max_nodes=1000)
    assert err.value.reason is Reason.BAD_CONFIG


def test_decks_out_of_range() -> None:
    """Odds are computed for 1 to 8 decks; 0 or 9 is a BAD_CONFIG."""
    for decks in (0, 9):
        with pytest.raises(DomainError) as err:
            odds.odds_report("punto_banco", decks)
        assert err.value.reason is Reason.BAD_CONFIG


def test_text_report() -> None:
    """The human report names the variant, the total and every bet with its edge in percent."""
    text = odds.odds_text("punto_banco", 8)
    assert "4,998,398,275,503,360" in text
    assert "2,292,252,566,437,888" in text
    for spot in get_variant("punto_banco").spots(get_variant("punto_banco").config()):
        assert spot in text
    assert "1.0579%" in text
