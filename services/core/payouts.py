"""Moved to :mod:`services.core.ledger`; this name stays until audit imports the ledger (issue 11)."""

from services.core.ledger import table_accounts

__all__ = ["table_accounts"]
