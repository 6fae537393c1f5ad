"""Baccarat banque (à deux tableaux): two punter hands against a permanent banker, the bank and the levy.

Authority: Arrêté du 14 mai 2007 (etalab/lois-non-codifiees-et-reglements-francais,
arrete/2007/arrete-du-14-mai-2007-intd0754510a/titre-iii/chapitre-iii/), art. 58 (decks, stop card),
59 (levy rounding), 60 (2 % limitée, 1.25 % ouverte), 61 (banque ouverte), 62 (levy base); seed 004 and
docs/architecture.md for the free banker and the option at 5.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.core.baccarat import engine
from services.core.baccarat.engine import Deal, Decide, Resolved, TableConfig
from services.core.baccarat.variants import get_variant
from services.core.baccarat.variants.baccarat_banque import VARIANT, BaccaratBanque
from services.core.cards import deck
from services.core.errors import DomainError, Reason
from services.core.ledger import Accounts, Wager

ACCOUNTS = Accounts(escrow="escrow", house="house", commission="cagnotte", bank="table:bank")
RANK_OF_VALUE = "KA23456789"  # a card rank for each point value 0..9


def card(value: int, suit: str = "S") -> str:
    """A card worth ``value`` points."""
    return RANK_OF_VALUE[value] + suit


def two(total: int, suit: str) -> tuple[str, str]:
    """Two cards worth ``total``: a king and a card of that value."""
    return ("K" + suit, card(total, suit))


def deal(right: tuple[str, str], left: tuple[str, str], banker: tuple[str, str]) -> list[str]:
    """The six opening cards in deal order: right, left, banker, right, left, banker."""
    return [right[0], left[0], banker[0], right[1], left[1], banker[1]]


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
    """The registry finds the module's VARIANT under its id, player-banked, with three hands."""
    assert get_variant("baccarat_banque") is VARIANT
    assert VARIANT.house_banked is False
    assert VARIANT.rules_version.startswith("baccarat_banque/")
    assert VARIANT.hands(VARIANT.config()) == ("right", "left", "banker")
    assert VARIANT.default_strategy in VARIANT.strategies()


@pytest.mark.parametrize(("decks", "bps"), [(3, 200), (6, 125)])
def test_decks_and_levy(decks: int, bps: int) -> None:
    """Art. 58: "trois jeux [...] pour la banque dite "limitée" et six jeux [...] pour la banque dite
    "ouverte""; art. 60: the levy is "2 % [...] si la banque est limitée, et 1,25 % si elle est ouverte"."""
    cfg = VARIANT.config(decks=decks)
    assert (cfg.decks, cfg.commission_bps, cfg.commission_rounding) == (decks, bps, "half_up")


@pytest.mark.parametrize("decks", [1, 2, 4, 8])
def test_other_decks_refused(decks: int) -> None:
    """Art. 58 knows only 3 and 6 decks at the baccara à deux tableaux."""
    with pytest.raises(DomainError) as err:
        VARIANT.config(decks=decks)
    assert err.value.reason is Reason.BAD_CONFIG


def test_stop_card() -> None:
    """Art. 58: the stop card is placed "avant les dix dernières cartes au baccara à deux tableaux"."""
    assert VARIANT.shoe_rules.stop_from_end == 10
    assert VARIANT.shoe_rules.burn == "none"


def test_deal_order() -> None:
    """Cards go one at a time to the right tableau, the left tableau and the banker, twice."""
    result = engine.resolve(VARIANT.config(), ["6S", "7H", "KD", "KC", "KH", "7D"], [("banker", "stand")])
    assert result.hand("right").cards == ("6S", "KC")
    assert result.hand("left").cards == ("7H", "KH")
    assert result.hand("banker").cards == ("KD", "7D")


# --- each tableau ------------------------------------------------------------------------------------

TABLEAU_RULE = [
    # each tableau "has the option at 5" (docs/architecture.md); draws on 0–4, stands on 6–7, natural on 8–9
    (0, "draw"), (1, "draw"), (2, "draw"), (3, "draw"), (4, "draw"),
    (5, "option"),
    (6, "stand"), (7, "stand"),
    (8, "natural"), (9, "natural"),
]  # fmt: skip
TABLEAU_ROWS = [(tab, total, rule) for tab in ("right", "left") for total, rule in TABLEAU_RULE]


