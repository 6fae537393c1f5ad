"""French club baccara: seed 000 ("Le baccara"), implemented as the text is written.

Every rule below quotes the seed; where the text is silent the interpretation is marked *Reading*.

* **Players and cards**: "De quatre à quinze joueurs", "Jeu de 52 cartes" — one deck; a coup has at
  most 15 players, the banker and at most 14 punters (:meth:`FrenchClub.accepts` refuses a 15th punter
  with ``over_limit``). *Reading*: the minimum of four is a matter of seating the table, which the engine
  does not see; a coup with fewer bettors is still played. No burn is named; the stop card sits
  :data:`MAX_CARDS` cards from the end so the last coup can always be completed ("Entre quatre et six
  cartes sont distribuées seulement").
* **Points**: ace to nine at face value, "10, Valet, Dame, Roi valent 0", units only.
* **Deal**: "D'abord le banquier distribue deux cartes tour à tour, au ponte en premier puis à
  lui-même" — ponte, banker, ponte, banker.
* **The ponte's third card**: "Sa main initiale [...] est égale à 0, 1, 2, 3, 4 ou 5" draws; "une main
  supérieure ou égale à 6, le ponte ne recevra pas de troisième carte".
* **The banker's third card** (:data:`BANKER_DRAWS_ON`): on 0, 1, 2 always ("Sa main initiale est égale
  à 0, 1, et 2" — whatever the ponte did); on 7 or more never ("il ne recevra jamais de carte
  supplémentaire"); on 3–6 only per the value of the ponte's third card (3: 0–7 and 9; 4: 2–7; 5: 4–7;
  6: 6–7), and "Dans ces cas, si le ponte ne reçoit pas de troisième carte, le banquier n'en reçoit donc
  pas non plus": on 3–6 the banker stands when the ponte stood (punto banco would draw on 3–5 there).
* **No naturals.** The text never names them, so 8 and 9 do not stop play: a ponte on 0–5 draws even
  against a banker's two-card 9, and a banker on 0–2 draws even against a ponte's 8 or 9. (An 8 or 9 still
  never draws: the ponte stands on 6 or more, the banker on 7 or more.) ``CoupResult.natural`` is
  therefore always false.
* **Outcome**: "La main gagnante est celle qui est la plus proche ou égale à 9" — ``ponte``, ``banker``
  or ``tie`` ("Égalité entre les deux parties si elles ont des mains de valeur égale").

Money (player-banked, ``house_banked = False``; the house takes nothing — the text names no levy):

* **The bank**: "Le banquier [...] fait une mise de départ sur la victoire de sa main": the banker's
  stake on spot ``bank`` (:data:`BANK_SPOT`), placed first, one per coup (a second is ``bank_taken``; a
  punter's bet before it is ``bank_cannot_cover``). *Reading*: the bank is "tenue" by the banker, so
  ``accounts.bank`` is the banker's account at the table: "Les paris perdants vont directement à la
  banque" (losing bets go to it) and the bank pays the winning bets.
* **Punters**: "c'est au tour des autres joueurs [...] de miser" on ``banker``, ``ponte`` or ``tie``,
  split as they like; "Le joueur ne peut aller plus haut que la mise du banquier": one account's total
  over the three spots is at most the bank's stake (``bank_cannot_cover``). *Reading*: "autres" — the
  banker's own account may not punt (``bank_taken``: it already holds the bank).
* **Cover** (*Reading*): the banker is a player who pays the winners ("Les paris perdants vont
  directement à la banque"; "il donne sa mise au ponte"): what he may owe beyond his stake comes from his
  own wallet. A payout only moves money the table holds in escrow, so the banker *reserves* it: bets on
  spot ``bank_cover`` (:data:`COVER_SPOT`, his account only, after his stake, as many as he likes) take
  money from his wallet into escrow like any stake — the wallet stage refuses what his wallet does not
  hold (``insufficient_funds``). A cover is not a bet: it is never a "mise", counts for no limit and is
  returned less what the bank owes. A punter's bet is then refused (``bank_cannot_cover``) only when,
  for some outcome, the banker would owe more than his stake, the bets he collects and his cover — what
  his reserved wallet cannot cover; :func:`bank_credit_minor` is the bank's balance per outcome before
  the cover. The text's only limit on a punter, "Le joueur ne peut aller plus haut que la mise du
  banquier", is checked as before, and its example ("les trois quarts de la somme sur l'égalité, le
  dernier quart pour la victoire du ponte") is playable as soon as the banker has reserved enough.
* **The ponte**: "celui qui aura misé la plus haute somme égale ou inférieure à celle du banquier en
  premier" — the punter account with the highest total not above the bank; *Reading*: among equal
  totals, the one whose first bet was accepted first (players bet in turn, "le premier joueur à droite
  du banquier commence"; wagers arrive in acceptance order) — :func:`ponte_account`.
* **Pays**: "Chaque bonne mise vaut aux joueurs de doubler celle-ci" — every winning bet, the tie
  included, is paid 1:1 by the bank (``tie_pays`` defaults to 1); a bet on a result that did not happen
  loses (no push: on a tie the ``banker`` and ``ponte`` bets lose). "Tous les joueurs ayant misé sur une
  victoire du banquier doublent leur mise mais doivent donner 10% de leur mise au banquier": a winning
  ``banker`` bet pays ``commission_bps`` (default 1 000) of its *stake* to the bank, rounded by the
  table's named ``commission_rounding`` (default ``floor``: 10 % of 15 is 1; ``half_up`` gives 2).
* **The banker's stake**: "Si le banquier gagne il récupère sa mise"; "S'il y a égalité ou si le
  banquier perd, il donne sa mise au ponte, même si ce dernier perd le pari" — on a tie or a ponte win
  the whole bank stake goes to the ponte, whatever his own bets did. It rides on the ponte's first
  accepted wager's payout (each payout credits exactly one wallet, its own), so that payout's
  ``credit_minor`` exceeds its bet's own stake-plus-win by the bank stake. *Reading*: with no ponte
  (nobody bet) the banker keeps his stake.
* **Postings**: every stake leaves ``accounts.escrow``; a punter's wallet gets ``credit_minor``; the bank
  account takes a losing stake and the 10 %, pays a win and the stake handed to the ponte; the banker's
  own payout releases his stake and settles the bank account's net for the coup with his wallet. Every
  payout's postings sum to zero, and the bank account nets to zero over the coup.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from services.core.baccarat.engine import (
    CoupResult,
    CoupState,
    Deal,
    Resolved,
    Step,
    TableConfig,
    rounding_setting,
)
from services.core.baccarat.settings import Setting
from services.core.baccarat.variants.punto_banco import TwoHandGame
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
    bank_first,
    bank_payout,
)
from services.core.shoe import ShoeRules

BANK_SPOT: Final = "bank"
"""The banker's opening stake ("mise de départ")."""

