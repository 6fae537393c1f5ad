"""Chemin de fer: the ponte's option at 5, the banker's tableau and optional cells, the bank and the levy.

Authority: Arrêté du 14 mai 2007 (etalab/lois-non-codifiees-et-reglements-francais,
arrete/2007/arrete-du-14-mai-2007-intd0754510a/titre-iii/), art. 55-14 (tableau de tirage), 58 (six
decks, stop card), 59 (levy rounding), 60 (5 % levy); the chemin de fer rule card where it is silent.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.core.baccarat import engine
from services.core.baccarat.engine import Deal, Decide, Resolved, TableConfig
from services.core.baccarat.variants import get_variant
from services.core.baccarat.variants.chemin_de_fer import VARIANT, CheminDeFer, banker_cell
from services.core.cards import deck
from services.core.errors import DomainError, Reason
from services.core.ledger import Accounts, Wager

ACCOUNTS = Accounts(escrow="escrow", house="house", commission="cagnotte", bank="table:bank")
RANK_OF_VALUE = "KA23456789"  # a card rank for each point value 0..9


def card(value: int, suit: str = "S") -> str:
    """A card worth ``value`` points."""
    return RANK_OF_VALUE[value] + suit


def play(config: TableConfig, cards: Sequence[str], decisions: Sequence[tuple[str, str]] = ()) -> engine.Step:
    """Apply the decisions whenever one is due and the cards in order; return what is due next."""
    state = engine.start(config)
    pending, queue = list(decisions), list(cards)
    while True:
        step = engine.next_step(state)
        if isinstance(step, Decide) and pending:
            hand, choice = pending.pop(0)
            state = engine.apply_decision(state, hand, choice)
        elif isinstance(step, Deal) and queue:
            state = engine.apply_card(state, queue.pop(0))
        else:
            return step


def test_registered() -> None:
    """The registry finds the module's VARIANT under its id, player-banked, with a rules version."""
    assert get_variant("chemin_de_fer") is VARIANT
    assert VARIANT.house_banked is False
    assert VARIANT.rules_version.startswith("chemin_de_fer/")
    assert VARIANT.default_strategy in VARIANT.strategies()


def test_six_decks_only() -> None:
    """Art. 58: "Au baccara chemin de fer, il est fait usage de six jeux de cinquante-deux cartes"."""
    assert VARIANT.config().decks == 6
    for decks in (1, 3, 8):
        with pytest.raises(DomainError) as err:
            VARIANT.config(decks=decks)
        assert err.value.reason is Reason.BAD_CONFIG


def test_stop_card_and_burn() -> None:
    """Art. 58: "une carte d'arrêt est placée à la fin du jeu avant les sept dernières cartes au baccara
    chemin de fer"; the article names no burn."""
    assert VARIANT.shoe_rules.stop_from_end == 7
    assert VARIANT.shoe_rules.burn == "none"


# --- the ponte ------------------------------------------------------------------------------------

PONTE_RULE = [
    # "A player with 0, 1, 2, 3 and 4 points will always ask for a third card; with 5 points he is free to
    # 'stick' or 'twist'; with 6 or 7 he will 'stick', and with 8 or 9 he must show his cards" (rule card)
    (0, "draw"), (1, "draw"), (2, "draw"), (3, "draw"), (4, "draw"),
    (5, "option"),
    (6, "stand"), (7, "stand"),
    (8, "natural"), (9, "natural"),
]  # fmt: skip


@pytest.mark.parametrize(("total", "rule"), PONTE_RULE)
def test_ponte_rule(total: int, rule: str) -> None:
    """The ponte draws on 0–4, chooses at 5, stands on 6–7, shows a natural on 8–9 (banker holds 7)."""
    cards = ["KS", "KH", card(total, "D"), card(7, "C")]
    step = play(VARIANT.config(), cards)
    if rule == "draw":
        assert step == Deal("player")
    elif rule == "option":
        assert step == Decide("player", cell="player_option_5")
    elif rule == "stand":
        assert isinstance(step, Resolved)  # the banker's 7 stands: nothing more is dealt
        assert len(step.result.hand("player").cards) == 2
    else:
        assert isinstance(step, Resolved)
        assert step.result.natural is True


def test_banker_natural_stops_the_ponte() -> None:
    """Art. 55-14: "si banco a 8 ou 9, il fait un abattage et punto ne peut tirer"."""
    step = play(VARIANT.config(), ["KS", "9H", "KD", "KC"])
    assert isinstance(step, Resolved)
    assert step.result.outcome == "banker"
    assert step.result.natural is True