@pytest.mark.parametrize(("tab", "total", "rule"), TABLEAU_ROWS)
def test_tableau_rule(tab: str, total: int, rule: str) -> None:
    """Each tableau draws on 0–4, chooses at 5, stands on 6–7 and 8–9 (the other stands on 6, banker 7)."""
    hand, other = two(total, "S"), two(6, "H")
    cards = deal(hand, other, two(7, "D")) if tab == "right" else deal(other, hand, two(7, "D"))
    step = play(VARIANT.config(), cards)
    if rule == "draw":
        assert step == Deal(tab)
    elif rule == "option":
        assert step == Decide(tab, cell="player_option_5")
    else:
        assert step == Decide("banker", cell="banker_free")
        result = engine.resolve(VARIANT.config(), cards, [("banker", "stand")])
        assert len(result.hand(tab).cards) == 2
        assert result.natural is (rule == "natural")


@pytest.mark.parametrize("banker", range(8))
def test_banker_free(banker: int) -> None:
    """Seed 004 / docs/architecture.md: "banker free to draw or stand" on every total that is not a
    natural."""
    step = play(VARIANT.config(), deal(two(6, "S"), two(7, "H"), two(banker, "D")))
    assert step == Decide("banker", cell="banker_free")


@pytest.mark.parametrize("banker", [8, 9])
def test_banker_natural(banker: int) -> None:
    """A banker's natural ends the coup ("abattage"): neither tableau draws, even on 0."""
    step = play(VARIANT.config(), deal(two(0, "S"), two(0, "H"), two(banker, "D")))
    assert isinstance(step, Resolved)
    assert step.result.natural is True
    assert step.result.cards_used == 6


def test_both_tableaux_naturals_banker_does_not_play() -> None:
    """With a natural on both tableaux nothing is left for the banker to play against."""
    step = play(VARIANT.config(), deal(two(8, "S"), two(9, "H"), two(3, "D")))
    assert isinstance(step, Resolved)
    assert dict(step.result.versus) == {"right": "win", "left": "win"}


def test_natural_tableau_settled_on_banker_two_cards() -> None:
    """A natural tableau is turned over at once: the banker's later draw (3 → 9) plays only the other."""
    cards = [*deal(two(8, "S"), two(0, "H"), two(3, "D")), "KC", "6C"]
    result = engine.resolve(VARIANT.config(), cards, [("banker", "draw")])
    assert result.hand("banker").total == 9
    assert dict(result.versus) == {"right": "win", "left": "lose"}
    assert result.outcome == "split"


def test_tableaux_decide_in_order() -> None:
    """The right tableau chooses before the left; a choice out of turn is DECISION_NOT_DUE."""
    cards = deal(two(5, "S"), two(5, "H"), two(7, "D"))
    assert play(VARIANT.config(), cards) == Decide("right", cell="player_option_5")
    assert play(VARIANT.config(), cards, [("right", "stand")]) == Decide("left", cell="player_option_5")
    state = engine.start(VARIANT.config())
    for c in cards:
        state = engine.apply_card(state, c)
    for hand in ("left", "banker"):
        with pytest.raises(DomainError) as err:
            engine.apply_decision(state, hand, "stand")
        assert err.value.reason is Reason.DECISION_NOT_DUE


@pytest.mark.parametrize(
    ("decisions", "due"),
    [
        ([], "right"),  # the right tableau's option at 5
        ([("right", "stand")], "banker"),  # the banker's free choice
    ],
)
def test_card_not_due_while_deciding(decisions: list[tuple[str, str]], due: str) -> None:
    """A card arriving while a decision is due is refused with CARD_NOT_DUE."""
    state = engine.start(VARIANT.config())
    for c in deal(two(5, "S"), two(6, "H"), two(7, "D")):
        state = engine.apply_card(state, c)
    for hand, choice in decisions:
        state = engine.apply_decision(state, hand, choice)
    step = engine.next_step(state)
    assert isinstance(step, Decide)
    assert step.hand == due
    with pytest.raises(DomainError) as err:
        engine.apply_card(state, "2C")
    assert err.value.reason is Reason.CARD_NOT_DUE


