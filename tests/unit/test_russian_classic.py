"""Russian classic baccara (seed 001, «Баккара», rules 1–18): the text as written.

Every rule test quotes the rule of the seed it checks, in Russian, then in English.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.core.baccarat import engine
from services.core.baccarat.engine import CoupResult, Deal, Decide, Resolved, TableConfig
from services.core.baccarat.variants import get_variant
from services.core.baccarat.variants.russian_classic import (
    MAX_PUNTERS,
    VARIANT,
    deal_order,
    draw_order,
    max_cards,
    share,
)
from services.core.cards import deck
from services.core.errors import DomainError, Reason
from services.core.ledger import Accounts, Wager

ACCOUNTS = Accounts(escrow="escrow", house="house", commission="commission", bank="table:bank")


def two(total: int, suit: str = "S") -> tuple[str, str]:
    """Two cards whose Russian total is ``total`` (there is no card worth 1 here: the ace counts 0)."""
    if total == 0:
        return ("K" + suit, "A" + suit)
    if total == 1:
        return ("5" + suit, "6" + suit)
    return (str(total) + suit, "Q" + suit)


def dealt(punters: Sequence[int], banker: int) -> list[str]:
    """The initial deal in rule 5's order for two-card totals ``punters`` (seat order) and ``banker``."""
    hands = [two(t, "SHDC"[i % 4]) for i, t in enumerate(punters)]
    b = two(banker, "D")
    return [h[0] for h in hands] + [b[0], b[1]] + [h[1] for h in reversed(hands)]


def config(punters: int) -> TableConfig:
    """A table of ``punters`` punter hands."""
    return VARIANT.config(punters=punters)


def run(
    cfg: TableConfig, cards: Sequence[str], decisions: Sequence[tuple[str, str]] = ()
) -> engine.CoupState:
    """Apply decisions when due and cards in order; return the state when neither is left to apply."""
    state = engine.start(cfg)
    pending, queue = list(decisions), list(cards)
    while True:
        step = engine.next_step(state)
        if isinstance(step, Decide) and pending:
            hand, choice = pending.pop(0)
            state = engine.apply_decision(state, hand, choice)
        elif isinstance(step, Deal) and queue:
            state = engine.apply_card(state, queue.pop(0))
        else:
            return state


def stand_all(cfg: TableConfig, cards: Sequence[str]) -> CoupResult:
    """The coup played from ``cards`` with every free hand standing."""
    return engine.resolve(cfg, cards, strategy=VARIANT.strategies()["never_draw"])


def w(bet: str, spot: str, stake: int, account: str | None = None) -> Wager:
    """A wager on ``spot`` (by default from an account of its own)."""
    return Wager(bet_id=bet, account_id=account or f"acct-{bet}", spot=spot, stake_minor=stake)


# --- the table -------------------------------------------------------------------------------------


def test_registered() -> None:
    """The registry finds the module's VARIANT under its id: player-banked, with its own strategies."""
    assert get_variant("russian_classic") is VARIANT
    assert VARIANT.house_banked is False
    assert VARIANT.rules_version.startswith("russian_classic/")
    assert "001" in VARIANT.source
    assert VARIANT.default_strategy in VARIANT.strategies()
    assert set(VARIANT.strategies()) >= {"draw_to_5", "never_draw"}


def test_two_decks() -> None:
    """Rule 1: «В Баккару играют в две полные (52 карты) мешанные колоды» (played with two full 52-card
    decks shuffled together). Two decks and no other number."""
    assert VARIANT.config().decks == 2
    with pytest.raises(DomainError) as err:
        VARIANT.config(decks=1)
    assert err.value.reason is Reason.BAD_CONFIG


@pytest.mark.parametrize(
    ("punters", "ok"), [(0, False), (1, True), (3, True), (12, True), (13, True), (33, True), (34, False)]
)
def test_number_of_punters(punters: int, ok: bool) -> None:
    """Rule 3: «Число игроков не ограничено» (the number of players is not limited): no cap of 12; a table
    declares 1 to 33 punter hands, the most whose coup (3 cards a hand) the two decks of rule 1 hold."""
    if ok:
        cfg = config(punters)
        assert VARIANT.hands(cfg) == (*(f"punter_{i}" for i in range(1, punters + 1)), "banker")
        assert VARIANT.spots(cfg) == (*(f"punter_{i}" for i in range(1, punters + 1)), "bank")
    else:
        with pytest.raises(DomainError) as err:
            config(punters)
        assert err.value.reason is Reason.BAD_CONFIG


