"""Punto banco: the casino-banked game with a forced tableau (seeds 002, 003, 004), and its side bets.

Deal: player, banker, player, banker (seed 004: "one to the Player first, then to the Banker, then
another to the Player, and then another to the Banker"). A two-card 8 or 9 on either side is a
natural and both stand. Otherwise the player draws on 0–5 and stands on 6–7; the banker, if the
player stood, draws on 0–5; if the player drew, the banker acts on its two-card total and the point
value of the player's third card (:data:`BANKER_DRAWS`). Seeds 002 and 004 state that table in two
different layouts; tests check both against this one.

Pays (seed 004, French regulation art. 55-14): player 1:1; banker 1:1 less 5 % commission on the win
(19:20 net); tie 8:1 (9:1 configurable as ``tie_pays``); player and banker bets push on a tie
(seed 002: "the bets to the Player and the Banker are returned").

Shoe (art. 55-14): the burn is the value of the first card turned ("La valeur de cette carte (les figures
valant 10 pour cette opération) indique le nombre de cartes qui seront "brûlées""), and "une carte
d'arrêt [...] est placée à la fin du sixain, entre les dixième et onzième cartes": the stop card has ten
cards behind it (:data:`STOP_FROM_END`). Art. 55-14 names six decks; seed 004 offers 1, 6 or 8, which is
what a table may choose (``decks``).

Side bets (beyond the seeds; the usual casino paytables, see :data:`PAIR_PAYS` and
:data:`DRAGON_BONUS_PAYS`):

* ``player_pair`` / ``banker_pair``: the hand's first two cards share a rank (suits do not matter),
  11:1; a pair made with the third card does not count.
* ``dragon_bonus_player`` / ``dragon_bonus_banker``: the chosen hand wins with a natural: 1:1; both
  hands natural and equal: push; the chosen hand wins without a natural by 9 points: 30:1, by 8: 10:1,
  by 7: 6:1, by 6: 4:1, by 5: 2:1, by 4: 1:1; anything else (a smaller margin, a non-natural tie, a
  loss) loses.

Which side bets a table offers is the option ``side_bets`` (any subset of the variant's
:attr:`BankedTwoHandGame.side_bets_available`, all of them by default).

Fast path: :meth:`TwoHandGame.play` resolves a forced-tableau coup straight from the card list, with
the same :class:`CoupResult` as the state machine (tests check they agree); the dealer keeps using the
state machine, the simulator and the benchmarks may use the fast path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Final

from services.core.baccarat.engine import (
    CoupResult,
    CoupState,
    Deal,
    HandResult,
    Resolved,
    Step,
    TableConfig,
    Variant,
    resolve,
    rounding_setting,
)
from services.core.baccarat.settings import Setting
from services.core.cards import CARD_POINTS, Card
from services.core.errors import DomainError, Reason
from services.core.ledger import LOSE, PUSH, Grade
from services.core.shoe import ShoeRules

STOP_FROM_END: Final = 10
"""Art. 55-14: "une carte d'arrêt de couleur rouge est placée à la fin du sixain, entre les dixième et
onzième cartes": ten cards stay behind the stop card."""

BANKER_DRAWS: dict[int, frozenset[int]] = {
    0: frozenset(range(10)),
    1: frozenset(range(10)),
    2: frozenset(range(10)),
    3: frozenset({0, 1, 2, 3, 4, 5, 6, 7, 9}),
    4: frozenset({2, 3, 4, 5, 6, 7}),
    5: frozenset({4, 5, 6, 7}),
    6: frozenset({6, 7}),
    7: frozenset(),
}
"""Banker's two-card total → the player's third-card point values on which the banker draws."""


def banker_draws(banker_total: int, player_third: int | None) -> bool:
    """The forced banker rule: ``player_third`` is the point value of the player's third card, or
    ``None`` when the player stood (then the banker draws on 0–5 like the player)."""
    if player_third is None:
        return banker_total <= 5
    return player_third in BANKER_DRAWS.get(banker_total, frozenset())


