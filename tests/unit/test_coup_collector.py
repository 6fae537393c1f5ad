"""Replay's one-coup view (``replay --coup ID``): the coup folded into the core coup record, with what
each record adds beside it."""

from __future__ import annotations

from typing import Any

from services.audit.replay import CoupCollector
from services.core import topics
from services.core.envelope import Envelope, request

COUP = "T1/S1/1"
AT = "2026-01-01T00:00:00.000Z"


def _rec(type_: str, payload: dict[str, Any], event_id: str, topic: str = topics.TABLE_EVENTS) -> Envelope:
    return request(type_, topic, "T1", payload, event_id=event_id, occurred_at=AT, producer="t")


def _bet(bet_id: str, stake: int) -> dict[str, Any]:
    return {"bet_id": bet_id, "account_id": "player:1", "table_id": "T1", "coup_id": COUP, "spot": "player",
            "stake_minor": stake, "currency": "EUR"}  # fmt: skip


def _reserved(bet_id: str, stake: int) -> dict[str, Any]:
    postings = [
        {"account": "player:1", "amount_minor": -stake},
        {"account": "table:T1:escrow", "amount_minor": stake},
    ]
    return {"bet_id": bet_id, "table_id": "T1", "coup_id": COUP, "balance_before_minor": 10_000,
            "balance_after_minor": 10_000 - stake, "postings": postings}  # fmt: skip


def test_a_refused_bet_with_its_stake_reserved_is_shown_refused_not_as_a_bet() -> None:
    """A stake reserved for a bet the dealer then refused (betting closed) used to make the view fail
    (a bet without a stake in the totals): it is listed among the refused bets, with its reservation,
    and the totals count the accepted bets only."""
    c = CoupCollector(COUP)
    c.observe(_rec("StakeReserved", _reserved("b1", 300), "e1", topics.WALLET_EVENTS))
    c.observe(_rec("BetAccepted", _bet("b1", 300), "e2"))
    c.observe(_rec("StakeReserved", _reserved("b2", 700), "e3", topics.WALLET_EVENTS))
    refused = {**_bet("b2", 700), "reason": "betting_closed", "detail": "no betting window is open"}
    c.observe(_rec("BetRefused", refused, "e4"))
    view = c.to_dict()
    assert [b["bet_id"] for b in view["bets"]] == ["b1"]
    assert view["bets"][0]["stake_reserved"]["event_id"] == "e1" and view["bets"][0]["currency"] == "EUR"
    assert [(r["bet_id"], r["reason"], r["stake_reserved"]["event_id"]) for r in view["refused_bets"]] == [
        ("b2", "betting_closed", "e3")
    ]
    assert view["totals"]["bets"] == 1 and view["totals"]["stake_minor"] == 300


def test_cards_and_decisions_keep_their_order_records_and_cells() -> None:
    """Each card with its hand, shoe position, number and record; each decision with who made it and
    the rules' cell; the first record of a bet is the one shown."""
    c = CoupCollector(COUP)
    c.observe(_rec("BetAccepted", _bet("b1", 300), "e1"))
    c.observe(_rec("BetAccepted", {**_bet("b1", 999), "spot": "banker"}, "e2"))
    for n, (hand, card) in enumerate([("player", "9S"), ("banker", "4H")]):
        payload = {"table_id": "T1", "shoe_id": "S1", "coup_id": COUP, "hand": hand, "card": card,
                   "shoe_position": 10 + n}  # fmt: skip
        c.observe(_rec("CardDealt", payload, f"c{n}"))
    decision = {"table_id": "T1", "coup_id": COUP, "hand": "player", "choice": "stand", "decided_by": "d1",
                "cell": "5"}  # fmt: skip
    c.observe(_rec("DecisionMade", decision, "d"))
    view = c.to_dict()
    assert [(x["n"], x["hand"], x["card"], x["shoe_position"], x["event_id"]) for x in view["cards"]] == [
        (1, "player", "9S", 10, "c0"), (2, "banker", "4H", 11, "c1"),
    ]  # fmt: skip
    assert view["decisions"] == [{"cell": "5", "choice": "stand", "decided_by": "d1", "event_id": "d",
                                  "hand": "player", "occurred_at": AT}]  # fmt: skip
    assert [(b["spot"], b["stake_minor"], b["accepted"]["event_id"]) for b in view["bets"]] == [
        ("player", 300, "e1")
    ]
    assert c.coup.dealt() == ["9S", "4H"]
