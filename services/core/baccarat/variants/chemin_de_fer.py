"""Chemin de fer: the player-banked game with the ponte's option at 5 (seed 004, docs/architecture.md).

Sources, in order of authority: the French regulation (*Arrêté du 14 mai 2007 relatif à la réglementation
des jeux dans les casinos*, titre III, chapitre III, section 3, articles 58–60), then seed 004, then the
rule card posted at chemin de fer tables ("jouer selon la règle") where both are silent.

* **Shoe** (art. 58): "Au baccara chemin de fer, il est fait usage de six jeux de cinquante-deux cartes"
  — 6 decks only; "une carte d'arrêt est placée à la fin du jeu avant les sept dernières cartes au
  baccara chemin de fer [...] Lorsque cette carte apparaît, aucun autre coup ne doit être donné" — stop
  card 7 cards from the end, no burn (the article names none).
* **Deal**: player (the ponte), banker, player, banker, as in seed 004 and art. 55-14.
* **Naturals**: a two-card 8 or 9 on either side ends the coup ("abattage").
* **The ponte** draws on 0–4, stands on 6–7 and at 5 is free ("tire ou reste"): a :class:`Decide` with
  ``cell="player_option_5"``.
* **The banker** follows the tableau of :func:`~.punto_banco.banker_draws` (the regulation's own tableau,
  art. 55-14, including its "Refus" column: when the ponte stood the banker draws on 0–5) except in the
  *optional cells*, where he chooses (a :class:`Decide` whose ``cell`` names the cell,
  ``banker_<his total>_vs_<ponte's third card value or "none">``). The regulation is silent on the
  chemin de fer tableau; the default optional cells are those of the classic rule card: banker 3 when the
  ponte's third card is a 9 (``banker_3_vs_9``), banker 5 when it is a 4 (``banker_5_vs_4``). A table
  sets its own with the option ``optional_cells``; a cell taken out of the set is played as art. 55-14
  plays it.
* **Money** (player-banked, ``house_banked = False``): the bank is a player's stake on spot ``bank``;
  punters stake on spot ``player`` against it, in total no more than the bank (:meth:`accepts`, art. 58
  lets the casino fix "le minimum et le maximum soit de la mise initiale, soit des bancos", the cover is
  the bank itself). Every stake waits in escrow; the punters win 1:1 from and lose to the table's bank
  account, which the bank's own payout settles with the banker's wallet after the levy
  (:func:`settle_player_banked`). On a tie "le coup est nul" (art. 55-14, by analogy: the chemin de fer
  articles are silent): every stake comes back.
* **Levy** (art. 60): "le prélèvement est, au baccara chemin de fer, fixé à 5 % des sommes gagnées à
  chaque coup par le banquier", and (art. 59) "Le montant du prélèvement est arrondi à la dizaine de
  centimes d'euro la plus voisine": :func:`levy_minor` rounds to ``levy_step_minor`` (default 10 minor
  units) with the table's ``commission_rounding`` (default here ``half_up``: "la plus voisine", halves
  up — the text does not say where an exact half goes). The levy never exceeds what the banker won.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from services.core.baccarat.engine import (
    CoupResult,
    CoupState,
    Deal,
    Decide,
    Resolved,
    Step,
    Strategy,
    TableConfig,
    Variant,
    rounding_setting,
)
from services.core.baccarat.settings import Setting
from services.core.baccarat.variants.punto_banco import TwoHandGame, banker_draws
from services.core.cards import CARD_POINTS
from services.core.errors import DomainError, Reason
from services.core.ledger import (
    BPS,
    LOSE,
    PUSH,
    ROUNDINGS,
    Accounts,
    Amounts,
    Grade,
    Payout,
    Wager,
    amounts_of,
    postings_for,
    round_ratio,
)
from services.core.shoe import ShoeRules

BANK_SPOT = "bank"
"""The spot of the bank's own stake in every player-banked game here."""

PLAYER_OPTION_CELL = "player_option_5"
"""The cell that leaves a punter hand free at 5 (chemin de fer's ponte, baccarat banque's tableaux)."""

