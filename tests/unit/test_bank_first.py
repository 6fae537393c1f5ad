"""``ledger.bank_first``: the player-held bank bets first and once (French club, Russian classic, which
each wrote this block out before issue #11)."""

from __future__ import annotations

import pytest

from services.core.baccarat import get_variant
from services.core.ledger import Wager, bank_first

BANK = Wager("b0", "banker:1", "bank", 10_000)
PUNTER = Wager("b1", "punter:1", "punto", 1_000)


def test_the_bank_first_and_once() -> None:
    """The bank alone first: accepted. A second bank: ``bank_taken``. A bank after punters, or a punter
    before the bank: ``bank_cannot_cover``. A punter after the bank: go on, against that bank."""
    assert bank_first([], BANK) == (None, None)
    assert bank_first([BANK], Wager("b2", "banker:2", "bank", 5_000)) == ("bank_taken", None)
    assert bank_first([PUNTER], BANK) == ("bank_cannot_cover", None)
    assert bank_first([], PUNTER) == ("bank_cannot_cover", None)
    assert bank_first([BANK, PUNTER], Wager("b3", "punter:2", "punto", 500)) == (None, BANK)
    other = Wager("b4", "x", "other_bank", 1)  # the bank's spot is the caller's
    assert bank_first([BANK], other, bank_spot="other_bank") == ("bank_cannot_cover", None)


@pytest.mark.parametrize("variant", ["french_club", "russian_classic"])
def test_the_player_banked_variants_answer_as_bank_first(variant: str) -> None:
    """Each variant's ``accepts`` gives ``bank_first``'s refusal whenever it refuses, on its own spots."""
    game = get_variant(variant)
    config = game.config()
    spot = next(s for s in game.spots(config) if s not in ("bank", "bank_cover"))
    bank = Wager("b0", "banker:1", "bank", 10_000)
    punter = Wager("b1", "punter:1", spot, 1_000)
    assert game.accepts(config, [], bank) is None
    assert game.accepts(config, [bank], Wager("b2", "banker:2", "bank", 5_000)) == "bank_taken"
    assert game.accepts(config, [punter], bank) == "bank_cannot_cover"
    assert game.accepts(config, [], punter) == "bank_cannot_cover"
    assert game.accepts(config, [bank], punter) is None
    assert game.accepts(config, [bank], Wager("b3", "banker:1", spot, 1_000)) == "bank_taken"
