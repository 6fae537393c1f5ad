"""The seamless-wallet adapter's decisions (docs/integration.md), pure (no I/O, no clock; the state's maps
change in place, see :class:`SeamlessState`): which call to make next, how an answer folds into the state,
and which events it emits.

A casino that keeps balances in its own platform is called over HTTP instead of our wallet stage:
``PlaceBet`` becomes a **debit**, ``PayoutIssued`` a **credit** (a zero credit closes a lost round),
``BetRefundDue`` a **rollback** of the bet's debit. This module never makes a call: it emits
``SeamlessCallRequested`` (on the wallet's event stream) and reads the shell's recorded
``SeamlessCallAnswered`` (on the wallet requests), so a replay of the log re-derives every decision
without the operator. What holds, and why:

* **Derived transaction ids.** ``debit/<bet_id>``, ``credit/<bet_id>``, ``rollback/<bet_id>``
  (:func:`transaction_id`): a retry, a re-delivered request or a restarted worker reuses the id, and
  the operator de-duplicates by it.
* **One call in flight per wallet.** Each account has a queue; only its head is asked for, and the
  next call (a retry of the head, or the next transaction) is emitted only when the head's answer is
  folded in. So there are never two calls for one transaction in flight, and the operator's balances
  in the answers come in the order it applied them (each transfer's ``balance_before_minor`` and
  ``balance_after_minor`` are the operator's own).
* **Only the head's current try counts.** An answer for another transaction or another ``attempt``
  (a duplicate delivery, a restarted shell repeating a call) changes nothing.
* **Definite answers end a call.** ``ok`` and ``duplicate`` (already applied) are success;
  ``insufficient_funds`` and ``unknown_account`` are refusals. A timeout, a 5xx, a refused connection
  or an unreadable answer is no answer: the same transaction is asked again after
  :func:`backoff_ms` (capped exponential).
* **A debit without a definite answer within the betting window is rolled back.** When the tries of a
  debit have taken ``debit_window_ms`` (the recorded ``elapsed_ms`` of its answers, summed) it is
  replaced by a rollback of it, retried until definite; the bet is then rejected
  (``wallet_unavailable``) and never reaches the table. The operator must treat a rollback of a
  debit it has not seen as final (the reference wallet remembers it and refuses the debit later).
* **The same downstream events as the internal wallet stage.** A debit's success emits
  ``StakeReserved`` and then ``BetPlaced`` to the table (so the dealer sees a bet only once the
  operator has debited it); a credit's ``PayoutApplied``; a rollback's ``StakeRefunded``; refusals
  ``BetRejected`` or ``TransferRefused``. When the operator's balance differs from the one our events
  lead to (the first call for a wallet; money moved outside our tables) an ``OperatorBalanceSynced``
  posts the difference against ``operator:<currency>`` first, so every wallet still follows its
  postings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from services.core import topics, transfers
from services.core.boundary import stake_id, sync_id
from services.core.envelope import Draft, canonical, sha256_hex
from services.core.errors import Reason
from services.core.kept import Kept
from services.core.ledger import table_accounts
from services.core.values import owned_in_place

SUCCESS: Final = frozenset({"ok", "duplicate"})
"""Answers that mean the operator applied the transaction (now or before)."""

REFUSED: Final = frozenset({"insufficient_funds", "unknown_account"})
"""Definite answers that mean the operator did not apply it and will not."""

CALL_OF: Final[Mapping[str, str]] = {
    "PlaceBet": "debit", "PayoutIssued": "credit", "BetRefundDue": "rollback",
}  # fmt: skip
"""The call each wallet request becomes."""


def transaction_id(call: str, bet_id: str) -> str:
    """The derived transaction id of ``call`` for ``bet_id`` (a retry reuses it)."""
    return f"{call}/{bet_id}"


def operator_account(currency: str) -> str:
    """The account the difference between the operator's balances and ours is posted against."""
    return f"operator:{currency}"


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How calls without a definite answer are retried.

    ``backoff_ms(n)`` = ``min(backoff_max_ms, backoff_base_ms * 2**(n-1))`` before try ``n`` (no wait
    before the first); a debit is given up (rolled back) once its tries took ``debit_window_ms``.
    """

    backoff_base_ms: int = 100
    backoff_max_ms: int = 5_000
    debit_window_ms: int = 15_000

    def __post_init__(self) -> None:
        if not 1 <= self.backoff_base_ms <= self.backoff_max_ms <= 3_600_000:
            raise ValueError("backoff: 1 <= base_ms <= max_ms <= 3,600,000")
        if not 1 <= self.debit_window_ms <= 3_600_000:
            raise ValueError("debit_window_ms is 1 to 3,600,000")


def backoff_ms(policy: RetryPolicy, attempt: int) -> int:
    """The wait before try ``attempt`` (0 for the first): capped exponential, no jitter (deterministic;
    the operator sees one call per wallet at a time, so there is no herd to spread)."""
    if attempt <= 0:
        return 0
    return min(policy.backoff_max_ms, policy.backoff_base_ms << min(attempt - 1, 40))


@dataclass(frozen=True, slots=True)
class Call:
    """One transaction the adapter is asking the operator for, and how far it got."""

    transaction_id: str
    call: str
    account_id: str
    round_id: str
    bet_id: str
    table_id: str
    amount_minor: int
    currency: str
    request: str
    origin: Mapping[str, Any]
    """The wallet request's payload: what the events after a success are built from."""
    reference_transaction_id: str | None = None
    attempt: int = 0
    spent_ms: int = 0
    abandons: bool = False
    """A rollback the adapter issued itself for a debit that got no definite answer in time."""