STOOD: Final = 10
"""Index of the "player stood" column in :data:`BANKER_DRAW_TABLE`."""

BANKER_DRAW_TABLE: Final[tuple[tuple[bool, ...], ...]] = tuple(
    (*(banker_draws(b, x) for x in range(10)), banker_draws(b, None)) for b in range(8)
)
""":func:`banker_draws` as a lookup table for the fast path: ``[banker_total][third or STOOD]``."""


DealtCoup = tuple[tuple[Card, ...], tuple[Card, ...], int, int, bool]
"""A coup as :meth:`TwoHandGame.deal` computes it: player cards, banker cards, their totals, natural."""


class TwoHandGame(Variant):
    """Shared mechanics for player-versus-banker games with the punto banco deal and tableau.

    Subclasses override :meth:`grade` (and :meth:`spots`); commission-free variants keep the tableau.
    """

    hand_names: ClassVar[tuple[str, str]] = ("player", "banker")

    def hands(self, config: TableConfig) -> tuple[str, ...]:
        """Player then banker."""
        return self.hand_names

    def next_step(self, state: CoupState) -> Step:
        """The forced tableau: naturals stand, player 0–5 draws, banker per :func:`banker_draws`."""
        p_name, b_name = self.hand_names
        player, banker = state.cards(p_name), state.cards(b_name)
        dealt = len(player) + len(banker)
        if dealt < 4:
            return Deal((p_name, b_name)[dealt % 2])
        pts = self.card_points
        p2 = (pts[player[0]] + pts[player[1]]) % 10
        b2 = (pts[banker[0]] + pts[banker[1]]) % 10
        if p2 >= 8 or b2 >= 8:
            return Resolved(self.result(state, natural=True))
        if len(player) == 2 and p2 <= 5:
            return Deal(p_name)
        if len(banker) == 2:
            third = pts[player[2]] if len(player) == 3 else None
            if banker_draws(b2, third):
                return Deal(b_name)
        return Resolved(self.result(state, natural=False))

    def result(self, state: CoupState, natural: bool) -> CoupResult:
        """Build the result from the final hands."""
        p_name, b_name = self.hand_names
        player, banker = state.cards(p_name), state.cards(b_name)
        pt, bt = self.total(player), self.total(banker)
        outcome = p_name if pt > bt else b_name if bt > pt else "tie"
        return CoupResult(
            variant=self.id,
            rules_version=self.rules_version,
            hands=(HandResult(p_name, player, pt), HandResult(b_name, banker, bt)),
            outcome=outcome,
            natural=natural,
            cards_used=len(player) + len(banker),
            decisions=state.decisions,
        )

    def forced(self) -> bool:
        """True when this variant plays :meth:`TwoHandGame.next_step` unchanged (no decision is ever
        due), so :meth:`play` may compute the coup directly."""
        return type(self).next_step is TwoHandGame.next_step

    def fast_play(self) -> Callable[[Sequence[Card]], CoupResult] | None:
        """:meth:`play` where the tableau is forced (:meth:`forced`)."""
        return self.play if self.forced() else None

    def deal(self, cards: Sequence[Card], pos: int = 0) -> DealtCoup:
        """The forced tableau computed straight from the cards, for the coup whose first card is
        ``cards[pos]``: ``(player cards, banker cards, player total, banker total, natural)``.

        The fast path (no intermediate states, no result object); :meth:`play` wraps it into the
        :class:`CoupResult`. Cards must be canonical (``9S``, ``TH``: what a shoe holds); anything
        else raises ``UNKNOWN_CARD``, too few cards ``TOO_FEW_CARDS``. Only for variants that play
        :meth:`TwoHandGame.next_step` unchanged (see :meth:`forced`).
        """
        pts = self.card_points
        try:
            c0, c1, c2, c3 = cards[pos], cards[pos + 1], cards[pos + 2], cards[pos + 3]
            p = (pts[c0] + pts[c2]) % 10
            b = (pts[c1] + pts[c3]) % 10
            if p >= 8 or b >= 8:
                return (c0, c2), (c1, c3), p, b, True
            if p <= 5:
                c4 = cards[pos + 4]
                x = pts[c4]
                p = (p + x) % 10
                player: tuple[Card, ...] = (c0, c2, c4)
                nxt = pos + 5
            else:
                x = STOOD
                player = (c0, c2)
                nxt = pos + 4
            if BANKER_DRAW_TABLE[b][x]:
                c5 = cards[nxt]
                return player, (c1, c3, c5), p, (b + pts[c5]) % 10, False
            return player, (c1, c3), p, b, False
        except IndexError:
            raise DomainError(
                Reason.TOO_FEW_CARDS, f"{self.id} needs more than the {len(cards) - pos} cards given"
            ) from None
        except KeyError as exc:
            raise DomainError(Reason.UNKNOWN_CARD, f"not a canonical card: {exc.args[0]!r}") from None

    def play(self, cards: Sequence[Card], pos: int = 0) -> CoupResult:
        """Resolve the coup whose first card is ``cards[pos]``: the fast path for forced tableaux.

        Gives exactly the :class:`CoupResult` that :func:`~services.core.baccarat.engine.resolve` gives
        for ``cards[pos:]`` (tests check it), from :meth:`deal`. A variant whose tableau leaves choices
        (it overrides :meth:`next_step`) goes through the state machine instead, which asks for
        decisions (``DECISION_REQUIRED``).
        """
        if type(self).next_step is not TwoHandGame.next_step:
            return resolve(self.config(), cards[pos:])
        player, banker, p, b, natural = self.deal(cards, pos)
        p_name, b_name = self.hand_names
        return CoupResult(
            self.id,
            self.rules_version,
            (HandResult(p_name, player, p), HandResult(b_name, banker, b)),
            p_name if p > b else b_name if b > p else "tie",
            natural,
            len(player) + len(banker),
        )


