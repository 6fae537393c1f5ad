"""The one vocabulary of reason codes: every stable code any part of casino-ledger writes or reports.

Codes are part of the event contract: they appear in refusal events, dead letters, audit findings,
monitor alerts and replay reports, and outside tools match on them. Add codes; never rename or reuse
one. Every code is a member of a ``StrEnum`` here and nowhere else; code elsewhere names the member,
never the bare string.

The enums, and the order that holds in each (TigerBeetle's result codes: when several codes apply,
the first one listed is the one given, because it is the first one checked):

* :class:`Reason` — every code the core can raise (:class:`DomainError`, here beside its codes), write in
  a dead letter or give an operator command (``CommandRefused``). Grouped by where it arises; within
  the dealer's and the wallet's groups the order is the order of the checks.
* :class:`RefusalReason` — a business refusal recorded as an event (``BetRefused``, ``BetRejected``…),
  in precedence order: the wallet stage checks first, then the dealer. Every value is also a
  :class:`Reason` value (checked below, at import).
* :class:`FindingReason` — what audit found wrong, in precedence order: the log's integrity first, then
  the shoe, the coup, the money.
* :class:`ReplayReason` — what only the regulatory replay finds about the log as a file (it reads what
  audit never sees: undecodable lines, repeated ids); its report uses these beside the
  :class:`FindingReason` codes, and orders a group of findings by :data:`ROOT_PRIORITY` (most specific
  cause first) rather than by precedence.
* :class:`Detector` — what the monitor detects (``AnomalyDetected.detector``), each in one
  :class:`Category` (:data:`CATEGORY`).
* :class:`Severity` — how urgent a finding or an alert is.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Final

__all__ = [
    "AUTH_REFUSALS",
    "CATEGORY",
    "INTEGRITY_REASONS",
    "ROOT_PRIORITY",
    "TREE_REASONS",
    "Category",
    "Detector",
    "DomainError",
    "FindingReason",
    "Reason",
    "RefusalReason",
    "ReplayReason",
    "Severity",
]


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

    # trust at the input (docs/trust.md, services.core.trust)
    UNAUTHENTICATED = "unauthenticated"
    NOT_PERMITTED = "not_permitted"
    KEY_MISMATCH = "key_mismatch"
    SEED_NOT_ALLOWED = "seed_not_allowed"

    # the boundary: what a permitted writer may name (docs/trust.md, services.core.boundary)
    TRANSFER_ID_NOT_OWN = "transfer_id_not_own"
    NOT_A_PLAYER_ACCOUNT = "not_a_player_account"
    NOT_SEATED = "not_seated"


class DomainError(Exception):
    """A refusal by the core: a reason code plus a human sentence.

    The core raises it instead of returning a wrong result; shells turn it into a refusal event,
    a dead-letter record or a CLI error line.
    """

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(f"{reason.value}: {message}")
        self.reason = reason
        self.message = message


class RefusalReason(StrEnum):
    """Why a bet, a withdrawal or a transfer was refused: a business outcome, recorded as an event.

    Listed in precedence order: when several apply, the first one listed is the one reported, because
    it is the first one checked. The wallet stage checks first (a bet must be funded before it reaches
    the table), then the dealer. ``currency_mismatch`` is checked at both: by the wallet against the
    wallet's currency, and again by the dealer (after ``duplicate_bet``) against the table's.
    Every value is also a :class:`services.core.errors.Reason` value: one vocabulary of codes.
    """

    TRANSFER_ID_CONFLICT = "transfer_id_conflict"
    """The transfer id was already used with other content (a retry with the same content is a no-op)."""
    AMOUNT_TOO_LARGE = "amount_too_large"
    """The amount is above the configured ceiling of one request, or would take the wallet's balance
    past the largest balance (:data:`services.core.limits.BALANCE_MAX_MINOR`)."""
    CURRENCY_MISMATCH = "currency_mismatch"
    """The request's currency is not the wallet's (or, at the dealer, not the table's)."""
    OPERATOR_WALLET = "operator_wallet"
    """A deposit or withdrawal in a currency whose balances the operator keeps (seamless wallet): the
    operator's own cashier moves that money, not ours."""
    INSUFFICIENT_FUNDS = "insufficient_funds"
    """The wallet cannot cover the stake or the withdrawal: no wallet goes negative."""
    UNKNOWN_ACCOUNT = "unknown_account"
    """Seamless wallet: the operator knows no such account."""
    WALLET_UNAVAILABLE = "wallet_unavailable"
    """Seamless wallet: the operator gave no definite answer to the debit within the betting window, so
    the debit was rolled back (whether or not the operator had applied it) and the bet never reached
    the table."""
    NO_TABLE = "no_table"
    """The bet names a table that is not open."""
    BETTING_CLOSED = "betting_closed"
    """No betting window is open at the table (a late bet): the stake is refunded."""
    WRONG_COUP = "wrong_coup"
    """The bet names a coup other than the one open for betting."""
    DUPLICATE_BET = "duplicate_bet"
    """A bet with this id is already in the coup."""
    UNKNOWN_SPOT = "unknown_spot"
    """The table's variant has no such spot."""
    UNDER_LIMIT = "under_limit"
    """The stake is below the spot's ``min_minor``."""
    OVER_LIMIT = "over_limit"
    """The stake is above the spot's ``max_minor``."""
    BAD_AMOUNT = "bad_amount"
    """Player-banked games: the stake is not a positive multiple of the table's stake unit (baccarat
    banque at 6 decks takes whole euros, art. 61)."""
    BANK_CANNOT_COVER = "bank_cannot_cover"
    """Player-banked games: the punters' stakes would exceed what the bank has put up."""
    BANK_TAKEN = "bank_taken"
    """Player-banked games: someone already holds the bank for this coup."""


class FindingReason(StrEnum):
    """What audit found wrong, in precedence order: integrity of the log first (nothing after a broken
    chain can be trusted), then the shoe, then the coup, then the money.
    """

    HASH_MISMATCH = "hash_mismatch"
    """A record's ``hash`` does not match the SHA-256 of its canonical content: it was edited."""
    SEQ_GAP = "seq_gap"
    """An event stream skipped one or more ``seq`` numbers: a record was deleted or is missing."""
    SEQ_DUPLICATE = "seq_duplicate"
    """An event stream repeated or went back in ``seq``: a record was replayed or reordered."""
    CHAIN_BROKEN = "chain_broken"
    """``prev_hash`` is not the hash of the previous event on that topic and key."""
    SEQ_REORDERED = "seq_reordered"
    """Two consecutive events of one stream appear in swapped order (the finding names both ids)."""
    INVALID_PAYLOAD = "invalid_payload"
    """A recorded event breaks the event contract (its payload does not validate, or its schema
    version is unknown): it was forged or edited, or written by a faulty producer."""
    CHECKPOINT_SIGNATURE_INVALID = "checkpoint_signature_invalid"
    """A signed ``AuditCheckpoint`` does not verify under its key id."""
    CHECKPOINT_MISMATCH = "checkpoint_mismatch"
    """A checkpoint's rounds, table digest, chain head or findings differ from what a replay derives."""
    CHECKPOINT_MISSING = "checkpoint_missing"
    """The checkpoint cadence calls for a checkpoint the log does not hold."""
    SHOE_COMMITMENT_MISMATCH = "shoe_commitment_mismatch"
    """The revealed seed does not re-derive the committed order (or no seed was revealed)."""
    CARD_MISMATCH = "card_mismatch"
    """A dealt card is not the card at its shoe position, or went to the wrong hand."""
    UNKNOWN_TABLE = "unknown_table"
    """An event names a table that was never opened."""
    OUTCOME_MISMATCH = "outcome_mismatch"
    """Re-running the rules on the recorded cards and decisions gives other hands, outcome or natural."""
    BET_SET_MISMATCH = "bet_set_mismatch"
    """``CoupResolved.bet_ids`` differs from the bets accepted into the coup."""
    POSTINGS_UNBALANCED = "postings_unbalanced"
    """A transfer's postings are empty or do not sum to zero."""
    PAYOUT_MISMATCH = "payout_mismatch"
    """A recorded payout differs from the recomputed one (result, win, credit, stake, account, spot)."""
    COMMISSION_MISMATCH = "commission_mismatch"
    """Only the commission (and so the credit) of a payout differs from the recomputed one."""
    POSTINGS_MISMATCH = "postings_mismatch"
    """A payout's amounts agree but its postings move money between other accounts."""
    PAYOUT_UNEXPECTED = "payout_unexpected"
    """A payout for a bet that the coup did not settle."""
    COMMISSION_POSTING_MISMATCH = "commission_posting_mismatch"
    """What a payout posts to the commission account is not the commission it reports (paired invariant)."""
    ESCROW_NOT_ZERO = "escrow_not_zero"
    """A coup's stakes put into the table escrow are not what its payouts take out (paired invariant)."""
    DUPLICATE_PAYOUT = "duplicate_payout"
    """A second payout for the same bet."""
    BALANCE_MISMATCH = "balance_mismatch"
    """A wallet's ``balance_after_minor`` does not follow from the postings applied to it."""
    TRANSFER_ID_NOT_OWN = "transfer_id_not_own"
    """A wallet event's transfer id is outside its kind's namespace (``payout/<bet_id>`` for a payout, a
    cashier's own ``cashier/…`` for a deposit: :mod:`services.core.boundary`): it took an id another
    movement needs."""
    NOT_A_PLAYER_ACCOUNT = "not_a_player_account"
    """A deposit or withdrawal moved a table's, the cage's or the operator's account, not a player's."""


class Severity(StrEnum):
    """How urgent a finding or an anomaly is."""

    INFO = "info"
    """Worth a look; nothing is known to be wrong."""
    WARNING = "warning"
    """Something is unusual and may be wrong."""
    CRITICAL = "critical"
    """The record or the money is wrong: the period is not clean until it is explained."""


class Detector(StrEnum):
    """Stable codes of what the monitor detects (part of the event contract: add, never rename)."""

    PAST_POSTING = "past_posting"
    CARD_NOT_DUE = "card_not_due"
    CARD_OVERCOUNT = "card_overcount"
    SHOE_POSITION = "shoe_position"
    WIN_STREAK = "win_streak"
    NET_RESULT_OUTLIER = "net_result_outlier"
    HEDGED_BETS = "hedged_bets"
    STRUCTURING = "structuring"
    UNREADABLE_EVENT = "unreadable_event"
    INTERNAL_ERROR = "internal_error"
    REFUSED_RECORD = "refused_record"
    LATE_DECISION = "late_decision"
    SHOE_BIAS = "shoe_bias"
    EDGE_SORTING = "edge_sorting"
    BOT_REGULARITY = "bot_regularity"
    LINKED_HEDGE = "linked_hedge"
    PAIRED_PLAY = "paired_play"
    DEPOSIT_STRUCTURING = "deposit_structuring"
    CROSS_TABLE_HEDGE = "cross_table_hedge"
    """Retired (issue #29): opposite bets at two tables are two independent coups, not a hedge."""
    ACCOUNT_EDGE = "account_edge"
    GROUP_EDGE = "group_edge"
    LATE_BET = "late_bet"
    IN_AND_OUT = "in_and_out"
    CAGE_STRUCTURING = "cage_structuring"


class Category(StrEnum):
    """The family of a detector (``AnomalyDetected.category``), for the back office to group alerts."""

    PAST_POSTING = "past_posting"
    SHOE_TAMPERING = "shoe_tampering"
    STATISTICAL_OUTLIER = "statistical_outlier"
    BET_PATTERN = "bet_pattern"
    INTEGRITY = "integrity"
    TRUST = "trust"
    DEALER_COLLUSION = "dealer_collusion"
    ADVANTAGE_PLAY = "advantage_play"
    AUTOMATION = "automation"
    CHIP_DUMPING = "chip_dumping"
    STRUCTURING = "structuring"


CATEGORY: Final[Mapping[Detector, Category]] = {
    Detector.PAST_POSTING: Category.PAST_POSTING,
    Detector.CARD_NOT_DUE: Category.SHOE_TAMPERING,
    Detector.CARD_OVERCOUNT: Category.SHOE_TAMPERING,
    Detector.SHOE_POSITION: Category.SHOE_TAMPERING,
    Detector.WIN_STREAK: Category.STATISTICAL_OUTLIER,
    Detector.NET_RESULT_OUTLIER: Category.STATISTICAL_OUTLIER,
    Detector.HEDGED_BETS: Category.BET_PATTERN,
    Detector.STRUCTURING: Category.BET_PATTERN,
    Detector.UNREADABLE_EVENT: Category.INTEGRITY,
    Detector.INTERNAL_ERROR: Category.INTEGRITY,
    Detector.REFUSED_RECORD: Category.TRUST,
    Detector.LATE_DECISION: Category.DEALER_COLLUSION,
    Detector.SHOE_BIAS: Category.SHOE_TAMPERING,
    Detector.EDGE_SORTING: Category.ADVANTAGE_PLAY,
    Detector.BOT_REGULARITY: Category.AUTOMATION,
    Detector.LINKED_HEDGE: Category.BET_PATTERN,
    Detector.PAIRED_PLAY: Category.CHIP_DUMPING,
    Detector.DEPOSIT_STRUCTURING: Category.STRUCTURING,
    Detector.CROSS_TABLE_HEDGE: Category.BET_PATTERN,
    Detector.ACCOUNT_EDGE: Category.STATISTICAL_OUTLIER,
    Detector.GROUP_EDGE: Category.STATISTICAL_OUTLIER,
    Detector.LATE_BET: Category.PAST_POSTING,
    Detector.IN_AND_OUT: Category.STRUCTURING,
    Detector.CAGE_STRUCTURING: Category.STRUCTURING,
}
"""The family of each detector, for the back office to group alerts."""


class ReplayReason(StrEnum):
    """What the regulatory replay alone finds about the log it reads (beside audit's findings). A line
    that is not an envelope is :attr:`Reason.UNDECODABLE`, the code a processor's dead letter gives it."""

    DUPLICATE_EVENT = "duplicate_event"
    """An event id appears twice in the log (not an exact re-delivery, which the replay drops)."""
    UNPROCESSABLE = "unprocessable"
    """A record could not be processed at all."""
    TREE_HEAD_INVALID = "tree_head_invalid"
    """A signed tree head's root or size is not the Merkle tree of the chain heads it lists."""
    CHAIN_DELETED = "chain_deleted"
    """A chain a signed tree head names is not in the log at all."""
    CHAIN_CUT = "chain_cut"
    """A chain ends before the head a signed tree head claims: its tail was deleted."""
    CHAIN_REWRITTEN = "chain_rewritten"
    """The record at a head a signed tree head claims has another hash: the history under it was replaced."""
    CHAIN_NOT_IN_TREE_HEAD = "chain_not_in_tree_head"
    """A chain audit had read when it signed a tree head is in none: spliced into the log afterwards."""
    HEADS_NOT_EXTENDED = "heads_not_extended"
    """The log does not extend the tree head pinned with ``--expect``: truncated, rolled back or forked."""
    ATTESTED_HEAD_MISSING = "attested_head_missing"
    """A writer's signed head names a record (a chain's head, or a dead letter) the log does not hold,
    or a record below it is missing (signed records deleted or changed:
    :mod:`services.audit.replay.attested`)."""
    CAUSE_MISSING = "cause_missing"
    """An attested record names a cause (``causation_hash``) the log does not hold."""


ROOT_PRIORITY: Final[tuple[FindingReason | ReplayReason | Reason, ...]] = (
    FindingReason.CARD_MISMATCH, FindingReason.OUTCOME_MISMATCH, FindingReason.BET_SET_MISMATCH,
    FindingReason.SHOE_COMMITMENT_MISMATCH, FindingReason.UNKNOWN_TABLE,
    FindingReason.COMMISSION_POSTING_MISMATCH, FindingReason.PAYOUT_MISMATCH,
    FindingReason.COMMISSION_MISMATCH, FindingReason.POSTINGS_MISMATCH, FindingReason.PAYOUT_UNEXPECTED,
    FindingReason.DUPLICATE_PAYOUT, FindingReason.ESCROW_NOT_ZERO, FindingReason.POSTINGS_UNBALANCED,
    FindingReason.BALANCE_MISMATCH, FindingReason.TRANSFER_ID_NOT_OWN, FindingReason.NOT_A_PLAYER_ACCOUNT,
    FindingReason.INVALID_PAYLOAD, FindingReason.SEQ_GAP,
    FindingReason.SEQ_REORDERED, FindingReason.SEQ_DUPLICATE, FindingReason.CHAIN_BROKEN,
    ReplayReason.DUPLICATE_EVENT, Reason.UNDECODABLE, ReplayReason.UNPROCESSABLE,
    ReplayReason.ATTESTED_HEAD_MISSING, ReplayReason.CAUSE_MISSING,
    FindingReason.HASH_MISMATCH, FindingReason.CHECKPOINT_SIGNATURE_INVALID,
    FindingReason.CHECKPOINT_MISSING, FindingReason.CHECKPOINT_MISMATCH,
    ReplayReason.HEADS_NOT_EXTENDED, ReplayReason.CHAIN_REWRITTEN, ReplayReason.CHAIN_CUT,
    ReplayReason.CHAIN_DELETED, ReplayReason.CHAIN_NOT_IN_TREE_HEAD, ReplayReason.TREE_HEAD_INVALID,
)  # fmt: skip
"""Which finding of a replay's group of related findings is its root: the first of these present (the
most specific cause; an edited payout explains the hash mismatch on its record, not the other way)."""

TREE_REASONS: Final[frozenset[ReplayReason]] = frozenset({
    ReplayReason.TREE_HEAD_INVALID, ReplayReason.CHAIN_DELETED, ReplayReason.CHAIN_CUT,
    ReplayReason.CHAIN_REWRITTEN, ReplayReason.CHAIN_NOT_IN_TREE_HEAD, ReplayReason.HEADS_NOT_EXTENDED,
})  # fmt: skip
"""What the replay finds checking audit's signed tree heads (and a pinned one) against the log."""

INTEGRITY_REASONS: Final[frozenset[FindingReason | ReplayReason | Reason]] = frozenset({
    FindingReason.HASH_MISMATCH, FindingReason.SEQ_GAP, FindingReason.SEQ_DUPLICATE,
    FindingReason.SEQ_REORDERED, FindingReason.CHAIN_BROKEN, ReplayReason.DUPLICATE_EVENT,
    Reason.UNDECODABLE, ReplayReason.UNPROCESSABLE, FindingReason.CHECKPOINT_SIGNATURE_INVALID,
    FindingReason.CHECKPOINT_MISMATCH, FindingReason.CHECKPOINT_MISSING, *TREE_REASONS,
    ReplayReason.ATTESTED_HEAD_MISSING, ReplayReason.CAUSE_MISSING,
})  # fmt: skip
"""Findings about the log itself, not about one table's play: a replay reports them whatever its scope."""

AUTH_REFUSALS: Final[frozenset[Reason]] = frozenset({
    Reason.UNAUTHENTICATED, Reason.NOT_PERMITTED, Reason.TRANSFER_ID_NOT_OWN, Reason.NOT_A_PLAYER_ACCOUNT,
})  # fmt: skip
"""Dead-letter reasons of records refused by authentication or authorization (docs/trust.md): a replay
counts and lists them; they are not findings."""

_NOT_REASONS = {r.value for r in RefusalReason} - {r.value for r in Reason}
assert not _NOT_REASONS, f"refusal codes missing from Reason: {sorted(_NOT_REASONS)}"