@pytest.mark.parametrize(("choice", "cards_after"), [("draw", 3), ("stand", 2)])
def test_ponte_option_is_followed(choice: str, cards_after: int) -> None:
    """At 5 the ponte's recorded choice decides whether he receives a third card."""
    result = engine.resolve(VARIANT.config(), ["5S", "KH", "KD", "7C", "4H"], [("player", choice)])
    assert len(result.hand("player").cards) == cards_after
    assert result.decisions == (("player", choice),)


# --- the banker's tableau ---------------------------------------------------------------------------

# Columns: the point value of the ponte's third card 0..9, then "Refus" (the ponte stood), as in
# art. 55-14's "Valeur de la 3e carte donnée à punto" table. T tire, R reste, O optional (the classic
# chemin de fer rule card: banker 3 giving 9, banker 5 giving 4).
BANKER_TABLEAU = {
    0: "TTTTTTTTTTT",  # art. 55-14: "lorsqu'il a 0, 1 ou 2, banco tire"
    1: "TTTTTTTTTTT",
    2: "TTTTTTTTTTT",
    3: "TTTTTTTTROT",
    4: "RRTTTTTTRRT",
    5: "RRRROTTTRRT",
    6: "RRRRRRTTRRR",
    7: "RRRRRRRRRRR",
}
COLUMNS: list[int | None] = [*range(10), None]
BANKER_ROWS = [(b, third, BANKER_TABLEAU[b][i]) for b in range(8) for i, third in enumerate(COLUMNS)]


def banker_cards(banker: int, third: int | None) -> list[str]:
    """Cards for a coup where the banker holds ``banker`` and the ponte drew ``third`` (0, then draws) or
    stood (``None``: a 6)."""
    ponte = ("KS", "KH") if third is not None else ("3S", "3H")
    bank = ("KD", card(banker, "C")) if banker else ("KD", "QC")
    cards = [ponte[0], bank[0], ponte[1], bank[1]]
    return [*cards, card(third, "H")] if third is not None else cards


@pytest.mark.parametrize(("banker", "third", "play_"), BANKER_ROWS)
def test_banker_tableau_cell(banker: int, third: int | None, play_: str) -> None:
    """Every cell of the banker's tableau: T draws, R stands, O asks the banker (cell named)."""
    step = play(VARIANT.config(), banker_cards(banker, third))
    if play_ == "T":
        assert step == Deal("banker")
    elif play_ == "R":
        assert isinstance(step, Resolved)
        assert len(step.result.hand("banker").cards) == 2
    else:
        assert step == Decide("banker", cell=banker_cell(banker, third))


@pytest.mark.parametrize(("choice", "cards_after"), [("draw", 3), ("stand", 2)])
def test_banker_option_is_followed(choice: str, cards_after: int) -> None:
    """In an optional cell the banker's recorded choice decides whether he draws."""
    cards = [*banker_cards(3, 9), "2D"]
    result = engine.resolve(VARIANT.config(), cards, [("banker", choice)])
    assert len(result.hand("banker").cards) == cards_after


def test_optional_cells_configurable() -> None:
    """A table names its own optional cells; a cell taken out is played as art. 55-14 ("3 … 9: T")."""
    cfg = VARIANT.config(optional_cells=["banker_6_vs_none"])
    assert play(cfg, banker_cards(6, None)) == Decide("banker", cell="banker_6_vs_none")
    assert play(cfg, banker_cards(3, 9)) == Deal("banker")
    assert play(cfg, banker_cards(5, 4)) == Deal("banker")
    none = VARIANT.config(optional_cells=[])
    assert play(none, banker_cards(3, 9)) == Deal("banker")


def test_optional_cells_round_trip() -> None:
    """A configuration with optional cells survives TableOpened's JSON form (lists, not tuples)."""
    cfg = VARIANT.config(optional_cells=["banker_6_vs_none", "banker_4_vs_1"])
    back = TableConfig.from_dict(cfg.to_dict())
    assert play(back, banker_cards(4, 1)) == Decide("banker", cell="banker_4_vs_1")


def test_unknown_optional_cell_refused() -> None:
    """A cell that is not in the tableau (a natural, a bad name) is a configuration error."""
    for cell in ("banker_8_vs_none", "banker_3_vs_10", "player_option_5"):
        with pytest.raises(DomainError) as err:
            VARIANT.config(optional_cells=[cell])
        assert err.value.reason is Reason.BAD_CONFIG


