"""The boundary (services.core.boundary, docs/trust.md): what a writer holding one legitimate key may
name — transfer ids in its own namespace, player accounts only — and audit's flag on a wallet event
that broke it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.audit.processor import Audit
from services.core import boundary, topics
from services.core.envelope import Draft, Envelope, request, seal
from services.core.ledger import cage_account, table_accounts
from services.core.seamless import operator_account
from services.core.trust import POLICY, Principal, authorize

T = "2026-11-22T20:00:00.000Z"


def _deposit(principal: Principal, transfer_id: str | None, account: str = "player:001") -> Envelope:
    payload: dict[str, Any] = {"account_id": account, "amount_minor": 100, "currency": "EUR"}
    if transfer_id is not None:
        payload["transfer_id"] = transfer_id
    return request("Deposit", topics.WALLET_REQUESTS, account, payload, event_id="e1", occurred_at=T,
                   producer=principal.value)  # fmt: skip


def test_the_writers_that_may_choose_an_id_are_the_policys() -> None:
    """The principals whose namespace a chosen transfer id may be in are exactly those the policy lets
    write the request (the two tables cannot drift apart)."""
    for type_, writers in boundary.CHOSEN_ID_WRITERS.items():
        assert {p.value for p in POLICY[(topics.WALLET_REQUESTS, type_)]} == writers


def test_derived_namespaces_are_no_principals() -> None:
    """No principal's own namespace is one of settlement's derived kinds (``payout/``, ``stake/``…)."""
    assert not {p.value for p in Principal} & boundary.DERIVED_KINDS


@given(tid=st.text(min_size=1, max_size=40).filter(lambda s: not any(c.isspace() for c in s)),
       principal=st.sampled_from([Principal.CASHIER, Principal.BACKOFFICE]))  # fmt: skip
@settings(max_examples=200, deadline=None)
def test_a_chosen_transfer_id_is_permitted_only_in_the_writers_own_namespace(
    tid: str, principal: Principal
) -> None:
    """Whatever id a cashier or the back office names, it is permitted iff it is ``<itself>/<something>``;
    otherwise refused ``transfer_id_not_own`` (so a derived ``payout/…`` or another writer's id never)."""
    refusal = authorize(_deposit(principal, tid), principal)
    mine = tid.startswith(f"{principal.value}/") and len(tid) > len(principal.value) + 1
    assert (refusal is None) == mine
    if not mine:
        assert refusal is not None and refusal.reason == "transfer_id_not_own"


@pytest.mark.parametrize("tid", ["payout/b-1", "stake/b-1", "refund/b-1", "deposit/e9", "sync/x/0",
                                 "backoffice/x", "cashier/", "cashier"])  # fmt: skip
def test_a_cashier_takes_no_id_another_will_need(tid: str) -> None:
    """Settlement's derived ids, the back office's and an empty own id are all refused to a cashier."""
    refusal = authorize(_deposit(Principal.CASHIER, tid), Principal.CASHIER)
    assert refusal is not None and refusal.reason == "transfer_id_not_own"


def test_a_deposit_without_an_id_is_permitted() -> None:
    """The wallet stage derives ``deposit/<event_id>``: naming none is always fine."""
    assert authorize(_deposit(Principal.CASHIER, None), Principal.CASHIER) is None


SYSTEM = [*[getattr(table_accounts("T1"), f) for f in ("escrow", "house", "commission", "bank")],
          cage_account("EUR"), operator_account("EUR")]  # fmt: skip


@pytest.mark.parametrize("account", SYSTEM)
@pytest.mark.parametrize("type_", ["Deposit", "Withdraw", "PlaceBet"])
def test_money_from_outside_moves_only_player_accounts(type_: str, account: str) -> None:
    """A deposit, a withdrawal or a bet on a table's, the cage's or the operator's account is refused
    ``not_a_player_account``, whoever writes it."""
    payload: dict[str, Any] = {"account_id": account, "amount_minor": 100, "currency": "EUR"}
    if type_ == "PlaceBet":
        payload = {"account_id": account, "bet_id": "b", "table_id": "T1", "spot": "banker",
                   "stake_minor": 100, "currency": "EUR"}  # fmt: skip
    env = request(type_, topics.WALLET_REQUESTS, account, payload, event_id="e1", occurred_at=T, producer="x")
    for principal in POLICY[(topics.WALLET_REQUESTS, type_)]:
        refusal = authorize(env, principal)
        assert refusal is not None and refusal.reason == "not_a_player_account", principal


# --- audit flags a wallet event beyond the boundary ----------------------------------------------------


def _wallet_event(type_: str, account: str, tid: str, **extra: Any) -> Envelope:
    payload = {"transfer_id": tid, "account_id": account, "amount_minor": 100, "currency": "EUR",
               "postings": [{"account": cage_account("EUR"), "amount_minor": -100},
                            {"account": account, "amount_minor": 100}],
               "balance_before_minor": 0, "balance_after_minor": 100, **extra}  # fmt: skip
    draft = Draft(type_, topics.WALLET_EVENTS, account, payload)
    return seal(draft, event_id=f"w-{tid}", occurred_at=T, producer="settlement", cause=None, head=None)


def _findings(env: Envelope) -> list[str]:
    audit = Audit(signing=None)
    _, drafts = audit.handle(audit.initial(), env)
    return [str(d.payload["reason"]) for d in drafts if d.type == "AuditFinding"]


@pytest.mark.parametrize(
    ("type_", "account", "tid", "want"),
    [
        ("FundsDeposited", "player:001", "payout/b-1", ["transfer_id_not_own"]),
        ("FundsDeposited", "player:001", "stake/b-1", ["transfer_id_not_own"]),
        ("FundsWithdrawn", "player:001", "deposit/e1", ["transfer_id_not_own"]),
        ("FundsDeposited", "table:T1:house", "deposit/e1", ["not_a_player_account"]),
        ("FundsDeposited", "player:001", "deposit/e1", []),
        ("FundsDeposited", "player:001", "cashier/slip-7", []),
        ("FundsDeposited", "player:001", "backoffice/9", []),
    ],
)  # fmt: skip
def test_audit_flags_a_wallet_event_beyond_the_boundary(
    type_: str, account: str, tid: str, want: list[str]
) -> None:
    """A deposit or withdrawal applied under an id outside its namespaces, or to a table account, is a
    finding naming it (a log written before the rule, or by a rogue settlement key); one inside is none."""
    env = _wallet_event(type_, account, tid)
    assert _findings(env) == want


@pytest.mark.parametrize(("type_", "kind"), [("StakeReserved", "stake"), ("PayoutApplied", "payout"),
                                             ("StakeRefunded", "refund")])  # fmt: skip
def test_a_bets_movement_goes_by_its_own_bet_id(type_: str, kind: str) -> None:
    """A stake, payout or refund transfer under another bet's id is a finding; under its own, none."""
    assert boundary.transfer_id_problem(type_, f"{kind}/b-1", "b-1") is None
    assert boundary.transfer_id_problem(type_, f"{kind}/b-2", "b-1") is not None
    assert boundary.transfer_id_problem(type_, "cashier/b-1", "b-1") is not None