DEFAULT_OPTIONAL_CELLS: tuple[str, ...] = ("banker_3_vs_9", "banker_5_vs_4")
"""The banker's free cells of the classic chemin de fer rule card (the regulation names none)."""

LEVY_STEP_MINOR = 10
"""Art. 59: the levy is rounded "à la dizaine de centimes d'euro la plus voisine" (10 cents)."""


def banker_cell(banker_total: int, player_third: int | None) -> str:
    """The name of a cell of the banker's tableau: his two-card total against the point value of the
    ponte's third card (``None`` when the ponte stood: the regulation's "Refus" column)."""
    return f"banker_{banker_total}_vs_{'none' if player_third is None else player_third}"


BANKER_CELLS: frozenset[str] = frozenset(banker_cell(b, t) for b in range(8) for t in (None, *range(10)))
"""Every cell a table may declare optional (banker totals 0–7; 8 and 9 are naturals)."""


def optional_cells(config: TableConfig) -> frozenset[str]:
    """The banker cells left to the banker's choice at a table of ``config`` (option ``optional_cells``)."""
    raw = config.option("optional_cells", DEFAULT_OPTIONAL_CELLS)
    if isinstance(raw, str):
        raw = [c for c in raw.replace(",", " ").split() if c]
    return frozenset(str(c) for c in raw)


ROUNDING_SOURCE = (
    'art. 59: "Le montant du prélèvement est arrondi à la dizaine de centimes d\'euro la plus voisine"'
)
"""Where the levy's rounding comes from (chemin de fer and baccarat banque)."""

LEVY_STEP_SETTING = Setting(
    "levy_step_minor", "int", str(LEVY_STEP_MINOR), ROUNDING_SOURCE + " (10 cents)", minimum=1, maximum=10_000
)
"""The levy is rounded to a multiple of this (minor units)."""

LEVY_SETTING = Setting(
    "commission_bps", "int", "500",
    'art. 60: "le prélèvement est, au baccara chemin de fer, fixé à 5 % des sommes gagnées à chaque coup '
    'par le banquier"', values=(500,),
)  # fmt: skip
"""Chemin de fer's levy: 5 %, fixed by the regulation."""


def levy_minor(base_minor: int, config: TableConfig) -> int:
    """The house levy on a banker's win of ``base_minor``: ``commission_bps`` of it (art. 60), rounded to a
    multiple of ``levy_step_minor`` (art. 59) by the table's ``commission_rounding``, and never more than
    ``base_minor`` (the house cannot take more than the banker won)."""
    if base_minor <= 0:
        return 0
    step = int(config.option("levy_step_minor", LEVY_STEP_MINOR))
    levy = round_ratio(base_minor * config.commission_bps, BPS * step, config.commission_rounding) * step
    return min(levy, base_minor)


def validate_player_banked(variant_id: str, config: TableConfig) -> None:
    """Refuse a levy configuration that cannot be applied (shared by the player-banked variants)."""
    if config.commission_rounding not in ROUNDINGS:
        raise DomainError(Reason.BAD_CONFIG, f"unknown rounding {config.commission_rounding!r}")
    if not 0 <= config.commission_bps <= BPS:
        raise DomainError(Reason.BAD_CONFIG, f"a levy is 0 to {BPS} bps, not {config.commission_bps}")
    step = config.option("levy_step_minor", LEVY_STEP_MINOR)
    if not isinstance(step, int) or step <= 0:
        raise DomainError(Reason.BAD_CONFIG, f"{variant_id}: levy_step_minor is a positive integer")


