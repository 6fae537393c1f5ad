"""Russian classic baccara: seed 001 ("Баккара"), implemented as the text is written.

Every rule below quotes the seed by its number; where the text is silent the interpretation is marked
*Reading*.

* **Shoe** (1): "две полные (52 карты) мешанные колоды" — two decks. No burn is named; the stop card sits
  :func:`max_cards` of the table from the end, so the last coup can always be completed.
* **Points** (8): "каждая фигура (А, К, Д, В) считается за 10 очков" — the ace counts as a face: A, K, Q,
  J and the ten are worth 0 (:data:`RUSSIAN_POINTS`); two to nine at face value; (16) "десятки
  отбрасываются" — units only.
* **Seats** (2, 3, 5, 14). "Число игроков не ограничено" (3): a table declares ``punters`` hands
  ``punter_1`` … ``punter_n`` (the table setting ``punters``, default :data:`DEFAULT_PUNTERS`); the only
  bound is the two decks': a coup (at most ``3 (n + 1)`` cards) must fit in 104 cards, so at most
  :data:`MAX_PUNTERS`; the stop card sits ``3 (n + 1)`` cards from the end (:meth:`shoe_rules_for`);
  players joining mid-talia take a seat at the next table configuration. *Geometry*: the punters sit in an arc
  facing the banker, ``punter_1`` at his immediate left, then on round the table to ``punter_n`` at his
  immediate right.
* **Deal** (5): "сначала слева направо всем игрокам, затем кладёт себе, потом по другой карте справа -
  налево, начиная с себя": ``punter_1 … punter_n``, ``banker``, then ``banker``, ``punter_n … punter_1``
  (:func:`deal_order`).
* **Stakes** (6, 7): each punter stakes on his own hand (spot = the hand's name, one stake per hand —
  a second is refused ``duplicate_bet``); "Банкомет каждую ставку удваивает": the banker pays 1:1.
  *Reading*: "the banker's stake" (17) is the bank, the banker's own stake on spot ``bank``, placed before
  the punters, once per coup; the punters' stakes together may not exceed it (``bank_cannot_cover``: the
  bank must cover every 1:1 payment). The banker's account may not punt (``bank_taken``). No levy.
* **Banker's 9** (11): a two-card 9 — "он сразу открывает карты и забирает себе все ставки понтеров,
  несмотря на то, что некоторые игроки так же имеют 9" — ends the coup, every punter loses (event
  ``banker_nine``). **Banker's 8** (12): a two-card 8 ends the coup, the banker "уплачивает" the punters
  with 9 "а с остальных же получит сам" (event ``banker_eight``). *Reading*: these two come first
  ("сразу"), so they take "все ставки"/"с остальных" — a punter's two-card 0 included.
* **Draw** (13, 14): otherwise "он и понтеры могут прикупать", "не более одной карты": each punter, on
  any total, is asked (a :class:`Decide`, cell :data:`PUNTER_CELL`), then the banker (cell
  :data:`BANKER_CELL`); a ``draw`` is dealt at once. Order: "сначала прикупает понтер, сидящий с правой
  стороны от банкомета, потом, сидящий с левой, затем опять с правой, следующий за уже прикупившим" —
  alternating from the banker outwards, right side first: ``punter_n, punter_1, punter_{n-1}, punter_2,
  …`` (:func:`draw_order`). "После всех банкомет".
* **Comparison** (10, 16): units against units; "если встретятся одинаковые количества единиц банкомета
  и понтера, то ставка берётся первым" — ties go to the banker. ``versus`` is ``win`` or ``lose`` from
  the punter's side (never ``tie``).
* **Baccara** (17): a punter whose total is 0 "сам забирает ставки всех остальных игроков и в том числе и
  банкомета": every other punter's stake and the bank go to him (event ``baccara``); "если это случилось
  до прикупки, то другие не имеют права покупать" — a punter's two-card 0 ends the coup before any draw
  (event ``baccara_before_draw``); a 0 reached by drawing counts too, and the draw goes on.
* **The banker's baccara** (9, 10, 16, 17) — *Reading*, the one that keeps all four rules true. Rule 9
  makes the baccara the best hand there is: "Цель игры - получить на руки Баккару, т. е. 10 или 20
  очков, либо карты, близкие к ним по сумме очков" — 0 is the aim, 9 ("выигрышными картами считается 9
  и 19") is merely the nearest to it. Rule 16 ("десятки отбрасываются и сравниваются оставшиеся
  единицы", its examples all between 5 and 8) orders the hands 1–9 by their units; it never compares a 0.
  Rule 17 says "Если же Баккара есть у банкомета и у понтера одновременно, то преимуществом пользуется,
  как сказано выше, банкомет" — "as said above" points to rule 10 ("Карты банкомета всегда имеют
  преимущество перед картами понтера"), which gives the banker only what is equal; so the banker's 0 is
  the same best hand as the punter's, and it must beat what a punter's 0 beats: everything. Reading the
  banker's 0 as the lowest hand (paying every punter holding 1–9) would make the punter's 0 the best
  hand and the banker's the worst, which rule 9 and rule 17's "преимуществом пользуется [...] банкомет"
  both deny. Hence: **the banker's final 0 takes every stake** (event ``banker_baccara``: every hand
  loses, the punters' zeros included), and a punter's baccara beats everything but the banker's. Rules
  11 and 12 still come first: they settle the coup "сразу", on the banker's two cards. "Если О у
  нескольких партнеров - они делят ставки всех других и банкомета между собой": several zeros share the
  pot equally (:func:`share`: equal parts, the indivisible remainder one minor unit each to the winners
  in seat order, ``punter_1`` first). *Reading*: a seat nobody staked is dealt (the engine deals every
  seat the table declares) but is no punter (6: "Каждый понтер [...] должен положить [...] сумму"): its
  0 wins nothing, and if no staked hand holds the baccara the staked hands are settled against the
  banker by rule 10.

``outcome`` summarises ``versus``: ``banker`` when he beat every hand, ``punters`` when every hand beat
him, ``split`` otherwise. ``natural`` is true when rule 11 or 12 ended the coup.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Final

from services.core import ledger
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
from services.core.cards import CARD_POINTS, Card
from services.core.errors import DomainError, Reason
from services.core.ledger import LOSE, PUSH, Accounts, Amounts, Grade, Payout, Wager, bank_payout
from services.core.shoe import ShoeRules

BANK_SPOT: Final = "bank"
"""The banker's stake: the bank."""

