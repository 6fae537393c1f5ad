"""French club baccara (seed 000, "Le baccara"): the text as written — deal, draw rules, betting, pays.

Every rule test quotes the sentence of the seed it checks, in French, then in English.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.core.baccarat import engine
from services.core.baccarat.engine import CoupResult, Deal, Resolved, TableConfig
from services.core.baccarat.variants import get_variant
from services.core.baccarat.variants.french_club import VARIANT, bank_credit_minor, ponte_account
from services.core.cards import deck
from services.core.errors import DomainError, Reason
from services.core.ledger import Accounts, Wager

ACCOUNTS = Accounts(escrow="escrow", house="house", commission="commission", bank="table:bank")
RANK_OF_VALUE = "KA23456789"  # a card rank for each point value 0..9


def card(value: int, suit: str = "S") -> str:
    """A card worth ``value`` points."""
    return RANK_OF_VALUE[value] + suit


def play(cards: Sequence[str], config: TableConfig | None = None) -> engine.Step:
    """Apply ``cards`` in order and return what is due next."""
    state = engine.start(config or VARIANT.config())
    for c in cards:
        state = engine.apply_card(state, c)
    return engine.next_step(state)


def resolved(cards: Sequence[str]) -> CoupResult:
    """The result of the coup played from ``cards``."""
    return engine.resolve(VARIANT.config(), cards)


def w(bet: str, spot: str, stake: int, account: str | None = None) -> Wager:
    """A wager on ``spot`` (by default from an account of its own)."""
    return Wager(bet_id=bet, account_id=account or f"acct-{bet}", spot=spot, stake_minor=stake)


# --- the table -------------------------------------------------------------------------------------


def test_registered() -> None:
    """The registry finds the module's VARIANT under its id: player-banked, with rules version and source."""
    assert get_variant("french_club") is VARIANT
    assert VARIANT.house_banked is False
    assert VARIANT.rules_version.startswith("french_club/")
    assert "000" in VARIANT.source
    assert VARIANT.hands(VARIANT.config()) == ("ponte", "banker")
    assert VARIANT.spots(VARIANT.config()) == ("bank", "bank_cover", "banker", "ponte", "tie")


def test_one_deck() -> None:
    """«Cartes — Jeu de 52 cartes.» (Cards: a 52-card deck.) One deck, and no other."""
    assert VARIANT.config().decks == 1
    assert VARIANT.default_decks == 1
    with pytest.raises(DomainError) as err:
        VARIANT.config(decks=6)
    assert err.value.reason is Reason.BAD_CONFIG


def test_stop_card_leaves_a_whole_coup() -> None:
    """«Entre quatre et six cartes sont distribuées seulement.» (Only four to six cards are dealt.) The stop
    card leaves six cards, so the last coup never runs out; there is no burn."""
    assert VARIANT.shoe_rules.stop_from_end == 6
    assert VARIANT.shoe_rules.burn == "none"


@pytest.mark.parametrize(
    ("rank", "value"),
    [("A", 1), ("2", 2), ("3", 3), ("4", 4), ("5", 5), ("6", 6), ("7", 7), ("8", 8), ("9", 9),
     ("T", 0), ("J", 0), ("Q", 0), ("K", 0)],
)  # fmt: skip
def test_card_points(rank: str, value: int) -> None:
    """«De l'as au 9, les cartes valent 1 à 9. 10, Valet, Dame, Roi valent 0.» (Ace to nine are worth 1 to
    9; ten, jack, queen, king are worth 0.)"""
    assert VARIANT.total([rank + "H"]) == value


def test_the_texts_own_example() -> None:
    """«le banquier reçoit un 8 et un 9 (8+9 = 17) : sa main vaut 7 points ; le ponte reçoit un 5 et un 5
    (5+5 = 10) : sa main vaut 0.» (The banker gets 8 and 9: 7 points; the ponte 5 and 5: 0.)"""
    result = resolved(["5S", "8H", "5D", "9C", "KS"])
    assert result.hand("banker").cards == ("8H", "9C")
    assert result.hand("banker").total == 7
    assert result.hand("ponte").cards[:2] == ("5S", "5D")
    assert VARIANT.total(result.hand("ponte").cards[:2]) == 0


