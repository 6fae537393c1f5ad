"""Punto banco's bets graded coup by coup: main bets, pairs and the Dragon Bonus, with exact Grades.

The side bets are beyond the seeds (docs/architecture.md "Side bets (player pair, banker pair, Dragon
Bonus...) are
paytables over the same coup result"); their paytables are the usual casino ones, as published by Wizard
of Odds (wizardofodds.com/games/baccarat/side-bets/, "Dragon Bonus": natural win 1, natural tie 0, win
by 9 pays 30, by 8 10, by 7 6, by 6 4, by 5 2, by 4 1) and for the pairs 11:1.
"""

from __future__ import annotations

import pytest

from services.core.baccarat import engine
from services.core.baccarat.engine import TableConfig
from services.core.baccarat.variants.punto_banco import VARIANT
from services.core.errors import DomainError, Reason
from services.core.ledger import LOSE, PUSH, Accounts, Grade, Wager

CONFIG = VARIANT.config()
BANKER_WIN = Grade("win", (1, 1), 500)
EVEN = Grade("win", (1, 1))

COUPS = {
    # name: cards in deal order (P B P B, player's third, banker's third)
    "player natural 9 over 5": ["9S", "2D", "KH", "3C"],
    "natural tie 8-8, banker pair": ["8S", "4D", "KH", "4C"],
    "player 9 over 0, three cards each": ["2S", "TD", "3H", "KC", "4D", "QS"],
    "banker 8 over 0 in three cards, banker pair": ["TS", "AC", "JH", "AD", "KD", "6S"],
    "banker 7 over 0": ["TS", "3C", "JH", "4D", "KD"],
    "player 6 over 0": ["6S", "TD", "KH", "QC", "KS"],
    "player 7 over 2": ["7S", "2D", "KH", "QC", "TS"],
    "player 6 over 2": ["6S", "2D", "KH", "QC", "TS"],
    "player 7 over 4": ["7S", "4D", "KH", "QC", "TS"],
    "non-natural tie 6-6": ["6S", "6D", "KH", "QC"],
    "player pair, banker 2 over 0": ["5S", "2D", "5H", "QC", "KS", "KD"],
    "third card pairs, not the first two": ["2S", "TD", "3H", "KC", "3D", "QS"],
}

GRADES = [
    ("player natural 9 over 5", "player", EVEN),
    ("player natural 9 over 5", "banker", LOSE),
    ("player natural 9 over 5", "tie", LOSE),
    ("player natural 9 over 5", "player_pair", LOSE),
    ("player natural 9 over 5", "banker_pair", LOSE),
    ("player natural 9 over 5", "dragon_bonus_player", EVEN),
    ("player natural 9 over 5", "dragon_bonus_banker", LOSE),
    ("natural tie 8-8, banker pair", "player", PUSH),
    ("natural tie 8-8, banker pair", "banker", PUSH),
    ("natural tie 8-8, banker pair", "tie", Grade("win", (8, 1))),
    ("natural tie 8-8, banker pair", "player_pair", LOSE),
    ("natural tie 8-8, banker pair", "banker_pair", Grade("win", (11, 1))),
    ("natural tie 8-8, banker pair", "dragon_bonus_player", PUSH),
    ("natural tie 8-8, banker pair", "dragon_bonus_banker", PUSH),
    ("player 9 over 0, three cards each", "player", EVEN),
    ("player 9 over 0, three cards each", "dragon_bonus_player", Grade("win", (30, 1))),
    ("player 9 over 0, three cards each", "dragon_bonus_banker", LOSE),
    ("banker 8 over 0 in three cards, banker pair", "banker", BANKER_WIN),
    ("banker 8 over 0 in three cards, banker pair", "player", LOSE),
    ("banker 8 over 0 in three cards, banker pair", "banker_pair", Grade("win", (11, 1))),
    ("banker 8 over 0 in three cards, banker pair", "dragon_bonus_banker", Grade("win", (10, 1))),
    ("banker 8 over 0 in three cards, banker pair", "dragon_bonus_player", LOSE),
    ("banker 7 over 0", "dragon_bonus_banker", Grade("win", (6, 1))),
    ("player 6 over 0", "dragon_bonus_player", Grade("win", (4, 1))),
    ("player 7 over 2", "dragon_bonus_player", Grade("win", (2, 1))),
    ("player 6 over 2", "dragon_bonus_player", Grade("win", (1, 1))),
    ("player 7 over 4", "dragon_bonus_player", LOSE),
    ("player 7 over 4", "player", EVEN),
    ("non-natural tie 6-6", "dragon_bonus_player", LOSE),
    ("non-natural tie 6-6", "dragon_bonus_banker", LOSE),
    ("non-natural tie 6-6", "tie", Grade("win", (8, 1))),
    ("non-natural tie 6-6", "banker", PUSH),
    ("player pair, banker 2 over 0", "player_pair", Grade("win", (11, 1))),
    ("player pair, banker 2 over 0", "banker_pair", LOSE),
    ("player pair, banker 2 over 0", "dragon_bonus_banker", LOSE),
    ("player pair, banker 2 over 0", "banker", BANKER_WIN),
    ("third card pairs, not the first two", "player_pair", LOSE),
]


def coup(name: str) -> engine.CoupResult:
    """The named coup, resolved by the state machine (the fast path must agree)."""
    result = engine.resolve(CONFIG, COUPS[name])
    assert VARIANT.play(COUPS[name]) == result
    assert result.cards_used == len(COUPS[name])
    return result