BANKER: Final = "banker"
"""The banker's hand."""

DEFAULT_PUNTERS: Final = 3
"""Punter hands at a table that names no number."""

MAX_PUNTERS: Final = 33
"""The most punter hands a table may declare. Rule 3 sets no limit ("Число игроков не ограничено"); the
two decks of rule 1 do: a coup uses at most ``3 (n + 1)`` cards (:func:`max_cards`), and 3 × 34 = 102
of the 104 cards is the most one coup can be sure to find in a fresh shoe."""

PUNTER_CELL: Final = "punter_option"
"""The cell of a punter's free draw (rules 13–14)."""

BANKER_CELL: Final = "banker_option"
"""The cell of the banker's free draw, after all punters (rule 14)."""

RUSSIAN_POINTS: Final[Mapping[Card, int]] = {
    card: 0 if card[0] == "A" else value for card, value in CARD_POINTS.items()
}
"""Rule 8: "каждая фигура (А, К, Д, В) считается за 10 очков" — the ace is worth 0 like the faces."""


def max_cards(punters: int) -> int:
    """The most cards one coup can use: two per hand and at most one more each."""
    return 3 * (punters + 1)


def punter_hands(punters: int) -> tuple[str, ...]:
    """``punter_1`` … ``punter_n``, seat order from the banker's left to his right."""
    return tuple(f"punter_{i}" for i in range(1, punters + 1))


def deal_order(punters: int) -> tuple[str, ...]:
    """Rule 5: one card each left to right, the banker last; then the second round right to left
    starting with the banker."""
    seats = punter_hands(punters)
    return (*seats, BANKER, BANKER, *reversed(seats))


def draw_order(punters: int) -> tuple[str, ...]:
    """Rule 14: the punter at the banker's right (``punter_n``), then at his left (``punter_1``), then the
    next on the right, the next on the left, …, meeting in the middle of the arc."""
    seats = punter_hands(punters)
    right, left = len(seats) - 1, 0
    out: list[str] = []
    while left <= right:
        out.append(seats[right])
        if left < right:
            out.append(seats[left])
        right, left = right - 1, left + 1
    return tuple(out)


def share(amount_minor: int, winners: int) -> tuple[int, ...]:
    """Rule 17's sharing: ``amount_minor`` in ``winners`` equal parts; the remainder of the integer
    division goes one minor unit each to the first winners (seat order). The parts sum to the amount."""
    base, rest = divmod(amount_minor, winners)
    return tuple(base + (1 if i < rest else 0) for i in range(winners))


