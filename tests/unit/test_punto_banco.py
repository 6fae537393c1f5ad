"""Punto banco: the tableau of seeds 002 and 004, naturals, ties, and properties of whole shoes.

Seeds: 002 (English, "Rules for drawing the third card"), 004 (English, "Punto Banco and Online Baccarat
Game Play"). The tableau below is the engine's contract, one row per cell; each seed's own table is
encoded as the text writes it and checked cell by cell against the engine.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.core.baccarat import engine
from services.core.baccarat.variants import get_variant
from services.core.baccarat.variants.punto_banco import VARIANT, banker_draws
from services.core.cards import CARD_POINTS, shoe_cards
from services.core.errors import DomainError, Reason
from services.core.ledger import LOSE, PUSH, Accounts, Grade, Wager
from services.core.shoe import shuffle

CONFIG = VARIANT.config()
RANK_OF_VALUE = "TA23456789"  # a rank for each point value 0..9


def card(value: int, suit: str = "S") -> str:
    """A card worth ``value`` points."""
    return RANK_OF_VALUE[value] + suit


def cell_coup(banker_total: int, third: int | None) -> list[str]:
    """Six cards in deal order (P B P B, then the third cards) putting the banker on ``banker_total``
    with the player standing on 6 (``third`` None) or drawing a card worth ``third`` from 5."""
    banker = [card(banker_total, "H"), "QC"]
    if third is None:
        return ["6S", banker[0], "KD", banker[1], "2D", "3D"]
    return ["2S", banker[0], "3S", banker[1], card(third, "D"), "4C"]


def banker_drew(cards: list[str]) -> bool:
    """Whether the banker took a third card, through the state machine and the fast path (which must
    agree)."""
    slow = engine.resolve(CONFIG, cards)
    fast = VARIANT.play(cards)
    assert fast == slow
    return len(slow.hand("banker").cards) == 3


# --- the tableau, one row per cell: (banker's two-card total, player's third card or None, action) ---

TABLEAU = [
    (0, None, "draw"), (0, 0, "draw"), (0, 1, "draw"), (0, 2, "draw"), (0, 3, "draw"), (0, 4, "draw"),
    (0, 5, "draw"), (0, 6, "draw"), (0, 7, "draw"), (0, 8, "draw"), (0, 9, "draw"),
    (1, None, "draw"), (1, 0, "draw"), (1, 1, "draw"), (1, 2, "draw"), (1, 3, "draw"), (1, 4, "draw"),
    (1, 5, "draw"), (1, 6, "draw"), (1, 7, "draw"), (1, 8, "draw"), (1, 9, "draw"),
    (2, None, "draw"), (2, 0, "draw"), (2, 1, "draw"), (2, 2, "draw"), (2, 3, "draw"), (2, 4, "draw"),
    (2, 5, "draw"), (2, 6, "draw"), (2, 7, "draw"), (2, 8, "draw"), (2, 9, "draw"),
    (3, None, "draw"), (3, 0, "draw"), (3, 1, "draw"), (3, 2, "draw"), (3, 3, "draw"), (3, 4, "draw"),
    (3, 5, "draw"), (3, 6, "draw"), (3, 7, "draw"), (3, 8, "stand"), (3, 9, "draw"),
    (4, None, "draw"), (4, 0, "stand"), (4, 1, "stand"), (4, 2, "draw"), (4, 3, "draw"), (4, 4, "draw"),
    (4, 5, "draw"), (4, 6, "draw"), (4, 7, "draw"), (4, 8, "stand"), (4, 9, "stand"),
    (5, None, "draw"), (5, 0, "stand"), (5, 1, "stand"), (5, 2, "stand"), (5, 3, "stand"), (5, 4, "draw"),
    (5, 5, "draw"), (5, 6, "draw"), (5, 7, "draw"), (5, 8, "stand"), (5, 9, "stand"),
    (6, None, "stand"), (6, 0, "stand"), (6, 1, "stand"), (6, 2, "stand"), (6, 3, "stand"), (6, 4, "stand"),
    (6, 5, "stand"), (6, 6, "draw"), (6, 7, "draw"), (6, 8, "stand"), (6, 9, "stand"),
    (7, None, "stand"), (7, 0, "stand"), (7, 1, "stand"), (7, 2, "stand"), (7, 3, "stand"), (7, 4, "stand"),
    (7, 5, "stand"), (7, 6, "stand"), (7, 7, "stand"), (7, 8, "stand"), (7, 9, "stand"),
]  # fmt: skip


@pytest.mark.parametrize(("banker_total", "third", "action"), TABLEAU)
def test_tableau_cell(banker_total: int, third: int | None, action: str) -> None:
    """Each cell of the banker's tableau is what the engine (state machine and fast path) does."""
    assert banker_drew(cell_coup(banker_total, third)) is (action == "draw")
    assert banker_draws(banker_total, third) is (action == "draw")


