"""Super 6 (also "no-commission baccarat", "Punto 2000"): a banker win on 6 pays 1:2.

Beyond the seeds (docs/architecture.md). The deal and the tableau are punto banco's (:class:`TwoHandGame`).
The
banker bet pays even money with no commission, except that a banker win with a total of 6 (two or
three cards) pays 1:2 (half the stake). Player 1:1; tie 8:1 (``tie_pays``); player and banker push on a
tie.

Side bets: ``super_6`` pays 12:1 (option ``super_6_pays``, e.g. 15) when the banker wins with a total of
6, and loses otherwise (ties included); the pair and Dragon Bonus bets of :mod:`.punto_banco` as live
Super 6 tables offer them. All are offered by default; the option ``side_bets`` selects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final

from services.core.baccarat.engine import CoupResult, TableConfig
from services.core.baccarat.settings import Setting
from services.core.baccarat.variants.ez_baccarat import CommissionFreeGame
from services.core.baccarat.variants.punto_banco import (
    COMMON_SIDE_BET_PAYTABLE,
    COMMON_SIDE_BETS,
    SideBetGrader,
    SideBetPaytable,
)
from services.core.errors import DomainError, Reason
from services.core.ledger import LOSE, Grade

BANKER_SIX_PAYS: Final = (1, 2)
"""A banker win on 6 pays half the stake."""

SUPER_6_PAYS: Final = 12
"""The Super 6 side bet's default pay, to one."""


def banker_wins_on_six(result: CoupResult) -> bool:
    """The banker won with a total of 6 (any number of cards)."""
    return result.outcome == "banker" and result.hand("banker").total == 6


def super_6_pays(config: TableConfig) -> int:
    """The table's Super 6 pay (``super_6_pays``, 12 by default)."""
    return int(config.option("super_6_pays", SUPER_6_PAYS))


def _super_6(result: CoupResult, config: TableConfig) -> Grade:
    return Grade("win", (super_6_pays(config), 1)) if banker_wins_on_six(result) else LOSE


SIDE_BETS: Final[Mapping[str, SideBetGrader]] = {"super_6": _super_6, **COMMON_SIDE_BETS}
"""Every side bet a Super 6 table can offer, by spot."""

SIDE_BET_PAYTABLE: Final[Mapping[str, SideBetPaytable]] = {
    "super_6": lambda config: {"pays": [super_6_pays(config), 1], "commission_bps": 0},
    **COMMON_SIDE_BET_PAYTABLE,
}
"""Paytable entries of :data:`SIDE_BETS` (Super 6 at the table's pay)."""


class Super6(CommissionFreeGame):
    """Super 6 (see the module docstring)."""

    id = "super6"
    rules_version = "super6/1"
    source = "beyond the seeds: Super 6 / no-commission baccarat rule card (banker 6 pays 1:2)"
    default_decks = 8
    side_bets_available: ClassVar[Mapping[str, SideBetGrader]] = SIDE_BETS
    side_bet_paytable: ClassVar[Mapping[str, SideBetPaytable]] = SIDE_BET_PAYTABLE

    def settings(self) -> tuple[Setting, ...]:
        """Those of every house-banked game, and the Super 6 side bet's pay."""
        return (
            *super().settings(),
            Setting(
                "super_6_pays",
                "int",
                str(SUPER_6_PAYS),
                "beyond the seeds: the rule card (12:1 or 15:1)",
                minimum=1,
                maximum=50,
            ),
        )

    def validate(self, config: TableConfig) -> None:
        """The decks, the side bets, no commission and a positive Super 6 pay."""
        super().validate(config)
        if super_6_pays(config) <= 0:
            raise DomainError(Reason.BAD_CONFIG, f"super_6_pays must be positive, not {super_6_pays(config)}")

    def grade_win(self, result: CoupResult, spot: str, config: TableConfig) -> Grade:
        """Player 1:1; banker 1:1, or 1:2 when it wins on 6."""
        if spot == "banker" and banker_wins_on_six(result):
            return Grade("win", BANKER_SIX_PAYS)
        return Grade("win", (1, 1))

    def main_paytable(self, config: TableConfig) -> dict[str, dict[str, Any]]:
        """Even money on both hands, no commission; the banker's win on 6 pays 1:2."""
        table = super().main_paytable(config)
        table["banker"]["on_six"] = list(BANKER_SIX_PAYS)
        return table


VARIANT = Super6()
"""The registered instance."""