def test_default_punters_and_stop_card() -> None:
    """A table that names no number has 3 punters; the stop card leaves room for the table's largest coup,
    and the largest table's coup fits in the two decks («две полные (52 карты) мешанные колоды»)."""
    assert VARIANT.config().punters == 3
    for n in (1, 3, 12, MAX_PUNTERS):
        assert VARIANT.shoe_rules_for(config(n)).stop_from_end == max_cards(n) == 3 * (n + 1)
    assert max_cards(MAX_PUNTERS) <= 104 < max_cards(MAX_PUNTERS + 1)


def test_no_levy() -> None:
    """The text names no levy: a commission is refused as a configuration error."""
    assert VARIANT.config().commission_bps == 0
    with pytest.raises(DomainError) as err:
        VARIANT.config(commission_bps=500)
    assert err.value.reason is Reason.BAD_CONFIG


@pytest.mark.parametrize(
    ("rank", "value"),
    [("A", 0), ("K", 0), ("Q", 0), ("J", 0), ("T", 0),
     ("2", 2), ("3", 3), ("4", 4), ("5", 5), ("6", 6), ("7", 7), ("8", 8), ("9", 9)],
)  # fmt: skip
def test_card_points(rank: str, value: int) -> None:
    """Rule 8: «каждая фигура (А, К, Д, В) считается за 10 очков» (every figure — ace, king, queen, jack —
    counts 10 points), and «десятки отбрасываются» (rule 16: tens are dropped): A K Q J T are worth 0."""
    assert VARIANT.total([rank + "C"]) == value


def test_ace_differs_from_punto_banco() -> None:
    """Rule 8 makes the ace a face: A + 8 is 8 here and 9 in punto banco."""
    assert VARIANT.total(["AS", "8H"]) == 8
    assert get_variant("punto_banco").total(["AS", "8H"]) == 9


# --- rule 5: the deal ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("punters", "order"),
    [
        (1, ["punter_1", "banker", "banker", "punter_1"]),
        (2, ["punter_1", "punter_2", "banker", "banker", "punter_2", "punter_1"]),
        (3, ["punter_1", "punter_2", "punter_3", "banker", "banker", "punter_3", "punter_2", "punter_1"]),
        (4, ["punter_1", "punter_2", "punter_3", "punter_4", "banker",
             "banker", "punter_4", "punter_3", "punter_2", "punter_1"]),
    ],
)  # fmt: skip
def test_deal_order(punters: int, order: list[str]) -> None:
    """Rule 5: «сначала слева направо всем игрокам, затем кладёт себе, потом по другой карте справа -
    налево, начиная с себя» (one card each left to right to all players, then himself; then a second card
    each right to left, starting with himself)."""
    assert list(deal_order(punters)) == order
    state = engine.start(config(punters))
    for i, hand in enumerate(order):
        assert engine.next_step(state) == Deal(hand)
        state = engine.apply_card(state, ["2S", "3S", "4S", "5S", "6S", "7S", "2H", "3H", "4H", "5H"][i])
    assert all(len(cards) == 2 for _, cards in state.hands)


# --- rules 13-14: the draw -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("punters", "order"),
    [
        (1, ["punter_1"]),
        (2, ["punter_2", "punter_1"]),
        (3, ["punter_3", "punter_1", "punter_2"]),
        (4, ["punter_4", "punter_1", "punter_3", "punter_2"]),
        (5, ["punter_5", "punter_1", "punter_4", "punter_2", "punter_3"]),
    ],
)
def test_draw_order(punters: int, order: list[str]) -> None:
    """Rule 14: «сначала прикупает понтер, сидящий с правой стороны от банкомета, потом, сидящий с левой,
    затем опять с правой, следующий за уже прикупившим и т. д. После всех банкомет» (first the punter at the
    banker's right, then the one at his left, then again the right, the next one, and so on; the banker
    after all). Seats: punter_1 at his left, punter_n at his right."""
    assert list(draw_order(punters)) == order
    cfg = config(punters)
    state = run(cfg, dealt([5] * punters, 4))
    asked = []
    while isinstance(step := engine.next_step(state), Decide):
        asked.append(step.hand)
        state = engine.apply_decision(state, step.hand, "stand")
    assert asked == [*order, "banker"]
    assert isinstance(engine.next_step(state), Resolved)