def test_tableau_is_complete() -> None:
    """The table has exactly one row per cell: banker totals 0–7 × player stood or third card 0–9."""
    cells = [(b, t) for b, t, _ in TABLEAU]
    assert len(cells) == len(set(cells)) == 8 * 11


# --- seed 002, as written ------------------------------------------------------------------------

SEED_002_BANKER = [
    # "Banker’s Hand Third Card Draw Rules": "0-2 Must Draw", "3-6 Depends on the Player’s Third Card",
    # "7 Must Stand"; then "When Banker’s First Two Cards Total: Banker Draws When Player’s Third Card Is:
    # Banker Stands When Player’s Third Card Is:"
    ("0-2", "Must Draw", "Must Draw"),
    ("3", "1-2-3-4-5-6-7-9-10", "8"),
    ("4", "2-3-4-5-6-7", "1-8-9-10"),
    ("5", "4-5-6-7", "1-2-3-8-9-10"),
    ("6", "6-7", "1-2-3-4-5-8-9-10"),
    ("7", "Stands", "Stands"),
]


def seed_002_cards(text: str) -> set[int]:
    """Point values of a seed 002 card list: "10" is the ten and, with the faces, worth 0 ("the Tens
    (10 number Cards) and the face cards ... are all considered as zero points"); "1" is the ace."""
    return {int(x) % 10 for x in text.split("-")}


def seed_002_cells() -> list[tuple[int, int | None, str]]:
    """Every cell seed 002 states. When the player stood it states only "0-2 Must Draw" and "7 Must
    Stand"; for 3–6 it says the banker "Depends on the Player’s Third Card", which a player who stood
    does not have, so those four cells are the seed's silence (seed 004 settles them)."""
    cells: list[tuple[int, int | None, str]] = []
    for totals, draws, stands in SEED_002_BANKER:
        low, _, high = totals.partition("-")
        for b in range(int(low), int(high or low) + 1):
            if draws == "Must Draw" or stands == "Stands":
                action = "draw" if draws == "Must Draw" else "stand"
                cells += [(b, t, action) for t in (None, *range(10))]
                continue
            drawn, stood = seed_002_cards(draws), seed_002_cards(stands)
            assert drawn | stood == set(range(10)) and not drawn & stood
            cells += [(b, t, "draw" if t in drawn else "stand") for t in range(10)]
    return cells


@pytest.mark.parametrize(("banker_total", "third", "action"), seed_002_cells())
def test_seed_002_table(banker_total: int, third: int | None, action: str) -> None:
    """Seed 002: "the following table represents the rules for when the banker must draw on the basis of
    the player’s third card" — each cell it states is what the engine does."""
    assert banker_drew(cell_coup(banker_total, third)) is (action == "draw")


def test_seed_002_states_all_cells_but_its_silence() -> None:
    """Seed 002 states 84 of the 88 cells; only banker 3–6 after the player stood are left open."""
    stated = {(b, t) for b, t, _ in seed_002_cells()}
    assert {(b, t) for b, t, _ in TABLEAU} - stated == {(3, None), (4, None), (5, None), (6, None)}


# --- seed 004, as written ------------------------------------------------------------------------

SEED_004_STOOD = ("0 to 5", "6 or 7")
"""Seed 004: "If the Player stood on only two cards, the Banker acts according to the same rule as the
Player, which is to stand on a total of 6 or 7, and to draw another card on a total of 0 to 5"."""

SEED_004_BANKER = [
    # "if the Player drew a third card, there are more complex rules that the Banker should follow,
    # depending on the following value of the third card drawn by the Player:"
    ("2 or 3", "draws if he has 0-4", "stands if he has 5-7"),
    ("4 or 5", "draws if he has 0-5", "stands if he has 6-7"),
    ("6 or 7", "draws if he has 0-6", "stands if he has 7"),
    ("8", "draws if he has 0-2", "stands if he has 3-7"),
    ("Ace, 9, 10, J, Q, K", "draws if he has 0-3", "stands if he has 4-7"),
]

SEED_004_VALUE = {"Ace": 1, "10": 0, "J": 0, "Q": 0, "K": 0}
"""Seed 004: "10, Jack, Queen, and King all are valued zero, while an Ace is worth a value of 1"."""


def seed_004_totals(text: str) -> set[int]:
    """Banker totals of a seed 004 phrase: "0-4", "7", "0 to 5", "6 or 7"."""
    words = text.rsplit(maxsplit=1)[-1] if "has" in text else text
    if " or " in words:
        return {int(x) for x in words.split(" or ")}
    low, _, high = words.replace(" to ", "-").partition("-")
    return set(range(int(low), int(high or low) + 1))


