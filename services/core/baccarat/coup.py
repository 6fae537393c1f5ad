"""The coup record: what ``CoupResolved`` says of a coup, as the engine's :class:`CoupResult`.

The dealer writes a :class:`~services.core.contract.CoupResolved` from a :class:`CoupResult`; every
reader that needs the result back (settlement's payout stage, the monitor, audit, replay) rebuilds it
here, once, from the typed payload, never from the raw dict.
"""

from __future__ import annotations

from collections.abc import Sequence

from services.core.baccarat.engine import CoupResult, HandResult
from services.core.contract import CoupResolved


def result_of(resolved: CoupResolved, hand_order: Sequence[str]) -> CoupResult:
    """The :class:`CoupResult` a ``CoupResolved`` records, its hands in the variant's ``hand_order``
    (a hand the record does not hold is left out)."""
    hands = tuple(
        HandResult(name, resolved.hands[name].cards, resolved.hands[name].total)
        for name in hand_order
        if name in resolved.hands
    )
    return CoupResult(
        variant=resolved.variant,
        rules_version=resolved.rules_version,
        hands=hands,
        outcome=resolved.outcome,
        natural=resolved.natural,
        cards_used=sum(len(h.cards) for h in hands),
        decisions=tuple((d.hand, d.choice) for d in resolved.decisions),
        versus=tuple(resolved.versus.items()),
        events=resolved.events,
    )