Verdict = tuple[tuple[tuple[str, str], ...], tuple[str, ...]]
"""``(versus, events)``: each punter hand's ``win``/``lose`` and the special rules that fired."""


def verdicts(hands: Sequence[HandResult], staked: frozenset[str] | None = None) -> Verdict:
    """Who beat whom, from the final hands (punters in seat order, the banker last).

    In this order: the banker's two-card 9 (rule 11) and 8 (rule 12); then the banker's baccara — his
    final total 0 beats every hand (event ``banker_baccara``); then a punter's baccara — a staked hand
    on 0 takes the pot (event ``baccara``); else units against units, ties to the banker (rules 10, 16).

    ``staked``, when given, limits the baccara to those hands (settlement: a seat nobody staked takes
    nothing); the engine passes ``None`` — every seat plays.
    """
    *punters, banker = hands
    events: list[str] = []
    if len(banker.cards) == 2 and banker.total == 9:
        return tuple((p.name, "lose") for p in punters), ("banker_nine",)
    if len(banker.cards) == 2 and banker.total == 8:
        return tuple((p.name, "win" if p.total == 9 else "lose") for p in punters), ("banker_eight",)
    all_zeros = [p.name for p in punters if p.total == 0]
    if all_zeros and all(len(h.cards) == 2 for h in hands):
        events.append("baccara_before_draw")
    if banker.total == 0:
        events.append("banker_baccara")
        return tuple((p.name, "lose") for p in punters), tuple(events)
    zeros = [name for name in all_zeros if staked is None or name in staked]
    if zeros:
        events.append("baccara")
        return tuple((p.name, "win" if p.name in zeros else "lose") for p in punters), tuple(events)
    return tuple((p.name, "win" if p.total > banker.total else "lose") for p in punters), tuple(events)


def summarise(versus: Sequence[tuple[str, str]]) -> str:
    """``banker`` when every hand lost, ``punters`` when every hand won, else ``split``."""
    results = {r for _, r in versus}
    if results == {"lose"}:
        return "banker"
    if results == {"win"}:
        return "punters"
    return "split"


def _always(choice: str) -> Strategy:
    def strategy(state: CoupState, decide: Decide) -> str:
        return choice

    return strategy


def _draw_to_5(state: CoupState, decide: Decide) -> str:
    """Draw on a total of 0–5, stand on 6–9 (the punto banco player's rule, for every hand)."""
    total = sum(RUSSIAN_POINTS[c] for c in state.cards(decide.hand)) % 10
    return "draw" if total <= 5 else "stand"