def test_anyone_may_draw() -> None:
    """Rule 13: «Если банкомет не имеет на руках ни 9 и 19 или 8 и 18, то он и понтеры могут прикупать» (if
    the banker has neither 9 nor 8, he and the punters may draw): a choice, offered on any total."""
    state = run(config(2), dealt([9, 7], 6))
    step = engine.next_step(state)
    assert step == Decide("punter_2", ("draw", "stand"), "punter_option")
    state = engine.apply_decision(state, "punter_2", "draw")
    assert engine.next_step(state) == Deal("punter_2")
    state = engine.apply_card(state, "2C")
    assert engine.next_step(state) == Decide("punter_1", ("draw", "stand"), "punter_option")
    state = engine.apply_decision(state, "punter_1", "draw")
    state = engine.apply_card(state, "3C")
    assert engine.next_step(state) == Decide("banker", ("draw", "stand"), "banker_option")


def test_at_most_one_card() -> None:
    """Rule 14: «Прикупают не более одной карты» (no more than one card is bought): after his card a punter
    is not asked again, and a second decision from him is refused."""
    state = run(config(2), [*dealt([3, 4], 5), "2C"], [("punter_2", "draw")])
    assert len(state.cards("punter_2")) == 3
    assert engine.next_step(state) == Decide("punter_1", ("draw", "stand"), "punter_option")
    with pytest.raises(DomainError) as err:
        engine.apply_decision(state, "punter_2", "draw")
    assert err.value.reason is Reason.DECISION_NOT_DUE
    result = engine.resolve(config(2), [*dealt([3, 4], 5), "2C", "2D", "2H"], strategy=lambda s, d: "draw")
    assert [len(h.cards) for h in result.hands] == [3, 3, 3]


# --- rules 10 and 16: comparison -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("punters", "banker", "versus", "quote"),
    [
        ([7, 5], 6, ["win", "lose"],
         "у банкомета получилось 6 очков, у одного понтера - 7, у другого - 5 банкомет платит первому и "
         "получает со второго (banker 6, punters 7 and 5: he pays the first, takes from the second)"),
        ([7, 8], 6, ["win", "win"],
         "Если понтеры имеют 7 и 8, то банкомет платит обоим (punters 7 and 8: he pays both)"),
        ([6, 6], 6, ["lose", "lose"],
         "если у понтеров так же по 6 очков - банкомет с обоих получает (punters 6 too: he takes from both)"),
    ],
)  # fmt: skip
def test_rule_16_examples(punters: list[int], banker: int, versus: list[str], quote: str) -> None:
    """Rule 16's own examples, everyone standing: units against units, ties to the banker."""
    result = stand_all(config(2), dealt(punters, banker))
    assert [r for _, r in result.versus] == versus, quote


def test_ties_go_to_the_banker() -> None:
    """Rule 10: «если встретятся одинаковые количества единиц банкомета и понтера, то ставка берётся первым»
    (on equal units the stake is taken by the banker)."""
    result = stand_all(config(1), dealt([4], 4))
    assert result.versus == (("punter_1", "lose"),)
    assert result.outcome == "banker"


# --- rules 11, 12: the banker's 9 and 8 ------------------------------------------------------------


def test_banker_nine_takes_all() -> None:
    """Rule 11: «Если у банкомета будет 9 или 19, то он сразу открывает карты и забирает себе все ставки
    понтеров, несмотря на то, что некоторые игроки так же имеют 9 или 19» (with 9 the banker shows at once
    and takes every punter's stake, even from those who also have 9). Reading: a punter's 0 too."""
    state = run(config(3), dealt([9, 0, 7], 9))
    step = engine.next_step(state)
    assert isinstance(step, Resolved)
    assert step.result.versus == (("punter_1", "lose"), ("punter_2", "lose"), ("punter_3", "lose"))
    assert step.result.events == ("banker_nine",)
    assert step.result.natural is True
    assert step.result.outcome == "banker"


