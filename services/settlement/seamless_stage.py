"""The wallet adapter stage: settlement's wallet stage for the currencies whose balances the operator
keeps (docs/integration.md), selected by the composition root (``CASINO_SEAMLESS_URL``).

It reads ``casino.wallet.requests`` like the internal :class:`~services.settlement.wallet_stage.WalletStage`
and keeps its name and output namespace (``settlement.wallet``), so the rest of the pipeline sees the
same events. A request in a seamless currency (every currency unless ``CASINO_SEAMLESS_CURRENCIES``
lists some) goes to the pure state machine of :mod:`services.core.seamless`: bets, payouts and refunds
become calls, recorded answers (``SeamlessCallAnswered``) fold in; deposits and withdrawals in such a
currency are refused (``operator_wallet``: the operator's cashier moves that money). Any other
currency stays with the internal wallet stage, unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from services.core import topics
from services.core.envelope import Draft, Envelope
from services.core.errors import DomainError, Reason
from services.core.processor import Processor
from services.core.seamless import (
    CALL_OF,
    RetryPolicy,
    SeamlessState,
    call_for,
    enqueue,
    fingerprint,
    fold_answer,
    refusal,
)
from services.settlement.wallet_stage import WalletStage, WalletState


@dataclass(frozen=True, slots=True)
class AdapterState:
    """The internal wallets (other currencies) and the seamless calls."""

    internal: WalletState = field(default_factory=WalletState)
    seamless: SeamlessState = field(default_factory=SeamlessState)


class SeamlessWalletStage(Processor[AdapterState]):
    """Settlement's wallet stage with the seamless adapter in front (see the module docstring)."""

    name = "settlement"
    stage = "settlement.wallet"
    inputs = (topics.WALLET_REQUESTS,)
    formerly = ("services.settlement.seamless_stage",)

    def __init__(
        self,
        internal: WalletStage | None = None,
        *,
        currencies: frozenset[str] | None = None,
        policy: RetryPolicy | None = None,
    ) -> None:
        self.internal = internal or WalletStage()
        self.currencies = currencies
        self.policy = policy or RetryPolicy()

    def initial(self) -> AdapterState:
        """No wallets, no calls."""
        return AdapterState()

    def seamless_currency(self, currency: object) -> bool:
        """Whether ``currency``'s balances are the operator's."""
        return self.currencies is None or currency in self.currencies

    def handle(self, state: AdapterState, record: Envelope) -> tuple[AdapterState, list[Draft]]:
        """Fold an answer, turn a request into a call, or hand another currency to the internal stage."""
        kind, p = record.type, record.payload
        if kind == "SeamlessCallAnswered":
            inner, drafts = fold_answer(state.seamless, p, self.policy)
            return replace(state, seamless=inner), drafts
        if not self.seamless_currency(p.get("currency")):
            wallet, drafts = self.internal.handle(state.internal, record)
            return replace(state, internal=wallet), drafts
        if kind in ("Deposit", "Withdraw"):
            return state, [self._operator_wallet(kind, record)]
        if kind not in CALL_OF:
            raise DomainError(Reason.UNKNOWN_TYPE, f"the wallet stage does not take {kind!r}")
        call = call_for(kind, p, record.key)
        if kind == "PlaceBet" and call.amount_minor > self.internal.amount_max_minor:
            return state, [refusal(call, Reason.AMOUNT_TOO_LARGE, "over the ceiling of one stake")]
        inner, drafts = enqueue(state.seamless, call, fingerprint(kind, p), self.policy)
        return replace(state, seamless=inner), drafts

    @staticmethod
    def _operator_wallet(kind: str, record: Envelope) -> Draft:
        p = record.payload
        name = "WithdrawalRejected" if kind == "Withdraw" else "TransferRefused"
        tid = str(p.get("transfer_id") or f"{kind.lower()}/{record.event_id}")
        payload = {
            "transfer_id": tid, "account_id": record.key, "request": kind,
            "reason": Reason.OPERATOR_WALLET.value, "amount_minor": p.get("amount_minor"),
            "currency": p.get("currency"),
            "detail": "this currency's balances are kept by the operator's wallet (seamless)",
        }  # fmt: skip
        return Draft(name, topics.WALLET_EVENTS, record.key, payload)
