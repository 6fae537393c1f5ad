"""Domain errors with stable, machine-readable reason codes.

Reason codes are part of the event contract: they appear in refusal events, dead-letter records and
audit findings, and outside tools match on them. Add codes; never rename or reuse one.
"""

from __future__ import annotations

from enum import StrEnum


class Reason(StrEnum):
    """Every stable reason code the core can give, grouped by where it arises."""

    # cards, shoes, the coup state machine
    UNKNOWN_CARD = "unknown_card"
    UNKNOWN_VARIANT = "unknown_variant"
    CARD_NOT_DUE = "card_not_due"
    DECISION_NOT_DUE = "decision_not_due"
    DECISION_REQUIRED = "decision_required"
    INVALID_CHOICE = "invalid_choice"
    COUP_NOT_RESOLVED = "coup_not_resolved"
    TOO_FEW_CARDS = "too_few_cards"
    SHOE_EXHAUSTED = "shoe_exhausted"
    BAD_CONFIG = "bad_config"
    UNKNOWN_SPOT = "unknown_spot"
    SHOE_COMMITMENT_MISMATCH = "shoe_commitment_mismatch"
    CARD_NOT_IN_SHOE = "card_not_in_shoe"

    # operator commands and bets refused by the dealer (business refusals: events, not errors)
    NO_TABLE = "no_table"
    TABLE_EXISTS = "table_exists"
    NO_SHOE = "no_shoe"
    SHOE_OPEN = "shoe_open"
    WRONG_PHASE = "wrong_phase"
    BETTING_CLOSED = "betting_closed"
    WRONG_COUP = "wrong_coup"
    UNDER_LIMIT = "under_limit"
    OVER_LIMIT = "over_limit"
    CURRENCY_MISMATCH = "currency_mismatch"
    DUPLICATE_BET = "duplicate_bet"
    BANK_CANNOT_COVER = "bank_cannot_cover"
    BANK_TAKEN = "bank_taken"

    # wallets and transfers
    INSUFFICIENT_FUNDS = "insufficient_funds"
    TRANSFER_ID_CONFLICT = "transfer_id_conflict"
    BAD_AMOUNT = "bad_amount"
    AMOUNT_TOO_LARGE = "amount_too_large"
    UNKNOWN_ACCOUNT = "unknown_account"
    WALLET_UNAVAILABLE = "wallet_unavailable"
    OPERATOR_WALLET = "operator_wallet"
    UNKNOWN_TYPE = "unknown_type"
    INVALID_PAYLOAD = "invalid_payload"
    INTERNAL_ERROR = "internal_error"
    UNDECODABLE = "undecodable"
    UNSUPPORTED_VERSION = "unsupported_version"

    # trust at the input (DESIGN §9, services.core.trust)
    UNAUTHENTICATED = "unauthenticated"
    NOT_PERMITTED = "not_permitted"
    KEY_MISMATCH = "key_mismatch"
    SEED_NOT_ALLOWED = "seed_not_allowed"


class DomainError(Exception):
    """A refusal by the core: a reason code plus a human sentence.

    The core raises it instead of returning a wrong result; shells turn it into a refusal event,
    a dead-letter record or a CLI error line.
    """

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(f"{reason.value}: {message}")
        self.reason = reason
        self.message = message