def seed_004_cells() -> list[tuple[int, int | None, str]]:
    """Every cell of seed 004's table (it states all 88)."""
    draw, stand = (seed_004_totals(x) for x in SEED_004_STOOD)
    cells: list[tuple[int, int | None, str]] = [
        (b, None, "draw" if b in draw else "stand") for b in sorted(draw | stand)
    ]
    for thirds, draws, stands in SEED_004_BANKER:
        values = {SEED_004_VALUE[x] if x in SEED_004_VALUE else int(x)
                  for x in thirds.replace(" or ", ", ").split(", ")}  # fmt: skip
        drawing, standing = seed_004_totals(draws), seed_004_totals(stands)
        assert drawing | standing == set(range(8)) and not drawing & standing
        for t in sorted(values):
            cells += [(b, t, "draw" if b in drawing else "stand") for b in range(8)]
    return cells


@pytest.mark.parametrize(("banker_total", "third", "action"), seed_004_cells())
def test_seed_004_table(banker_total: int, third: int | None, action: str) -> None:
    """Seed 004: "the Banker acts according to ... the value of the third card drawn by the Player" — each
    cell is what the engine does."""
    assert banker_drew(cell_coup(banker_total, third)) is (action == "draw")


def test_seed_004_states_every_cell() -> None:
    """Seed 004's table covers all 88 cells exactly once."""
    cells = [(b, t) for b, t, _ in seed_004_cells()]
    assert len(cells) == len(set(cells)) == 88


# --- the player's rule, naturals, ties ------------------------------------------------------------

PLAYER_RULE = [
    # seed 002: "On any other total, 0-5, the Player draws a 3rd card"; "The Player stays on totals of 6
    # or 7"; "A total of 8 or 9 for the Player will not get any extra cards"
    (0, 3), (1, 3), (2, 3), (3, 3), (4, 3), (5, 3), (6, 2), (7, 2), (8, 2), (9, 2),
]  # fmt: skip


@pytest.mark.parametrize(("player_total", "cards"), PLAYER_RULE)
def test_player_rule(player_total: int, cards: int) -> None:
    """The player draws on 0–5, stands on 6–7, and a natural 8–9 takes no card (banker on 0, drawing)."""
    coup = [card(player_total), "TH", "KS", "QH", "2D", "3C"]
    result = VARIANT.play(coup)
    assert result == engine.resolve(CONFIG, coup)
    assert len(result.hand("player").cards) == cards


NATURALS = [
    # seed 004: "If only one got a natural, his hand instantly wins"; "If both has a natural, the game is
    # won by the hand that has the higher value, or there can be a Tie"; seed 002: "unless the banker has
    # 8 or 9, in which case the bank hand wins without any further draw"
    (("8S", "KH"), ("2D", "3C"), "player", 8, 5),
    (("9S", "KH"), ("TD", "JC"), "player", 9, 0),
    (("2S", "3H"), ("8D", "KC"), "banker", 5, 8),
    (("KS", "QH"), ("4D", "5C"), "banker", 0, 9),
    (("9S", "KH"), ("8D", "KC"), "player", 9, 8),
    (("4S", "4H"), ("9D", "KC"), "banker", 8, 9),
    (("8S", "KH"), ("4D", "4C"), "tie", 8, 8),
    (("9S", "KH"), ("5D", "4C"), "tie", 9, 9),
]


@pytest.mark.parametrize(("player", "banker", "outcome", "p_total", "b_total"), NATURALS)
def test_naturals(player: tuple[str, str], banker: tuple[str, str], outcome: str, p_total: int,
                  b_total: int) -> None:  # fmt: skip
    """A two-card 8 or 9 on either side ends the coup at four cards, flagged natural."""
    coup = [player[0], banker[0], player[1], banker[1], "2S", "3S"]
    result = VARIANT.play(coup)
    assert result == engine.resolve(CONFIG, coup)
    assert (result.outcome, result.natural, result.cards_used) == (outcome, True, 4)
    assert (result.hand("player").total, result.hand("banker").total) == (p_total, b_total)


TIE_GRADES = [
    # seed 002: "the bets to the Player and the bets to the Banker are returned (nobody wins, and nobody
    # loses) and only the bets on the Tie are paid"; seed 004: "those wagering on the Tie bet will be paid
    # at 8:1"; docs/architecture.md: "tie 8:1 (9:1 configurable)"
    ("player", 8, PUSH),
    ("banker", 8, PUSH),
    ("tie", 8, Grade("win", (8, 1))),
    ("tie", 9, Grade("win", (9, 1))),
]


@pytest.mark.parametrize(("spot", "tie_pays", "grade"), TIE_GRADES)
def test_tie(spot: str, tie_pays: int, grade: Grade) -> None:
    """On a tie the player and banker bets push and the tie bet wins at the table's ratio."""
    result = VARIANT.play(["8S", "4D", "KH", "4C"])
    assert result.outcome == "tie"
    assert VARIANT.grade(result, spot, VARIANT.config(tie_pays=tie_pays)) == grade