def test_banker_eight_pays_the_nines() -> None:
    """Rule 12: «Если у банкомета выпадает 8 или 18, а у одного или нескольких понтеров 9 или 19, то
    банкомет уплачивает им, а с остальных же получит сам» (banker 8: he pays the punters with 9 and takes
    from the rest)."""
    state = run(config(4), dealt([9, 8, 0, 9], 8))
    step = engine.next_step(state)
    assert isinstance(step, Resolved)
    assert [r for _, r in step.result.versus] == ["win", "lose", "lose", "win"]
    assert step.result.events == ("banker_eight",)
    assert step.result.outcome == "split"


def test_a_drawn_nine_is_not_rule_11() -> None:
    """Rule 11 acts «сразу» (at once), on two cards: a banker who draws to 9 is compared by rule 10 (a
    punter's 9 still ties to him), and a punter's drawn 0 beats him by rule 17."""
    choices = [("punter_2", "stand"), ("punter_1", "stand"), ("banker", "draw")]
    result = engine.resolve(config(2), [*dealt([7, 9], 5), "4C"], choices)
    assert result.hand("banker").total == 9
    assert result.events == ()
    assert result.natural is False
    assert result.versus == (("punter_1", "lose"), ("punter_2", "lose"))
    choices = [("punter_2", "draw"), ("punter_1", "stand"), ("banker", "draw")]
    result = engine.resolve(config(2), [*dealt([7, 3], 5), "7C", "4C"], choices)
    assert (result.hand("banker").total, result.hand("punter_2").total) == (9, 0)
    assert result.events == ("baccara",)
    assert result.versus == (("punter_1", "lose"), ("punter_2", "win"))


# --- rule 17: baccara ------------------------------------------------------------------------------


def test_baccara_before_the_draw() -> None:
    """Rule 17: «Если кто-либо из понтеров получает "Баккару", т. е. "0" он сам забирает ставки всех
    остальных игроков и в том числе и банкомета, причём, если это случилось до прикупки, то другие не имеют
    права покупать» (a punter with baccara, 0, takes the stakes of all others, the banker's included; if
    before the draw, the others may not draw)."""
    state = run(config(3), dealt([7, 0, 3], 5))
    step = engine.next_step(state)
    assert isinstance(step, Resolved), "nobody may draw"
    assert step.result.versus == (("punter_1", "lose"), ("punter_2", "win"), ("punter_3", "lose"))
    assert step.result.events == ("baccara_before_draw", "baccara")
    assert step.result.natural is False


def test_baccara_by_drawing() -> None:
    """Rule 17 «получает "Баккару"» (gets baccara) holds after a draw too; the draw goes on (only a baccara
    «до прикупки», before the draw, stops it)."""
    state = run(config(2), [*dealt([7, 3], 5), "7C"], [("punter_2", "draw")])
    assert state.cards("punter_2")[-1] == "7C"
    assert engine.next_step(state) == Decide("punter_1", ("draw", "stand"), "punter_option")
    choices = [("punter_2", "draw"), ("punter_1", "stand"), ("banker", "stand")]
    result = engine.resolve(config(2), [*dealt([7, 3], 5), "7C"], choices)
    assert result.versus == (("punter_1", "lose"), ("punter_2", "win"))
    assert result.events == ("baccara",)


def test_banker_baccara_beats_punter_baccara() -> None:
    """Rule 17: «Если же Баккара есть у банкомета и у понтера одновременно, то преимуществом пользуется, как
    сказано выше, банкомет» (if banker and punter both have baccara, the banker has the advantage), and
    rule 9 makes the baccara the aim of the game: the banker's 0 is the best hand, it beats the punters'
    zeros and every other total too."""
    result = stand_all(config(3), dealt([0, 4, 0], 0))
    assert result.versus == (("punter_1", "lose"), ("punter_2", "lose"), ("punter_3", "lose"))
    assert result.outcome == "banker"
    assert result.events == ("baccara_before_draw", "banker_baccara")


@pytest.mark.parametrize("punter", [1, 2, 5, 8, 9])
def test_banker_baccara_takes_every_stake(punter: int) -> None:
    """Rule 9: «Цель игры - получить на руки Баккару, т. е. 10 или 20 очков» (the aim of the game is the
    baccara): the banker's 0 — reached by drawing, no punter holding one — is not the lowest hand paying
    every punter on 1–9, it beats them all."""
    choices = [("punter_1", "stand"), ("banker", "draw")]
    result = engine.resolve(config(1), [*dealt([punter], 3), "7C"], choices)
    assert result.hand("banker").total == 0
    assert result.versus == (("punter_1", "lose"),)
    assert result.events == ("banker_baccara",)
    wagers = [w("bank", "bank", 500, "banker"), w("p1", "punter_1", 200)]
    bank, p1 = VARIANT.settle(result, wagers, config(1), ACCOUNTS)
    assert (p1.result, p1.credit_minor) == ("lose", 0)
    assert (bank.result, bank.win_minor, bank.credit_minor) == ("win", 200, 700)