def test_deal_order() -> None:
    """«D'abord le banquier distribue deux cartes tour à tour, au ponte en premier puis à lui-même.» (First
    the banker deals two cards in turn, to the ponte first, then to himself.)"""
    expected = ["ponte", "banker", "ponte", "banker"]
    state = engine.start(VARIANT.config())
    for hand, c in zip(expected, ["2S", "3H", "KD", "KC"], strict=True):
        step = engine.next_step(state)
        assert step == Deal(hand)
        state = engine.apply_card(state, c)
    assert state.cards("ponte") == ("2S", "KD")
    assert state.cards("banker") == ("3H", "KC")


# --- the ponte's third card ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ponte_total", "draws"),
    [(0, True), (1, True), (2, True), (3, True), (4, True), (5, True),
     (6, False), (7, False), (8, False), (9, False)],
)  # fmt: skip
def test_ponte_rule(ponte_total: int, draws: bool) -> None:
    """«Le ponte reçoit une troisième carte si : Sa main initiale [...] est égale à 0, 1, 2, 3, 4 ou 5. [...]
    une main supérieure ou égale à 6, le ponte ne recevra pas de troisième carte.» (The ponte draws on 0–5;
    on 6 or more he gets no third card.) The banker holds 7, so only the ponte can draw."""
    step = play([card(ponte_total), card(7), card(0, "H"), card(0, "D")])
    assert (step == Deal("ponte")) is draws
    if not draws:
        assert isinstance(step, Resolved)


# --- the banker's third card: the text's tableau as a literal table --------------------------------

# One row per banker two-card total, in the order the text gives its rules. Columns: the point value of
# the ponte's third card 0 1 2 3 4 5 6 7 8 9, then "-" (the ponte stood). D draws, S stands.
BANKER_TABLEAU = [
    # "Le banquier reçoit une troisième carte si : Sa main initiale est égale à 0, 1, et 2."
    (0, "D D D D D D D D D D | D", "Sa main initiale est égale à 0, 1, et 2 (his initial hand is 0, 1 or 2)"),
    (1, "D D D D D D D D D D | D", "Sa main initiale est égale à 0, 1, et 2 (his initial hand is 0, 1 or 2)"),
    (2, "D D D D D D D D D D | D", "Sa main initiale est égale à 0, 1, et 2 (his initial hand is 0, 1 or 2)"),
    # "Si la main du banquier est égale ou supérieure à 7, alors il ne recevra jamais de carte
    # supplémentaire."
    (7, "S S S S S S S S S S | S", "égale ou supérieure à 7 [...] jamais (7 or more: never)"),
    (8, "S S S S S S S S S S | S", "égale ou supérieure à 7 [...] jamais (7 or more: never)"),
    (9, "S S S S S S S S S S | S", "égale ou supérieure à 7 [...] jamais (7 or more: never)"),
    # "quand sa main initiale est de 3, 4, 5 ou 6 [...]" + "Dans ces cas, si le ponte ne reçoit pas de
    # troisième carte, le banquier n'en reçoit donc pas non plus."
    (3, "D D D D D D D D S D | S", "3 points et [...] 0, 1, 2, 3, 4, 5, 6, 7 ou 9 (3: third card 0–7 or 9)"),
    (4, "S S D D D D D D S S | S", "4 points et [...] 2, 3, 4, 5, 6 ou 7 (4: third card 2–7)"),
    (5, "S S S S D D D D S S | S", "5 points et [...] 4, 5, 6 ou 7 (5: third card 4–7)"),
    (6, "S S S S S S D D S S | S", "6 points et [...] 6 ou 7 (6: third card 6 or 7)"),
]
STOOD = None


def _cells() -> list[tuple[int, int | None, bool, str]]:
    rows = []
    for banker_total, line, quote in BANKER_TABLEAU:
        drawn, stood = line.split("|")
        marks = drawn.split()
        assert len(marks) == 10
        rows += [(banker_total, third, mark == "D", quote) for third, mark in enumerate(marks)]
        rows.append((banker_total, STOOD, stood.strip() == "D", quote))
    return rows