@pytest.mark.parametrize(("name", "spot", "grade"), GRADES)
def test_grade(name: str, spot: str, grade: Grade) -> None:
    """Each spot's grade in each coup is the paytable's exact Grade (ratio and commission)."""
    assert VARIANT.grade(coup(name), spot, CONFIG) == grade


def test_coups_are_what_their_names_say() -> None:
    """The table's coups have the totals and outcomes their names give (a check on the fixtures)."""
    facts = {name: (r.hand("player").total, r.hand("banker").total, r.natural)
             for name, r in ((n, coup(n)) for n in COUPS)}  # fmt: skip
    assert facts["player 9 over 0, three cards each"] == (9, 0, False)
    assert facts["banker 8 over 0 in three cards, banker pair"] == (0, 8, False)
    assert facts["natural tie 8-8, banker pair"] == (8, 8, True)
    assert facts["player 7 over 4"] == (7, 4, False)


SETTLEMENTS = [
    # stake 100 minor units: credit = stake + win − commission; a push returns the stake
    ("player 9 over 0, three cards each", "dragon_bonus_player", "win", 3000, 0, 3100),
    ("banker 8 over 0 in three cards, banker pair", "banker_pair", "win", 1100, 0, 1200),
    ("banker 8 over 0 in three cards, banker pair", "banker", "win", 100, 5, 195),
    ("natural tie 8-8, banker pair", "dragon_bonus_banker", "push", 0, 0, 100),
    ("player 7 over 4", "dragon_bonus_player", "lose", 0, 0, 0),
]


@pytest.mark.parametrize(("name", "spot", "result", "win", "commission", "credit"), SETTLEMENTS)
def test_settlement(name: str, spot: str, result: str, win: int, commission: int, credit: int) -> None:
    """A 100-unit bet settles to the paytable's amounts with balanced postings against the house."""
    accounts = Accounts(escrow="escrow", house="house", commission="commission")
    (payout,) = VARIANT.settle(coup(name), [Wager("b1", "alice", spot, 100)], CONFIG, accounts)
    assert (payout.result, payout.win_minor, payout.commission_minor, payout.credit_minor) == (
        result,
        win,
        commission,
        credit,
    )
    assert sum(amount for _, amount in payout.postings) == 0


def test_default_table_offers_every_side_bet() -> None:
    """A default punto banco table offers the three main bets and the four side bets, in that order."""
    assert VARIANT.spots(CONFIG) == (
        "player", "banker", "tie", "player_pair", "banker_pair", "dragon_bonus_player", "dragon_bonus_banker"
    )  # fmt: skip


def test_side_bets_are_configurable() -> None:
    """The option ``side_bets`` selects the side bets offered; others are unknown spots at that table."""
    config = VARIANT.config(side_bets=["dragon_bonus_banker", "player_pair"])
    assert VARIANT.spots(config) == ("player", "banker", "tie", "player_pair", "dragon_bonus_banker")
    assert set(VARIANT.paytable(config)) == set(VARIANT.spots(config))
    with pytest.raises(DomainError) as err:
        VARIANT.grade(coup("player natural 9 over 5"), "banker_pair", config)
    assert err.value.reason is Reason.UNKNOWN_SPOT
    assert VARIANT.spots(VARIANT.config(side_bets=[])) == ("player", "banker", "tie")


def test_side_bets_survive_the_recorded_config() -> None:
    """A table's side bets read back from ``TableConfig.to_dict`` (as JSON lists) are the same spots."""
    config = VARIANT.config(side_bets=("banker_pair",))
    data = config.to_dict()
    data["options"] = {k: list(v) for k, v in data["options"].items()}
    assert VARIANT.spots(TableConfig.from_dict(data)) == VARIANT.spots(config)


def test_unknown_side_bet_refused() -> None:
    """A side bet the variant does not know is a BAD_CONFIG, not a silent omission."""
    with pytest.raises(DomainError) as err:
        VARIANT.config(side_bets=["dragon_7"])
    assert err.value.reason is Reason.BAD_CONFIG


def test_unknown_spot_refused() -> None:
    """Grading a spot the variant does not have raises UNKNOWN_SPOT."""
    with pytest.raises(DomainError) as err:
        VARIANT.grade(coup("player natural 9 over 5"), "panda_8", CONFIG)
    assert err.value.reason is Reason.UNKNOWN_SPOT


PAYTABLE = [
    ("player", [1, 1], 0),
    ("banker", [1, 1], 500),
    ("tie", [8, 1], 0),
    ("player_pair", [11, 1], 0),
    ("banker_pair", [11, 1], 0),
    ("dragon_bonus_player", [30, 1], 0),
    ("dragon_bonus_banker", [30, 1], 0),
]


@pytest.mark.parametrize(("spot", "pays", "bps"), PAYTABLE)
def test_paytable(spot: str, pays: list[int], bps: int) -> None:
    """``paytable()`` lists every spot offered with its headline pay and commission."""
    entry = VARIANT.paytable(CONFIG)[spot]
    assert (entry["pays"], entry["commission_bps"]) == (pays, bps)


def test_dragon_bonus_paytable_lines() -> None:
    """The Dragon Bonus entry carries its whole table: natural win 1:1, natural tie push, 9 → 30:1 …"""
    table = VARIANT.paytable(CONFIG)["dragon_bonus_banker"]["table"]
    assert table == {
        "natural_win": [1, 1], "natural_tie": "push", "win_by_9": [30, 1], "win_by_8": [10, 1],
        "win_by_7": [6, 1], "win_by_6": [4, 1], "win_by_5": [2, 1], "win_by_4": [1, 1],
    }  # fmt: skip