# --- decisions are due or not ------------------------------------------------------------------------


def test_card_while_ponte_must_choose() -> None:
    """A card arriving while the ponte's option at 5 is due is refused with CARD_NOT_DUE."""
    state = engine.start(VARIANT.config())
    for c in ["5S", "KH", "KD", "7C"]:
        state = engine.apply_card(state, c)
    with pytest.raises(DomainError) as err:
        engine.apply_card(state, "4H")
    assert err.value.reason is Reason.CARD_NOT_DUE


def test_card_while_banker_must_choose() -> None:
    """A card arriving while the banker's optional cell is due is refused with CARD_NOT_DUE."""
    state = engine.start(VARIANT.config())
    for c in banker_cards(5, 4):
        state = engine.apply_card(state, c)
    with pytest.raises(DomainError) as err:
        engine.apply_card(state, "2D")
    assert err.value.reason is Reason.CARD_NOT_DUE


@pytest.mark.parametrize(
    ("cards", "hand"),
    [
        (["5S", "KH"], "player"),  # cards still due
        (["6S", "KH", "KD", "3C"], "player"),  # the ponte stands on 6: no option
        (["5S", "KH", "KD", "7C"], "banker"),  # the ponte, not the banker, is asked
        (["KS", "KH", "KD", "7C", "4D"], "banker"),  # banker 7 giving 4: no option
    ],
)
def test_decision_not_due(cards: list[str], hand: str) -> None:
    """A decision from a hand that is not asked is refused with DECISION_NOT_DUE."""
    state = engine.start(VARIANT.config())
    for c in cards:
        state = engine.apply_card(state, c)
    with pytest.raises(DomainError) as err:
        engine.apply_decision(state, hand, "draw")
    assert err.value.reason is Reason.DECISION_NOT_DUE


def test_decision_required_without_strategy() -> None:
    """Resolving a coup whose option is due with no decision and no strategy raises DECISION_REQUIRED."""
    with pytest.raises(DomainError) as err:
        engine.resolve(VARIANT.config(), ["5S", "KH", "KD", "7C", "4H"])
    assert err.value.reason is Reason.DECISION_REQUIRED


# --- strategies -------------------------------------------------------------------------------------

CARDS = st.lists(st.sampled_from(deck()), min_size=6, max_size=6, unique=True)


@settings(max_examples=300, deadline=None)
@given(cards=CARDS)
def test_house_tableau_plays_the_punto_banco_tableau(cards: list[str]) -> None:
    """The ``house_tableau`` strategy plays every free cell as art. 55-14 does, so its coups equal punto
    banco's on the same cards."""
    ours = engine.resolve(VARIANT.config(), cards, strategy=VARIANT.strategies()["house_tableau"])
    theirs = engine.resolve(get_variant("punto_banco").config(decks=6), cards)
    assert ours.hands == theirs.hands
    assert ours.outcome == theirs.outcome


@pytest.mark.parametrize(("name", "ponte_cards"), [("always_draw", 3), ("always_stand", 2)])
def test_always_strategies(name: str, ponte_cards: int) -> None:
    """``always_draw`` draws and ``always_stand`` stands at the ponte's 5; the banker's 5 then draws either
    way (against a 4 by choice, against "Refus" by art. 55-14's "5 … T")."""
    strategy = VARIANT.strategies()[name]
    result = engine.resolve(VARIANT.config(), ["5S", "KH", "KD", "5C", "4H", "9D"], strategy=strategy)
    assert len(result.hand("player").cards) == ponte_cards
    assert len(result.hand("banker").cards) == 3
    assert result.decisions[-1][1] == ("draw" if name == "always_draw" else "stand")


# --- the bank: accepts ------------------------------------------------------------------------------


def w(bet: str, spot: str, stake: int, account: str | None = None) -> Wager:
    """A wager on ``spot``."""
    return Wager(bet_id=bet, account_id=account or f"acct-{bet}", spot=spot, stake_minor=stake)


