"""The wallet family: requests on ``casino.wallet.requests`` and the wallet stage's events on
``casino.wallet.events`` (docs/event-contract.md)."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import (
    Field,
    StrictInt,
    model_validator,
)

from services.core.contract.base import (
    Amount,
    BetResult,
    Count,
    Currency,
    Id,
    Name,
    OmitsUnset,
    Payload,
    PayoutPostings,
    PositiveAmount,
    Postings,
    Text,
    TypeName,
)
from services.core.reasons import RefusalReason

__all__ = [
    "BetRefundDue",
    "BetRejected",
    "Deposit",
    "FundsDeposited",
    "FundsWithdrawn",
    "OperatorBalanceSynced",
    "PayoutApplied",
    "PayoutIssued",
    "PlaceBet",
    "SeamlessCall",
    "SeamlessCallAnswered",
    "SeamlessCallRequested",
    "SeamlessStatus",
    "StakeRefunded",
    "StakeReserved",
    "Transfer",
    "TransferRefused",
    "WalletRefusal",
    "Withdraw",
    "WithdrawalRejected",
]

# --- casino.wallet.requests ---------------------------------------------------------------------


class Deposit(Payload):
    """Cashier: put ``amount_minor`` into a wallet. ``transfer_id`` makes a retry harmless; without one
    the wallet stage uses ``deposit/<event_id>``."""

    account_id: Id
    amount_minor: PositiveAmount
    currency: Currency
    transfer_id: Id | None = None


class Withdraw(Payload):
    """Cashier: take ``amount_minor`` out of a wallet (refused if it cannot cover it)."""

    account_id: Id
    amount_minor: PositiveAmount
    currency: Currency
    transfer_id: Id | None = None


class PlaceBet(Payload):
    """A terminal asks to stake ``stake_minor`` on ``spot`` of the coup open at ``table_id``."""

    account_id: Id
    bet_id: Id
    table_id: Id
    coup_id: Id | None = None
    spot: Name
    stake_minor: PositiveAmount
    currency: Currency


class PayoutIssued(Payload):
    """Settlement's result for one bet. ``credit_minor`` is all that goes back to the wallet (stake
    returned plus win less commission); ``postings`` move it out of the table's escrow and house
    accounts. Holds: postings balance, and the wallet's own postings add up to ``credit_minor``.
    """

    payout_id: Id
    bet_id: Id
    account_id: Id
    table_id: Id
    coup_id: Id
    spot: Name
    stake_minor: Amount
    result: BetResult
    win_minor: Amount
    commission_minor: Amount
    credit_minor: Amount
    currency: Currency
    postings: PayoutPostings

    @model_validator(mode="after")
    def _credit_is_posted(self) -> PayoutIssued:
        mine, account = 0, self.account_id
        for p in self.postings:  # a loop, not sum() over a generator: run for every record read
            if p.account == account:
                mine += p.amount_minor
        if mine != self.credit_minor:
            detail = f"postings credit {self.account_id} with {mine}, credit_minor is {self.credit_minor}"
            raise ValueError(detail)
        return self


class BetRefundDue(Payload):
    """Settlement: a bet the dealer refused gets its stake back from escrow."""

    refund_id: Id
    bet_id: Id
    account_id: Id
    table_id: Id
    coup_id: Id | None = None
    stake_minor: PositiveAmount
    currency: Currency
    reason: RefusalReason


SeamlessCall = Literal["debit", "credit", "rollback"]
"""A seamless-wallet call (docs/integration.md): ``debit`` a stake, ``credit`` a payout (zero closes a lost
round), ``rollback`` a debit."""

SeamlessStatus = Literal[
    "ok", "insufficient_funds", "unknown_account", "duplicate",
    "timeout", "server_error", "transport_error", "bad_answer",
]  # fmt: skip
"""How a seamless call ended. The first four are the operator's definite answers (``duplicate``: the
transaction id was already applied, a success); the others are no answer at all (a timeout, a 5xx, a
refused connection, an unreadable body) and the call is retried with the same transaction id."""


class SeamlessCallAnswered(Payload):
    """Settlement's HTTP shell: what one seamless call (``transaction_id``, try ``attempt``) got back,
    recorded before the adapter acts on it, so that a replay needs no operator. ``elapsed_ms`` is how
    long the try took (its back-off delay included): the adapter's betting-window budget adds them up."""

    transaction_id: Id
    account_id: Id
    attempt: Count
    status: SeamlessStatus
    balance_minor: Amount | None = None
    http_status: Annotated[StrictInt, Field(ge=0, le=999)] | None = None
    elapsed_ms: Count = 0
    detail: Text | None = None