@pytest.mark.parametrize(("banker_total", "ponte_third", "draws", "quote"), _cells())
def test_banker_tableau(banker_total: int, ponte_third: int | None, draws: bool, quote: str) -> None:
    """Each cell of the banker's rules as the text writes them: on 0–2 he always draws, on 7+ never, on 3–6
    only on the listed third cards of the ponte, and "si le ponte ne reçoit pas de troisième carte, le
    banquier n'en reçoit donc pas non plus" (if the ponte gets no third card, neither does the banker)."""
    if ponte_third is None:  # the ponte holds 6 and stands
        cards = [card(6), card(banker_total), card(0, "H"), card(0, "D")]
    else:  # the ponte holds 1, draws ``ponte_third``
        cards = [card(1), card(banker_total), card(0, "H"), card(0, "D"), card(ponte_third, "C")]
    step = play(cards)
    assert (step == Deal("banker")) is draws, quote
    if not draws:
        assert isinstance(step, Resolved)


def test_banker_stands_on_3_to_5_when_the_ponte_stood_unlike_punto_banco() -> None:
    """«Dans ces cas, si le ponte ne reçoit pas de troisième carte, le banquier n'en reçoit donc pas non
    plus.» (In these cases, if the ponte gets no third card, neither does the banker.) Punto banco would
    draw the banker's 3 against a standing 6; this game does not."""
    cards = ["6S", "3H", "KD", "KC", "9H"]
    assert resolved(cards).hand("banker").cards == ("3H", "KC")
    assert engine.resolve(get_variant("punto_banco").config(decks=1), cards).hand("banker").cards == (
        "3H", "KC", "9H",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("cards", "hand", "three", "quote"),
    [
        (["4S", "9H", "KD", "KC", "2H"], "ponte", True,
         "Sa main initiale [...] est égale à 0, 1, 2, 3, 4 ou 5 (the ponte draws on 0–5, even against a 9)"),
        (["9S", "KH", "KD", "KC", "2H"], "banker", True,
         "Sa main initiale est égale à 0, 1, et 2 (the banker draws on 0–2, even against a 9)"),
        (["8S", "2H", "KD", "KC", "2D"], "banker", True,
         "Sa main initiale est égale à 0, 1, et 2 (the banker draws on 0–2, even against an 8)"),
    ],
)  # fmt: skip
def test_no_naturals(cards: list[str], hand: str, three: bool, quote: str) -> None:
    """The text names no natural, so a two-card 8 or 9 on one side does not stop the other side drawing."""
    result = resolved(cards)
    assert (len(result.hand(hand).cards) == 3) is three, quote
    assert result.natural is False


@pytest.mark.parametrize(
    ("cards", "outcome"),
    [
        (["7S", "9H", "KD", "KC"], "banker"),  # "Victoire du banquier si sa main est plus proche de 9."
        (["9S", "7H", "KD", "KC"], "ponte"),  # "Victoire du ponte si sa main est plus proche de 9."
        (["7S", "7H", "KD", "KC"], "tie"),  # "Égalité [...] si elles ont des mains de valeur égale."
    ],
)
def test_outcomes(cards: list[str], outcome: str) -> None:
    """«Victoire du banquier / du ponte si sa main est plus proche de 9. Égalité entre les deux parties si
    elles ont des mains de valeur égale.» (The hand nearer 9 wins; equal hands tie.)"""
    assert resolved(cards).outcome == outcome


@settings(max_examples=300, deadline=None)
@given(cards=st.permutations(deck()))
def test_four_to_six_cards(cards: list[str]) -> None:
    """«Entre quatre et six cartes sont distribuées seulement.» (Only four to six cards are dealt.)"""
    result = resolved(cards[:6])
    assert 4 <= result.cards_used <= 6
    assert result.cards_used == sum(len(h.cards) for h in result.hands)
    assert result.outcome in ("ponte", "banker", "tie")


# --- state-machine refusals ------------------------------------------------------------------------


def test_card_not_due_after_the_coup() -> None:
    """Once the coup is resolved, another card is refused with CARD_NOT_DUE."""
    state = engine.start(VARIANT.config())
    for c in ["7S", "9H", "KD", "KC"]:
        state = engine.apply_card(state, c)
    with pytest.raises(DomainError) as err:
        engine.apply_card(state, "2S")
    assert err.value.reason is Reason.CARD_NOT_DUE


