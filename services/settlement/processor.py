"""Settlement's two pure stages (DESIGN §3–§4).

**Payout stage** (input ``casino.table.events``, per table): remembers each coup's accepted bets and,
on ``CoupResolved``, asks the variant to settle them — commission, tie pushes, side-bet paytables,
player-banked flows — and writes one ``PayoutIssued`` per bet to ``casino.wallet.requests`` with its
balanced postings. A refused bet becomes a ``BetRefundDue``.

**Wallet stage** (input ``casino.wallet.requests``, per account): holds wallet balances, reserves
stakes (wallet → table escrow) and forwards ``BetPlaced`` to the table's inbox, applies payouts,
refunds, deposits and withdrawals. Every movement is a transfer with an id: the same id with the same
content is a no-op, the same id with other content is refused (``transfer_id_conflict``). No wallet
goes negative: a bet or withdrawal it cannot cover is refused with ``insufficient_funds``.

Only wallets are balanced here (the key of this stage is the wallet's account id). Table accounts
(escrow, house, commission, bank) are sums of postings; audit and the back office derive them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from services.core import topics
from services.core.baccarat import TableConfig, Wager, get_variant
from services.core.baccarat.engine import Payout, result_from_dict
from services.core.envelope import Draft, Envelope, canonical, sha256_hex
from services.core.errors import DomainError, Reason
from services.core.limits import AMOUNT_MAX_MINOR, BALANCE_MAX_MINOR
from services.core.payouts import cage_account, table_accounts
from services.core.processor import Processor

__all__ = ["PayoutStage", "WalletStage", "cage_account", "payout_payload", "table_accounts"]


# --- payout stage -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PayoutTable:
    """What the payout stage knows of one table."""

    config: TableConfig
    currency: str
    wagers: Mapping[str, tuple[Wager, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PayoutState:
    """Every table's config and the accepted bets of its open coups."""

    tables: Mapping[str, PayoutTable] = field(default_factory=dict)


def payout_payload(p: Payout, coup_id: str, table_id: str, currency: str) -> dict[str, Any]:
    """The ``PayoutIssued`` payload of one settled bet."""
    return {
        "payout_id": f"payout/{p.bet_id}", "bet_id": p.bet_id, "account_id": p.account_id,
        "table_id": table_id, "coup_id": coup_id, "spot": p.spot, "stake_minor": p.stake_minor,
        "result": p.result, "win_minor": p.win_minor, "commission_minor": p.commission_minor,
        "credit_minor": p.credit_minor, "currency": currency,
        "postings": [{"account": a, "amount_minor": m} for a, m in p.postings],
    }  # fmt: skip


class PayoutStage(Processor[PayoutState]):
    """Settlement's payout stage (see the module docstring)."""

    name = "settlement"
    stage = "settlement.payout"
    inputs = (topics.TABLE_EVENTS,)

    def initial(self) -> PayoutState:
        """No tables."""
        return PayoutState()

    def handle(self, state: PayoutState, record: Envelope) -> tuple[PayoutState, list[Draft]]:
        """Track configs and accepted bets; settle each resolved coup."""
        p, key = record.payload, record.key
        tables = dict(state.tables)
        if record.type == "TableOpened":
            tables[key] = PayoutTable(TableConfig.from_dict(p["config"]), str(p["currency"]))
            return PayoutState(tables), []
        table = tables.get(key)
        if record.type == "BetAccepted" and table is not None:
            coup_id = str(p["coup_id"])
            w = Wager(str(p["bet_id"]), str(p["account_id"]), str(p["spot"]), int(p["stake_minor"]))
            wagers = dict(table.wagers)
            wagers[coup_id] = (*wagers.get(coup_id, ()), w)
            tables[key] = replace(table, wagers=wagers)
            return PayoutState(tables), []
        if record.type == "BetRefused":
            return state, [_refund_due(p, key)]
        if record.type == "CoupResolved" and table is not None:
            return self._settle(tables, table, record)
        return state, []

    def _settle(
        self, tables: dict[str, PayoutTable], table: PayoutTable, record: Envelope
    ) -> tuple[PayoutState, list[Draft]]:
        p, key = record.payload, record.key
        coup_id = str(p["coup_id"])
        wagers = dict(table.wagers)
        accepted = wagers.pop(coup_id, ())
        variant = get_variant(table.config.variant)
        result = result_from_dict(p, variant.hands(table.config))
        payouts = variant.settle(result, accepted, table.config, table_accounts(key))
        drafts = [
            Draft(
                "PayoutIssued", topics.WALLET_REQUESTS, po.account_id,
                payout_payload(po, coup_id, key, table.currency), chained=False,
            )
            for po in payouts
        ]  # fmt: skip
        tables[key] = replace(table, wagers=wagers)
        return PayoutState(tables), drafts


