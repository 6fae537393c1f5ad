"""The boundary (docs/trust.md): what a principal holding one legitimate key may name, beyond which
types it may write (:data:`services.core.trust.POLICY`).

An authentic record from a permitted writer can still reach past that writer's rights through the ids
and accounts it names. Three rules close that, each checked here and applied in the one policy place
(:func:`services.core.trust.authorize`), so a record that breaks one is a dead letter with a reason
code and changes nothing:

* **Transfer ids are namespaced by kind and writer.** Settlement derives every id it applies from
  what it settles (:func:`stake_id`, :func:`payout_id`, :func:`refund_id`, :func:`deposit_id`,
  :func:`withdraw_id`, :func:`sync_id`: the kinds in :data:`DERIVED_KINDS`). An outside writer that
  names its own id (a cashier's ``Deposit.transfer_id``) must name it in its own namespace,
  ``<principal>/…`` (:func:`own_namespace`): a cashier can no longer take ``payout/<bet_id>`` and so
  block a winner's payout as a ``transfer_id_conflict``.
* **Money from outside moves only player accounts.** A deposit, a withdrawal or a bet names a player's
  wallet, never a table's escrow, house, commission or bank account, the cage or the seamless
  operator's account (:func:`is_player_account`).
* **A wallet event's transfer id is in its kind's namespace.** Audit (and so the replay) flags one that
  is not (:func:`transfer_id_problem`): such an event moved money under an id another movement needs.

The binding of a decision to who may make it is the dealer's (it needs the coup's bets):
:func:`decision_form_refusal` here checks only what the writer's principal allows it to claim.

Pure: no I/O; principals are named by their string value (this module is below :mod:`trust`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from services.core import topics
from services.core.errors import Reason

STAKE, PAYOUT, REFUND, DEPOSIT, WITHDRAW, SYNC = "stake", "payout", "refund", "deposit", "withdraw", "sync"

DERIVED_KINDS: Final = frozenset({STAKE, PAYOUT, REFUND, DEPOSIT, WITHDRAW, SYNC})
"""The namespaces of the transfer ids settlement derives (``<kind>/…``): no outside writer names one."""


def stake_id(bet_id: str) -> str:
    """The transfer id of a bet's stake held in escrow (a ``PlaceBet``; a seamless debit's too)."""
    return f"{STAKE}/{bet_id}"


def payout_id(bet_id: str) -> str:
    """The id of a bet's payout (``PayoutIssued.payout_id``) and of the transfer that applies it."""
    return f"{PAYOUT}/{bet_id}"


def refund_id(bet_id: str) -> str:
    """The id of a refused bet's refund (``BetRefundDue.refund_id``) and of its transfer."""
    return f"{REFUND}/{bet_id}"


def deposit_id(event_id: str) -> str:
    """The transfer id of a ``Deposit`` that names none: derived from its event id."""
    return f"{DEPOSIT}/{event_id}"


def withdraw_id(event_id: str) -> str:
    """The transfer id of a ``Withdraw`` that names none: derived from its event id."""
    return f"{WITHDRAW}/{event_id}"


def sync_id(transaction_id: str, attempt: int) -> str:
    """The transfer id of a seamless wallet's ``OperatorBalanceSynced`` for one answered try."""
    return f"{SYNC}/{transaction_id}/{attempt}"


def own_namespace(principal: str) -> str:
    """The prefix of every transfer id ``principal`` may choose itself: ``<principal>/``."""
    return f"{principal}/"


CHOSEN_ID_WRITERS: Final[Mapping[str, frozenset[str]]] = {
    "Deposit": frozenset({"cashier", "backoffice"}),
    "Withdraw": frozenset({"cashier", "backoffice"}),
}
"""The requests whose writer may choose the transfer id, and who may write them (the same principals as
:data:`services.core.trust.POLICY`; a test keeps the two equal)."""

SYSTEM_ACCOUNT_PREFIXES: Final = ("table:", "cage:", "operator:")
"""The prefixes of the accounts that are no player's (a table's escrow, house, commission and bank
accounts, the cage, the seamless operator's account: :mod:`services.core.ledger`)."""


def is_player_account(account_id: str) -> bool:
    """Whether ``account_id`` is a player's wallet (not a table's, the cage's or the operator's)."""
    return not account_id.startswith(SYSTEM_ACCOUNT_PREFIXES)


_WALLET_MOVES: Final = frozenset({"Deposit", "Withdraw", "PlaceBet"})
"""Outside requests that move a wallet: each names a player account."""