def test_several_baccaras() -> None:
    """Rule 17: «Если О у нескольких партнеров - они делят ставки всех других и банкомета между собой» (if
    several have 0, they share the stakes of all others and the banker's)."""
    result = stand_all(config(3), dealt([0, 9, 0], 3))
    assert result.versus == (("punter_1", "win"), ("punter_2", "lose"), ("punter_3", "win"))
    assert result.outcome == "split"


@pytest.mark.parametrize(
    ("amount", "winners", "parts"),
    [
        (10, 1, (10,)),
        (10, 2, (5, 5)),
        (1101, 2, (551, 550)),
        (10, 3, (4, 3, 3)),
        (11, 3, (4, 4, 3)),
        (2, 3, (1, 1, 0)),
    ],
)
def test_share(amount: int, winners: int, parts: tuple[int, ...]) -> None:
    """«делят [...] между собой» (they share): equal parts, the remainder one unit each to the first in seat
    order."""
    assert share(amount, winners) == parts


# --- state-machine refusals ------------------------------------------------------------------------


def test_refusals() -> None:
    """A card while a decision is due, a decision while a card is due, a decision out of turn, a second
    decision, an unknown choice and a card after the result are each refused with their reason code."""
    cfg = config(2)
    state = engine.start(cfg)
    with pytest.raises(DomainError) as err:
        engine.apply_decision(state, "punter_1", "draw")
    assert err.value.reason is Reason.DECISION_NOT_DUE
    state = run(cfg, dealt([5, 5], 5))
    with pytest.raises(DomainError) as err:
        engine.apply_card(state, "2S")
    assert err.value.reason is Reason.CARD_NOT_DUE
    with pytest.raises(DomainError) as err:
        engine.apply_decision(state, "punter_1", "draw")  # punter_2 sits at the banker's right: his turn
    assert err.value.reason is Reason.DECISION_NOT_DUE
    with pytest.raises(DomainError) as err:
        engine.apply_decision(state, "punter_2", "hit")
    assert err.value.reason is Reason.INVALID_CHOICE
    for hand in ("punter_2", "punter_1", "banker"):
        state = engine.apply_decision(state, hand, "stand")
    assert isinstance(engine.next_step(state), Resolved)
    with pytest.raises(DomainError) as err:
        engine.apply_card(state, "2S")
    assert err.value.reason is Reason.CARD_NOT_DUE
    with pytest.raises(DomainError) as err:
        engine.resolve(cfg, dealt([5, 5], 5))
    assert err.value.reason is Reason.DECISION_REQUIRED


# --- strategies ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "total", "choice"),
    [("draw_to_5", 0, "draw"), ("draw_to_5", 5, "draw"), ("draw_to_5", 6, "stand"), ("draw_to_5", 9, "stand"),
     ("never_draw", 2, "stand"), ("always_draw", 9, "draw")],
)  # fmt: skip
def test_strategies(name: str, total: int, choice: str) -> None:
    """``draw_to_5`` draws on 0–5 and stands on 6–9; ``never_draw`` always stands; ``always_draw`` draws."""
    state = run(config(1), dealt([total if total else 5], 7 if total else 0))
    if total == 0:  # a punter's 0 ends the coup: test the banker's 0 instead
        state = engine.apply_decision(state, "punter_1", "stand")
        hand = "banker"
    else:
        hand = "punter_1"
    step = engine.next_step(state)
    assert isinstance(step, Decide) and step.hand == hand
    assert VARIANT.strategies()[name](state, step) == choice


# --- betting ---------------------------------------------------------------------------------------

BANK = w("b", "bank", 1000, "banker")