def _refund_due(p: Mapping[str, Any], table_id: str) -> Draft:
    payload = {
        "refund_id": f"refund/{p['bet_id']}", "bet_id": p["bet_id"], "account_id": p["account_id"],
        "table_id": table_id, "coup_id": p.get("coup_id"), "stake_minor": p["stake_minor"],
        "currency": p["currency"], "reason": p["reason"],
    }  # fmt: skip
    return Draft("BetRefundDue", topics.WALLET_REQUESTS, str(p["account_id"]), payload, chained=False)


# --- wallet stage -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WalletState:
    """Wallet balances and currencies, and the fingerprint of every transfer applied, by id.

    The maps are changed in place by :meth:`WalletStage.handle` once a request passed every check
    (:func:`services.core.processor.step` owns the state; a handler raises only before it mutates)."""

    balances: Mapping[str, int] = field(default_factory=dict)
    currencies: Mapping[str, str] = field(default_factory=dict)
    transfers: Mapping[str, str] = field(default_factory=dict)


def _mutable(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """A state map, which is a ``dict`` (built so, decoded so from a snapshot) that only handle changes."""
    assert isinstance(mapping, dict), type(mapping)
    return mapping


def _fingerprint(payload: Mapping[str, Any]) -> str:
    return sha256_hex(canonical(dict(payload)))


def _postings(rows: list[tuple[str, int]]) -> list[dict[str, Any]]:
    assert sum(m for _, m in rows) == 0, rows
    return [{"account": a, "amount_minor": m} for a, m in rows]


class WalletStage(Processor[WalletState]):
    """Settlement's wallet stage (see the module docstring).

    ``amount_max_minor`` is the ceiling of one stake, deposit or withdrawal: a request above it is
    refused (``amount_too_large``), as is any credit that would take a wallet past
    :data:`~services.core.limits.BALANCE_MAX_MINOR`.
    """

    name = "settlement"
    stage = "settlement.wallet"
    inputs = (topics.WALLET_REQUESTS,)

    def __init__(self, amount_max_minor: int = AMOUNT_MAX_MINOR) -> None:
        if not 1 <= amount_max_minor <= BALANCE_MAX_MINOR:
            raise ValueError(f"amount_max_minor is 1 to {BALANCE_MAX_MINOR}, not {amount_max_minor}")
        self.amount_max_minor = amount_max_minor

    def initial(self) -> WalletState:
        """No wallets."""
        return WalletState()

    def handle(self, state: WalletState, record: Envelope) -> tuple[WalletState, list[Draft]]:
        """Apply one request to its wallet, exactly once per transfer id."""
        kind = record.type
        p = record.payload
        tid = _transfer_id(kind, p, record)
        fp = _fingerprint({"type": kind, **p})
        seen = state.transfers.get(tid)
        if seen == fp:
            return state, []
        account = record.key
        if seen is not None:
            return state, [self._event("TransferRefused", account, {
                "transfer_id": tid, "account_id": account, "request": kind,
                "reason": Reason.TRANSFER_ID_CONFLICT.value,
                "detail": "the same transfer id was used with different content",
            })]  # fmt: skip
        amount = _amount(kind, p)
        balance = state.balances.get(account, 0)
        currency = state.currencies.get(account, str(p.get("currency", "")))
        if kind in CEILED and amount > self.amount_max_minor:
            return state, [self._refusal(kind, account, tid, p, Reason.AMOUNT_TOO_LARGE)]
        if str(p.get("currency", currency)) != currency:
            return state, [self._refusal(kind, account, tid, p, Reason.CURRENCY_MISMATCH)]
        if kind in ("Deposit", "PayoutIssued", "BetRefundDue") and balance + amount > BALANCE_MAX_MINOR:
            return state, [self._refusal(kind, account, tid, p, Reason.AMOUNT_TOO_LARGE)]
        if kind in ("Withdraw", "PlaceBet") and amount > balance:
            return state, [self._refusal(kind, account, tid, p, Reason.INSUFFICIENT_FUNDS)]
        delta, rows, event, extra = _movement(kind, p, account, amount, currency)
        new_balance = balance + delta
        payload = {
            "transfer_id": tid, "account_id": account, "amount_minor": amount, "currency": currency,
            "postings": _postings(rows), "balance_before_minor": balance,
            "balance_after_minor": new_balance, **extra,
        }  # fmt: skip
        drafts = [self._event(event, account, payload)]
        if kind == "PlaceBet":
            drafts.append(_bet_placed(p, account))
        # Every check passed and every draft is built: only now the state changes, in place (step()
        # owns it). Copying the three maps per request cost O(every transfer ever) per record.
        _mutable(state.balances)[account] = new_balance
        _mutable(state.currencies)[account] = currency
        _mutable(state.transfers)[tid] = fp
        return state, drafts

    def _event(self, kind: str, account: str, payload: dict[str, Any]) -> Draft:
        return Draft(kind, topics.WALLET_EVENTS, account, payload)

    def _refusal(self, kind: str, account: str, tid: str, p: Mapping[str, Any], reason: Reason) -> Draft:
        name = "BetRejected" if kind == "PlaceBet" else "WithdrawalRejected"
        if kind not in ("PlaceBet", "Withdraw"):
            name = "TransferRefused"
        return self._event(name, account, {
            "transfer_id": tid, "account_id": account, "request": kind, "bet_id": p.get("bet_id"),
            "table_id": p.get("table_id"), "amount_minor": _amount(kind, p),
            "currency": p.get("currency"), "reason": reason.value,
        })  # fmt: skip


CEILED = frozenset({"Deposit", "Withdraw", "PlaceBet"})
"""The requests whose amount the ceiling bounds (payouts and refunds follow from accepted stakes)."""


def _transfer_id(kind: str, p: Mapping[str, Any], record: Envelope) -> str:
    if kind == "PlaceBet":
        return f"stake/{p['bet_id']}"
    if kind == "PayoutIssued":
        return str(p["payout_id"])
    if kind == "BetRefundDue":
        return str(p["refund_id"])
    if kind in ("Deposit", "Withdraw"):
        return str(p.get("transfer_id") or f"{kind.lower()}/{record.event_id}")
    raise DomainError(Reason.UNKNOWN_TYPE, f"the wallet stage does not take {kind!r}")


def _amount(kind: str, p: Mapping[str, Any]) -> int:
    field_name = {"PayoutIssued": "credit_minor", "PlaceBet": "stake_minor", "BetRefundDue": "stake_minor"}
    value = p[field_name.get(kind, "amount_minor")]
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise DomainError(Reason.BAD_AMOUNT, f"{kind}: an amount is a non-negative integer, not {value!r}")
    if kind != "PayoutIssued" and value == 0:
        raise DomainError(Reason.BAD_AMOUNT, f"{kind}: the amount must be positive")
    return value


def _movement(
    kind: str, p: Mapping[str, Any], account: str, amount: int, currency: str
) -> tuple[int, list[tuple[str, int]], str, dict[str, Any]]:
    """(wallet delta, postings, event type, extra payload fields) of one accepted request."""
    if kind == "Deposit":
        return amount, [(cage_account(currency), -amount), (account, amount)], "FundsDeposited", {}
    if kind == "Withdraw":
        return -amount, [(account, -amount), (cage_account(currency), amount)], "FundsWithdrawn", {}
    escrow = table_accounts(str(p["table_id"])).escrow
    bet = {"bet_id": p["bet_id"], "table_id": p["table_id"]}
    if kind == "PlaceBet":
        extra = {**bet, "coup_id": p.get("coup_id"), "spot": p["spot"]}
        return -amount, [(account, -amount), (escrow, amount)], "StakeReserved", extra
    if kind == "BetRefundDue":
        return amount, [(escrow, -amount), (account, amount)], "StakeRefunded", {**bet, "reason": p["reason"]}
    rows = [(str(r["account"]), int(r["amount_minor"])) for r in p["postings"]]
    if sum(m for _, m in rows) != 0:
        raise DomainError(Reason.BAD_AMOUNT, f"payout {p['payout_id']}: postings do not sum to zero")
    mine = sum(m for a, m in rows if a == account)
    if mine != amount:
        detail = f"payout {p['payout_id']}: wallet posting {mine} != credit {amount}"
        raise DomainError(Reason.BAD_AMOUNT, detail)
    extra = {**bet, "coup_id": p["coup_id"], "payout_id": p["payout_id"], "result": p["result"]}
    return amount, rows, "PayoutApplied", extra


def _bet_placed(p: Mapping[str, Any], account: str) -> Draft:
    payload = {
        "bet_id": p["bet_id"], "account_id": account, "table_id": p["table_id"],
        "coup_id": p.get("coup_id"), "spot": p["spot"], "stake_minor": p["stake_minor"],
        "currency": p["currency"],
    }  # fmt: skip
    return Draft("BetPlaced", topics.TABLE_INBOX, str(p["table_id"]), payload, chained=False)