def request_refusal(
    topic: str, type_name: str, payload: Mapping[str, Any], principal: str
) -> tuple[Reason, str] | None:
    """Why ``principal`` may not write this record although :data:`~services.core.trust.POLICY` lets it
    write the type (``None`` when it may): a chosen transfer id outside its namespace
    (``transfer_id_not_own``), a wallet request on an account that is no player's
    (``not_a_player_account``), a decision in a form its principal may not claim (``not_permitted``)."""
    if topic == topics.WALLET_REQUESTS and type_name in _WALLET_MOVES:
        account = payload.get("account_id")
        if isinstance(account, str) and not is_player_account(account):
            why = f"{type_name} on {account[:80]!r}, which is no player's account"
            return Reason.NOT_A_PLAYER_ACCOUNT, why
        chosen = payload.get("transfer_id") if type_name in CHOSEN_ID_WRITERS else None
        if chosen is not None and not _in_own_namespace(chosen, principal):
            shown = repr(chosen)[:80]
            return Reason.TRANSFER_ID_NOT_OWN, f"{principal} names transfer id {shown}, outside {principal}/…"
        return None
    if topic == topics.TABLE_INBOX and type_name == "Decision":
        return decision_form_refusal(payload.get("decided_by"), principal)
    return None


def _in_own_namespace(transfer_id: object, principal: str) -> bool:
    prefix = own_namespace(principal)
    return isinstance(transfer_id, str) and transfer_id.startswith(prefix) and len(transfer_id) > len(prefix)


DEALER_FOR: Final = "dealer"
"""How a decision the operator makes at the table is recorded: ``dealer`` (no one is seated for the hand)
or ``dealer:<account>`` (on that seated player's behalf)."""


def by_dealer(decided_by: object) -> bool:
    """Whether a ``Decision``'s ``decided_by`` claims the dealer's form (absent, ``dealer``, ``dealer:…``)."""
    return (
        decided_by is None
        or decided_by == DEALER_FOR
        or (isinstance(decided_by, str) and decided_by.startswith(f"{DEALER_FOR}:"))
    )


def decision_form_refusal(decided_by: object, principal: str) -> tuple[Reason, str] | None:
    """A terminal decides as a seated player (it names the account), never as the dealer; the operator
    decides as the dealer (``dealer`` or ``dealer:<account>``), never as a player. The dealer then checks
    the account named against the coup's seats."""
    if principal == "terminal" and by_dealer(decided_by):
        return Reason.NOT_PERMITTED, "a terminal decides as the seated player (decided_by: the account)"
    if principal == "operator" and not by_dealer(decided_by):
        return Reason.NOT_PERMITTED, "the operator decides as the dealer (decided_by: dealer[:account])"
    return None


_BET_IDS: Final[Mapping[str, str]] = {
    "StakeReserved": STAKE, "PayoutApplied": PAYOUT, "StakeRefunded": REFUND,
}  # fmt: skip
_CHOSEN_BY_EVENT: Final[Mapping[str, str]] = {"FundsDeposited": "Deposit", "FundsWithdrawn": "Withdraw"}
_DERIVED_BY_EVENT: Final[Mapping[str, str]] = {
    "FundsDeposited": DEPOSIT, "FundsWithdrawn": WITHDRAW, "OperatorBalanceSynced": SYNC,
}  # fmt: skip


def transfer_id_problem(type_name: str, tid: object, bet_id: object = None) -> str | None:
    """Why a wallet event's transfer id is outside its kind's namespace (``None`` when it is in it): a
    stake, payout or refund goes by ``<kind>/<its bet id>``; a deposit or withdrawal by its derived id
    or by an id in the namespace of a principal that may write the request; a balance sync by ``sync/…``.
    Refusals move nothing and are not judged. ``tid``: the event's transfer id; ``bet_id``: its bet's."""
    if not isinstance(tid, str):
        return None
    kind = _BET_IDS.get(type_name)
    if kind is not None:
        want = f"{kind}/{bet_id}"
        return None if tid == want else f"{type_name} goes by {want!r}, not {tid[:80]!r}"
    derived = _DERIVED_BY_EVENT.get(type_name)
    if derived is None:
        return None
    if tid.startswith(f"{derived}/"):
        return None
    writers = CHOSEN_ID_WRITERS.get(_CHOSEN_BY_EVENT.get(type_name, ""), frozenset())
    if any(_in_own_namespace(tid, w) for w in writers):
        return None
    return f"{type_name} with transfer id {tid[:80]!r}: outside {derived}/… and its writers' namespaces"


def account_problem(type_name: str, account_id: str) -> str | None:
    """Why a deposit or withdrawal applied to ``account_id`` breaks the boundary (``None`` when not)."""
    if type_name in _CHOSEN_BY_EVENT and not is_player_account(account_id):
        return f"{type_name} on {account_id[:80]!r}, which is no player's account"
    return None