@pytest.mark.parametrize(
    ("accepted", "wager", "reason", "quote"),
    [
        ([], w("p1", "punter_1", 10), "bank_cannot_cover", "reading: the bank is put up first"),
        ([], BANK, None, "reading: the banker's stake is the bank"),
        ([BANK], w("b2", "bank", 10), "bank_taken", "Банкометом называется игрок, держащий [...] банк"),
        ([BANK], w("p1", "punter_1", 10, "banker"), "bank_taken", "понтерами - все остальные (the others)"),
        ([BANK], w("p1", "punter_1", 1000), None,
         "Банкомет каждую ставку удваивает (the banker doubles each stake: the bank covers it)"),
        ([BANK, w("p1", "punter_1", 600)], w("p2", "punter_2", 400), None, "каждую ставку удваивает"),
        ([BANK, w("p1", "punter_1", 600)], w("p2", "punter_2", 401), "bank_cannot_cover",
         "Банкомет каждую ставку удваивает (he must be able to pay every stake)"),
        ([BANK, w("p1", "punter_1", 6)], w("p2", "punter_1", 4), "duplicate_bet",
         "должен положить возле себя ту сумму денег (each punter puts one sum before himself)"),
        ([BANK], w("p1", "punter_4", 10), "unknown_spot", "three punters at this table"),
    ],
)  # fmt: skip
def test_accepts(accepted: list[Wager], wager: Wager, reason: str | None, quote: str) -> None:
    """The bank first and once; one stake per punter hand, not the banker's; all stakes within the bank."""
    assert VARIANT.accepts(config(3), accepted, wager) == reason, quote


STAKES = [w("bank", "bank", 1001, "banker"), w("p1", "punter_1", 333), w("p2", "punter_2", 101),
          w("p3", "punter_3", 57)]  # fmt: skip
"""Odd stakes: a bank of 1001 covering 491 on three hands."""

# (two-card totals of punters 1-3, banker's, wagers, bet -> (result, win, credit)), worked by hand.
SETTLEMENTS = [
    ("rule 16: banker 6; 7 wins, 5 loses, 6 ties to the banker", [7, 5, 6], 6, STAKES,
     {"p1": ("win", 333, 666), "p2": ("lose", 0, 0), "p3": ("lose", 0, 0), "bank": ("lose", 0, 826)}),
    ("rule 11: banker 9 takes all", [9, 2, 9], 9, STAKES,
     {"p1": ("lose", 0, 0), "p2": ("lose", 0, 0), "p3": ("lose", 0, 0), "bank": ("win", 491, 1492)}),
    ("rule 12: banker 8 pays the nine", [8, 9, 0], 8, STAKES,
     {"p1": ("lose", 0, 0), "p2": ("win", 101, 202), "p3": ("lose", 0, 0), "bank": ("win", 289, 1290)}),
    ("rule 17: one baccara takes the others' stakes and the bank", [7, 0, 9], 5, STAKES,
     {"p1": ("lose", 0, 0), "p2": ("win", 1391, 1492), "p3": ("lose", 0, 0), "bank": ("lose", 0, 0)}),
    ("rule 17: two baccaras share 1101, the odd unit to punter_1 (seat order, not bet order)", [0, 9, 0], 5,
     [w("bank", "bank", 1000, "banker"), w("p3", "punter_3", 57), w("p2", "punter_2", 101),
      w("p1", "punter_1", 333)],
     {"p1": ("win", 551, 884), "p2": ("lose", 0, 0), "p3": ("win", 550, 607), "bank": ("lose", 0, 0)}),
    ("reading: an unstaked seat's baccara wins nothing; rule 10 settles the rest", [7, 2, 0], 5, STAKES[:3],
     {"p1": ("win", 333, 666), "p2": ("lose", 0, 0), "bank": ("lose", 0, 769)}),
    ("rules 9, 17: the banker's baccara beats the punter's, and the 4 and the 7", [0, 4, 7], 0, STAKES,
     {"p1": ("lose", 0, 0), "p2": ("lose", 0, 0), "p3": ("lose", 0, 0), "bank": ("win", 491, 1492)}),
]  # fmt: skip