# --- side bets -------------------------------------------------------------------------------------

PAIR_PAYS: Final = (11, 1)
"""A winning pair bet pays 11:1 (the usual casino paytable)."""

DRAGON_BONUS_PAYS: Final[Mapping[int, tuple[int, int]]] = {
    9: (30, 1), 8: (10, 1), 7: (6, 1), 6: (4, 1), 5: (2, 1), 4: (1, 1),
}  # fmt: skip
"""Dragon Bonus, a non-natural win: the margin in points → the win ratio (smaller margins lose)."""

DRAGON_BONUS_NATURAL_PAYS: Final = (1, 1)
"""Dragon Bonus, a win with a natural: even money (a natural tie pushes)."""

SideBetGrader = Callable[[CoupResult, TableConfig], Grade]
"""How a side bet fares in a resolved coup."""


def pair(cards: tuple[Card, ...]) -> bool:
    """The first two cards share a rank (the pair side bets; suits do not matter)."""
    return len(cards) >= 2 and cards[0][0] == cards[1][0]


def pair_grade(hand: str) -> SideBetGrader:
    """The pair bet on ``hand``: 11:1 when its first two cards share a rank, else lost."""

    def grade(result: CoupResult, config: TableConfig) -> Grade:
        return Grade("win", PAIR_PAYS) if pair(result.hand(hand).cards) else LOSE

    return grade


def dragon_bonus_grade(hand: str) -> SideBetGrader:
    """The Dragon Bonus on ``hand`` (see the module docstring for the paytable).

    A natural coup stops after two cards, so a hand that wins one wins it with its own natural.
    """

    def grade(result: CoupResult, config: TableConfig) -> Grade:
        if result.outcome == "tie":
            return PUSH if result.natural else LOSE
        if result.outcome != hand:
            return LOSE
        if result.natural:
            return Grade("win", DRAGON_BONUS_NATURAL_PAYS)
        margin = abs(result.hands[0].total - result.hands[1].total)
        ratio = DRAGON_BONUS_PAYS.get(margin)
        return LOSE if ratio is None else Grade("win", ratio)

    return grade