def test_decision_while_cards_due() -> None:
    """A decision while the opening cards are still due is refused with DECISION_NOT_DUE."""
    state = engine.apply_card(engine.start(VARIANT.config()), "5S")
    with pytest.raises(DomainError) as err:
        engine.apply_decision(state, "right", "draw")
    assert err.value.reason is Reason.DECISION_NOT_DUE


# --- outcome summary ---------------------------------------------------------------------------------

OUTCOMES = [
    # engine.CoupResult: "``banker`` if the banker beat every hand, ``punters`` if every hand beat the
    # banker, ``tie`` if all tied, ``split`` otherwise"
    ((0, 0, 9), {"right": "lose", "left": "lose"}, "banker"),
    ((9, 9, 8), {"right": "win", "left": "win"}, "punters"),
    ((8, 8, 8), {"right": "tie", "left": "tie"}, "tie"),
    ((9, 0, 8), {"right": "win", "left": "lose"}, "split"),
    ((0, 8, 8), {"right": "lose", "left": "tie"}, "split"),
]


@pytest.mark.parametrize(("totals", "versus", "outcome"), OUTCOMES)
def test_outcome_summary(totals: tuple[int, int, int], versus: dict[str, str], outcome: str) -> None:
    """``versus`` gives each tableau's result from its own side; ``outcome`` summarises."""
    r, l_, b = totals
    result = engine.resolve(VARIANT.config(), deal(two(r, "S"), two(l_, "H"), two(b, "D")))
    assert dict(result.versus) == versus
    assert result.outcome == outcome
    assert result.to_dict()["versus"] == versus


# --- strategies -------------------------------------------------------------------------------------

HOUSE_TABLEAU_BANKER = [(0, 3), (1, 3), (2, 3), (3, 3), (4, 3), (5, 3), (6, 2), (7, 2)]


@pytest.mark.parametrize(("banker", "cards_after"), HOUSE_TABLEAU_BANKER)
def test_house_tableau_banker(banker: int, cards_after: int) -> None:
    """``house_tableau``: the banker draws on 0–5 and stands on 6–7 (art. 55-14's banco rule when
    punto stood: "Refus" column)."""
    cards = [*deal(two(6, "S"), two(7, "H"), two(banker, "D")), "2C"]
    result = engine.resolve(VARIANT.config(), cards, strategy=VARIANT.strategies()["house_tableau"])
    assert len(result.hand("banker").cards) == cards_after


@pytest.mark.parametrize(("name", "count"), [("house_tableau", 3), ("always_draw", 3), ("always_stand", 2)])
def test_strategies_at_five(name: str, count: int) -> None:
    """At 5 ``house_tableau`` and ``always_draw`` draw (art. 55-14: punto "0-1-2-3-4-5 TIRER"),
    ``always_stand`` stands."""
    cards = [*deal(two(5, "S"), two(5, "H"), two(7, "D")), "2C", "3C", "4C"]
    result = engine.resolve(VARIANT.config(), cards, strategy=VARIANT.strategies()[name])
    assert len(result.hand("right").cards) == count
    assert len(result.hand("left").cards) == count


# --- the bank: accepts ------------------------------------------------------------------------------


def w(bet: str, spot: str, stake: int, account: str | None = None) -> Wager:
    """A wager on ``spot``."""
    return Wager(bet_id=bet, account_id=account or f"acct-{bet}", spot=spot, stake_minor=stake)


BANK = w("b", "bank", 1000)


