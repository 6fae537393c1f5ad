"""Baccarat banque (baccara à deux tableaux): a permanent banker against two punter hands (seed 004).

Sources, in order of authority: the French regulation (*Arrêté du 14 mai 2007*, titre III, chapitre III,
sections 3 and 4, articles 58–62), then seed 004 and docs/architecture.md; where both are silent, the
traditional
game, as written below.

* **Shoe** (art. 58): "On emploie trois jeux de cinquante-deux cartes [...] pour la banque dite
  "limitée" et six jeux [...] pour la banque dite "ouverte"" — 3 decks (banque limitée, the default) or
  6 (banque ouverte); "une carte d'arrêt est placée [...] avant les dix dernières cartes au baccara à deux
  tableaux" — stop card 10 from the end; no burn (the article names none).
* **Hands and deal** (the regulation is silent): the first tableau sits at the banker's right, the second
  at his left; cards go one at a time to ``right``, ``left``, ``banker``, twice. The tableaux then play in
  that order, the banker last.
* **Naturals**: a banker's two-card 8 or 9 ends the coup ("abattage"): nobody draws. A tableau's natural
  stands and is settled against the banker's *two-card* total (it is turned over at once; the banker's
  later draw is against the other tableau). When both tableaux have naturals the banker does not play.
* **Each tableau** draws on 0–4, stands on 6–7, and at 5 is free (``Decide``, ``cell="player_option_5"``).
* **The banker** is free to draw or stand on any total 0–7 (``Decide``, ``cell="banker_free"``).
* **Result**: ``versus`` holds each tableau's ``win``/``lose``/``tie`` from the tableau's side;
  ``outcome`` is ``banker`` (beat both), ``punters`` (both beat him), ``tie`` (both tied) or ``split``.
* **Money** (player-banked): the bank is a player's stake on spot ``bank``; punters stake on ``right``
  or ``left`` (art. 62 counts "les sommes exposées sur chaque tableau"; the regulation knows no bet "à
  cheval" on both, so there is no such spot), 1:1, void on a tie ("égalité"). The punters' stakes in total
  may not exceed the bank, which must be able to "payer tous les enjeux" (art. 61). At the banque ouverte
  stakes are "des sommes égales à 1 euro ou des multiples de 1 euro" (art. 61): option
  ``stake_unit_minor``, 100 at 6 decks, 1 at 3.
* **Levy** (art. 60): "2 % des sommes gagnées à chaque coup par le banquier, si la banque est limitée,
  et 1,25 % si elle est ouverte", on (art. 62 1°) the stakes of both tableaux when the banker wins both,
  the difference between the winning and the losing tableau's stakes when he wins one and loses the other,
  the winning tableau's stakes when the other ties — that is, on the banker's net win of the coup; rounded
  "à la dizaine de centimes d'euro la plus voisine" (art. 59), see
  :func:`~.chemin_de_fer.levy_minor`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from services.core.baccarat.engine import (
    CoupResult,
    CoupState,
    Deal,
    Decide,
    HandResult,
    Resolved,
    Step,
    Strategy,
    TableConfig,
    Variant,
    rounding_setting,
)
from services.core.baccarat.settings import Setting
from services.core.baccarat.variants.chemin_de_fer import (
    BANK_SPOT,
    LEVY_STEP_MINOR,
    LEVY_STEP_SETTING,
    PLAYER_OPTION_CELL,
    ROUNDING_SOURCE,
    bank_accepts,
    settle_player_banked,
    validate_player_banked,
)
from services.core.cards import CARD_POINTS
from services.core.errors import DomainError, Reason
from services.core.ledger import LOSE, PUSH, Accounts, Grade, Payout, Wager
from services.core.shoe import ShoeRules

TABLEAUX: tuple[str, str] = ("right", "left")
"""The two punter hands in the order they are dealt and play: the first tableau is at the banker's right."""

BANKER_FREE_CELL = "banker_free"
"""The cell that leaves the banker free to draw or stand."""

LEVY_BPS: dict[int, int] = {3: 200, 6: 125}
"""Art. 60: the levy by number of decks — 2 % at the banque limitée (3 decks), 1.25 % at the ouverte (6)."""


def _two(cards: Sequence[str]) -> int:
    return (CARD_POINTS[cards[0]] + CARD_POINTS[cards[1]]) % 10


def _always(choice: str) -> Strategy:
    def strategy(state: CoupState, decide: Decide) -> str:
        return choice if choice in decide.options else decide.options[0]

    return strategy


