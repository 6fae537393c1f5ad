"""Settlement's wallet stage (input ``casino.wallet.requests``, per account; docs/event-contract.md,
docs/architecture.md): holds wallet balances, reserves stakes (wallet → table escrow) and forwards
``BetPlaced`` to the table's inbox, applies payouts, refunds, deposits and withdrawals. Every movement is
a transfer with an id: the same id with the same content is a no-op, the same id with other content is
refused (``transfer_id_conflict``). No wallet goes negative: a bet or withdrawal it cannot cover is
refused with ``insufficient_funds``.

Only wallets are balanced here (the key of this stage is the wallet's account id). Table accounts
(escrow, house, commission, bank) are sums of postings; audit and the back office derive them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any

from services.core import topics, transfers
from services.core.boundary import deposit_id, stake_id, withdraw_id
from services.core.contract import (
    BetPlaced,
    BetRefundDue,
    BetRejected,
    Deposit,
    FundsDeposited,
    FundsWithdrawn,
    Payload,
    PayoutApplied,
    PayoutIssued,
    PlaceBet,
    RefusalReason,
    StakeRefunded,
    StakeReserved,
    TransferRefused,
    Withdraw,
    WithdrawalRejected,
    Written,
)
from services.core.envelope import Envelope, canonical, sha256_hex
from services.core.errors import DomainError, Reason
from services.core.kept import Kept
from services.core.ledger import table_accounts
from services.core.limits import AMOUNT_MAX_MINOR, BALANCE_MAX_MINOR
from services.core.processor import Event, Reactor
from services.core.values import owned_in_place

__all__ = ["WalletStage"]


@owned_in_place
class WalletState:
    """Wallet balances and currencies, and the fingerprint of every transfer applied, by id.

    The maps are changed in place by :meth:`WalletStage.react` once a request passed every check
    (:func:`services.core.processor.step` owns the state; a handler raises only before it mutates).
    Why not immutable, like every other processor's state: ``transfers`` holds every transfer ever
    applied (idempotence forever), so a copy per request is O(history) per record — a replay of a
    large log turns quadratic — and the standard library has no persistent map (no dependency is added
    for one). Copy-on-write per account would not help ``transfers``, which is one map for all.

    ``transfers`` is a :class:`~services.core.kept.Kept` map: in memory by default, in a shell's store
    once bound (the embedded runtime's SQLite table), so a snapshot holds the live balances only."""

    balances: Mapping[str, int] = field(default_factory=dict)
    currencies: Mapping[str, str] = field(default_factory=dict)
    transfers: Kept = field(default_factory=Kept)


def _mutable(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """A state map, which is a ``dict`` (built so, decoded so from a snapshot) that only handle changes."""
    assert isinstance(mapping, dict), type(mapping)
    return mapping


Request = Deposit | Withdraw | PlaceBet | PayoutIssued | BetRefundDue
"""What the wallet stage applies."""

REQUESTS: frozenset[type[Payload]] = frozenset({Deposit, Withdraw, PlaceBet, PayoutIssued, BetRefundDue})
"""The payload classes of :data:`Request`.

The wallet stage tells its requests apart by their exact class (``type(request) in``/``is``), as
:func:`~services.core.contract.payload_of` builds them, not by ``isinstance``: the contract's models are
pydantic's, whose metaclass is an ``ABCMeta``, which makes each ``isinstance`` slow
(docs/performance.md#settlement-bet-runs-and-exact-classes)."""

CEILED: frozenset[type[Payload]] = frozenset({Deposit, Withdraw, PlaceBet})
"""The requests whose amount the ceiling bounds (payouts and refunds follow from accepted stakes)."""

CREDITS: frozenset[type[Payload]] = frozenset({Deposit, PayoutIssued, BetRefundDue})
"""The requests that add to the wallet: refused past the largest balance."""

DEBITS: frozenset[type[Payload]] = frozenset({Withdraw, PlaceBet})
"""The requests that take from the wallet: refused when it cannot cover them."""


def fingerprint(record: Envelope) -> str:
    """What a transfer id stands for: the request's type and its content as written."""
    return sha256_hex(canonical({"type": record.type, **record.payload}))


class WalletStage(Reactor[WalletState]):
    """Settlement's wallet stage (see the module docstring): a
    :class:`~services.core.processor.Reactor` to the requests of others, in one pass (:meth:`react`):
    the decide half checks the request and builds its events, then the evolve half records the
    transfer — in place, the one exception to "the state passed in is not changed" (see
    :class:`WalletState`). Each balance is also the fold of this stage's own transfer events (its
    last ``balance_after_minor``): tests/unit/test_decide_evolve.py checks it.

    ``amount_max_minor`` is the ceiling of one stake, deposit or withdrawal: a request above it is
    refused (``amount_too_large``), as is any credit that would take a wallet past
    :data:`~services.core.limits.BALANCE_MAX_MINOR`.
    """

    name = "settlement"
    stage = "settlement.wallet"
    inputs = (topics.WALLET_REQUESTS,)
    formerly = ("services.settlement.processor",)

    def __init__(self, amount_max_minor: int = AMOUNT_MAX_MINOR) -> None:
        if not 1 <= amount_max_minor <= BALANCE_MAX_MINOR:
            raise ValueError(f"amount_max_minor is 1 to {BALANCE_MAX_MINOR}, not {amount_max_minor}")
        self.amount_max_minor = amount_max_minor

    def initial(self) -> WalletState:
        """No wallets."""
        return WalletState()

    def react(
        self, state: WalletState, record: Envelope, payload: Payload | None
    ) -> tuple[WalletState, list[Event]]:
        """Apply one request to its wallet, exactly once per transfer id."""
        if type(payload) not in REQUESTS:
            raise DomainError(Reason.UNKNOWN_TYPE, f"the wallet stage does not take {record.type!r}")
        request: Request = payload  # type: ignore[assignment]
        kind = type(request)
        account, at = record.key, record.occurred_at
        tid = transfer_id(request, record.event_id)
        fp = fingerprint(record)
        seen = state.transfers.get(tid)
        if seen == fp:
            return state, []
        if seen is not None:
            conflict = TransferRefused(
                transfer_id=tid, account_id=account, request=record.type,
                reason=RefusalReason.TRANSFER_ID_CONFLICT,
                detail="the same transfer id was used with different content",
            )  # fmt: skip
            return state, [Event(account, at, conflict)]
        amount = amount_of(request)
        balance = state.balances.get(account, 0)
        currency = state.currencies.get(account, request.currency)
        reason = self._refusal_reason(request, amount, balance, currency)
        if reason is not None:
            refusal = _refusal(request, record.type, account, tid=tid, amount=amount, reason=reason)
            return state, [Event(account, at, refusal)]
        after = balance - amount if kind in DEBITS else balance + amount
        event = _movement(
            request, account, tid=tid, amount=amount, balance=balance, after=after, currency=currency
        )
        events = [Event(account, at, event)]
        if type(request) is PlaceBet:
            events.append(Event(request.table_id, at, _bet_placed(request, account)))
        # Every check passed and every event is built: only now the state changes, in place (step()
        # owns it). Copying the three maps per request cost O(every transfer ever) per record.
        _mutable(state.balances)[account] = after
        _mutable(state.currencies)[account] = currency
        state.transfers[tid] = fp
        return state, events

    def _refusal_reason(
        self, request: Request, amount: int, balance: int, currency: str
    ) -> RefusalReason | None:
        """The first check the request fails, in :class:`RefusalReason` order; ``None`` when it passes."""
        kind = type(request)
        if kind in CEILED and amount > self.amount_max_minor:
            return RefusalReason.AMOUNT_TOO_LARGE
        if request.currency != currency:
            return RefusalReason.CURRENCY_MISMATCH
        if kind in CREDITS and balance + amount > BALANCE_MAX_MINOR:
            return RefusalReason.AMOUNT_TOO_LARGE
        if kind in DEBITS and amount > balance:
            return RefusalReason.INSUFFICIENT_FUNDS
        return None


def transfer_id(request: Request, event_id: str) -> str:
    """The id a request's transfer goes by: a retry under it is applied once."""
    if type(request) is PayoutIssued:
        return request.payout_id
    if type(request) is PlaceBet:
        return stake_id(request.bet_id)
    if type(request) is BetRefundDue:
        return request.refund_id
    assert isinstance(request, Deposit | Withdraw), type(request)
    derived = deposit_id if type(request) is Deposit else withdraw_id
    return request.transfer_id or derived(event_id)


def amount_of(request: Request) -> int:
    """What the request moves: the stake, the payout's credit, or the amount."""
    if type(request) is PayoutIssued:
        return request.credit_minor
    if type(request) is PlaceBet or type(request) is BetRefundDue:
        return request.stake_minor
    assert isinstance(request, Deposit | Withdraw), type(request)
    return request.amount_minor


def _refusal(
    request: Request, kind: str, account: str, *, tid: str, amount: int, reason: RefusalReason
) -> Payload:
    bet_id = getattr(request, "bet_id", None)
    table_id = getattr(request, "table_id", None)
    if type(request) is PlaceBet:
        return BetRejected(
            transfer_id=tid, account_id=account, request=kind, bet_id=request.bet_id,
            table_id=request.table_id, amount_minor=amount, currency=request.currency, reason=reason,
        )  # fmt: skip
    refusal = WithdrawalRejected if type(request) is Withdraw else TransferRefused
    return refusal(
        transfer_id=tid, account_id=account, request=kind, bet_id=bet_id, table_id=table_id,
        amount_minor=amount, currency=request.currency, reason=reason,
    )  # fmt: skip


def _movement(
    request: Request, account: str, *, tid: str, amount: int, balance: int, after: int, currency: str
) -> Written:
    """The transfer event of one accepted request, with its balanced postings, written as its record
    carries it (every value from the validated request and the wallet's state; the payloads of
    :mod:`services.core.transfers`, the seamless adapter's too)."""
    m = transfers.Moved(tid, account, amount, currency, balance, after)
    if type(request) is PayoutIssued:
        rows = [{"account": p.account, "amount_minor": p.amount_minor} for p in request.postings]
        return Written(PayoutApplied, transfers.payout_applied(
            m, rows, bet_id=request.bet_id, table_id=request.table_id, coup_id=request.coup_id,
            payout_id=request.payout_id, result=request.result,
        ))  # fmt: skip
    if type(request) is Deposit:
        return Written(FundsDeposited, transfers.deposited(m))
    if type(request) is Withdraw:
        return Written(FundsWithdrawn, transfers.withdrawn(m))
    assert isinstance(request, PlaceBet | BetRefundDue), type(request)
    escrow = table_accounts(request.table_id).escrow
    if type(request) is PlaceBet:
        return Written(StakeReserved, transfers.stake_reserved(
            m, escrow=escrow, bet_id=request.bet_id, table_id=request.table_id, coup_id=request.coup_id,
            spot=request.spot,
        ))  # fmt: skip
    assert isinstance(request, BetRefundDue), type(request)
    return Written(StakeRefunded, transfers.stake_refunded(
        m, escrow=escrow, bet_id=request.bet_id, table_id=request.table_id, reason=request.reason.value,
    ))  # fmt: skip


def _bet_placed(bet: PlaceBet, account: str) -> Written:
    return Written(BetPlaced, {
        "bet_id": bet.bet_id, "account_id": account, "table_id": bet.table_id, "coup_id": bet.coup_id,
        "spot": bet.spot, "stake_minor": bet.stake_minor, "currency": bet.currency,
    })  # fmt: skip