@pytest.mark.parametrize("hand", ["ponte", "banker"])
def test_decision_never_due(hand: str) -> None:
    """The text leaves nobody a choice: a decision is refused with DECISION_NOT_DUE, mid-coup and after."""
    state = engine.start(VARIANT.config())
    with pytest.raises(DomainError) as err:
        engine.apply_decision(state, hand, "draw")
    assert err.value.reason is Reason.DECISION_NOT_DUE
    for c in ["7S", "9H", "KD", "KC"]:
        state = engine.apply_card(state, c)
    with pytest.raises(DomainError) as err:
        engine.apply_decision(state, hand, "stand")
    assert err.value.reason is Reason.DECISION_NOT_DUE


def test_too_few_cards() -> None:
    """A coup that needs a fifth card and gets four raises TOO_FEW_CARDS."""
    with pytest.raises(DomainError) as err:
        resolved(["2S", "9H", "KD", "KC"])
    assert err.value.reason is Reason.TOO_FEW_CARDS


# --- betting: accepts -------------------------------------------------------------------------------

BANK = w("b", "bank", 100, "banker")


@pytest.mark.parametrize(
    ("accepted", "wager", "reason", "quote"),
    [
        ([], w("p1", "banker", 10), "bank_cannot_cover",
         "Le banquier [...] fait une mise de départ [...] Ensuite c'est au tour des autres joueurs "
         "(the banker stakes first, then the others)"),
        ([], BANK, None, "fait une mise de départ sur la victoire de sa main (an opening stake)"),
        ([BANK], w("b2", "bank", 100), "bank_taken", "Le banquier, désigné parmi les joueurs (one banker)"),
        ([BANK], w("p1", "banker", 10, "banker"), "bank_taken",
         "c'est au tour des autres joueurs (the other players bet, not the banker)"),
        ([BANK], w("p1", "banker", 100), None,
         "Soit le joueur décide de suivre la mise exacte du banquier (he may match the banker's stake)"),
        ([BANK], w("p1", "banker", 101), "bank_cannot_cover",
         "Le joueur ne peut aller plus haut que la mise du banquier (no player above the banker's stake)"),
        ([BANK, w("p1", "banker", 60)], w("p1b", "ponte", 41, "acct-p1"), "bank_cannot_cover",
         "Le joueur ne peut aller plus haut que la mise du banquier (a player's total, split or not)"),
        ([BANK, w("p1", "banker", 60)], w("p1b", "ponte", 40, "acct-p1"), None,
         "Il peut répartir la somme comme il veut (he may split the sum as he likes)"),
        ([BANK, w("p1", "banker", 100)], w("p2", "tie", 75), None,
         "les trois quarts de la somme sur l'égalité (three quarters on the tie...)"),
        ([BANK, w("p1", "banker", 100), w("p2", "tie", 75)], w("p2b", "ponte", 25, "acct-p2"), None,
         "le dernier quart pour la victoire du ponte (...the last quarter on the ponte)"),
        ([BANK], w("p1", "ponte", 10), "bank_cannot_cover",
         "Les paris perdants vont directement à la banque (reading: the bank pays only from what it holds)"),
        ([BANK], w("p1", "tie", 10), "bank_cannot_cover",
         "Les paris perdants vont directement à la banque (reading: the bank pays only from what it holds)"),
        ([BANK], w("p1", "player", 10), "unknown_spot", "un des trois résultats possibles (three results)"),
    ],
)  # fmt: skip
def test_accepts(accepted: list[Wager], wager: Wager, reason: str | None, quote: str) -> None:
    """The bank first and once; the others bet on the three results, each at most the banker's stake in
    total; a bet the bank could not cover in some outcome is refused."""
    assert VARIANT.accepts(VARIANT.config(), accepted, wager) == reason, quote


def test_at_most_fifteen_players() -> None:
    """«De quatre à quinze joueurs» (four to fifteen players): the banker and at most 14 punters."""
    accepted = [w("b", "bank", 10_000, "banker")]
    for i in range(14):
        bet = w(f"p{i}", "banker", 10)
        assert VARIANT.accepts(VARIANT.config(), accepted, bet) is None
        accepted.append(bet)
    assert VARIANT.accepts(VARIANT.config(), accepted, w("p14", "banker", 10)) == "over_limit"
    assert VARIANT.accepts(VARIANT.config(), accepted, w("p0b", "banker", 10, "acct-p0")) is None