def dragon_bonus_paytable(config: TableConfig) -> dict[str, Any]:
    """The Dragon Bonus paytable in the ``TableOpened`` form: the top pay and every line."""
    table: dict[str, Any] = {"natural_win": list(DRAGON_BONUS_NATURAL_PAYS), "natural_tie": "push"}
    table.update({f"win_by_{m}": list(r) for m, r in DRAGON_BONUS_PAYS.items()})
    return {"pays": list(DRAGON_BONUS_PAYS[9]), "commission_bps": 0, "table": table}


COMMON_SIDE_BETS: Final[Mapping[str, SideBetGrader]] = {
    "player_pair": pair_grade("player"),
    "banker_pair": pair_grade("banker"),
    "dragon_bonus_player": dragon_bonus_grade("player"),
    "dragon_bonus_banker": dragon_bonus_grade("banker"),
}
"""The side bets every house-banked two-hand game here can offer, by spot."""

SideBetPaytable = Callable[[TableConfig], dict[str, Any]]
"""A side bet's paytable entry at a table of the given configuration."""


def fixed_pays(ratio: tuple[int, int]) -> SideBetPaytable:
    """The paytable entry of a side bet with one fixed win ratio and no commission."""
    return lambda config: {"pays": list(ratio), "commission_bps": 0}


COMMON_SIDE_BET_PAYTABLE: Final[Mapping[str, SideBetPaytable]] = {
    "player_pair": fixed_pays(PAIR_PAYS),
    "banker_pair": fixed_pays(PAIR_PAYS),
    "dragon_bonus_player": dragon_bonus_paytable,
    "dragon_bonus_banker": dragon_bonus_paytable,
}
"""Paytable entries of :data:`COMMON_SIDE_BETS`."""