@pytest.mark.parametrize(("case", "punters", "banker", "wagers", "expected"), SETTLEMENTS)
def test_settlement_table(
    case: str, punters: list[int], banker: int, wagers: list[Wager], expected: dict[str, tuple[str, int, int]]
) -> None:
    """Odd stakes in each case: 1:1 against the bank, the banker's 9 and 8, the baccara and its share."""
    cfg = config(3)
    result = stand_all(cfg, dealt(punters, banker))
    payouts = VARIANT.settle(result, wagers, cfg, ACCOUNTS)
    assert [p.bet_id for p in payouts] == [x.bet_id for x in wagers]
    assert {p.bet_id: (p.result, p.win_minor, p.credit_minor) for p in payouts} == expected, case
    for p in payouts:
        assert sum(m for _, m in p.postings) == 0
        assert dict(p.postings)["escrow"] == -p.stake_minor
        assert p.commission_minor == 0


def test_settle_refuses_what_the_bank_cannot_cover() -> None:
    """Settling stakes over the bank, or punters without a bank, is refused, not paid out of nothing."""
    result = stand_all(config(3), dealt([7, 5, 6], 6))
    for wagers in ([w("b", "bank", 100), w("p", "punter_1", 101)], [w("p", "punter_1", 1)]):
        with pytest.raises(DomainError) as err:
            VARIANT.settle(result, wagers, config(3), ACCOUNTS)
        assert err.value.reason is Reason.BANK_CANNOT_COVER
    assert VARIANT.settle(result, [], config(3), ACCOUNTS) == ()


def test_grade() -> None:
    """A punter's grade follows ``versus``; the bank's is the coup's direction; unknown spots are refused."""
    cfg = config(3)
    result = stand_all(cfg, dealt([7, 5, 6], 6))
    assert VARIANT.grade(result, "punter_1", cfg).result == "win"
    assert VARIANT.grade(result, "punter_3", cfg).result == "lose"
    assert VARIANT.grade(result, "bank", cfg).result == "push"
    assert VARIANT.grade(stand_all(cfg, dealt([7, 5, 6], 9)), "bank", cfg).result == "win"
    assert VARIANT.grade(stand_all(cfg, dealt([7, 0, 6], 5)), "bank", cfg).result == "lose"
    with pytest.raises(DomainError) as err:
        VARIANT.grade(result, "player", cfg)
    assert err.value.reason is Reason.UNKNOWN_SPOT


# --- conservation ----------------------------------------------------------------------------------

TWO_DECKS = deck() * 2


@settings(max_examples=300, deadline=None)
@given(
    cards=st.permutations(TWO_DECKS),
    punters=st.integers(1, MAX_PUNTERS),
    strategy=st.sampled_from(sorted(VARIANT.strategies())),
    bank=st.integers(1, 50_000),
    stakes=st.lists(st.tuples(st.integers(1, MAX_PUNTERS), st.integers(1, 20_000)), max_size=12),
)
def test_conservation(
    cards: list[str], punters: int, strategy: str, bank: int, stakes: list[tuple[int, int]]
) -> None:
    """Over random shoes, tables, strategies and stakes: every accepted wager gets exactly one payout, each
    balances, the escrow is emptied exactly, the bank account nets to zero and no credit is negative."""
    cfg = config(punters)
    result = engine.resolve(cfg, cards[: max_cards(punters)], strategy=VARIANT.strategies()[strategy])
    assert result.cards_used <= max_cards(punters)
    accepted = [w("bank", "bank", bank, "banker")]
    for i, (seat, stake) in enumerate(stakes):
        candidate = w(f"x{i}", f"punter_{seat}", stake)
        if VARIANT.accepts(cfg, accepted, candidate) is None:
            accepted.append(candidate)
    payouts = VARIANT.settle(result, accepted, cfg, ACCOUNTS)
    assert [p.bet_id for p in payouts] == [x.bet_id for x in accepted]
    flows: dict[str, int] = {}
    for p in payouts:
        assert p.postings
        assert sum(m for _, m in p.postings) == 0
        assert p.credit_minor >= 0
        assert sum(m for a, m in p.postings if a == p.account_id) == p.credit_minor
        assert {a for a, _ in p.postings} <= {"escrow", "table:bank", p.account_id}
        for account, amount in p.postings:
            flows[account] = flows.get(account, 0) + amount
    total_in = sum(x.stake_minor for x in accepted)
    assert flows["escrow"] == -total_in
    assert flows.get("table:bank", 0) == 0
    assert sum(p.credit_minor for p in payouts) == total_in
    banker = result.hand("banker")
    if len(banker.cards) == 2 and banker.total == 9:  # rule 11, reckoned independently
        assert payouts[0].credit_minor == total_in