# --- the ponte -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("wagers", "ponte"),
    [
        ([BANK, w("a", "banker", 50), w("b", "banker", 80), w("c", "tie", 80)], "acct-b"),
        ([BANK, w("a", "banker", 30), w("b", "banker", 80), w("a2", "ponte", 60, "acct-a")], "acct-a"),
        ([BANK, w("a", "banker", 80), w("b", "banker", 40), w("b2", "tie", 40, "acct-b")], "acct-a"),
        ([BANK, w("a", "tie", 100), w("b", "banker", 100)], "acct-a"),
        ([BANK], None),
        ([w("a", "banker", 10)], None),
    ],
)
def test_ponte_is_the_first_highest_bettor(wagers: list[Wager], ponte: str | None) -> None:
    """«Il est celui qui aura misé la plus haute somme égale ou inférieure à celle du banquier en premier.»
    (He is the one who first bet the highest sum equal to or below the banker's.) Totals per account."""
    assert ponte_account(wagers) == ponte


# --- settlement ------------------------------------------------------------------------------------

COUP = {
    "banker": ["7S", "9H", "KD", "KC"],
    "ponte": ["9S", "7H", "KD", "KC"],
    "tie": ["7S", "7H", "KD", "KC"],
}
"""Four-card coups of each outcome."""

ODD = [w("bank", "bank", 1001, "banker"), w("p1", "banker", 15), w("p2", "ponte", 15), w("p3", "tie", 7)]
"""Odd stakes: the ponte is p1 (15, first among the highest)."""

# bet -> (result, win, commission, credit); worked by hand from the text:
# "Chaque bonne mise vaut aux joueurs de doubler celle-ci." "Les paris perdants vont directement à la banque."
# "Si le banquier gagne il récupère sa mise. [...] doivent donner 10% de leur mise au banquier avant."
# "S'il y a égalité ou si le banquier perd, il donne sa mise au ponte, même si ce dernier perd le pari."
SETTLEMENTS = [
    ("banker", "floor", {"p1": ("win", 15, 1, 29), "p2": ("lose", 0, 0, 0), "p3": ("lose", 0, 0, 0),
                         "bank": ("win", 8, 0, 1009)}),
    ("banker", "half_up", {"p1": ("win", 15, 2, 28), "p2": ("lose", 0, 0, 0), "p3": ("lose", 0, 0, 0),
                           "bank": ("win", 9, 0, 1010)}),
    ("banker", "ceil", {"p1": ("win", 15, 2, 28), "p2": ("lose", 0, 0, 0), "p3": ("lose", 0, 0, 0),
                        "bank": ("win", 9, 0, 1010)}),
    ("ponte", "floor", {"p1": ("lose", 0, 0, 1001), "p2": ("win", 15, 0, 30), "p3": ("lose", 0, 0, 0),
                        "bank": ("lose", 0, 0, 7)}),
    ("tie", "floor", {"p1": ("lose", 0, 0, 1001), "p2": ("lose", 0, 0, 0), "p3": ("win", 7, 0, 14),
                      "bank": ("lose", 0, 0, 23)}),
]  # fmt: skip


@pytest.mark.parametrize(("outcome", "rounding", "expected"), SETTLEMENTS)
def test_settlement_table(
    outcome: str, rounding: str, expected: dict[str, tuple[str, int, int, int]]
) -> None:
    """Odd stakes, each outcome: every winning bet doubled, 10 % of a winning banker bet's stake to the
    banker by the table's rounding, losing bets to the bank, the bank stake to the ponte on a tie or a
    banker loss."""
    cfg = VARIANT.config(commission_rounding=rounding)
    result = resolved(COUP[outcome])
    assert result.outcome == outcome
    payouts = VARIANT.settle(result, ODD, cfg, ACCOUNTS)
    assert [p.bet_id for p in payouts] == [x.bet_id for x in ODD]
    got = {p.bet_id: (p.result, p.win_minor, p.commission_minor, p.credit_minor) for p in payouts}
    assert got == expected
    for p in payouts:
        assert sum(m for _, m in p.postings) == 0
        assert dict(p.postings)["escrow"] == -p.stake_minor
        assert "house" not in dict(p.postings) and "commission" not in dict(p.postings)