class BankedTwoHandGame(TwoHandGame):
    """A house-banked player/banker game: three main bets plus the side bets the table offers.

    Subclasses define :meth:`grade_main` (player, banker, tie), :meth:`main_paytable` and
    :attr:`side_bets_available` (spot → grader); :attr:`side_bet_paytable` gives each side bet's
    paytable entry. The option ``side_bets`` (an iterable of spot names) selects which side bets a
    table offers; unset, :attr:`side_bets_default` (or all available) are offered.
    """

    main_spots: ClassVar[tuple[str, ...]] = ("player", "banker", "tie")
    side_bets_available: ClassVar[Mapping[str, SideBetGrader]] = COMMON_SIDE_BETS
    side_bet_paytable: ClassVar[Mapping[str, SideBetPaytable]] = COMMON_SIDE_BET_PAYTABLE
    side_bets_default: ClassVar[tuple[str, ...] | None] = None

    decks_source: ClassVar[str] = "beyond the seeds: the game's rule card (8 decks usual)"
    tie_pays_allowed: ClassVar[tuple[int, ...]] = (8, 9)
    tie_pays_source: ClassVar[str] = (
        'seed 004: "those wagering on the Tie bet will be paid at 8:1"; '
        'docs/architecture.md: "9:1 configurable"'
    )

    def commission_setting(self) -> Setting:
        """The banker's commission: none in the commission-free games (overridden by punto banco)."""
        return Setting("commission_bps", "int", "0", "commission-free (the game's rule card)", values=(0,))

    def settings(self) -> tuple[Setting, ...]:
        """Decks, the tie's pay, the banker's commission and its rounding, the side bets offered."""
        default_side = ", ".join(self.side_bets_default or tuple(self.side_bets_available))
        return (
            Setting("decks", "int", str(self.default_decks), self.decks_source, values=self.allowed_decks),
            Setting("tie_pays", "int", "8", self.tie_pays_source, values=self.tie_pays_allowed),
            self.commission_setting(),
            rounding_setting("floor", "the house's rule (a commission is rounded down by default)"),
            Setting(
                "side_bets",
                "names",
                default_side,
                "beyond the seeds: the usual casino paytables",
                values=tuple(self.side_bets_available),
            ),
        )

    def make_config(self, **overrides: Any) -> TableConfig:
        """The default configuration; ``side_bets`` may be given as any iterable of spot names."""
        if "side_bets" in overrides:
            overrides["side_bets"] = self._ordered(overrides["side_bets"])
        return super().make_config(**overrides)

    def _ordered(self, names: Iterable[str]) -> tuple[str, ...]:
        wanted = {str(n) for n in names}
        unknown = sorted(wanted - set(self.side_bets_available))
        if unknown:
            raise DomainError(Reason.BAD_CONFIG, f"{self.id} offers no side bets {unknown}")
        return tuple(n for n in self.side_bets_available if n in wanted)

    def validate(self, config: TableConfig) -> None:
        """The decks, and side bets this variant knows."""
        super().validate(config)
        self.side_bets(config)

    def side_bets(self, config: TableConfig) -> tuple[str, ...]:
        """The side bets the table offers, in the order of :attr:`side_bets_available`."""
        chosen = config.option("side_bets")
        if chosen is None:
            chosen = self.side_bets_default
        if chosen is None:
            return tuple(self.side_bets_available)
        return self._ordered(chosen)

    def spots(self, config: TableConfig) -> tuple[str, ...]:
        """The three main bets, then the side bets offered."""
        return (*self.main_spots, *self.side_bets(config))

    def grade(self, result: CoupResult, spot: str, config: TableConfig) -> Grade:
        """Main bets by :meth:`grade_main`, side bets by their graders; unknown spots refused."""
        if spot in self.main_spots:
            return self.grade_main(result, spot, config)
        if spot in self.side_bets(config):
            return self.side_bets_available[spot](result, config)
        raise self.unknown_spot(spot)

    def grade_main(self, result: CoupResult, spot: str, config: TableConfig) -> Grade:
        """Tie ``tie_pays``:1; player and banker push on a tie, lose to the other hand and, when theirs
        wins, are paid as :meth:`grade_win` says."""
        outcome = result.outcome
        if spot == "tie":
            return Grade("win", (config.tie_pays, 1)) if outcome == "tie" else LOSE
        if outcome == "tie":
            return PUSH
        if outcome != spot:
            return LOSE
        return self.grade_win(result, spot, config)

    def grade_win(self, result: CoupResult, spot: str, config: TableConfig) -> Grade:
        """A player or banker bet whose hand won: 1:1, less ``commission_bps`` on the banker's win."""
        bps = config.commission_bps if spot == "banker" else 0
        return Grade("win", (1, 1), bps)

    def main_paytable(self, config: TableConfig) -> dict[str, dict[str, Any]]:
        """Headline pays of the main bets."""
        return {
            "player": {"pays": [1, 1], "commission_bps": 0},
            "banker": {"pays": [1, 1], "commission_bps": config.commission_bps},
            "tie": {"pays": [config.tie_pays, 1], "commission_bps": 0},
        }

    def paytable(self, config: TableConfig) -> dict[str, dict[str, Any]]:
        """Headline pays per spot offered (side bets with their full tables where they have one)."""
        table = self.main_paytable(config)
        for spot in self.side_bets(config):
            table[spot] = self.side_bet_paytable[spot](config)
        return table


class PuntoBanco(BankedTwoHandGame):
    """Punto banco (see the module docstring)."""

    id = "punto_banco"
    rules_version = "punto_banco/1"
    source = "seeds 002, 003, 004; Arrêté du 14 mai 2007 art. 55-14"
    default_decks = 8
    allowed_decks = (1, 6, 8)
    decks_source: ClassVar[str] = 'seed 004: "It can be played by using 1, 6, or 8 standard 52-card decks"'
    card_points = CARD_POINTS
    shoe_rules = ShoeRules(burn="first_card_value", stop_from_end=STOP_FROM_END)

    def commission_setting(self) -> Setting:
        """5 % of a banker win by default; a table may charge less, never more."""
        return Setting(
            "commission_bps", "int", "500",
            'seed 004: "5% of the bet will go to the house as the commission"; art. 55-14: "les gains '
            'de banco sont payés 19 pour 20" (a table may charge less, never more)',
            minimum=0, maximum=500,
        )  # fmt: skip


VARIANT = PuntoBanco()
"""The registered instance."""