@pytest.mark.parametrize(
    ("decks", "accepted", "wager", "reason"),
    [
        (3, [], w("p", "right", 100), "bank_cannot_cover"),
        (3, [BANK, w("p1", "right", 600)], w("p2", "left", 400), None),  # both tableaux count
        (3, [BANK, w("p1", "right", 600)], w("p2", "left", 401), "bank_cannot_cover"),
        (3, [BANK], w("p", "right", 151), None),
        (3, [BANK], w("b2", "bank", 5000), "bank_taken"),
        (3, [BANK], w("p", "player", 100), "unknown_spot"),
        (3, [BANK], w("p", "a_cheval", 100), "unknown_spot"),  # the regulation knows no bet on both
        (6, [BANK], w("p", "right", 150), "bad_amount"),  # art. 61: "multiples de 1 euro"
        (6, [BANK], w("p", "right", 100), None),
        (6, [BANK], w("p", "left", 1100), "bank_cannot_cover"),
    ],
)
def test_accepts(decks: int, accepted: list[Wager], wager: Wager, reason: str | None) -> None:
    """The stakes on both tableaux together never exceed the bank (art. 61: the banker must be able
    "payer tous les enjeux"); one bank per coup; whole euros at the banque ouverte."""
    assert VARIANT.accepts(VARIANT.config(decks=decks), accepted, wager) == reason


# --- the bank: settlement and the levy -----------------------------------------------------------------

BANKER_BOTH = deal(two(0, "S"), two(0, "H"), two(9, "D"))
RIGHT_LOSES_LEFT_WINS = deal(two(0, "S"), two(9, "H"), two(8, "D"))
RIGHT_LOSES_LEFT_TIES = deal(two(0, "S"), two(8, "H"), two(8, "D"))
PUNTERS_BOTH = deal(two(9, "S"), two(9, "H"), two(8, "D"))
ALL_TIE = deal(two(8, "S"), two(8, "H"), two(8, "D"))

SETTLEMENT = [
    # (decks, cards, right stakes, left stakes, right credits, left credits, bank result, win, levy, credit)
    # art. 62 1° a) "Du montant total des sommes misées par les pontes toutes les fois que le banquier
    # gagne sur les deux tableaux"
    (3, BANKER_BOTH, [1500], [700], [0], [0], "win", 2200, 40, 7160),  # 44 c → 40
    (3, BANKER_BOTH, [333, 1], [11], [0, 0], [0], "win", 345, 10, 5335),  # 6.9 c → 10
    (3, BANKER_BOTH, [250], [], [0], [], "win", 250, 10, 5240),  # 5 c → 10 (half up)
    (6, BANKER_BOTH, [1500], [700], [0], [0], "win", 2200, 30, 7170),  # 27.5 c → 30
    (6, BANKER_BOTH, [400], [], [0], [], "win", 400, 10, 5390),  # 5 c → 10
    # b) "De la différence entre le montant des sommes misées sur le tableau gagnant et le montant des
    # sommes misées sur le tableau perdant lorsque le banquier gagne sur un tableau et perd sur l'autre"
    (3, RIGHT_LOSES_LEFT_WINS, [1500], [700], [0], [1400], "win", 800, 20, 5780),  # 16 c → 20
    (6, RIGHT_LOSES_LEFT_WINS, [1500], [700], [0], [1400], "win", 800, 10, 5790),  # 10 c
    (3, RIGHT_LOSES_LEFT_WINS, [700], [1500], [0], [3000], "lose", 0, 0, 4200),  # no levy on a loss
    # c) "Du montant des sommes misées sur le tableau gagnant lorsque le banquier gagne sur un tableau et
    # est en carte sur l'autre"
    (3, RIGHT_LOSES_LEFT_TIES, [1500], [700], [0], [700], "win", 1500, 30, 6470),  # 30 c
    (6, RIGHT_LOSES_LEFT_TIES, [300], [100], [0], [100], "win", 300, 0, 5300),  # 3.75 c → 0
    (3, PUNTERS_BOTH, [1501], [699], [3002], [1398], "lose", 0, 0, 2800),
    (3, ALL_TIE, [333], [667], [333], [667], "push", 0, 0, 5000),
]


