"""The per-table summaries of the demo and of the replay count wagers, not a french club banker's cover
(a reserve of his own money for what he may owe, seed 000), so handle and hold % mean what a casino means."""

from __future__ import annotations

from services.cli.demo import summarise
from services.core.baccarat.variants.french_club import COVER_SPOT
from services.runtime.replay import replay
from services.simulation.simulator import Session, TableSpec
from tests.helpers.membus import MemBus

TABLE = "T05-french-club"


def test_a_bank_cover_is_neither_handle_nor_paid_and_the_win_is_what_the_house_kept() -> None:
    """Handle and bets count only the wagers; the house's win is every stake less every credit, covers
    included (what the covers gave up paid the bank's debts, not the house); the player-banker's share
    is his payouts less his stakes and covers; the replay's table row agrees."""
    bus = MemBus()
    Session(bus, seed=5).run([TableSpec(TABLE, "french_club")], 12)
    accepted = [e.payload for e in bus.log if e.type == "BetAccepted" and e.key == TABLE]
    covers = [p for p in accepted if p["spot"] == COVER_SPOT]
    wagers = [p for p in accepted if p["spot"] != COVER_SPOT]
    assert covers and wagers, "the session must exercise covers and wagers"
    payouts = [e.payload for e in bus.log if e.type == "PayoutIssued" and e.payload["table_id"] == TABLE]
    cover_stake = sum(p["stake_minor"] for p in covers)
    cover_credit = sum(p["credit_minor"] for p in payouts if p["spot"] == COVER_SPOT)

    summary = summarise(bus.log)[TABLE]
    assert summary.bets == len(wagers)
    assert summary.handle_minor == sum(p["stake_minor"] for p in wagers)
    everything = sum(p["stake_minor"] for p in accepted) - sum(p["credit_minor"] for p in payouts)
    assert summary.win_minor == everything == 0  # french club: the text names no levy
    assert summary.reserve_used_minor == cover_stake - cover_credit
    banker = {p["account_id"] for p in accepted if p["spot"] == "bank"}
    mine = [p for p in payouts if p["spot"] in ("bank", COVER_SPOT)]
    assert {p["account_id"] for p in mine} <= banker
    assert summary.bank_minor == sum(p["credit_minor"] - p["stake_minor"] for p in mine)
    row = next(t for t in replay(bus.log).to_dict()["tables"] if t["table_id"] == TABLE)
    assert (row["bets"], row["handle_minor"], row["paid_minor"], row["win_minor"], row["bank_minor"]) == (
        summary.bets,
        summary.handle_minor,
        summary.paid_minor,
        summary.win_minor,
        summary.bank_minor,
    )
