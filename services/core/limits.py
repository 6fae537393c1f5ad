"""Ceilings on amounts (docs/trust.md: nothing is unbounded). The sizes of records, strings and collections
are bounded where they are defined: :mod:`services.core.envelope` and :mod:`services.core.contract`."""

from __future__ import annotations

from typing import Final

AMOUNT_MAX_MINOR: Final = 100_000_000_000
"""The default ceiling of one amount a request may move (a stake, a deposit, a withdrawal): one
billion in major units. Beyond it a request is refused with ``amount_too_large`` — a typo or a forged
record, never a bet; an operator sets another ceiling (``CASINO_AMOUNT_MAX_MINOR``) up to
:data:`BALANCE_MAX_MINOR`."""

BALANCE_MAX_MINOR: Final = 2**53 - 1
"""The largest wallet balance: the largest integer every JSON reader (JavaScript's included) holds
exactly, so no consumer of the event contract ever rounds a balance. A deposit, refund or payout that
would take a wallet past it is refused with ``amount_too_large``."""