COVER_SPOT: Final = "bank_cover"
"""Money the banker reserves from his wallet behind the bank (see *Cover* in the module docstring)."""

BANK_SPOTS: Final = frozenset({"bank", "bank_cover"})
"""The banker's own spots: his stake and his cover."""

PUNTER_SPOTS: Final = ("banker", "ponte", "tie")
"""What the other players bet on: "un des trois résultats possibles"."""

OUTCOMES: Final = ("banker", "ponte", "tie")
"""The three results: "Trois résultats sont possibles"."""

BANKER_COMMISSION_BPS: Final = 1_000
""""doivent donner 10% de leur mise au banquier": 10 % of a winning banker bet's stake."""

MAX_PUNTERS: Final = 14
""""De quatre à quinze joueurs": fifteen players at most, the banker and fourteen punters."""

MAX_CARDS: Final = 6
""""Entre quatre et six cartes sont distribuées seulement": the most one coup can use."""

BANKER_DRAWS_ON: Final[Mapping[int, frozenset[int]]] = {
    3: frozenset({0, 1, 2, 3, 4, 5, 6, 7, 9}),
    4: frozenset({2, 3, 4, 5, 6, 7}),
    5: frozenset({4, 5, 6, 7}),
    6: frozenset({6, 7}),
}
"""Banker's two-card total 3–6 → the point values of the ponte's third card on which he draws."""


