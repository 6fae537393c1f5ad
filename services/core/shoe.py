"""Deterministic, unbiased shuffling from a recorded seed, and the shoe commitment.

The algorithm (a contract: audit re-derives shoes years later with it, so never change it in place;
add a new ``SHUFFLE_ALGORITHM`` id instead):

1. **Byte stream.** Block ``i`` (``i`` = 0, 1, 2, …) is ``SHA-256(seed ‖ i as 8 bytes big-endian)``;
   the stream is the blocks concatenated. ``seed`` is 32 bytes (256 bits).
2. **Uniform index.** To draw an integer uniformly in ``[0, n)`` take the next 4 bytes as a big-endian
   unsigned 32-bit ``x``; let ``limit = 2**32 - (2**32 % n)``; if ``x >= limit`` reject it and take
   the next 4 bytes; otherwise return ``x % n``. Rejection removes modulo bias exactly.
3. **Fisher–Yates.** For ``i`` from ``len - 1`` down to ``1``: ``j = uniform(i + 1)``; swap ``i, j``.

Same seed and same input order give the same output on every platform and Python version: only
SHA-256, integer arithmetic and list swaps are involved.

**Commitment.** Before the first card the dealer publishes ``SHA-256(seed ‖ order)`` where ``order``
is the shuffled cards joined by nothing (``"9SKH2D…"``, ASCII). After the shoe it reveals the seed;
anyone can recompute the order with :func:`shuffle` and check :func:`verify_commitment`.

**Burn and stop card** are per-variant configuration (:class:`ShoeRules`): punto banco burns by the
value of the first card turned (faces and tens burn 10), chemin de fer and baccarat banque burn none
here; the stop card sits ``stop_from_end`` cards before the end of the shoe, and the coup in which it
appears is completed and is the shoe's last ("aucun autre coup ne doit être donné", Arrêté du 14 mai
2007 art. 55-14 and 58): the dealer flags it in ``CoupResolved.stop_card_reached``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from services.core.cards import Card
from services.core.errors import DomainError, Reason

SHUFFLE_ALGORITHM: Final = "sha256-ctr/rejection/fisher-yates/v1"
SEED_BYTES: Final = 32


def _stream(seed: bytes) -> Iterator[int]:
    """Yield 32-bit unsigned integers from the SHA-256 counter-mode stream of ``seed``."""
    counter = 0
    while True:
        block = hashlib.sha256(seed + counter.to_bytes(8, "big")).digest()
        for k in range(0, 32, 4):
            yield int.from_bytes(block[k : k + 4], "big")
        counter += 1


def shuffle(seed: bytes, cards: Sequence[Card]) -> tuple[Card, ...]:
    """Return ``cards`` shuffled by the documented algorithm under ``seed`` (32 bytes)."""
    if len(seed) != SEED_BYTES:
        raise DomainError(Reason.BAD_CONFIG, f"a shoe seed is {SEED_BYTES} bytes, not {len(seed)}")
    out = list(cards)
    words = _stream(seed)
    for i in range(len(out) - 1, 0, -1):
        n = i + 1
        limit = (1 << 32) - ((1 << 32) % n)
        x = next(words)
        while x >= limit:
            x = next(words)
        j = x % n
        out[i], out[j] = out[j], out[i]
    return tuple(out)


def commitment(seed: bytes, order: Sequence[Card]) -> str:
    """SHA-256 (hex) of ``seed ‖ order``, the order written as the cards' characters end to end."""
    return hashlib.sha256(seed + "".join(order).encode("ascii")).hexdigest()


def verify_commitment(seed: bytes, cards: Sequence[Card], order: Sequence[Card], digest: str) -> bool:
    """True when ``order`` is what ``seed`` shuffles ``cards`` into and ``digest`` commits to it."""
    return tuple(order) == shuffle(seed, cards) and commitment(seed, order) == digest


@dataclass(frozen=True, slots=True)
class ShoeRules:
    """How a variant opens and ends a shoe.

    ``burn``: ``"first_card_value"`` (turn one card, burn as many more as its point value, tens and
    faces counting 10), or ``"none"``. ``stop_from_end``: the stop card's distance from the end.
    """

    burn: Literal["first_card_value", "none"] = "first_card_value"
    stop_from_end: int = 16


def burn_count(first_card: Card) -> int:
    """How many cards the punto banco burn discards after turning ``first_card`` (faces count 10)."""
    rank = first_card[0]
    return 10 if rank in "TJQK" else (1 if rank == "A" else int(rank))


def play_window(order: Sequence[Card], rules: ShoeRules) -> tuple[int, int]:
    """Return ``(first, stop)``: the shoe position of the first card in play and of the stop card.

    Positions are 0-based indexes into ``order``. Cards before ``first`` are burned.
    """
    first = 0
    if rules.burn == "first_card_value" and order:
        first = 1 + burn_count(order[0])
    stop = max(first, len(order) - rules.stop_from_end)
    return first, stop