def bank_accepts(
    spots: Sequence[str], accepted: Sequence[Wager], wager: Wager, stake_unit_minor: int = 1
) -> str | None:
    """Whether ``wager`` may join ``accepted`` at a player-banked table: ``None`` or a reason code.

    One bank per coup (``bank_taken``); a bank must cover the punters already accepted, and a punter's
    stake must fit in what the bank has not yet covered (``bank_cannot_cover``); a punter's stake must be
    a multiple of ``stake_unit_minor`` (``bad_amount``).
    """
    if wager.spot not in spots:
        return Reason.UNKNOWN_SPOT.value
    if wager.stake_minor <= 0:
        return Reason.BAD_AMOUNT.value
    banks = [w.stake_minor for w in accepted if w.spot == BANK_SPOT]
    covered = sum(w.stake_minor for w in accepted if w.spot != BANK_SPOT)
    if wager.spot == BANK_SPOT:
        if banks:
            return Reason.BANK_TAKEN.value
        return Reason.BANK_CANNOT_COVER.value if wager.stake_minor < covered else None
    if wager.stake_minor % stake_unit_minor:
        return Reason.BAD_AMOUNT.value
    if not banks or covered + wager.stake_minor > banks[0]:
        return Reason.BANK_CANNOT_COVER.value
    return None


def settle_player_banked(
    variant: Variant, result: CoupResult, wagers: Sequence[Wager], config: TableConfig, accounts: Accounts
) -> tuple[Payout, ...]:
    """Every wager's payout at a player-banked table, in the order given.

    The punters play against ``accounts.bank``, the table's bank account, exactly as house-banked bets
    play against the house (:func:`~services.core.ledger.postings_for`): a punter graded a win by
    ``variant.grade`` gets stake and win (escrow −stake, bank −win, wallet +stake+win), a loss goes to the
    bank (escrow −stake, bank +stake), a push returns the stake. The bank's own payout releases its stake
    from escrow and settles the bank account's net for the coup (``won − paid``): the levy
    (:func:`levy_minor` of the net win; art. 60, and art. 62 1° b: the difference between the stakes won
    and the stakes paid) to ``accounts.commission``, the rest to the banker's wallet.

    So every payout's postings sum to zero and are never empty; each touches exactly one wallet, its own,
    by ``credit_minor`` (the wallet stage applies a payout to the one wallet it is keyed by); escrow is
    emptied exactly and the bank account nets to zero over the coup.
    """
    if accounts.bank is None:
        raise DomainError(Reason.BAD_CONFIG, f"{variant.id} is player-banked: Accounts.bank is required")
    banks = [w for w in wagers if w.spot == BANK_SPOT]
    if len(banks) > 1:
        raise DomainError(Reason.BANK_TAKEN, f"{len(banks)} bank wagers in one coup")
    punters = {i: amounts_of(w.stake_minor, variant.grade(result, w.spot, config), config.commission_rounding)
               for i, w in enumerate(wagers) if w.spot != BANK_SPOT}  # fmt: skip
    if not banks:
        if punters:
            raise DomainError(Reason.BANK_CANNOT_COVER, "punters bet and nobody holds the bank")
        return ()
    bank = banks[0]
    covered = sum(s.stake_minor for s in punters.values())
    if covered > bank.stake_minor:
        raise DomainError(Reason.BANK_CANNOT_COVER, f"bank {bank.stake_minor} < stakes {covered}")
    won = sum(s.stake_minor for s in punters.values() if s.result == "lose")
    paid = sum(s.win_minor for s in punters.values() if s.result == "win")
    payouts: list[Payout] = []
    for i, w in enumerate(wagers):
        if w.spot == BANK_SPOT:
            payouts.append(_bank_payout(w, won - paid, config, accounts, accounts.bank))
        else:
            rows = postings_for(punters[i], w.account_id, accounts.bank, accounts)
            payouts.append(_payout(w, punters[i], rows))
    return tuple(payouts)


def _bank_payout(
    bank: Wager, net_minor: int, config: TableConfig, accounts: Accounts, bank_account: str
) -> Payout:
    levy = levy_minor(net_minor, config)
    credit = bank.stake_minor + net_minor - levy
    rows = [(accounts.escrow, -bank.stake_minor)]
    if net_minor:
        rows.append((bank_account, -net_minor))
    if credit:
        rows.append((bank.account_id, credit))
    if levy:
        rows.append((accounts.commission, levy))
    result: Literal["win", "lose", "push"] = "win" if net_minor > 0 else "lose" if net_minor < 0 else "push"
    s = Amounts(result, bank.stake_minor, max(net_minor, 0), levy, credit)
    return _payout(bank, s, tuple(rows))