@pytest.mark.parametrize(
    ("decks", "cards", "right", "left", "right_credits", "left_credits", "bank_result", "bank_win", "levy",
     "bank_credit"),
    SETTLEMENT,
)  # fmt: skip
def test_settlement(
    decks: int, cards: list[str], right: list[int], left: list[int], right_credits: list[int],
    left_credits: list[int], bank_result: str, bank_win: int, levy: int, bank_credit: int,
) -> None:  # fmt: skip
    """The bank pays and collects per tableau, and pays the levy on its net win (art. 60, 62, 59)."""
    cfg = VARIANT.config(decks=decks)
    result = engine.resolve(cfg, cards)
    wagers = [
        w("bank", "bank", 5000, "banker"),
        *(w(f"r{i}", "right", s) for i, s in enumerate(right)),
        *(w(f"l{i}", "left", s) for i, s in enumerate(left)),
    ]
    for i, x in enumerate(wagers):
        assert VARIANT.accepts(cfg, wagers[:i], x) is None
    payouts = VARIANT.settle(result, wagers, cfg, ACCOUNTS)
    by_spot = {"right": [p.credit_minor for p in payouts if p.spot == "right"],
               "left": [p.credit_minor for p in payouts if p.spot == "left"]}  # fmt: skip
    assert by_spot == {"right": right_credits, "left": left_credits}
    bank = payouts[0]
    assert (bank.result, bank.win_minor, bank.commission_minor, bank.credit_minor) == (
        bank_result, bank_win, levy, bank_credit,
    )  # fmt: skip
    assert dict(bank.postings).get("cagnotte", 0) == levy
    for p in payouts:
        assert sum(a for _, a in p.postings) == 0


def test_bank_grade_direction() -> None:
    """The bank's grade gives only its direction: win when it beat both, lose when both beat it."""
    cfg = VARIANT.config()
    assert VARIANT.grade(engine.resolve(cfg, BANKER_BOTH), "bank", cfg).result == "win"
    assert VARIANT.grade(engine.resolve(cfg, PUNTERS_BOTH), "bank", cfg).result == "lose"
    assert VARIANT.grade(engine.resolve(cfg, RIGHT_LOSES_LEFT_WINS), "bank", cfg).result == "push"


# --- conservation -----------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    cards=st.lists(st.sampled_from(deck()), min_size=9, max_size=9, unique=True),
    strategy=st.sampled_from(sorted(BaccaratBanque().strategies())),
    decks=st.sampled_from([3, 6]),
    bank=st.integers(1, 100_000),
    stakes=st.lists(st.tuples(st.sampled_from(["right", "left"]), st.integers(1, 400)), max_size=8),
)
def test_conservation(
    cards: list[str], strategy: str, decks: int, bank: int, stakes: list[tuple[str, int]]
) -> None:
    """Over random shoes, strategies and stakes: every payout balances, the escrow is emptied exactly, the
    money out equals the money in, and each punter gets what an independent reckoning says."""
    cfg = VARIANT.config(decks=decks)
    result = engine.resolve(cfg, cards, strategy=VARIANT.strategies()[strategy])
    accepted = [w("bank", "bank", bank, "banker")]
    for i, (spot, units) in enumerate(stakes):
        candidate = w(f"p{i}", spot, units * 100)
        if VARIANT.accepts(cfg, accepted, candidate) is None:
            accepted.append(candidate)
    payouts = VARIANT.settle(result, accepted, cfg, ACCOUNTS)
    total_in = sum(x.stake_minor for x in accepted)
    escrow = bank_account = 0
    for p in payouts:
        assert sum(a for _, a in p.postings) == 0
        assert p.credit_minor >= 0
        assert sum(m for a, m in p.postings if a == p.account_id) == p.credit_minor
        assert p.postings, "every payout moves its stake out of escrow"
        assert {a for a, _ in p.postings} <= {"escrow", "table:bank", "cagnotte", p.account_id}
        escrow += sum(a for acct, a in p.postings if acct == "escrow")
        bank_account += sum(a for acct, a in p.postings if acct == "table:bank")
    assert escrow == -total_in
    assert bank_account == 0
    assert sum(p.credit_minor + p.commission_minor for p in payouts) == total_in
    versus = dict(result.versus)
    factor = {"win": 2, "tie": 1, "lose": 0}
    net = 0
    for x, p in zip(accepted[1:], payouts[1:], strict=True):
        assert p.credit_minor == factor[versus[x.spot]] * x.stake_minor
        net += x.stake_minor - p.credit_minor
    assert payouts[0].credit_minor + payouts[0].commission_minor == bank + net
    assert 0 <= payouts[0].commission_minor <= max(net, 0)