def _house_tableau(state: CoupState, decide: Decide) -> str:
    """A documented simple rule: a tableau draws at 5 (the punto rule of art. 55-14, "0-1-2-3-4-5
    TIRER"); the banker draws on 0–5 and stands on 6–7 (art. 55-14's banco rule when punto stood)."""
    if decide.hand != "banker":
        return "draw"
    return "draw" if _two(state.cards("banker")) <= 5 else "stand"


class BaccaratBanque(Variant):
    """Baccarat banque (see the module docstring)."""

    id = "baccarat_banque"
    enumerable = False  # three or more hands with free draws: millions of states, see odds.py
    rules_version = "baccarat_banque/1"
    source = "seed 004; Arrêté du 14 mai 2007 art. 58 (shoe), 59 (rounding), 60–62 (levy, banque ouverte)"
    default_decks = 3
    allowed_decks = (3, 6)
    shoe_rules = ShoeRules(burn="none", stop_from_end=10)
    house_banked = False
    default_strategy: ClassVar[str] = "house_tableau"
    """The strategy the simulator uses unless told otherwise."""

    def settings(self) -> tuple[Setting, ...]:
        """3 or 6 decks (art. 58), the levy of art. 60 for that bank, its rounding, the stake unit."""
        return (
            Setting(
                "decks", "int", "3",
                'art. 58: "trois jeux [...] pour la banque dite "limitée" et six jeux [...] pour la banque '
                'dite "ouverte""', values=(3, 6),
            ),
            Setting(
                "commission_bps", "int", "200 at 3 decks, 125 at 6",
                'art. 60: "2 % des sommes gagnées à chaque coup par le banquier, si la banque est limitée, '
                'et 1,25 % si elle est ouverte" (must match the decks)', values=(125, 200),
            ),
            rounding_setting("half_up", ROUNDING_SOURCE),
            LEVY_STEP_SETTING,
            Setting(
                "stake_unit_minor", "int", "100 at 6 decks, 1 at 3",
                'art. 61: "des sommes égales à 1 euro ou des multiples de 1 euro" (banque ouverte)',
                minimum=1, maximum=1_000_000,
            ),
        )  # fmt: skip

    def make_config(self, **overrides: Any) -> TableConfig:
        """The default configuration: 3 decks, the levy of art. 60 for the deck count, rounded half up."""
        decks = int(overrides.get("decks", self.default_decks))
        overrides.setdefault("commission_bps", LEVY_BPS.get(decks, LEVY_BPS[self.default_decks]))
        overrides.setdefault("commission_rounding", "half_up")
        return super().make_config(**overrides)

    def validate(self, config: TableConfig) -> None:
        """3 or 6 decks (art. 58), a usable levy, a positive stake unit."""
        super().validate(config)
        validate_player_banked(self.id, config)
        if config.commission_bps != LEVY_BPS[config.decks]:
            raise DomainError(
                Reason.BAD_CONFIG,
                f"art. 60 fixes the levy at {LEVY_BPS[config.decks]} bps with {config.decks} decks, "
                f"not {config.commission_bps}",
            )
        unit = self.stake_unit_minor(config)
        if not isinstance(unit, int) or unit <= 0:
            raise DomainError(Reason.BAD_CONFIG, f"stake_unit_minor is a positive integer, not {unit!r}")

    def stake_unit_minor(self, config: TableConfig) -> int:
        """Punter stakes are multiples of this: 1 euro at the banque ouverte (art. 61), else 1 minor unit."""
        unit: int = config.option("stake_unit_minor", 100 if config.decks == 6 else 1)
        return unit

    def hands(self, config: TableConfig) -> tuple[str, ...]:
        """Right tableau, left tableau, banker: the deal order."""
        return (*TABLEAUX, "banker")

    def spots(self, config: TableConfig) -> tuple[str, ...]:
        """A punter bets on one tableau; the banker's stake is ``bank``."""
        return (*TABLEAUX, BANK_SPOT)

    def next_step(self, state: CoupState) -> Step:
        """Deal R L B R L B; a banker's natural ends the coup; each tableau in turn draws 0–4, chooses at
        5, stands 6–9; then the banker chooses, unless both tableaux have naturals."""
        order = self.hands(state.config)
        dealt = sum(len(state.cards(h)) for h in order)
        if dealt < 6:
            return Deal(order[dealt % 3])
        banker = state.cards("banker")
        if _two(banker) >= 8:
            return Resolved(self.result(state))
        for tab in TABLEAUX:
            cards = state.cards(tab)
            total = _two(cards)
            if len(cards) == 2 and total <= 4:
                return Deal(tab)
            if len(cards) == 2 and total == 5:
                choice = state.decision(tab)
                if choice is None:
                    return Decide(tab, cell=PLAYER_OPTION_CELL)
                if choice == "draw":
                    return Deal(tab)
        if len(banker) == 2 and not all(_two(state.cards(t)) >= 8 for t in TABLEAUX):
            choice = state.decision("banker")
            if choice is None:
                return Decide("banker", cell=BANKER_FREE_CELL)
            if choice == "draw":
                return Deal("banker")
        return Resolved(self.result(state))

    def result(self, state: CoupState) -> CoupResult:
        """Each tableau against the banker (a natural tableau against his two-card total)."""
        banker = state.cards("banker")
        b2, bt = _two(banker), self.total(banker)
        hands: list[HandResult] = []
        versus: list[tuple[str, str]] = []
        for tab in TABLEAUX:
            cards = state.cards(tab)
            total = self.total(cards)
            against = b2 if _two(cards) >= 8 else bt
            versus.append((tab, "win" if total > against else "lose" if total < against else "tie"))
            hands.append(HandResult(tab, cards, total))
        hands.append(HandResult("banker", banker, bt))
        sides = {v for _, v in versus}
        outcome = (
            "banker" if sides == {"lose"} else "punters" if sides == {"win"}
            else "tie" if sides == {"tie"} else "split"
        )  # fmt: skip
        natural = b2 >= 8 or any(_two(state.cards(t)) >= 8 for t in TABLEAUX)
        return CoupResult(
            variant=self.id, rules_version=self.rules_version, hands=tuple(hands), outcome=outcome,
            natural=natural, cards_used=sum(len(h.cards) for h in hands), decisions=state.decisions,
            versus=tuple(versus),
        )  # fmt: skip

    def grade(self, result: CoupResult, spot: str, config: TableConfig) -> Grade:
        """A tableau: 1:1 when it beat the banker, lost when beaten, void on a tie. ``bank``: only the
        direction (``banker`` win, ``punters`` lose, else push); its amounts are :meth:`settle`'s."""
        if spot == BANK_SPOT:
            return (Grade("win", (1, 1)) if result.outcome == "banker"
                    else LOSE if result.outcome == "punters" else PUSH)  # fmt: skip
        if spot not in TABLEAUX:
            raise self.unknown_spot(spot)
        side = dict(result.versus).get(spot)
        if side == "win":
            return Grade("win", (1, 1))
        return LOSE if side == "lose" else PUSH

    def accepts(self, config: TableConfig, accepted: Sequence[Wager], wager: Wager) -> str | None:
        """One bank per coup; punters' stakes in total no more than the bank (art. 61), in whole
        ``stake_unit_minor`` (:func:`~.chemin_de_fer.bank_accepts`)."""
        return bank_accepts(self.spots(config), accepted, wager, self.stake_unit_minor(config))

    def settle(
        self, result: CoupResult, wagers: Sequence[Wager], config: TableConfig, accounts: Accounts
    ) -> tuple[Payout, ...]:
        """The bank pays and collects per tableau; the levy on its net win (art. 62 1°)."""
        return settle_player_banked(self, result, wagers, config, accounts)

    def strategies(self) -> Mapping[str, Strategy]:
        """``house_tableau`` (see :func:`_house_tableau`), ``always_draw``, ``always_stand``."""
        return {
            "house_tableau": _house_tableau,
            "always_draw": _always("draw"),
            "always_stand": _always("stand"),
        }

    def paytable(self, config: TableConfig) -> dict[str, dict[str, Any]]:
        """Each tableau 1:1; the bank pays the levy on its net win, rounded to ``levy_step_minor``."""
        table: dict[str, dict[str, Any]] = {t: {"pays": [1, 1], "commission_bps": 0} for t in TABLEAUX}
        table[BANK_SPOT] = {
            "pays": [1, 1], "commission_bps": config.commission_bps,
            "commission_rounding": config.commission_rounding,
            "levy_step_minor": int(config.option("levy_step_minor", LEVY_STEP_MINOR)),
        }  # fmt: skip
        return table


VARIANT = BaccaratBanque()
"""The registered instance."""
