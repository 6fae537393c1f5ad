"""Cards, point values and shoe compositions.

A card is a two-character string: rank then suit, ranks ``A 2 3 4 5 6 7 8 9 T J Q K`` and suits
``S H D C`` (``9S``, ``TH``). Input may write the ten as ``10`` and may use lower case; ``parse_card``
normalises. Strings keep cards cheap to hash, compare, log and put in JSON.

Point values (every seed text agrees, except where a variant says otherwise): ace 1, two to nine at
face value, ten and the faces 0; a hand's total is the sum modulo 10. Seed 001 (the Russian classic
game) counts the ace as a face ("каждая фигура (А, К, Д, В) считается за 10 очков"), so it passes
its own value table to :func:`hand_total`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Final

from services.core.errors import DomainError, Reason

Card = str

RANKS: Final = "A23456789TJQK"
SUITS: Final = "SHDC"

POINTS: Final[Mapping[str, int]] = {
    "A": 1, "2": 2, "3": 3, "4": 4, "5": 5, "6": 6, "7": 7, "8": 8, "9": 9,
    "T": 0, "J": 0, "Q": 0, "K": 0,
}  # fmt: skip
"""Point value of each rank in punto banco and most variants."""

CARD_POINTS: Final[Mapping[Card, int]] = {r + s: POINTS[r] for s in SUITS for r in RANKS}
"""Point value of each card, for the hot path (one dict lookup)."""

ALL_CARDS: Final = frozenset(CARD_POINTS)


def parse_card(text: str) -> Card:
    """Return the canonical form of one card written like ``9S``, ``th`` or ``10H``.

    Raises ``DomainError(UNKNOWN_CARD)`` for anything else, naming the offending text.
    """
    if not isinstance(text, str):
        raise DomainError(Reason.UNKNOWN_CARD, f"not a card: {text!r} (a card is text, e.g. 9S, TH, 10D)")
    raw = text.strip().upper()
    if raw.startswith("10") and len(raw) == 3:
        raw = "T" + raw[2]
    if raw not in ALL_CARDS:
        raise DomainError(Reason.UNKNOWN_CARD, f"not a card: {text!r} (expected e.g. 9S, TH, 10D)")
    return raw


def parse_cards(text: str | Iterable[str]) -> tuple[Card, ...]:
    """Parse a whitespace- or comma-separated card list (or an iterable of card strings)."""
    items = text.replace(",", " ").split() if isinstance(text, str) else list(text)
    return tuple(parse_card(item) for item in items)


def point(card: Card, values: Mapping[Card, int] = CARD_POINTS) -> int:
    """Point value of one card under ``values`` (punto banco values by default)."""
    return values[card]


def hand_total(cards: Iterable[Card], values: Mapping[Card, int] = CARD_POINTS) -> int:
    """Baccarat total of a hand: the sum of point values modulo 10."""
    return sum(values[c] for c in cards) % 10


def deck() -> tuple[Card, ...]:
    """One 52-card deck in canonical order (suits S, H, D, C; ranks A..K within each)."""
    return tuple(r + s for s in SUITS for r in RANKS)


def shoe_cards(decks: int) -> tuple[Card, ...]:
    """The unshuffled content of a shoe of ``decks`` 52-card decks, deck after deck."""
    if not 1 <= decks <= 8:
        raise DomainError(Reason.BAD_CONFIG, f"a shoe holds 1 to 8 decks, not {decks}")
    return deck() * decks


def check_shoe_holds(cards: Iterable[Card], decks: int) -> None:
    """Refuse a card order no shoe of ``decks`` decks can produce: a card seen more often than the
    shoe holds copies of it (``DomainError(CARD_NOT_IN_SHOE)``, naming the card)."""
    for card, seen in Counter(cards).items():
        if seen > decks:
            raise DomainError(
                Reason.CARD_NOT_IN_SHOE,
                f"{card} appears {seen} times, a shoe of {decks} deck(s) holds {decks} of it",
            )