def _payout(w: Wager, s: Amounts, rows: tuple[tuple[str, int], ...]) -> Payout:
    return Payout(
        bet_id=w.bet_id, account_id=w.account_id, spot=w.spot, stake_minor=w.stake_minor,
        result=s.result, win_minor=s.win_minor, commission_minor=s.commission_minor,
        credit_minor=s.credit_minor, postings=rows,
    )  # fmt: skip


def _always(choice: str) -> Strategy:
    def strategy(state: CoupState, decide: Decide) -> str:
        return choice if choice in decide.options else decide.options[0]

    return strategy


def _house_tableau(state: CoupState, decide: Decide) -> str:
    """Every free cell played as the regulation's forced punto banco tableau (art. 55-14) plays it:
    the ponte draws at 5, the banker per :func:`banker_draws`."""
    if decide.hand == "player":
        return "draw"
    player, banker = state.cards("player"), state.cards("banker")
    b2 = (CARD_POINTS[banker[0]] + CARD_POINTS[banker[1]]) % 10
    third = CARD_POINTS[player[2]] if len(player) == 3 else None
    return "draw" if banker_draws(b2, third) else "stand"


class CheminDeFer(TwoHandGame):
    """Chemin de fer (see the module docstring)."""

    id = "chemin_de_fer"
    rules_version = "chemin_de_fer/1"
    source = "seed 004; Arrêté du 14 mai 2007 art. 55-14 (tableau), 58 (shoe), 59 (rounding), 60 (levy)"
    default_decks = 6
    allowed_decks = (6,)
    shoe_rules = ShoeRules(burn="none", stop_from_end=7)
    house_banked = False
    hand_names = ("player", "banker")
    default_strategy: ClassVar[str] = "house_tableau"
    """The strategy the simulator uses unless told otherwise."""

    def settings(self) -> tuple[Setting, ...]:
        """Six decks, the 5 % levy and its rounding (art. 58–60), the banker's optional cells."""
        return (
            Setting(
                "decks", "int", "6", 'art. 58: "il est fait usage de six jeux de cinquante-deux cartes"',
                values=(6,),
            ),
            LEVY_SETTING,
            rounding_setting("half_up", ROUNDING_SOURCE),
            LEVY_STEP_SETTING,
            Setting(
                "optional_cells", "names", ", ".join(DEFAULT_OPTIONAL_CELLS),
                "the classic rule card (the regulation names none)", values=tuple(sorted(BANKER_CELLS)),
                allowed_text="any of the banker cells `banker_<0-7>_vs_<0-9 or none>`",
            ),
        )  # fmt: skip

    def make_config(self, **overrides: Any) -> TableConfig:
        """The default configuration: 6 decks, 5 % levy rounded half up (art. 59–60), the classic
        optional cells; ``optional_cells`` may be given as any iterable of cell names."""
        overrides.setdefault("commission_rounding", "half_up")
        if "optional_cells" in overrides:
            overrides["optional_cells"] = tuple(sorted(set(overrides["optional_cells"])))
        return super().make_config(**overrides)

    def validate(self, config: TableConfig) -> None:
        """Six decks (art. 58), a usable levy, and optional cells that exist."""
        super().validate(config)
        validate_player_banked(self.id, config)
        unknown = sorted(optional_cells(config) - BANKER_CELLS)
        if unknown:
            raise DomainError(Reason.BAD_CONFIG, f"no such banker cells: {unknown}")

    def spots(self, config: TableConfig) -> tuple[str, ...]:
        """Punters bet on ``player`` (the ponte's hand); the banker's stake is ``bank``."""
        return ("player", BANK_SPOT)

    def next_step(self, state: CoupState) -> Step:
        """Deal P B P B; naturals end the coup; the ponte draws 0–4, chooses at 5, stands 6–7; the
        banker per the tableau, choosing in the table's optional cells."""
        player, banker = state.cards("player"), state.cards("banker")
        dealt = len(player) + len(banker)
        if dealt < 4:
            return Deal(("player", "banker")[dealt % 2])
        pts = self.card_points
        p2 = (pts[player[0]] + pts[player[1]]) % 10
        b2 = (pts[banker[0]] + pts[banker[1]]) % 10
        if p2 >= 8 or b2 >= 8:
            return Resolved(self.result(state, natural=True))
        if len(player) == 2 and p2 <= 5:
            if p2 == 5:
                choice = state.decision("player")
                if choice is None:
                    return Decide("player", cell=PLAYER_OPTION_CELL)
                if choice == "draw":
                    return Deal("player")
            else:
                return Deal("player")
        if len(banker) == 2:
            third = pts[player[2]] if len(player) == 3 else None
            cell = banker_cell(b2, third)
            if cell in optional_cells(state.config):
                choice = state.decision("banker")
                if choice is None:
                    return Decide("banker", cell=cell)
                draws = choice == "draw"
            else:
                draws = banker_draws(b2, third)
            if draws:
                return Deal("banker")
        return Resolved(self.result(state, natural=False))

    def grade(self, result: CoupResult, spot: str, config: TableConfig) -> Grade:
        """``player``: 1:1 when the ponte wins, lost when the banker wins, void on a tie. ``bank``: only the
        direction (win/lose/push); its amounts depend on the punters' stakes, see :meth:`settle`."""
        if spot not in self.spots(config):
            raise self.unknown_spot(spot)
        if result.outcome == "tie":
            return PUSH
        side = "player" if spot == "player" else "banker"
        return Grade("win", (1, 1)) if result.outcome == side else LOSE

    def odds_grade(self, result: CoupResult, spot: str, config: TableConfig) -> Grade:
        """The bank's unit with the levy of art. 60 ("5 % des sommes gagnées à chaque coup par le
        banquier") taken from its win, unrounded (art. 59's ten cents are a rounding of the sum, not a
        rate); the punter's unit as :meth:`grade`."""
        grade = self.grade(result, spot, config)
        if spot == BANK_SPOT and grade.result == "win":
            return Grade("win", grade.win_ratio, config.commission_bps)
        return grade

    def odds_includes(self, spot: str, config: TableConfig) -> str:
        """The bank's figure includes the levy; the punters' pay none."""
        if spot == BANK_SPOT:
            return (
                f"the banker's net per unit against an equal punter stake: wins 1:1 less the "
                f"{config.commission_bps / 100:g} % levy of art. 60 (unrounded), a tie void"
            )
        return "the punter's net per unit: 1:1 against the bank, a tie void, no levy"

    def accepts(self, config: TableConfig, accepted: Sequence[Wager], wager: Wager) -> str | None:
        """One bank per coup; punters' stakes in total no more than the bank (:func:`bank_accepts`)."""
        return bank_accepts(self.spots(config), accepted, wager)

    def settle(
        self, result: CoupResult, wagers: Sequence[Wager], config: TableConfig, accounts: Accounts
    ) -> tuple[Payout, ...]:
        """Punters against the bank, the levy on the banker's win (:func:`settle_player_banked`)."""
        return settle_player_banked(self, result, wagers, config, accounts)

    def strategies(self) -> Mapping[str, Strategy]:
        """``house_tableau`` (every free cell as art. 55-14 plays it), ``always_draw``, ``always_stand``."""
        return {
            "house_tableau": _house_tableau,
            "always_draw": _always("draw"),
            "always_stand": _always("stand"),
        }

    def paytable(self, config: TableConfig) -> dict[str, dict[str, Any]]:
        """Punters 1:1; the bank pays the levy on its win, rounded to ``levy_step_minor``."""
        return {
            "player": {"pays": [1, 1], "commission_bps": 0},
            BANK_SPOT: {
                "pays": [1, 1], "commission_bps": config.commission_bps,
                "commission_rounding": config.commission_rounding,
                "levy_step_minor": int(config.option("levy_step_minor", LEVY_STEP_MINOR)),
            },
        }  # fmt: skip


VARIANT = CheminDeFer()
"""The registered instance."""