@pytest.mark.parametrize(
    ("accepted", "wager", "reason"),
    [
        ([], w("p1", "player", 100), "bank_cannot_cover"),  # no bank yet
        ([w("b", "bank", 1000)], w("p1", "player", 1000), None),  # exactly covered
        ([w("b", "bank", 1000)], w("p1", "player", 1001), "bank_cannot_cover"),
        ([w("b", "bank", 1000), w("p1", "player", 600)], w("p2", "player", 400), None),
        ([w("b", "bank", 1000), w("p1", "player", 600)], w("p2", "player", 401), "bank_cannot_cover"),
        ([w("b", "bank", 1000)], w("b2", "bank", 1000), "bank_taken"),
        ([w("p1", "player", 600)], w("b", "bank", 599), "bank_cannot_cover"),
        ([w("p1", "player", 600)], w("b", "bank", 600), None),
        ([w("b", "bank", 1000)], w("p1", "tie", 10), "unknown_spot"),
        ([w("b", "bank", 1000)], w("p1", "player", 0), "bad_amount"),
    ],
)
def test_accepts(accepted: list[Wager], wager: Wager, reason: str | None) -> None:
    """The punters' stakes together never exceed the bank; one bank per coup."""
    assert VARIANT.accepts(VARIANT.config(), accepted, wager) == reason


def test_settle_refuses_uncovered_stakes() -> None:
    """Settling stakes the bank cannot cover is refused rather than paid out of nothing."""
    result = engine.resolve(VARIANT.config(), ["9S", "KH", "KD", "KC"])
    with pytest.raises(DomainError) as err:
        VARIANT.settle(result, [w("b", "bank", 100), w("p", "player", 101)], VARIANT.config(), ACCOUNTS)
    assert err.value.reason is Reason.BANK_CANNOT_COVER


# --- the bank: settlement and the levy -----------------------------------------------------------------

BANKER_WINS = ["KS", "9H", "KD", "QC"]  # banker natural 9 against 0
PONTE_WINS = ["9S", "KH", "KD", "QC"]  # ponte natural 9 against 0
TIE = ["9S", "9H", "KD", "KC"]

SETTLEMENT = [
    # (cards, options, punter stakes, punter credits, bank result, bank win, levy, bank credit)
    # art. 60: 5 % "des sommes gagnées à chaque coup par le banquier"; art. 59: "arrondi à la dizaine de
    # centimes d'euro la plus voisine" (half up: 5 cents → 10).
    (BANKER_WINS, {}, [99], [0], "win", 99, 0, 5099),  # 4.95 c → 0
    (BANKER_WINS, {}, [100], [0], "win", 100, 10, 5090),  # 5 c → 10
    (BANKER_WINS, {}, [290], [0], "win", 290, 10, 5280),  # 14.5 c → 10
    (BANKER_WINS, {}, [300], [0], "win", 300, 20, 5280),  # 15 c → 20
    (BANKER_WINS, {}, [333, 667], [0, 0], "win", 1000, 50, 5950),
    (BANKER_WINS, {}, [2999], [0], "win", 2999, 150, 7849),  # 149.95 c → 150
    (BANKER_WINS, {"commission_rounding": "floor"}, [300], [0], "win", 300, 10, 5290),
    (BANKER_WINS, {"levy_step_minor": 1}, [333], [0], "win", 333, 17, 5316),  # 16.65 c → 17
    (PONTE_WINS, {}, [333, 667], [666, 1334], "lose", 0, 0, 4000),
    (PONTE_WINS, {}, [5000], [10000], "lose", 0, 0, 0),  # the bank is broken ("banco" lost)
    (TIE, {}, [333], [333], "push", 0, 0, 5000),  # "le coup est nul"
    (BANKER_WINS, {}, [], [], "push", 0, 0, 5000),  # nobody followed the bank
]


@pytest.mark.parametrize(
    ("cards", "options", "stakes", "credits", "bank_result", "bank_win", "levy", "bank_credit"), SETTLEMENT
)
def test_settlement(
    cards: list[str], options: dict[str, object], stakes: list[int], credits: list[int],
    bank_result: str, bank_win: int, levy: int, bank_credit: int,
) -> None:  # fmt: skip
    """Punters win 1:1 from the bank or lose to it, the bank pays the levy on its win, ties are void."""
    cfg = VARIANT.config(**options)
    result = engine.resolve(cfg, cards)
    wagers = [w("bank", "bank", 5000, "banker"), *(w(f"p{i}", "player", s) for i, s in enumerate(stakes))]
    payouts = VARIANT.settle(result, wagers, cfg, ACCOUNTS)
    assert [p.bet_id for p in payouts] == [x.bet_id for x in wagers]
    bank, punters = payouts[0], payouts[1:]
    assert [p.credit_minor for p in punters] == credits
    assert (bank.result, bank.win_minor, bank.commission_minor, bank.credit_minor) == (
        bank_result, bank_win, levy, bank_credit,
    )  # fmt: skip
    assert dict(bank.postings).get("cagnotte", 0) == levy
    assert dict(bank.postings).get("banker", 0) == bank_credit
    for p in payouts:
        assert sum(a for _, a in p.postings) == 0