def ponte_draws(ponte_total: int) -> bool:
    """The ponte's rule: a third card on 0–5, none on 6 or more."""
    return ponte_total <= 5


def banker_draws(banker_total: int, ponte_third: int | None) -> bool:
    """The banker's rule: ``ponte_third`` is the point value of the ponte's third card, ``None`` when
    he stood. 0–2 always draw; 7–9 never; 3–6 only on the listed third cards, never when the ponte
    stood ("si le ponte ne reçoit pas de troisième carte, le banquier n'en reçoit donc pas non plus")."""
    if banker_total <= 2:
        return True
    if ponte_third is None:
        return False
    return ponte_third in BANKER_DRAWS_ON.get(banker_total, frozenset())


def outcome_grade(outcome: str, spot: str, config: TableConfig) -> Grade:
    """A punter's bet on ``spot`` when the coup's outcome is ``outcome``: the right result is paid 1:1
    (the tie at ``tie_pays``:1, 1 by default), a banker win less ``commission_bps`` of the stake; any
    other result loses."""
    if spot != outcome:
        return LOSE
    if spot == "banker":
        return Grade("win", (1, 1), config.commission_bps, "stake")
    if spot == "tie":
        return Grade("win", (config.tie_pays, 1))
    return Grade("win", (1, 1))


def ponte_account(wagers: Sequence[Wager]) -> str | None:
    """The ponte: the punter account with the highest total stake not above the bank's, the first to
    have bet among equals (``wagers`` in acceptance order); ``None`` without a bank or an eligible punter."""
    banks = [w for w in wagers if w.spot == BANK_SPOT]
    if not banks:
        return None
    cap = banks[0].stake_minor
    totals: dict[str, int] = {}
    for w in wagers:
        if w.spot not in BANK_SPOTS:
            totals[w.account_id] = totals.get(w.account_id, 0) + w.stake_minor
    best: str | None = None
    for account, total in totals.items():  # dicts keep first-insertion order: the order of first bets
        if total <= cap and (best is None or total > totals[best]):
            best = account
    return best


def _punter_settlements(
    outcome: str, wagers: Sequence[Wager], config: TableConfig
) -> list[tuple[Wager, Amounts]]:
    return [
        (w, amounts_of(w.stake_minor, outcome_grade(outcome, w.spot, config), config.commission_rounding))
        for w in wagers
        if w.spot not in BANK_SPOTS
    ]


def bank_credit_minor(outcome: str, wagers: Sequence[Wager], config: TableConfig) -> int:
    """What the banker's wallet gets back for the coup if it ends in ``outcome``: his stake when he wins
    (nothing when it goes to the ponte), plus the losing stakes and the 10 %, less the wins paid.
    Negative means the bank cannot cover the bets (:meth:`FrenchClub.accepts` refuses that)."""
    banks = [w for w in wagers if w.spot == BANK_SPOT]
    stake = banks[0].stake_minor if banks else 0
    net = sum(s.stake_minor - s.credit_minor for _, s in _punter_settlements(outcome, wagers, config))
    keeps = outcome == "banker" or ponte_account(wagers) is None
    return net + (stake if keeps else 0)


def cover_minor(wagers: Sequence[Wager]) -> int:
    """What the banker has reserved from his wallet behind the bank this coup (his ``bank_cover`` bets)."""
    return sum(w.stake_minor for w in wagers if w.spot == COVER_SPOT)


