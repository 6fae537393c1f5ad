"""A table's figures, defined once: bets, handle, paid back, commission, win, hold and the player-banker's
share — what the demo's summary, the replay's report, the back office's read model, API, CSV and page
all print (each folds its records through :func:`of_record`).

Three parties meet at a table: the **house**, the **player-banker** (at a player-banked game: chemin de
fer, baccarat banque, french club, russian classic — the account that holds the bank, spot ``bank``,
and reserves money behind it on ``bank_cover``) and the **punters** (everyone else). Every figure
comes from the recorded events alone (``BetAccepted``, ``BetRefused``, ``CoupResolved`` and settlement's
``PayoutIssued`` with its postings), never from a variant's rules, so a replay and a read model agree
with the live pipeline by construction:

* ``bets``, ``handle_minor``: the accepted bets and their stakes; the banker's stake on ``bank`` is a
  bet ("une mise de départ"), his cover reserve (``bank_cover``) is not: it is money he sets aside
  from his wallet so that the bank can pay, never a wager, returned less what the bank owed.
* ``paid_minor``: everything credited back on bets (stakes returned on wins and pushes, winnings less
  commission; at a player-banked table the banker's payout too); the cover's return is not in it.
* ``reserve_used_minor``: what the cover reserve gave up to pay the bank's debts (its stakes less its
  returns).
* ``win_minor``: what the house kept, commission included (DESIGN §10): everything staked at the
  table (covers included) less everything credited back (covers included) = ``handle − paid +
  reserve_used``. Escrow and the bank account net to zero per coup, so this is exactly what the
  house's accounts (its bankroll and the commission account) took. At a player-banked game the house
  is no party to the bets: its win is its levy (chemin de fer's 5 %), zero where the text names none
  (french club).
* ``commission_minor``: the commission and levies the house took (what the payouts post to the
  table's commission account). The french club's 10 % on a winning banker bet goes to the
  player-banker, so it is in his share, not here.
* ``bank_minor``: the player-banker's share: what the bank's holders won (positive) or lost
  (negative) at the table, the commission paid to the bank included (his payouts on ``bank`` and
  ``bank_cover`` less their stakes). Zero at a house-banked table.
* the punters' result is then ``−(win + bank)``: money only moves between the three parties.
* ``hold``: win over handle; in basis points (integer, floor) for reports that must be exact, in
  percent for display.

Counted when recorded: a bet in ``handle`` when accepted, its credit in ``paid`` when its payout is
issued (a session that stops between the two shows the coup's stakes as won until it is settled).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import fields
from typing import Any, Final

from services.core import topics
from services.core.baccarat.variants.french_club import BANK_SPOT, COVER_SPOT
from services.core.ledger import table_accounts
from services.core.values import immutable

__all__ = [
    "BANK_SPOT", "COUNTED", "COUNTERS", "COVER_SPOT", "NOTHING", "Figures", "fold", "of_payout", "of_record",
]  # fmt: skip

COUNTED: Final = frozenset({"BetAccepted", "BetRefused", "CoupResolved", "PayoutIssued"})
"""The record types that move a figure."""


@immutable
class Figures:
    """The counters of one table (or one table's day or shift): all integers, added field by field.

    The derived figures (:attr:`win_minor`, :attr:`hold_bps`, :attr:`hold_pct`) are properties, so they
    can never disagree with the counters (see the module docstring for what each is)."""

    coups: int = 0
    bets: int = 0
    refused: int = 0
    handle_minor: int = 0
    paid_minor: int = 0
    commission_minor: int = 0
    reserve_used_minor: int = 0
    bank_minor: int = 0

    def __add__(self, other: Figures) -> Figures:
        return Figures(*(getattr(self, n) + getattr(other, n) for n in COUNTERS))

    @property
    def win_minor(self) -> int:
        """What the house kept, commission included: all staked less all credited back."""
        return self.handle_minor - self.paid_minor + self.reserve_used_minor

    @property
    def punters_minor(self) -> int:
        """What the punters (every bettor but the player-banker) won (positive) or lost in all."""
        return -(self.win_minor + self.bank_minor)

    @property
    def hold_bps(self) -> int:
        """Win over handle in basis points, floored (0 without handle)."""
        return self.win_minor * 10_000 // self.handle_minor if self.handle_minor else 0

    @property
    def hold_pct(self) -> float:
        """Win over handle in percent, rounded to 4 places (display only; money stays integer)."""
        return round(100.0 * self.win_minor / self.handle_minor, 4) if self.handle_minor else 0.0

    def counted(self) -> Iterator[tuple[str, int]]:
        """The counters this value moves, ``(name, amount)`` (a record moves one to three of them)."""
        for name in COUNTERS:
            value = getattr(self, name)
            if value:
                yield name, value

    def to_dict(self) -> dict[str, Any]:
        """The counters and the derived figures, by name (the fields every report prints)."""
        return {
            "coups": self.coups, "bets": self.bets, "refused": self.refused,
            "handle_minor": self.handle_minor, "paid_minor": self.paid_minor,
            "commission_minor": self.commission_minor, "win_minor": self.win_minor,
            "hold_pct": self.hold_pct, "bank_minor": self.bank_minor,
            "reserve_used_minor": self.reserve_used_minor,
        }  # fmt: skip


COUNTERS: Final = tuple(f.name for f in fields(Figures))
"""The stored counters of :class:`Figures`, in order (a read model keeps one column each)."""

NOTHING: Final = Figures()
"""No figures."""


def _house_commission(payload: Mapping[str, Any]) -> int:
    account = table_accounts(str(payload["table_id"])).commission
    total = 0
    for posting in payload.get("postings") or ():
        if posting["account"] == account:
            total += int(posting["amount_minor"])
    return total


def of_payout(payload: Mapping[str, Any]) -> Figures:
    """What one ``PayoutIssued`` (on the wallet requests) adds to its table's figures."""
    spot = payload["spot"]
    stake, credit = int(payload["stake_minor"]), int(payload["credit_minor"])
    commission = _house_commission(payload)
    if spot == COVER_SPOT:
        used = stake - credit
        return Figures(reserve_used_minor=used, bank_minor=-used, commission_minor=commission)
    bank = credit - stake if spot == BANK_SPOT else 0
    return Figures(paid_minor=credit, commission_minor=commission, bank_minor=bank)


def of_record(topic: str, kind: str, payload: Mapping[str, Any]) -> Figures | None:
    """What one record adds to its table's figures (``None``: nothing; the table is
    ``payload["table_id"]``). A ``PayoutIssued`` counts on the wallet requests only, where settlement
    writes it once (the wallet's events repeat its money as transfers)."""
    if kind == "BetAccepted":
        if payload.get("spot") == COVER_SPOT:
            return None  # a reserve, not a bet
        return Figures(bets=1, handle_minor=int(payload["stake_minor"]))
    if kind == "BetRefused":
        return Figures(refused=1) if payload.get("spot") != COVER_SPOT else None
    if kind == "CoupResolved":
        return Figures(coups=1)
    if kind == "PayoutIssued" and topic == topics.WALLET_REQUESTS:
        return of_payout(payload)
    return None


def fold(records: Iterable[tuple[str, str, Mapping[str, Any]]]) -> dict[str, Figures]:
    """Every table's figures from ``(topic, type, payload)`` records, by table id (sorted)."""
    tables: dict[str, Figures] = {}
    for topic, kind, payload in records:
        add = of_record(topic, kind, payload)
        if add is not None:
            table_id = str(payload["table_id"])
            tables[table_id] = tables.get(table_id, NOTHING) + add
    return dict(sorted(tables.items()))
