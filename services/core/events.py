"""Moved to :mod:`services.core.contract`; this re-export goes once audit imports the package (issue 11)."""

from services.core.contract import PAYLOADS, payload_of

__all__ = ["PAYLOADS", "payload_of"]
