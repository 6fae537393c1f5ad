"""A decision is bound to who may make it at that table (issue #28, docs/trust.md): the seated player of
that hand in that coup, through a terminal, or the dealer on their behalf, recorded as such. The dealer
runs guarded (as the composition root builds it), fed signed inbox records."""

from __future__ import annotations

from typing import Any

import pytest

from services.core import topics
from services.core.baccarat import get_variant
from services.core.envelope import Envelope, request
from services.core.ledger import Wager
from services.core.processor import initial_state, step
from services.core.trust import Principal, authenticate
from services.runtime.compose import Composition
from services.runtime.keyring import new_keyring

RING = new_keyring()
T = "T-cdf"
AT = "2026-11-22T20:00:00.000Z"
BANKER, PONTE, OTHER = "player:bank", "player:ponte", "player:small"
PLAYER_AT_5 = ["2S", "TS", "3H", "4D"]
"""Ponte 2+3 = 5 against the banker's T+4 = 4: the ponte's option at 5 is due."""


class Table:
    """A guarded dealer at one chemin de fer table with a smart shoe, its coup dealt to a decision."""

    def __init__(self) -> None:
        self.dealer = Composition(RING).dealer()
        self.state = initial_state(self.dealer)
        self.n = 0
        self.events: list[Envelope] = []
        self.send(Principal.OPERATOR, "OpenTable", {"variant": "chemin_de_fer", "currency": "EUR"})
        self.send(Principal.OPERATOR, "OpenShoe", {"shoe_id": "s1", "mode": "smart"})
        self.send(Principal.OPERATOR, "OpenBetting", {})
        coup = next(e for e in self.events if e.type == "BettingOpened").payload["coup_id"]
        self.coup_id = str(coup)
        for bet, account, spot, stake in (("b0", BANKER, "bank", 10_000), ("b1", PONTE, "player", 5_000),
                                          ("b2", OTHER, "player", 1_000)):  # fmt: skip
            self.send(Principal.SETTLEMENT, "BetPlaced", {
                "bet_id": bet, "account_id": account, "coup_id": self.coup_id, "spot": spot,
                "stake_minor": stake, "currency": "EUR",
            })  # fmt: skip
        self.send(Principal.OPERATOR, "CloseBetting", {})
        self.send(Principal.OPERATOR, "DealCoup", {})
        for card in PLAYER_AT_5:
            self.send(Principal.SHOE, "CardRead", {"card": card})
        assert self.events[-1].type == "DecisionRequested", self.events[-1]

    def send(self, who: Principal, type_: str, payload: dict[str, Any]) -> list[Envelope]:
        """One inbox record written and signed by ``who``: the dealer's outputs."""
        self.n += 1
        env = request(type_, topics.TABLE_INBOX, T, {"table_id": T, **payload}, event_id=f"e{self.n}",
                      occurred_at=AT, producer=who.value)  # fmt: skip
        out = step(self.dealer, self.state, authenticate(env, RING.key(who)))
        self.events.extend(out)
        return out

    def decide(self, who: Principal, **fields: Any) -> Envelope:
        """A ``Decision`` for the ponte's hand: the one output (made, refused or dead-lettered)."""
        out = self.send(
            who, "Decision", {"coup_id": self.coup_id, "hand": "player", "choice": "draw", **fields}
        )
        return out[0]


def test_the_seat_of_each_hand_is_who_plays_it() -> None:
    """The ponte is the biggest punter (first among equals), the banker hand the bank's holder; a tableau
    with no stake has no one seated."""
    cdf = get_variant("chemin_de_fer")
    wagers = [Wager("b0", BANKER, "bank", 100), Wager("b1", OTHER, "player", 10),
              Wager("b2", PONTE, "player", 30), Wager("b3", OTHER, "player", 15)]  # fmt: skip
    config = cdf.config()
    assert cdf.seat(config, wagers, "banker") == BANKER
    assert cdf.seat(config, wagers, "player") == PONTE
    assert cdf.seat(config, [*wagers, Wager("b4", OTHER, "player", 6)], "player") == OTHER  # 31 > 30
    banque = get_variant("baccarat_banque")
    assert banque.seat(banque.config(), [Wager("b0", BANKER, "bank", 100)], "left") is None
    russian = get_variant("russian_classic")
    seated = [Wager("b0", BANKER, "bank", 100), Wager("b1", OTHER, "punter_2", 5)]
    assert russian.seat(russian.config(), seated, "punter_2") == OTHER


def test_the_seated_player_decides_through_a_terminal_recorded_by_name() -> None:
    """The ponte's own decision from a terminal is recorded with the ponte's account."""
    made = Table().decide(Principal.TERMINAL, decided_by=PONTE)
    assert (made.type, made.payload["decided_by"]) == ("DecisionMade", PONTE)


@pytest.mark.parametrize("claimed", [None, "dealer", f"dealer:{PONTE}"])
def test_the_dealer_decides_on_the_seated_players_behalf(claimed: str | None) -> None:
    """The operator's decision is recorded as the dealer's on behalf of the seated player."""
    fields = {} if claimed is None else {"decided_by": claimed}
    made = Table().decide(Principal.OPERATOR, **fields)
    assert (made.type, made.payload["decided_by"]) == ("DecisionMade", f"dealer:{PONTE}")


@pytest.mark.parametrize(
    ("who", "fields", "reason"),
    [
        (Principal.TERMINAL, {"decided_by": OTHER}, "not_seated"),  # a punter, not the ponte
        (Principal.TERMINAL, {"decided_by": BANKER}, "not_seated"),  # the banker deciding the ponte's hand
        (Principal.TERMINAL, {"decided_by": "strategy:always_draw"}, "not_seated"),
        (Principal.OPERATOR, {"decided_by": f"dealer:{OTHER}"}, "not_seated"),
        (Principal.TERMINAL, {"decided_by": PONTE, "coup_id": "another-coup"}, "wrong_coup"),
        (Principal.TERMINAL, {"decided_by": PONTE, "hand": "banker"}, "decision_not_due"),
    ],
)  # fmt: skip
def test_anyone_else_is_refused_and_the_coup_waits(
    who: Principal, fields: dict[str, Any], reason: str
) -> None:
    """A decision by someone not seated at that hand, for another coup or for a hand not due is refused
    with its reason; the coup still waits for its real decision, which the ponte then makes."""
    table = Table()
    refused = table.decide(who, **fields)
    assert (refused.type, refused.payload["reason"]) == ("CommandRefused", reason)
    assert table.decide(Principal.TERMINAL, decided_by=PONTE).type == "DecisionMade"


@pytest.mark.parametrize(
    ("who", "fields"),
    [(Principal.TERMINAL, {}), (Principal.TERMINAL, {"decided_by": "dealer"}),
     (Principal.TERMINAL, {"decided_by": f"dealer:{PONTE}"}), (Principal.OPERATOR, {"decided_by": PONTE})],
)  # fmt: skip
def test_a_principal_claiming_the_others_form_is_not_permitted(
    who: Principal, fields: dict[str, Any]
) -> None:
    """A terminal cannot claim to be the dealer, nor the operator a player: dead letter ``not_permitted``."""
    table = Table()
    dead = table.decide(who, **fields)
    assert (dead.type, dead.payload["reason"]) == ("DeadLetter", "not_permitted")
    assert table.decide(Principal.TERMINAL, decided_by=PONTE).type == "DecisionMade"