def test_levy_never_exceeds_the_win() -> None:
    """With ceiling rounding a 1-cent win would round to a 10-cent levy; the house takes at most the win."""
    cfg = VARIANT.config(commission_rounding="ceil")
    result = engine.resolve(cfg, BANKER_WINS)
    payouts = VARIANT.settle(result, [w("bank", "bank", 5, "banker"), w("p", "player", 1)], cfg, ACCOUNTS)
    assert payouts[0].commission_minor == 1


def test_bank_account_required() -> None:
    """A player-banked coup cannot be settled without the table's bank account to play against."""
    result = engine.resolve(VARIANT.config(), BANKER_WINS)
    accounts = Accounts(escrow="escrow", house="house", commission="cagnotte")
    with pytest.raises(DomainError) as err:
        VARIANT.settle(result, [w("bank", "bank", 50, "banker")], VARIANT.config(), accounts)
    assert err.value.reason is Reason.BAD_CONFIG


@pytest.mark.parametrize(
    ("cards", "loser", "winner"),
    [
        (BANKER_WINS, ("escrow", -700), ("table:bank", 700)),
        (PONTE_WINS, ("escrow", -700), ("table:bank", -700)),
    ],
)
def test_punters_play_against_the_bank(
    cards: list[str], loser: tuple[str, int], winner: tuple[str, int]
) -> None:
    """Punters lose to and win from the table's bank account; the bank's payout settles it to zero."""
    result = engine.resolve(VARIANT.config(), cards)
    wagers = [w("bank", "bank", 5000, "banker"), w("p1", "player", 700)]
    bank, punter = VARIANT.settle(result, wagers, VARIANT.config(), ACCOUNTS)
    assert loser in punter.postings
    assert winner in punter.postings
    assert dict(bank.postings)["table:bank"] == -winner[1]
    assert dict(bank.postings)["escrow"] == -5000


# --- conservation -----------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    cards=CARDS,
    strategy=st.sampled_from(sorted(CheminDeFer().strategies())),
    bank=st.integers(1, 100_000),
    stakes=st.lists(st.integers(1, 50_000), max_size=6),
    rounding=st.sampled_from(["floor", "half_up", "ceil"]),
)
def test_conservation(cards: list[str], strategy: str, bank: int, stakes: list[int], rounding: str) -> None:
    """Over random shoes, strategies and stakes: every payout balances, the escrow is emptied exactly, the
    money out equals the money in, and each punter gets what an independent reckoning says."""
    cfg = VARIANT.config(commission_rounding=rounding)
    result = engine.resolve(cfg, cards, strategy=VARIANT.strategies()[strategy])
    accepted = [w("bank", "bank", bank, "banker")]
    for i, s in enumerate(stakes):
        candidate = w(f"p{i}", "player", s)
        if VARIANT.accepts(cfg, accepted, candidate) is None:
            accepted.append(candidate)
    payouts = VARIANT.settle(result, accepted, cfg, ACCOUNTS)
    total_in = sum(x.stake_minor for x in accepted)
    flows: dict[str, int] = {}
    for p in payouts:
        assert sum(a for _, a in p.postings) == 0
        assert p.credit_minor >= 0
        assert sum(m for a, m in p.postings if a == p.account_id) == p.credit_minor
        assert p.postings, "every payout moves its stake out of escrow"
        assert {a for a, _ in p.postings} <= {"escrow", "table:bank", "cagnotte", p.account_id}
        for account, amount in p.postings:
            flows[account] = flows.get(account, 0) + amount
    assert flows.get("escrow", 0) == -total_in
    assert flows.get("table:bank", 0) == 0
    assert sum(p.credit_minor for p in payouts) + sum(p.commission_minor for p in payouts) == total_in
    punters = sum(x.stake_minor for x in accepted[1:])
    expected_each = {"player": 2, "banker": 0, "tie": 1}[result.outcome]
    for p in payouts[1:]:
        assert p.credit_minor == expected_each * p.stake_minor
    net = {"player": -punters, "banker": punters, "tie": 0}[result.outcome]
    assert payouts[0].credit_minor + payouts[0].commission_minor == bank + net
    assert 0 <= payouts[0].commission_minor <= max(net, 0)