def test_deal_order_seed_004() -> None:
    """Seed 004: "one to the Player first, then to the Banker, then another to the Player, and then
    another to the Banker"; the player's third card comes before the banker's."""
    result = VARIANT.play(["AS", "2S", "3S", "2H", "5S", "6S"])
    assert result.hand("player").cards == ("AS", "3S", "5S")
    assert result.hand("banker").cards == ("2S", "2H", "6S")


def test_seed_002_example() -> None:
    """Seed 002: "The Banker gets {10-Spades} {7-Hearts} ... the banker is the winner as 0+7= 7 points,
    whereas the Player’s hand is having only 2 points" — (the player, on 2, then draws; here a ten)."""
    result = VARIANT.play(["9H", "TS", "3D", "7H", "KC"])
    assert (result.hand("banker").total, result.hand("player").total, result.outcome) == (7, 2, "banker")


def test_decks_allowed() -> None:
    """Seed 004: "It can be played by using 1, 6, or 8 standard 52-card decks"; other counts are refused."""
    assert [VARIANT.config(decks=d).decks for d in (1, 6, 8)] == [1, 6, 8]
    with pytest.raises(DomainError) as err:
        VARIANT.config(decks=4)
    assert err.value.reason is Reason.BAD_CONFIG


def test_fast_path_refuses_what_it_cannot_play() -> None:
    """The fast path raises TOO_FEW_CARDS when the shoe runs out and UNKNOWN_CARD for a non-card."""
    with pytest.raises(DomainError) as err:
        VARIANT.play(["2S", "3S", "4S", "KS"])
    assert err.value.reason is Reason.TOO_FEW_CARDS
    with pytest.raises(DomainError) as err:
        VARIANT.play(["2S", "3S", "XX", "5S"])
    assert err.value.reason is Reason.UNKNOWN_CARD


def test_registered() -> None:
    """The registry finds the module's VARIANT under ``punto_banco``."""
    assert get_variant("punto_banco") is VARIANT


# --- whole shoes ---------------------------------------------------------------------------------

ACCOUNTS = Accounts(escrow="escrow", house="house", commission="commission")
SEEDS = st.binary(min_size=32, max_size=32)


def play_shoe(order: tuple[str, ...]) -> list[engine.CoupResult]:
    """Every coup of a shoe dealt from the top with the fast path, until fewer than 6 cards are left."""
    results, pos = [], 0
    while pos <= len(order) - 6:
        result = VARIANT.play(order, pos)
        results.append(result)
        pos += result.cards_used
    return results


@settings(max_examples=25, deadline=None)
@given(seed=SEEDS, decks=st.sampled_from([1, 6, 8]))
def test_any_shoe_every_coup_terminates(seed: bytes, decks: int) -> None:
    """In any shuffled shoe every coup uses 4 to 6 cards, each total is its cards' points summed mod 10,
    and the state machine agrees with the fast path on the first coups."""
    order = shuffle(seed, shoe_cards(decks))
    results = play_shoe(order)
    pos = 0
    for i, result in enumerate(results):
        assert 4 <= result.cards_used <= 6
        for hand in result.hands:
            assert hand.total == sum(CARD_POINTS[c] for c in hand.cards) % 10
        assert sorted(result.hand("player").cards + result.hand("banker").cards) == sorted(
            order[pos : pos + result.cards_used]
        )
        if i < 8:
            assert engine.resolve(CONFIG, order[pos : pos + 6]) == result
        pos += result.cards_used
    assert pos > len(order) - 6 - 6


@settings(max_examples=25, deadline=None)
@given(
    seed=SEEDS,
    stake=st.integers(min_value=1, max_value=10**9),
    rounding=st.sampled_from(["floor", "half_up", "ceil"]),
)
def test_postings_balance(seed: bytes, stake: int, rounding: str) -> None:
    """Every payout of a bet on every spot, in the first coups of any shoe, posts entries summing to zero
    and credits stake + win − commission on a win, the stake on a push, nothing on a loss."""
    config = VARIANT.config(commission_rounding=rounding)
    order = shuffle(seed, shoe_cards(8))
    wagers = [Wager(f"b{i}", f"acct{i}", spot, stake) for i, spot in enumerate(VARIANT.spots(config))]
    for result in play_shoe(order)[:10]:
        for payout in VARIANT.settle(result, wagers, config, ACCOUNTS):
            assert sum(amount for _, amount in payout.postings) == 0
            expected = {"win": stake + payout.win_minor - payout.commission_minor, "push": stake, "lose": 0}
            assert payout.credit_minor == expected[payout.result]
            grade = VARIANT.grade(result, payout.spot, config)
            assert grade.result == payout.result
            assert grade != LOSE or payout.credit_minor == 0