@dataclass(frozen=True, slots=True)
class Wallet:
    """One account: its calls (the head is in flight) and its balance as our events have it."""

    queue: tuple[Call, ...] = ()
    balance_minor: int | None = None
    currency: str = ""


@owned_in_place
class SeamlessState:
    """Every account's wallet, and each transaction id ever taken with its request's fingerprint.

    The two maps are changed in place by :func:`enqueue` and :func:`fold_answer` once every event of
    the step is built (the shell's :func:`~services.core.processor.step` owns the state; nothing raises
    after the change), as the internal wallet stage's
    (:class:`~services.settlement.wallet_stage.WalletState`) and for its reason: ``seen`` holds every
    transaction ever taken, so a copy of it per request made a long run quadratic
    (docs/performance.md#seamless-state-in-place), and ``wallets`` one entry per player copied per
    request and per answer."""

    wallets: Mapping[str, Wallet] = field(default_factory=dict)
    seen: Kept = field(default_factory=Kept)
    """A :class:`~services.core.kept.Kept` map (a shell may keep it in its store, out of snapshots)."""


def _mutable(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """A state map, which is a ``dict`` (built so, decoded so from a snapshot) that only the folds change."""
    assert isinstance(mapping, dict), type(mapping)
    return mapping


def fingerprint(kind: str, payload: Mapping[str, Any]) -> str:
    """The fingerprint of a request: the same transaction id with other content is a conflict."""
    return sha256_hex(canonical({"type": kind, **payload}))


def call_for(kind: str, p: Mapping[str, Any], account: str) -> Call:
    """The call a wallet request (``PlaceBet``, ``PayoutIssued``, ``BetRefundDue``) becomes."""
    call = CALL_OF[kind]
    bet_id = str(p["bet_id"])
    amount = int(p["credit_minor"] if kind == "PayoutIssued" else p["stake_minor"])
    table_id = str(p["table_id"])
    return Call(
        transaction_id=transaction_id(call, bet_id), call=call, account_id=account,
        round_id=str(p.get("coup_id") or table_id), bet_id=bet_id, table_id=table_id,
        amount_minor=amount, currency=str(p["currency"]), request=kind, origin=dict(p),
        reference_transaction_id=transaction_id("debit", bet_id) if call == "rollback" else None,
    )  # fmt: skip


def request_draft(c: Call, policy: RetryPolicy) -> Draft:
    """The ``SeamlessCallRequested`` asking the shell for the current try of ``c``."""
    payload = {
        "transaction_id": c.transaction_id, "call": c.call, "account_id": c.account_id,
        "round_id": c.round_id, "bet_id": c.bet_id, "table_id": c.table_id,
        "amount_minor": c.amount_minor, "currency": c.currency,
        "reference_transaction_id": c.reference_transaction_id, "attempt": c.attempt,
        "delay_ms": backoff_ms(policy, c.attempt), "request": c.request,
    }  # fmt: skip
    return Draft("SeamlessCallRequested", topics.WALLET_EVENTS, c.account_id, payload)


def enqueue(state: SeamlessState, c: Call, fp: str, policy: RetryPolicy) -> tuple[SeamlessState, list[Draft]]:
    """Queue ``c`` on its wallet; ask for it at once when nothing else of that wallet is in flight. The
    state returned is ``state``, changed in place (:class:`SeamlessState`).

    A transaction id already taken with the same fingerprint is a re-delivery (nothing happens); with
    another, a ``transfer_id_conflict`` refusal.
    """
    seen = state.seen.get(c.transaction_id)
    if seen == fp:
        return state, []
    if seen is not None:
        return state, [refusal(c, Reason.TRANSFER_ID_CONFLICT, "the same transaction id with other content")]
    wallet = state.wallets.get(c.account_id, Wallet(currency=c.currency))
    if wallet.currency != c.currency:
        return state, [refusal(c, Reason.CURRENCY_MISMATCH, f"the wallet is in {wallet.currency}")]
    drafts = [request_draft(c, policy)] if not wallet.queue else []
    # every event built: only now the state changes, in place (see SeamlessState)
    _mutable(state.wallets)[c.account_id] = replace(wallet, queue=(*wallet.queue, c))
    state.seen[c.transaction_id] = fp
    return state, drafts


def fold_answer(
    state: SeamlessState, answer: Mapping[str, Any], policy: RetryPolicy
) -> tuple[SeamlessState, list[Draft]]:
    """Fold one recorded answer in: the outcome's events and the wallet's next call, if any (``state``
    returned, changed in place: :class:`SeamlessState`)."""
    account = str(answer["account_id"])
    wallet = state.wallets.get(account)
    if wallet is None or not wallet.queue:
        return state, []
    head = wallet.queue[0]
    if head.transaction_id != answer["transaction_id"] or head.attempt != answer["attempt"]:
        return state, []  # a stale or repeated answer: only the head's current try counts
    status = str(answer["status"])
    balance = answer.get("balance_minor")
    if status in SUCCESS and balance is None and wallet.balance_minor is None:
        status = "bad_answer"  # a success must tell the balance at least once
    if status in SUCCESS or status in REFUSED:
        wallet, drafts = _definite(wallet, head, status, balance)
        rest = wallet.queue[1:]
        wallet = replace(wallet, queue=rest)
        if rest:
            drafts.append(request_draft(rest[0], policy))
        _mutable(state.wallets)[account] = wallet  # every event built: in place (see SeamlessState)
        return state, drafts
    spent = head.spent_ms + int(answer.get("elapsed_ms") or 0)
    if head.call == "debit" and spent >= policy.debit_window_ms:
        nxt = replace(
            head, transaction_id=transaction_id("rollback", head.bet_id), call="rollback",
            reference_transaction_id=head.transaction_id, attempt=0, spent_ms=0, abandons=True,
        )  # fmt: skip
    else:
        nxt = replace(head, attempt=head.attempt + 1, spent_ms=spent)
    drafts = [request_draft(nxt, policy)]
    _mutable(state.wallets)[account] = replace(wallet, queue=(nxt, *wallet.queue[1:]))  # in place, as above
    return state, drafts


def _definite(wallet: Wallet, c: Call, status: str, balance: Any) -> tuple[Wallet, list[Draft]]:
    """The events of a definite answer to ``c`` and the wallet's balance after it."""
    if c.abandons:  # whatever the operator had done with the debit, it is undone: the bet is rejected
        drafts = _sync(wallet, c, balance, 0)
        after = balance if isinstance(balance, int) else wallet.balance_minor
        why = "no definite answer to the debit within the betting window: rolled back"
        return replace(wallet, balance_minor=after), [*drafts, refusal(c, Reason.WALLET_UNAVAILABLE, why)]
    if status in REFUSED:
        reason = Reason(status)
        after = balance if isinstance(balance, int) else wallet.balance_minor
        drafts = _sync(wallet, c, balance, 0)
        return replace(wallet, balance_minor=after), [*drafts, refusal(c, reason, f"the operator: {status}")]
    delta = -c.amount_minor if c.call == "debit" else c.amount_minor
    drafts = _sync(wallet, c, balance, delta)
    before = (balance - delta) if _usable(balance, delta) else (wallet.balance_minor or 0)
    after = before + delta
    drafts.append(_movement(c, before, after))
    if c.call == "debit":
        drafts.append(_bet_placed(c))
    return replace(wallet, balance_minor=after), drafts


def _usable(balance: Any, delta: int) -> bool:
    return isinstance(balance, int) and not isinstance(balance, bool) and balance - delta >= 0


def _sync(wallet: Wallet, c: Call, balance: Any, delta: int) -> list[Draft]:
    """An ``OperatorBalanceSynced`` when the operator's balance before ``c`` is not ours."""
    if not _usable(balance, delta):
        return []
    theirs = int(balance) - delta
    ours = wallet.balance_minor or 0
    if wallet.balance_minor is not None and theirs == ours:
        return []
    diff = theirs - ours
    if diff == 0:
        return []
    moved = transfers.Moved(sync_id(c.transaction_id, c.attempt), c.account_id, abs(diff), c.currency,
                            ours, theirs)  # fmt: skip
    payload = transfers.balance_synced(moved, against=operator_account(c.currency), diff=diff,
                                       transaction_id=c.transaction_id)  # fmt: skip
    return [Draft("OperatorBalanceSynced", topics.WALLET_EVENTS, c.account_id, payload)]


def _movement(c: Call, before: int, after: int) -> Draft:
    """The transfer event a success records, exactly as the internal wallet stage writes it (both build
    it with :mod:`services.core.transfers`)."""
    p, account = c.origin, c.account_id
    escrow = table_accounts(c.table_id).escrow
    if c.call == "debit":
        m = transfers.Moved(stake_id(c.bet_id), account, c.amount_minor, c.currency, before, after)
        payload = transfers.stake_reserved(m, escrow=escrow, bet_id=c.bet_id, table_id=c.table_id,
                                           coup_id=p.get("coup_id"), spot=p["spot"])  # fmt: skip
        return Draft("StakeReserved", topics.WALLET_EVENTS, account, payload)
    if c.call == "rollback":
        m = transfers.Moved(str(p["refund_id"]), account, c.amount_minor, c.currency, before, after)
        payload = transfers.stake_refunded(m, escrow=escrow, bet_id=c.bet_id, table_id=c.table_id,
                                           reason=p["reason"])  # fmt: skip
        return Draft("StakeRefunded", topics.WALLET_EVENTS, account, payload)
    m = transfers.Moved(str(p["payout_id"]), account, c.amount_minor, c.currency, before, after)
    payload = transfers.payout_applied(m, list(p["postings"]), bet_id=c.bet_id, table_id=c.table_id,
                                       coup_id=p["coup_id"], payout_id=p["payout_id"],
                                       result=p["result"])  # fmt: skip
    return Draft("PayoutApplied", topics.WALLET_EVENTS, account, payload)


def _bet_placed(c: Call) -> Draft:
    p = c.origin
    payload = {
        "bet_id": c.bet_id, "account_id": c.account_id, "table_id": c.table_id,
        "coup_id": p.get("coup_id"), "spot": p["spot"], "stake_minor": c.amount_minor,
        "currency": c.currency,
    }  # fmt: skip
    return Draft("BetPlaced", topics.TABLE_INBOX, c.table_id, payload, chained=False)


def refusal(c: Call, reason: Reason, detail: str) -> Draft:
    """``BetRejected`` for a debit (or the rollback that replaced it), else ``TransferRefused``."""
    name = "BetRejected" if c.request == "PlaceBet" else "TransferRefused"
    tid = stake_id(c.bet_id) if c.request == "PlaceBet" else c.transaction_id
    payload = {
        "transfer_id": tid, "account_id": c.account_id, "request": c.request, "reason": reason.value,
        "detail": detail, "bet_id": c.bet_id, "table_id": c.table_id, "amount_minor": c.amount_minor,
        "currency": c.currency,
    }  # fmt: skip
    return Draft(name, topics.WALLET_EVENTS, c.account_id, payload)


def in_flight(state: SeamlessState) -> int:
    """How many wallets have a call outstanding (zero: every transaction has its definite answer)."""
    return sum(1 for w in state.wallets.values() if w.queue)
