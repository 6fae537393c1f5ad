"""The baccarat rules engine: a pure state machine over hands, one module per variant."""

from services.core.baccarat.engine import (
    CoupResult,
    CoupState,
    Deal,
    Decide,
    HandResult,
    Resolved,
    Step,
    TableConfig,
    Variant,
    apply_card,
    apply_decision,
    next_step,
    resolve,
    start,
)
from services.core.baccarat.variants import VARIANTS, get_variant
from services.core.ledger import Accounts, Grade, Wager

__all__ = [
    "VARIANTS",
    "Accounts",
    "CoupResult",
    "CoupState",
    "Deal",
    "Decide",
    "Grade",
    "HandResult",
    "Resolved",
    "Step",
    "TableConfig",
    "Variant",
    "Wager",
    "apply_card",
    "apply_decision",
    "get_variant",
    "next_step",
    "resolve",
    "start",
]
