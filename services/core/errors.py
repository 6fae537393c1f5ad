"""Domain errors with stable, machine-readable reason codes.

Reason codes are part of the event contract: they appear in refusal events, dead-letter records and
audit findings, and outside tools match on them. Add codes; never rename or reuse one.
"""

from __future__ import annotations

from services.core.reasons import DomainError, Reason

__all__ = ["DomainError", "Reason"]