class FrenchClub(TwoHandGame):
    """French club baccara, seed 000 as written (see the module docstring)."""

    id = "french_club"
    rules_version = "french_club/1"
    source = "seed 000 (Le baccara)"
    default_decks = 1
    allowed_decks = (1,)
    shoe_rules = ShoeRules(burn="none", stop_from_end=MAX_CARDS)
    card_points = CARD_POINTS
    house_banked = False
    hand_names = ("ponte", "banker")

    def make_config(self, **overrides: Any) -> TableConfig:
        """One deck; every winning bet doubled (``tie_pays`` 1); 10 % of a banker bet's stake to the
        banker (``commission_bps`` 1 000), rounded ``floor`` unless the table names another rule."""
        overrides.setdefault("tie_pays", 1)
        overrides.setdefault("commission_bps", BANKER_COMMISSION_BPS)
        return super().make_config(**overrides)

    def validate(self, config: TableConfig) -> None:
        """One deck, a known rounding, a commission between 0 and 100 %, a positive tie pay."""
        super().validate(config)
        if config.commission_rounding not in ROUNDINGS:
            raise DomainError(Reason.BAD_CONFIG, f"unknown rounding {config.commission_rounding!r}")
        if not 0 <= config.commission_bps <= BPS:
            raise DomainError(
                Reason.BAD_CONFIG, f"a commission is 0 to {BPS} bps, not {config.commission_bps}"
            )
        if config.tie_pays < 1:
            raise DomainError(Reason.BAD_CONFIG, f"tie_pays is a positive ratio, not {config.tie_pays}")

    def settings(self) -> tuple[Setting, ...]:
        """One deck, the 1:1 tie, the banker's 10 % and its rounding: the text fixes all but the rounding."""
        return (
            Setting("decks", "int", "1", 'seed 000: "Jeu de 52 cartes"', values=(1,)),
            Setting(
                "tie_pays", "int", "1", 'seed 000: "Chaque bonne mise vaut aux joueurs de doubler celle-ci"',
                values=(1,),
            ),
            Setting(
                "commission_bps", "int", str(BANKER_COMMISSION_BPS),
                'seed 000: "doivent donner 10% de leur mise au banquier"', values=(BANKER_COMMISSION_BPS,),
            ),
            rounding_setting("floor", "the house's rule (the text does not say how 10 % of 15 rounds)"),
        )  # fmt: skip

    def seat(self, config: TableConfig, wagers: Sequence[Wager], hand: str) -> str | None:
        """The ponte hand is the ponte's (:func:`ponte_account`), the banker hand the bank's holder."""
        if hand == "ponte":
            return ponte_account(wagers)
        return super().seat(config, wagers, hand)

    def spots(self, config: TableConfig) -> tuple[str, ...]:
        """The banker's stake ``bank`` and his cover ``bank_cover``, then the three results the others
        bet on."""
        return (BANK_SPOT, COVER_SPOT, *PUNTER_SPOTS)

    def next_step(self, state: CoupState) -> Step:
        """Deal ponte, banker, ponte, banker; the ponte draws on 0–5; the banker per :func:`banker_draws`.
        No naturals: an 8 or 9 merely stands."""
        ponte, banker = state.cards("ponte"), state.cards("banker")
        dealt = len(ponte) + len(banker)
        if dealt < 4:
            return Deal(("ponte", "banker")[dealt % 2])
        pts = self.card_points
        if len(ponte) == 2 and ponte_draws((pts[ponte[0]] + pts[ponte[1]]) % 10):
            return Deal("ponte")
        if len(banker) == 2:
            b2 = (pts[banker[0]] + pts[banker[1]]) % 10
            if banker_draws(b2, pts[ponte[2]] if len(ponte) == 3 else None):
                return Deal("banker")
        return Resolved(self.result(state, natural=False))

    def grade(self, result: CoupResult, spot: str, config: TableConfig) -> Grade:
        """``banker``/``ponte``/``tie`` by :func:`outcome_grade`. ``bank``: the fate of the banker's own
        stake only (a push when his hand wins: "il récupère sa mise"; else lost to the ponte); what his
        payout carries depends on every bet, see :meth:`settle`."""
        if spot not in self.spots(config):
            raise self.unknown_spot(spot)
        if spot == BANK_SPOT:
            return PUSH if result.outcome == "banker" else LOSE
        if spot == COVER_SPOT:
            return PUSH
        return outcome_grade(result.outcome, spot, config)

    def odds_includes(self, spot: str, config: TableConfig) -> str:
        """What the odds' figures mean at this player-banked table."""
        if spot == BANK_SPOT:
            return (
                "the banker's own stake only: kept when his hand wins, handed to the ponte otherwise; "
                "what he collects from and pays to the punters is not in this figure"
            )
        if spot == COVER_SPOT:
            return "not a bet: money the banker reserves, returned less what the bank owes (0 here)"
        pays = f"{config.tie_pays}:1" if spot == "tie" else "1:1"
        less = ""
        if spot == "banker":
            less = f", less {config.commission_bps / 100:g} % of the stake to the banker"
        return (
            f"a punter's net per unit: paid {pays} by the bank{less}; "
            "the bank stake the ponte may receive is not included"
        )

    def accepts(self, config: TableConfig, accepted: Sequence[Wager], wager: Wager) -> str | None:
        """The bank first and once; the banker's cover after it, from his account only; then punters, not
        the banker, each account's total at most the bank's stake, at most :data:`MAX_PUNTERS` accounts,
        and only bets that the bank's stake, the bets it collects and the banker's cover pay in every
        outcome."""
        if wager.spot not in self.spots(config):
            return Reason.UNKNOWN_SPOT.value
        refusal, bank = bank_first(accepted, wager, BANK_SPOT)
        if bank is None:
            return refusal
        if wager.spot == COVER_SPOT:
            return None if wager.account_id == bank.account_id else Reason.BANK_TAKEN.value
        if wager.account_id == bank.account_id:
            return Reason.BANK_TAKEN.value
        mine = sum(w.stake_minor for w in accepted if w.account_id == wager.account_id)
        if mine + wager.stake_minor > bank.stake_minor:
            return Reason.BANK_CANNOT_COVER.value
        punters = {w.account_id for w in accepted if w.spot not in BANK_SPOTS} | {wager.account_id}
        if len(punters) > MAX_PUNTERS:
            return Reason.OVER_LIMIT.value
        after = (*accepted, wager)
        cover = cover_minor(after)
        if any(bank_credit_minor(o, after, config) + cover < 0 for o in OUTCOMES):
            return Reason.BANK_CANNOT_COVER.value
        return None

    def settle(
        self, result: CoupResult, wagers: Sequence[Wager], config: TableConfig, accounts: Accounts
    ) -> tuple[Payout, ...]:
        """Every wager's payout, in the order given (see the module docstring for the flows)."""
        bank_account = accounts.bank
        if bank_account is None:
            raise DomainError(Reason.BAD_CONFIG, f"{self.id} is player-banked: Accounts.bank is required")
        banks = [w for w in wagers if w.spot == BANK_SPOT]
        if len(banks) > 1:
            raise DomainError(Reason.BANK_TAKEN, f"{len(banks)} bank wagers in one coup")
        punters = _punter_settlements(result.outcome, wagers, config)
        covers = [w for w in wagers if w.spot == COVER_SPOT]
        if not banks:
            if punters or covers:
                raise DomainError(Reason.BANK_CANNOT_COVER, "bets and nobody holds the bank")
            return ()
        bank = banks[0]
        if any(c.account_id != bank.account_id for c in covers):
            raise DomainError(Reason.BANK_TAKEN, "a cover from another account than the banker's")
        ponte = ponte_account(wagers)
        handed = bank.stake_minor if result.outcome != "banker" and ponte is not None else 0
        net = sum(s.stake_minor - s.credit_minor for _, s in punters) - handed
        held = bank.stake_minor + cover_minor(wagers)
        if held + net < 0:
            raise DomainError(Reason.BANK_CANNOT_COVER, f"the bank owes {-net}, it holds {held}")
        by_id: dict[str, Payout] = {}
        prize_to = next((w.bet_id for w, _ in punters if w.account_id == ponte), None)
        for w, s in punters:
            extra = handed if w.bet_id == prize_to else 0
            by_id[w.bet_id] = _punter_payout(w, s, extra, accounts, bank_account)
        # the bank's net for the coup: a gain rides on the stake's payout; a debt is taken from the stake
        # first, then from each cover in the order reserved
        debt = max(-net, 0)
        taken = min(debt, bank.stake_minor)
        by_id[bank.bet_id] = bank_payout(bank, net if net >= 0 else -taken, net, accounts, bank_account)
        debt -= taken
        for c in covers:
            taken = min(debt, c.stake_minor)
            by_id[c.bet_id] = _cover_payout(c, taken, accounts, bank_account)
            debt -= taken
        return tuple(by_id[w.bet_id] for w in wagers)

    def paytable(self, config: TableConfig) -> dict[str, dict[str, Any]]:
        """Every winning bet 1:1 (the tie at ``tie_pays``:1); 10 % of a winning banker bet's stake to the
        banker; the bank stake to the ponte on a tie or a ponte win."""
        return {
            BANK_SPOT: {"pays": [1, 1], "commission_bps": 0, "to_ponte_on": ["ponte", "tie"]},
            COVER_SPOT: {"pays": [0, 1], "commission_bps": 0, "covers": BANK_SPOT},
            "banker": {
                "pays": [1, 1], "commission_bps": config.commission_bps, "commission_base": "stake",
                "commission_rounding": config.commission_rounding, "commission_to": "bank",
            },
            "ponte": {"pays": [1, 1], "commission_bps": 0},
            "tie": {"pays": [config.tie_pays, 1], "commission_bps": 0},
        }  # fmt: skip