# --- casino.wallet.events -----------------------------------------------------------------------


class SeamlessCallRequested(Payload):
    """The seamless adapter asks its HTTP shell to make one call (docs/integration.md), after ``delay_ms``
    (the
    back-off of a retry). The body sent is exactly the protocol's fields here; a retry reuses the
    ``transaction_id`` with the next ``attempt``. ``request`` is the wallet request it serves."""

    transaction_id: Id
    call: SeamlessCall
    account_id: Id
    round_id: Id
    bet_id: Id
    table_id: Id
    amount_minor: Amount
    currency: Currency
    reference_transaction_id: Id | None = None
    attempt: Count
    delay_ms: Count
    request: TypeName


class Transfer(Payload):
    """A movement applied to one wallet, exactly once per ``transfer_id``. Holds: postings balance, the
    wallet's balance moves by exactly its own postings, and by ``amount_minor`` (in or out)."""

    transfer_id: Id
    account_id: Id
    amount_minor: Amount
    currency: Currency
    postings: Postings
    balance_before_minor: Amount
    balance_after_minor: Amount

    @model_validator(mode="after")
    def _balance_follows_postings(self) -> Transfer:
        delta = self.balance_after_minor - self.balance_before_minor
        mine, account = 0, self.account_id
        for p in self.postings:  # a loop, not sum() over a generator: run for every record read
            if p.account == account:
                mine += p.amount_minor
        if mine != delta:
            raise ValueError(f"balance moved by {delta} but {self.account_id}'s postings sum to {mine}")
        if abs(delta) != self.amount_minor:
            raise ValueError(f"balance moved by {delta}, amount_minor is {self.amount_minor}")
        return self


class FundsDeposited(Transfer):
    """A deposit applied: cage → wallet."""


class FundsWithdrawn(Transfer):
    """A withdrawal applied: wallet → cage."""


class StakeReserved(Transfer):
    """A bet's stake held: wallet → the table's escrow; ``BetPlaced`` goes to the table next."""

    bet_id: Id
    table_id: Id
    coup_id: Id | None = None
    spot: Name


class StakeRefunded(Transfer):
    """A refused bet's stake returned: escrow → wallet."""

    bet_id: Id
    table_id: Id
    reason: RefusalReason


class PayoutApplied(Transfer):
    """A ``PayoutIssued`` applied to the wallet, with its postings (empty when it moves nothing)."""

    postings: PayoutPostings

    bet_id: Id
    table_id: Id
    coup_id: Id
    payout_id: Id
    result: BetResult


class WalletRefusal(OmitsUnset):
    """A request the wallet stage refused; nothing moved. ``request`` is the refused request's type."""

    dumped_only_when_given: ClassVar[frozenset[str]] = frozenset({"detail"})

    transfer_id: Id
    account_id: Id
    request: TypeName
    reason: RefusalReason
    detail: Text | None = None
    bet_id: Id | None = None
    table_id: Id | None = None
    amount_minor: Amount | None = None
    currency: Currency | None = None


class BetRejected(WalletRefusal):
    """A ``PlaceBet`` refused by the wallet (``insufficient_funds``, ``currency_mismatch``…)."""

    bet_id: Id
    table_id: Id


class WithdrawalRejected(WalletRefusal):
    """A ``Withdraw`` refused by the wallet."""


class TransferRefused(WalletRefusal):
    """Any other request refused, e.g. a transfer id reused with other content."""


class OperatorBalanceSynced(Transfer):
    """Seamless wallet: the operator's balance (from an answer) differs from the one our events lead
    to — the first call for a wallet, or money the operator moved outside our tables. The difference
    is posted against the operator's account (``operator:<currency>``) so that each wallet's balance
    still follows its postings; ``transaction_id`` is the answered call that showed it."""

    transaction_id: Id
