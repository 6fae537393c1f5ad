"""EZ Baccarat: punto banco without commission, with the Dragon 7 and Panda 8 side bets.

Beyond the seeds (docs/architecture.md). The deal and the tableau are punto banco's (:class:`TwoHandGame`).
The
banker bet pays even money with no commission, except that a banker win with a three-card total of 7
(the "Dragon 7") pushes it. Player 1:1; tie 8:1 (``tie_pays``); player and banker push on a tie.

Side bets: ``dragon_7`` pays 40:1 when the banker wins with a three-card 7; ``panda_8`` pays 25:1 when
the player wins with a three-card 8 (both lose otherwise, ties included). The pair and Dragon Bonus
bets of :mod:`.punto_banco` may be offered too (option ``side_bets``); by default a table offers the
two that define the game, Dragon 7 and Panda 8.

Interpretation: "three-card 7" means the banker's final hand holds three cards and totals 7, and
"wins" means it beats the player (a three-card 7 that ties is a tie: banker bets push as on every
tie, and Dragon 7 loses).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final

from services.core.baccarat.engine import CoupResult, TableConfig
from services.core.baccarat.variants.punto_banco import (
    COMMON_SIDE_BET_PAYTABLE,
    COMMON_SIDE_BETS,
    BankedTwoHandGame,
    SideBetGrader,
    SideBetPaytable,
    fixed_pays,
)
from services.core.errors import DomainError, Reason
from services.core.ledger import LOSE, PUSH, Grade

DRAGON_7_PAYS: Final = (40, 1)
"""Dragon 7: a banker win with a three-card 7 pays 40:1."""

PANDA_8_PAYS: Final = (25, 1)
"""Panda 8: a player win with a three-card 8 pays 25:1."""


def three_card_win(result: CoupResult, hand: str, total: int) -> bool:
    """``hand`` won the coup holding three cards that total ``total``."""
    h = result.hand(hand)
    return result.outcome == hand and len(h.cards) == 3 and h.total == total


def _dragon_7(result: CoupResult, config: TableConfig) -> Grade:
    return Grade("win", DRAGON_7_PAYS) if three_card_win(result, "banker", 7) else LOSE


def _panda_8(result: CoupResult, config: TableConfig) -> Grade:
    return Grade("win", PANDA_8_PAYS) if three_card_win(result, "player", 8) else LOSE


SIDE_BETS: Final[Mapping[str, SideBetGrader]] = {
    "dragon_7": _dragon_7,
    "panda_8": _panda_8,
    **COMMON_SIDE_BETS,
}
"""Every side bet an EZ Baccarat table can offer, by spot."""

SIDE_BET_PAYTABLE: Final[Mapping[str, SideBetPaytable]] = {
    "dragon_7": fixed_pays(DRAGON_7_PAYS),
    "panda_8": fixed_pays(PANDA_8_PAYS),
    **COMMON_SIDE_BET_PAYTABLE,
}
"""Paytable entries of :data:`SIDE_BETS`."""


def validate_commission_free(variant_id: str, config: TableConfig) -> None:
    """A commission-free game refuses a table configured with a commission."""
    if config.commission_bps != 0:
        raise DomainError(
            Reason.BAD_CONFIG, f"{variant_id} is commission-free, not {config.commission_bps} bps"
        )


class CommissionFreeGame(BankedTwoHandGame):
    """A house-banked two-hand game without commission (EZ Baccarat, Super 6): configured with none,
    refusing a table configured with one."""

    def make_config(self, **overrides: Any) -> TableConfig:
        """The default configuration, commission-free."""
        overrides.setdefault("commission_bps", 0)
        return super().make_config(**overrides)

    def validate(self, config: TableConfig) -> None:
        """The decks, the side bets, and no commission."""
        super().validate(config)
        validate_commission_free(self.id, config)


class EzBaccarat(CommissionFreeGame):
    """EZ Baccarat (see the module docstring)."""

    id = "ez_baccarat"
    rules_version = "ez_baccarat/1"
    source = "beyond the seeds: EZ Baccarat rule card (Dragon 7 push, Dragon 7 40:1, Panda 8 25:1)"
    default_decks = 8
    side_bets_available: ClassVar[Mapping[str, SideBetGrader]] = SIDE_BETS
    side_bet_paytable: ClassVar[Mapping[str, SideBetPaytable]] = SIDE_BET_PAYTABLE
    side_bets_default: ClassVar[tuple[str, ...] | None] = ("dragon_7", "panda_8")

    def grade_win(self, result: CoupResult, spot: str, config: TableConfig) -> Grade:
        """Player 1:1; banker 1:1 but a push when it wins with a three-card 7."""
        if spot == "banker" and three_card_win(result, "banker", 7):
            return PUSH
        return Grade("win", (1, 1))

    def main_paytable(self, config: TableConfig) -> dict[str, dict[str, Any]]:
        """Even money on both hands, no commission (the banker's three-card-7 push is in the name)."""
        table = super().main_paytable(config)
        table["banker"]["push_on"] = "banker_three_card_7"
        return table


VARIANT = EzBaccarat()
"""The registered instance."""