def _punter_payout(w: Wager, s: Amounts, extra_minor: int, accounts: Accounts, bank: str) -> Payout:
    """A punter's bet against the bank; ``extra_minor`` is the bank stake handed to the ponte."""
    credit = s.credit_minor + extra_minor
    rows: list[tuple[str, int]] = [(accounts.escrow, -s.stake_minor)]
    if credit:
        rows.append((w.account_id, credit))
    if s.stake_minor - credit:
        rows.append((bank, s.stake_minor - credit))
    return Payout(
        bet_id=w.bet_id, account_id=w.account_id, spot=w.spot, stake_minor=w.stake_minor,
        result=s.result, win_minor=s.win_minor, commission_minor=s.commission_minor,
        credit_minor=credit, postings=tuple(rows),
    )  # fmt: skip


def _cover_payout(cover: Wager, taken_minor: int, accounts: Accounts, bank_account: str) -> Payout:
    """A cover: it leaves escrow, ``taken_minor`` of it pays the bank's debt, the rest goes home."""
    credit = cover.stake_minor - taken_minor
    rows: list[tuple[str, int]] = [(accounts.escrow, -cover.stake_minor)]
    if taken_minor:
        rows.append((bank_account, taken_minor))
    if credit:
        rows.append((cover.account_id, credit))
    return Payout(
        bet_id=cover.bet_id, account_id=cover.account_id, spot=cover.spot, stake_minor=cover.stake_minor,
        result="lose" if taken_minor else "push", win_minor=0, commission_minor=0, credit_minor=credit,
        postings=tuple(rows),
    )  # fmt: skip


VARIANT = FrenchClub()
"""The registered instance."""