def test_bank_stake_goes_to_the_ponte_even_if_he_loses() -> None:
    """«il donne sa mise au ponte, même si ce dernier perd le pari» (he gives his stake to the ponte, even
    if the ponte loses his bet): the ponte's losing banker bet is credited the bank stake."""
    wagers = [w("bank", "bank", 200, "banker"), w("a", "banker", 200), w("b", "ponte", 150)]
    result = resolved(COUP["ponte"])
    bank, a, b = VARIANT.settle(result, wagers, VARIANT.config(), ACCOUNTS)
    assert (a.result, a.credit_minor) == ("lose", 200)
    assert sorted(a.postings) == sorted([("escrow", -200), ("acct-a", 200)])
    assert (b.result, b.credit_minor) == ("win", 300)
    assert bank.credit_minor == 50  # 200 collected, 150 paid, his own 200 handed on
    # the bank account paid the 150 win; the banker's payout refills it from his stake
    assert sorted(bank.postings) == sorted([("escrow", -200), ("table:bank", 150), ("banker", 50)])


def test_banker_without_punters_keeps_his_stake() -> None:
    """Reading: with nobody to be the ponte, «il donne sa mise au ponte» has no receiver: the stake comes
    back."""
    (bank,) = VARIANT.settle(
        resolved(COUP["ponte"]), [w("bank", "bank", 100, "banker")], VARIANT.config(), ACCOUNTS
    )
    assert (bank.result, bank.credit_minor) == ("push", 100)
    assert bank.postings == (("escrow", -100), ("banker", 100))


def test_settle_refuses_what_the_bank_cannot_cover() -> None:
    """Settling bets the bank cannot cover is refused rather than paid out of nothing."""
    with pytest.raises(DomainError) as err:
        VARIANT.settle(resolved(COUP["ponte"]), [BANK, w("p", "ponte", 100)], VARIANT.config(), ACCOUNTS)
    assert err.value.reason is Reason.BANK_CANNOT_COVER
    with pytest.raises(DomainError) as err:
        VARIANT.settle(resolved(COUP["ponte"]), [w("p", "ponte", 100)], VARIANT.config(), ACCOUNTS)
    assert err.value.reason is Reason.BANK_CANNOT_COVER


def test_grade() -> None:
    """Grades: the right result 1:1 (banker less 10 % of the stake), others lose; the bank stake is kept on a
    banker win and lost otherwise; unknown spots are refused."""
    cfg = VARIANT.config()
    banker_win = resolved(COUP["banker"])
    assert VARIANT.grade(banker_win, "banker", cfg).commission_bps == 1000
    assert VARIANT.grade(banker_win, "banker", cfg).commission_base == "stake"
    assert VARIANT.grade(banker_win, "bank", cfg).result == "push"
    assert VARIANT.grade(resolved(COUP["tie"]), "tie", cfg).win_ratio == (1, 1)
    assert VARIANT.grade(resolved(COUP["tie"]), "banker", cfg).result == "lose"
    assert VARIANT.grade(resolved(COUP["tie"]), "bank", cfg).result == "lose"
    with pytest.raises(DomainError) as err:
        VARIANT.grade(banker_win, "player", cfg)
    assert err.value.reason is Reason.UNKNOWN_SPOT


# --- conservation ----------------------------------------------------------------------------------

SPOTS = st.sampled_from(["banker", "ponte", "tie"])


@settings(max_examples=300, deadline=None)
@given(
    cards=st.permutations(deck()),
    bank=st.integers(1, 50_000),
    bets=st.lists(st.tuples(st.integers(0, 6), SPOTS, st.integers(1, 30_000)), max_size=12),
    rounding=st.sampled_from(["floor", "half_up", "ceil"]),
)
def test_conservation(cards: list[str], bank: int, bets: list[tuple[int, str, int]], rounding: str) -> None:
    """Over random shoes and stakes: every accepted wager gets exactly one payout, each balances, the escrow
    is emptied exactly, the bank account nets to zero, no credit is negative and the house takes nothing."""
    cfg = VARIANT.config(commission_rounding=rounding)
    accepted = [w("bank", "bank", bank, "banker")]
    for i, (who, spot, stake) in enumerate(bets):
        candidate = w(f"x{i}", spot, stake, f"acct-{who}")
        if VARIANT.accepts(cfg, accepted, candidate) is None:
            accepted.append(candidate)
    for outcome in ("banker", "ponte", "tie"):
        assert bank_credit_minor(outcome, accepted, cfg) >= 0
    result = engine.resolve(cfg, cards[:6])
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
