"""Cards, the seeded shuffle and the shoe commitment."""

from __future__ import annotations

import hashlib
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.core.cards import deck, hand_total, parse_card, parse_cards, point, shoe_cards
from services.core.errors import DomainError, Reason
from services.core.shoe import (
    ShoeRules,
    burn_count,
    commitment,
    play_window,
    shuffle,
    verify_commitment,
)

SEED_ZERO = bytes(32)
SEED_NAMED = hashlib.sha256(b"casino-ledger").digest()


@pytest.mark.parametrize(
    ("text", "card"),
    [("9S", "9S"), ("th", "TH"), ("10D", "TD"), (" ac ", "AC"), ("KC", "KC")],
)
def test_parse_card_normalises(text: str, card: str) -> None:
    """Input may write the ten as 10 and use lower case; the canonical form is rank+suit."""
    assert parse_card(text) == card


@pytest.mark.parametrize("text", ["1C", "9X", "", "10", "AS1", "ZZ", "11H"])
def test_parse_card_refuses_unknown(text: str) -> None:
    """Anything that is not a card is refused with the UNKNOWN_CARD reason."""
    with pytest.raises(DomainError) as err:
        parse_card(text)
    assert err.value.reason is Reason.UNKNOWN_CARD


@pytest.mark.parametrize(
    ("rank", "value"),
    [("A", 1), ("2", 2), ("3", 3), ("4", 4), ("5", 5), ("6", 6), ("7", 7), ("8", 8), ("9", 9),
     ("T", 0), ("J", 0), ("Q", 0), ("K", 0)],
)  # fmt: skip
def test_point_values(rank: str, value: int) -> None:
    """Seed 002: tens and faces count zero, the ace one, the others their face value."""
    assert point(rank + "H") == value


def test_seed_examples() -> None:
    """Seed 000: "le banquier reçoit un 8 et un 9 (8+9 = 17) : sa main vaut 7 points ; le ponte reçoit
    un 5 et un 5 : sa main vaut 0"; seed 003: "un Roi, un 10 et un 8, votre main vaudra 8 points"."""
    assert hand_total(parse_cards("8S 9H")) == 7
    assert hand_total(parse_cards("5S 5H")) == 0
    assert hand_total(parse_cards("KS 10H 8D")) == 8


@given(st.lists(st.sampled_from(deck()), min_size=0, max_size=6))
def test_total_is_sum_mod_10(cards: list[str]) -> None:
    """A hand's total is the sum of its point values modulo 10."""
    assert hand_total(cards) == sum(point(c) for c in cards) % 10


def test_shoe_composition() -> None:
    """A shoe of n decks holds each of the 52 cards exactly n times."""
    for n in (1, 6, 8):
        counts = Counter(shoe_cards(n))
        assert len(counts) == 52
        assert set(counts.values()) == {n}
    with pytest.raises(DomainError):
        shoe_cards(9)


def _reference_shuffle(seed: bytes, cards: list[str]) -> list[str]:
    """An independent, naive rendering of the documented algorithm (bytes buffer, then FY)."""
    buf = b"".join(hashlib.sha256(seed + i.to_bytes(8, "big")).digest() for i in range(64))
    words = [int.from_bytes(buf[k : k + 4], "big") for k in range(0, len(buf), 4)]
    out, w = list(cards), 0
    for i in range(len(out) - 1, 0, -1):
        n = i + 1
        while words[w] >= 2**32 - 2**32 % n:
            w += 1
        j = words[w] % n
        w += 1
        out[i], out[j] = out[j], out[i]
    return out


@pytest.mark.parametrize("seed", [SEED_ZERO, SEED_NAMED, bytes(range(32))])
def test_shuffle_matches_reference(seed: bytes) -> None:
    """The shuffle equals an independent rendering of the algorithm in the module docstring."""
    assert list(shuffle(seed, deck())) == _reference_shuffle(seed, list(deck()))


@pytest.mark.parametrize(
    ("seed", "first_twelve"),
    [
        (SEED_ZERO, "9C 9H JH QH 2H 2D 6H KD 5H 4C TS QC"),
        (SEED_NAMED, "5D 3H 6C 5S KC 8S 9S 8C 2S TD QC KH"),
    ],
)
def test_shuffle_is_pinned(seed: bytes, first_twelve: str) -> None:
    """The algorithm is a contract: these orders were recorded once and must never change, on any
    platform or Python version (audit re-derives shoes years later)."""
    assert " ".join(shuffle(seed, deck())[:12]) == first_twelve


def test_shuffle_is_a_permutation() -> None:
    """A shuffled 8-deck shoe holds exactly the cards it was given."""
    cards = shoe_cards(8)
    assert Counter(shuffle(SEED_NAMED, cards)) == Counter(cards)


def test_shuffle_refuses_short_seed() -> None:
    """A seed is 256 bits; anything else is refused."""
    with pytest.raises(DomainError):
        shuffle(b"short", deck())


def test_shuffle_is_uniform() -> None:
    """Over 6,000 fixed seeds, every card of a 6-card list lands in every position about equally
    often: chi-squared over the 36 cells stays under 70.0 (35 degrees of freedom, p ≈ 0.0005), and
    the seed list is fixed, so the test cannot flake."""
    cards = ["A", "B", "C", "D", "E", "F"]
    cells: Counter[tuple[int, str]] = Counter()
    trials = 6000
    for i in range(trials):
        seed = hashlib.sha256(i.to_bytes(4, "big")).digest()
        for pos, card in enumerate(shuffle(seed, cards)):
            cells[(pos, card)] += 1
    expected = trials / 6
    chi2 = sum((cells[(p, c)] - expected) ** 2 / expected for p in range(6) for c in cards)
    assert chi2 < 70.0


def test_commitment_round_trip() -> None:
    """The revealed seed re-derives the committed order; any other seed or order fails."""
    cards = shoe_cards(1)
    order = shuffle(SEED_NAMED, cards)
    digest = commitment(SEED_NAMED, order)
    assert digest == hashlib.sha256(SEED_NAMED + "".join(order).encode()).hexdigest()
    assert verify_commitment(SEED_NAMED, cards, order, digest)
    assert not verify_commitment(SEED_ZERO, cards, order, digest)
    swapped = (order[1], order[0], *order[2:])
    assert not verify_commitment(SEED_NAMED, cards, swapped, digest)


@pytest.mark.parametrize(("card", "burn"), [("AS", 1), ("5H", 5), ("9D", 9), ("TC", 10), ("KS", 10)])
def test_burn_by_first_card(card: str, burn: int) -> None:
    """Punto banco burns as many cards as the first card's value, tens and faces counting ten."""
    assert burn_count(card) == burn
    first, stop = play_window([card, *["2S"] * 100], ShoeRules("first_card_value", 16))
    assert (first, stop) == (1 + burn, 101 - 16)


def test_no_burn() -> None:
    """Without a burn rule the first card is in play."""
    assert play_window(["2S"] * 50, ShoeRules("none", 10)) == (0, 40)