class RussianClassic(Variant):
    """Russian classic baccara, seed 001 as written (see the module docstring)."""

    id = "russian_classic"
    enumerable = False  # three or more hands with free draws: millions of states, see odds.py
    rules_version = "russian_classic/2"
    source = "seed 001 (Баккара, rules 1–18)"
    default_decks = 2
    allowed_decks = (2,)
    shoe_rules = ShoeRules(burn="none", stop_from_end=max_cards(DEFAULT_PUNTERS))
    card_points = RUSSIAN_POINTS
    house_banked = False
    default_strategy: ClassVar[str] = "draw_to_5"
    """The strategy the simulator and the CLI use unless told otherwise."""

    def default_punters(self) -> int:
        """:data:`DEFAULT_PUNTERS` punter hands."""
        return DEFAULT_PUNTERS

    def settings(self) -> tuple[Setting, ...]:
        """Two decks (rule 1), the number of punter hands (rule 3), no levy."""
        return (
            Setting(
                "decks", "int", "2", 'rule 1: "В Баккару играют в две полные (52 карты) мешанные колоды"',
                values=(2,),
            ),
            Setting(
                "punters", "int", str(DEFAULT_PUNTERS),
                'rule 3: "Число игроков не ограничено" (two decks hold a coup of at most '
                f"{MAX_PUNTERS} punters)", minimum=1, maximum=MAX_PUNTERS,
            ),
            Setting("commission_bps", "int", "0", "the text names no levy", values=(0,)),
            rounding_setting("floor", "unused: nothing is levied"),
        )  # fmt: skip

    def shoe_rules_for(self, config: TableConfig) -> ShoeRules:
        """No burn; the stop card sits :func:`max_cards` of this table from the end, so the last coup can
        always be completed."""
        return ShoeRules(burn="none", stop_from_end=max_cards(config.punters))

    def make_config(self, **overrides: Any) -> TableConfig:
        """Two decks, :data:`DEFAULT_PUNTERS` punters, no levy (the text names none)."""
        overrides.setdefault("commission_bps", 0)
        return super().make_config(**overrides)

    def validate(self, config: TableConfig) -> None:
        """Two decks, 1 to :data:`MAX_PUNTERS` punters, no levy."""
        super().validate(config)
        if not 1 <= config.punters <= MAX_PUNTERS:
            raise DomainError(
                Reason.BAD_CONFIG, f"{self.id} seats 1 to {MAX_PUNTERS} punters, not {config.punters}"
            )
        if config.commission_bps != 0:
            raise DomainError(Reason.BAD_CONFIG, f"{self.id} has no levy: commission_bps is 0")

    def hands(self, config: TableConfig) -> tuple[str, ...]:
        """The punters in seat order, then the banker (the order of the first round, rule 5)."""
        return (*punter_hands(config.punters), BANKER)

    def spots(self, config: TableConfig) -> tuple[str, ...]:
        """Each punter's own hand, then the bank."""
        return (*punter_hands(config.punters), BANK_SPOT)

    def next_step(self, state: CoupState) -> Step:
        """Deal by :func:`deal_order`; banker's 8 or 9 ends the coup; a punter's two-card 0 ends it before
        any draw; else each punter in :func:`draw_order`, then the banker, may take one card."""
        n = state.config.punters
        dealt = sum(len(cards) for _, cards in state.hands)
        order = deal_order(n)
        if dealt < len(order):
            return Deal(order[dealt])
        pts = self.card_points
        banker = state.cards(BANKER)
        b2 = (pts[banker[0]] + pts[banker[1]]) % 10
        if b2 >= 8:
            return Resolved(self.result(state, natural=True))
        before_draw = all(len(cs) == 2 for _, cs in state.hands)
        if before_draw and any(self.total(cs) == 0 for name, cs in state.hands if name != BANKER):
            return Resolved(self.result(state, natural=False))
        for hand in (*draw_order(n), BANKER):
            choice = state.decision(hand)
            if choice is None:
                return Decide(hand, cell=BANKER_CELL if hand == BANKER else PUNTER_CELL)
            if choice == "draw" and len(state.cards(hand)) == 2:
                return Deal(hand)
        return Resolved(self.result(state, natural=False))

    def result(self, state: CoupState, natural: bool) -> CoupResult:
        """The final hands, ``versus`` by :func:`verdicts`, ``outcome`` by :func:`summarise`."""
        hands = tuple(HandResult(name, cards, self.total(cards)) for name, cards in state.hands)
        versus, events = verdicts(hands)
        return CoupResult(
            variant=self.id, rules_version=self.rules_version, hands=hands, outcome=summarise(versus),
            natural=natural, cards_used=state.cards_used, decisions=state.decisions, versus=versus,
            events=events,
        )  # fmt: skip

    def grade(self, result: CoupResult, spot: str, config: TableConfig) -> Grade:
        """A punter hand: ``win`` (1:1, or under the baccara a share of the pot: see :meth:`settle`) or
        ``lose``. ``bank``: the direction only — win when he beat every hand, lose when every hand beat
        him or a baccara took the bank, push otherwise; its amount depends on the stakes."""
        if spot not in self.spots(config):
            raise self.unknown_spot(spot)
        versus, events = verdicts(result.hands)
        if spot == BANK_SPOT:
            outcome = summarise(versus)
            if "baccara" in events or outcome == "punters":
                return LOSE
            return Grade("win", (1, 1)) if outcome == "banker" else PUSH
        return Grade("win", (1, 1)) if dict(versus)[spot] == "win" else LOSE

    def accepts(self, config: TableConfig, accepted: Sequence[Wager], wager: Wager) -> str | None:
        """The bank first and once; then one stake per punter hand, not from the banker's account, all
        together at most the bank."""
        if wager.spot not in self.spots(config):
            return Reason.UNKNOWN_SPOT.value
        refusal, bank = ledger.bank_first(accepted, wager, BANK_SPOT)
        if bank is None:
            return refusal
        if wager.account_id == bank.account_id:
            return Reason.BANK_TAKEN.value
        if any(w.spot == wager.spot for w in accepted):
            return Reason.DUPLICATE_BET.value
        covered = sum(w.stake_minor for w in accepted if w.spot != BANK_SPOT)
        if covered + wager.stake_minor > bank.stake_minor:
            return Reason.BANK_CANNOT_COVER.value
        return None

    def settle(
        self, result: CoupResult, wagers: Sequence[Wager], config: TableConfig, accounts: Accounts
    ) -> tuple[Payout, ...]:
        """Every wager's payout, in the order given.

        Punters play against ``accounts.bank`` (the banker's account at the table): a win is paid 1:1
        from it, a loss goes to it. Under the baccara the bank account collects every other punter's
        stake and the bank's stake and pays it out in :func:`share` parts to the staked zeros. The
        banker's own payout releases his stake from escrow and settles the bank account's net for the
        coup with his wallet. Postings of each payout sum to zero; the bank account nets to zero.
        """
        bank_account = accounts.bank
        if bank_account is None:
            raise DomainError(Reason.BAD_CONFIG, f"{self.id} is player-banked: Accounts.bank is required")
        banks = [w for w in wagers if w.spot == BANK_SPOT]
        punters = [w for w in wagers if w.spot != BANK_SPOT]
        if len(banks) > 1:
            raise DomainError(Reason.BANK_TAKEN, f"{len(banks)} bank wagers in one coup")
        unknown = sorted({w.spot for w in punters} - set(punter_hands(config.punters)))
        if unknown:
            raise self.unknown_spot(unknown[0])
        if not banks:
            if punters:
                raise DomainError(Reason.BANK_CANNOT_COVER, "punters bet and nobody holds the bank")
            return ()
        bank = banks[0]
        covered = sum(w.stake_minor for w in punters)
        if covered > bank.stake_minor:
            raise DomainError(Reason.BANK_CANNOT_COVER, f"bank {bank.stake_minor} < stakes {covered}")
        versus, events = verdicts(result.hands, frozenset(w.spot for w in punters))
        won = dict(versus)
        if "baccara" in events:
            winners = [w for w in punters if won[w.spot] == "win"]  # seat order below
            winners.sort(key=lambda w: punter_hands(config.punters).index(w.spot))
            pot = bank.stake_minor + sum(w.stake_minor for w in punters if won[w.spot] != "win")
            wins: dict[str, int] = {
                w.bet_id: part for w, part in zip(winners, share(pot, len(winners)), strict=True)
            }
        else:
            wins = {w.bet_id: w.stake_minor for w in punters if won[w.spot] == "win"}
        out: dict[str, Payout] = {}
        net = 0
        for w in punters:
            win = wins.get(w.bet_id)
            s = (
                Amounts("lose", w.stake_minor, 0, 0, 0)
                if win is None
                else Amounts("win", w.stake_minor, win, 0, w.stake_minor + win)
            )
            net += w.stake_minor - s.credit_minor
            out[w.bet_id] = _payout(w, s, accounts, bank_account)
        out[bank.bet_id] = bank_payout(bank, net, net, accounts, bank_account)
        return tuple(out[w.bet_id] for w in wagers)

    def strategies(self) -> Mapping[str, Strategy]:
        """``draw_to_5`` (draw on 0–5, stand on 6–9), ``never_draw``, ``always_draw``."""
        return {"draw_to_5": _draw_to_5, "never_draw": _always("stand"), "always_draw": _always("draw")}

    def paytable(self, config: TableConfig) -> dict[str, dict[str, Any]]:
        """Each punter hand 1:1 against the bank (a baccara: a share of the pot); the bank covers all."""
        table: dict[str, dict[str, Any]] = {
            hand: {"pays": [1, 1], "commission_bps": 0, "baccara": "share_of_pot"}
            for hand in punter_hands(config.punters)
        }
        table[BANK_SPOT] = {"pays": [1, 1], "commission_bps": 0}
        return table


def _payout(w: Wager, s: Amounts, accounts: Accounts, bank: str) -> Payout:
    """A punter's bet against the bank account."""
    rows: list[tuple[str, int]] = [(accounts.escrow, -s.stake_minor)]
    if s.credit_minor:
        rows.append((w.account_id, s.credit_minor))
    if s.stake_minor - s.credit_minor:
        rows.append((bank, s.stake_minor - s.credit_minor))
    return Payout(
        bet_id=w.bet_id, account_id=w.account_id, spot=w.spot, stake_minor=w.stake_minor,
        result=s.result, win_minor=s.win_minor, commission_minor=0, credit_minor=s.credit_minor,
        postings=tuple(rows),
    )  # fmt: skip


VARIANT = RussianClassic()
"""The registered instance."""
