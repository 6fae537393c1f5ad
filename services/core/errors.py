"""Domain errors with stable, machine-readable reason codes.

Reason codes are part of the event contract: they appear in refusal events, dead-letter records and
audit findings, and outside tools match on them. Add codes; never rename or reuse one.
"""

from __future__ import annotations

from services.core.contract.reasons import Reason

__all__ = ["DomainError", "Reason"]


class DomainError(Exception):
    """A refusal by the core: a reason code plus a human sentence.

    The core raises it instead of returning a wrong result; shells turn it into a refusal event,
    a dead-letter record or a CLI error line.
    """

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(f"{reason.value}: {message}")
        self.reason = reason
        self.message = message
