"""The round hash the digest folds is SHA-256 of the canonical JSON of the round record, whichever way
it is encoded (in key order when the recorded parts allow it, else sorted)."""

from __future__ import annotations

import enum
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from services.audit.processor import CoupTrail, coup_hash, coup_record
from services.core.envelope import canonical, sha256_hex
from services.core.ledger import Payout

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=12,
)


class Hand(enum.StrEnum):
    BANKER = "banker"


def _trail(hands: Any, outcome: Any, extra: Any) -> CoupTrail:
    """A completed coup's trail: ``hands`` as recorded (verbatim, any JSON), the outcome and one payout
    field of any JSON (the round record reads what was recorded)."""
    trail = CoupTrail("T01", "T01/T01-S1/3", shoe_id="T01-S1", number=3)
    trail.card("player", "9S", 0)
    trail.card("banker", "4H", 1)
    trail.decision("player", "stand", "dealer")
    trail.bet("b2", "player:2", "banker", 500)
    trail.bet("b1", "player:1", "player", 1000)
    trail.hands, trail.outcome = hands, outcome
    for bet_id, wager in trail.bets.items():
        payout = Payout(bet_id, wager.account_id, wager.spot, wager.stake_minor, extra, 0, 0, 0, ())
        trail.recorded[bet_id], trail.paid_by[bet_id] = payout, f"e-{bet_id}"
    return trail


def _canonical_hash(trail: CoupTrail) -> str:
    return sha256_hex(canonical(coup_record(trail, "T01/T01-S1/3")))


@given(_json, _json, _json)
def test_round_hash_is_the_hash_of_the_canonical_record(hands: Any, outcome: Any, extra: Any) -> None:
    """Any recorded hands, outcome and payout field (dicts in any key order, nested) hash the same as
    the canonical JSON of the record."""
    trail = _trail(hands, outcome, extra)
    assert coup_hash(trail, "T01/T01-S1/3") == _canonical_hash(trail)


def test_unsorted_recorded_hands_are_sorted_like_canonical_json() -> None:
    """Hands recorded with their keys out of order still hash canonically (the sorting path)."""
    hands = {"player": {"total": 9, "cards": ["9S"]}, "banker": {"total": 4, "cards": ["4H"]}}
    trail = _trail(hands, "player", "win")
    assert coup_hash(trail, "T01/T01-S1/3") == _canonical_hash(trail)
    ordered = _trail({"banker": {"cards": ["4H"], "total": 4}, "player": {"cards": ["9S"], "total": 9}},
                     "player", "win")  # fmt: skip
    assert coup_hash(ordered, "T01/T01-S1/3") == coup_hash(trail, "T01/T01-S1/3")


def test_a_str_subclass_takes_the_canonical_path() -> None:
    """A value of a type the key-order check does not know (an enum) is encoded by canonical JSON."""
    trail = _trail({Hand.BANKER: {"cards": [], "total": 0}}, Hand.BANKER, "win")
    assert coup_hash(trail, "T01/T01-S1/3") == _canonical_hash(trail)
