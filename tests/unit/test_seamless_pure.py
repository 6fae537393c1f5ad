"""The seamless adapter's pure state machine (services/core/seamless.py) through the wallet stage."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.core import topics
from services.core.envelope import Envelope, request
from services.core.processor import ProcessorState, initial_state, step
from services.core.seamless import (
    RetryPolicy,
    SeamlessState,
    backoff_ms,
    call_for,
    enqueue,
    fingerprint,
    fold_answer,
    in_flight,
    transaction_id,
)
from services.integrations.seamless.client import answer_envelope
from services.settlement.seamless_stage import AdapterState, SeamlessWalletStage
from tests.helpers.seamless import ModelOperator, check_done

AT = "2026-11-23T00:00:00Z"
POLICY = RetryPolicy(backoff_base_ms=100, backoff_max_ms=800, debit_window_ms=3_000)
FAULTS = ("ok", "timeout_before", "timeout_after", "error_before", "error_after", "duplicate", "insufficient")


class Harness:
    """The adapter stage fed by requests, its calls answered by a model operator under a fault schedule."""

    def __init__(self, schedule: list[tuple[str, int]], accounts: int = 3, funds: int = 10_000) -> None:
        self.stage = SeamlessWalletStage(policy=POLICY)
        self.state: ProcessorState[AdapterState] = initial_state(self.stage)
        self.initial = {f"p{n}": funds for n in range(accounts)}
        self.operator = ModelOperator(dict(self.initial))
        self.schedule = list(schedule)
        self.log: list[Envelope] = []
        self.outstanding: list[Envelope] = []
        self.n = 0

    def feed(self, env: Envelope) -> None:
        self.log.append(env)
        for out in step(self.stage, self.state, env):
            self.log.append(out)
            if out.type == "SeamlessCallRequested":
                open_txs = {o.payload["transaction_id"] for o in self.outstanding}
                assert out.payload["transaction_id"] not in open_txs, (
                    "two calls in flight for one transaction"
                )
                open_wallets = {o.payload["account_id"] for o in self.outstanding}
                assert out.payload["account_id"] not in open_wallets, "two calls in flight for one wallet"
                self.outstanding.append(out)

    def send(self, type_: str, account: str, payload: dict[str, Any]) -> None:
        self.n += 1
        self.feed(request(type_, topics.WALLET_REQUESTS, account, {"account_id": account, **payload},
                          event_id=f"r{self.n}", occurred_at=AT, producer="t"))  # fmt: skip

    def answer_all(self) -> None:
        """Answer calls until none is outstanding: faults from the schedule, then a healthy operator."""
        while self.outstanding:
            call = self.outstanding.pop(0)
            fault, elapsed = self.schedule.pop(0) if self.schedule else ("ok", 5)
            self.feed(answer_envelope(call, self._answer(call.payload, fault, elapsed), None))

    def _answer(self, p: dict[str, Any], fault: str, elapsed: int) -> dict[str, Any]:
        base = {"transaction_id": p["transaction_id"], "account_id": p["account_id"], "attempt": p["attempt"],
                "elapsed_ms": elapsed, "http_status": 200, "detail": None}  # fmt: skip
        if fault in ("timeout_before", "error_before"):
            status = "timeout" if fault == "timeout_before" else "server_error"
            return {**base, "status": status, "balance_minor": None}
        body = self.operator.apply(p, insufficient=fault == "insufficient")
        if fault == "duplicate":
            body = self.operator.apply(p)
        if fault in ("timeout_after", "error_after"):
            return {
                **base,
                "status": "timeout" if fault == "timeout_after" else "server_error",
                "balance_minor": None,
            }
        status = body["status"] if body["status"] != "cancelled" else "bad_answer"
        return {**base, "status": status, "balance_minor": body["balance_minor"]}

    def play(self, bets: int, seed: int) -> None:
        """Place bets, answer, settle each placed bet (a payout or a refund), answer again."""
        rng = random.Random(seed)
        for b in range(bets):
            account = f"p{rng.randrange(len(self.initial))}"
            self.send("PlaceBet", account, {"bet_id": f"b{b}", "table_id": "T1", "coup_id": "c1",
                                            "spot": "banker", "stake_minor": rng.choice((100, 250, 5_000)),
                                            "currency": "EUR"})  # fmt: skip
        self.answer_all()
        for env in [e for e in self.log if e.type == "BetPlaced"]:
            p = env.payload
            if rng.random() < 0.2:
                self.send("BetRefundDue", p["account_id"], {
                    "refund_id": f"refund/{p['bet_id']}", "bet_id": p["bet_id"], "table_id": "T1",
                    "coup_id": "c1", "stake_minor": p["stake_minor"], "currency": "EUR",
                    "reason": "betting_closed",
                })  # fmt: skip
            else:
                credit = rng.choice((0, p["stake_minor"], 2 * p["stake_minor"]))
                self.send("PayoutIssued", p["account_id"], _payout(p, credit))
        self.answer_all()


def _payout(p: dict[str, Any], credit: int) -> dict[str, Any]:
    stake, account = p["stake_minor"], p["account_id"]
    rows = [("table:T1:escrow", -stake), ("table:T1:house", stake - credit), (account, credit)]
    result = "lose" if credit == 0 else "push" if credit == stake else "win"
    return {"payout_id": f"payout/{p['bet_id']}", "bet_id": p["bet_id"], "table_id": "T1", "coup_id": "c1",
            "spot": "banker", "stake_minor": stake, "result": result, "win_minor": max(0, credit - stake),
            "commission_minor": 0, "credit_minor": credit, "currency": "EUR",
            "postings": [{"account": a, "amount_minor": m} for a, m in rows if m]}  # fmt: skip


schedules = st.lists(st.tuples(st.sampled_from(FAULTS), st.integers(0, 2_500)), max_size=60)


@settings(max_examples=120, deadline=None)
@given(schedule=schedules, seed=st.integers(0, 2**16))
def test_any_fault_schedule_ends_with_the_operator_agreeing_with_the_rules(
    schedule: list[Any], seed: int
) -> None:
    """Under any schedule of timeouts, 5xx before and after applying, duplicate deliveries and refusals,
    once the faults stop: balances match the rules, each debit closes once, nothing applies twice, and
    reconcile finds nothing."""
    h = Harness(schedule)
    h.play(bets=12, seed=seed)
    assert not h.outstanding
    assert h.state.inner.seamless.wallets and all(
        not w.queue for w in h.state.inner.seamless.wallets.values()
    )
    check_done(h.log, h.operator.rows, h.operator.balances, h.initial)


def test_a_debit_without_an_answer_for_the_whole_window_is_rolled_back_and_the_bet_rejected() -> None:
    """Timeouts until the betting window is spent turn the debit into a rollback; the bet never
    reaches the table and the operator ends where it started."""
    h = Harness([("timeout_after", 1_000)] * 3)
    h.send("PlaceBet", "p0", {"bet_id": "b1", "table_id": "T1", "coup_id": "c1", "spot": "banker",
                              "stake_minor": 500, "currency": "EUR"})  # fmt: skip
    h.answer_all()
    calls = [(e.payload["call"], e.payload["attempt"]) for e in h.log if e.type == "SeamlessCallRequested"]
    assert calls == [("debit", 0), ("debit", 1), ("debit", 2), ("rollback", 0)]
    rejected = [e.payload["reason"] for e in h.log if e.type == "BetRejected"]
    assert rejected == ["wallet_unavailable"]
    assert not [e for e in h.log if e.type == "BetPlaced"]
    assert h.operator.balances["p0"] == 10_000
    assert [r["kind"] for r in h.operator.rows] == ["debit", "rollback"]


def test_a_debit_cancelled_before_it_arrived_is_never_applied() -> None:
    """A debit lost before the operator saw it, then rolled back: the rollback cancels it (amount 0)."""
    h = Harness([("timeout_before", 3_000)])
    h.send("PlaceBet", "p0", {"bet_id": "b1", "table_id": "T1", "coup_id": "c1", "spot": "banker",
                              "stake_minor": 500, "currency": "EUR"})  # fmt: skip
    h.answer_all()
    assert [(r["kind"], r["amount_minor"]) for r in h.operator.rows] == [("rollback", 0)]
    assert h.operator.apply({"transaction_id": "debit/b1", "account_id": "p0", "call": "debit",
                             "amount_minor": 500})["status"] == "cancelled"  # fmt: skip
    check_done(h.log, h.operator.rows, h.operator.balances, h.initial)


def test_retries_reuse_the_transaction_id_with_capped_exponential_backoff() -> None:
    """Each retry asks for the same transaction id, waiting 100, 200, 400, 800, 800 ms."""
    h = Harness([("error_before", 10)] * 5)
    h.send("PlaceBet", "p1", {"bet_id": "b9", "table_id": "T1", "coup_id": "c1", "spot": "banker",
                              "stake_minor": 100, "currency": "EUR"})  # fmt: skip
    h.answer_all()
    asked = [e.payload for e in h.log if e.type == "SeamlessCallRequested"]
    assert {a["transaction_id"] for a in asked} == {transaction_id("debit", "b9")}
    assert [a["delay_ms"] for a in asked] == [0, 100, 200, 400, 800, 800]
    assert [backoff_ms(POLICY, n) for n in range(7)] == [0, 100, 200, 400, 800, 800, 800]


def test_a_stale_or_repeated_answer_changes_nothing() -> None:
    """An answer to an earlier try, or the same answer twice, emits nothing and moves nothing."""
    h = Harness([("error_before", 10)])
    h.send("PlaceBet", "p0", {"bet_id": "b1", "table_id": "T1", "coup_id": "c1", "spot": "banker",
                              "stake_minor": 100, "currency": "EUR"})  # fmt: skip
    first = h.outstanding[0]
    h.answer_all()
    before = copy.deepcopy(h.state.inner)  # the maps change in place (SeamlessState)
    stale = answer_envelope(first, {"transaction_id": "debit/b1", "account_id": "p0", "attempt": 0,
                                    "status": "ok", "balance_minor": 1, "elapsed_ms": 0}, None)  # fmt: skip
    stale = stale.model_copy(update={"event_id": "another-delivery"})
    assert step(h.stage, h.state, stale) == []
    assert h.state.inner == before


@pytest.mark.parametrize(("status", "event", "reason"), [
    ("insufficient_funds", "BetRejected", "insufficient_funds"),
    ("unknown_account", "BetRejected", "unknown_account"),
])  # fmt: skip
def test_a_definite_refusal_of_a_debit_rejects_the_bet(status: str, event: str, reason: str) -> None:
    """The operator's refusal is final: the bet is rejected with its reason, never retried or placed."""
    h = Harness([])
    h.send("PlaceBet", "p0", {"bet_id": "b1", "table_id": "T1", "coup_id": "c1", "spot": "banker",
                              "stake_minor": 100, "currency": "EUR"})  # fmt: skip
    call = h.outstanding.pop()
    h.feed(answer_envelope(call, {"transaction_id": "debit/b1", "account_id": "p0", "attempt": 0,
                                  "status": status, "balance_minor": 50, "elapsed_ms": 3}, None))  # fmt: skip
    assert [e.payload["reason"] for e in h.log if e.type == event] == [reason]
    assert not h.outstanding and not [e for e in h.log if e.type == "BetPlaced"]


def test_deposits_in_a_seamless_currency_are_refused_and_other_currencies_stay_internal() -> None:
    """The operator's cashier moves seamless money; a currency not configured uses the internal wallet."""
    stage = SeamlessWalletStage(currencies=frozenset({"EUR"}))
    state = initial_state(stage)
    eur = request("Deposit", topics.WALLET_REQUESTS, "p0", {"account_id": "p0", "amount_minor": 5,
                  "currency": "EUR"}, event_id="d1", occurred_at=AT, producer="cashier")  # fmt: skip
    usd = request("Deposit", topics.WALLET_REQUESTS, "p1", {"account_id": "p1", "amount_minor": 5,
                  "currency": "USD"}, event_id="d2", occurred_at=AT, producer="cashier")  # fmt: skip
    out_eur = step(stage, state, eur)
    out_usd = step(stage, state, usd)
    assert [(e.type, e.payload["reason"]) for e in out_eur] == [("TransferRefused", "operator_wallet")]
    assert [e.type for e in out_usd] == ["FundsDeposited"]
    assert state.inner.internal.balances == {"p1": 5}


def test_a_debit_success_places_the_bet_after_the_stake_event_with_the_operators_balances() -> None:
    """Success emits the operator's balance as a sync, then StakeReserved, then BetPlaced to the table."""
    h = Harness([])
    h.send("PlaceBet", "p0", {"bet_id": "b1", "table_id": "T1", "coup_id": "c1", "spot": "banker",
                              "stake_minor": 100, "currency": "EUR"})  # fmt: skip
    h.answer_all()
    tail = [e for e in h.log if e.type in ("OperatorBalanceSynced", "StakeReserved", "BetPlaced")]
    assert [e.type for e in tail] == ["OperatorBalanceSynced", "StakeReserved", "BetPlaced"]
    assert tail[0].payload["balance_after_minor"] == 10_000
    assert (tail[1].payload["balance_before_minor"], tail[1].payload["balance_after_minor"]) == (
        10_000,
        9_900,
    )
    assert tail[2].topic == topics.TABLE_INBOX


HOSTILE = st.one_of(
    st.none(), st.booleans(), st.integers(), st.sampled_from([10**30, -1, 0, 2**63]),
    st.text(max_size=20), st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers()),
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(kind=st.sampled_from(["PlaceBet", "PayoutIssued", "BetRefundDue", "SeamlessCallAnswered"]),
       field=st.integers(0, 20), value=HOSTILE, drop=st.booleans())  # fmt: skip
def test_a_hostile_record_is_refused_or_dead_lettered_never_an_internal_error(
    kind: str, field: int, value: Any, drop: bool
) -> None:
    """Any field of a request or an answer replaced by a hostile value (or removed): the adapter never
    fails inside (no internal_error), and a dead letter leaves its state as it was."""
    h = Harness([])
    h.send("PlaceBet", "p0", {"bet_id": "b1", "table_id": "T1", "coup_id": "c1", "spot": "banker",
                              "stake_minor": 100, "currency": "EUR"})  # fmt: skip
    asked = h.outstanding[0]
    valid: dict[str, dict[str, Any]] = {
        "PlaceBet": {"account_id": "p0", "bet_id": "b2", "table_id": "T1", "coup_id": "c1", "spot": "banker",
                     "stake_minor": 100, "currency": "EUR"},
        "PayoutIssued": {"account_id": "p0",
                         **_payout({"bet_id": "b1", "account_id": "p0", "stake_minor": 100}, 200)},
        "BetRefundDue": {"account_id": "p0", "refund_id": "refund/b1", "bet_id": "b1", "table_id": "T1",
                         "coup_id": "c1", "stake_minor": 100, "currency": "EUR", "reason": "betting_closed"},
        "SeamlessCallAnswered": {"transaction_id": "debit/b1", "account_id": "p0", "attempt": 0,
                                 "status": "ok", "balance_minor": 900, "http_status": 200, "elapsed_ms": 1,
                                 "detail": None},
    }  # fmt: skip
    payload = dict(valid[kind])
    name = sorted(payload)[field % len(payload)]
    if drop:
        payload.pop(name)
    else:
        payload[name] = value
    before = copy.deepcopy(h.state.inner)  # the maps change in place (SeamlessState)
    env = request(
        kind, topics.WALLET_REQUESTS, "p0", payload, event_id="hostile", occurred_at=AT, producer="t"
    )
    if kind == "SeamlessCallAnswered":
        env = env.model_copy(update={"causation_id": asked.event_id})
    outs = step(h.stage, h.state, env)
    reasons = [o.payload["reason"] for o in outs if o.type == "DeadLetter"]
    assert "internal_error" not in reasons, outs
    if reasons:
        assert h.state.inner == before


def test_a_long_run_keeps_every_transaction_and_refuses_an_old_id_reused_with_other_content() -> None:
    """The maps change in place (no copy of every transaction per request): after many bets on many
    wallets each id is still known, a re-delivered old request changes nothing and emits nothing, and an
    old id with other content is a ``transfer_id_conflict``."""
    policy = RetryPolicy()
    state = SeamlessState()
    bets = [({"bet_id": f"b{n}", "table_id": "T1", "coup_id": "c1", "spot": "banker", "stake_minor": 100,
              "currency": "EUR"}, f"p{n % 7}") for n in range(60)]  # fmt: skip
    for p, account in bets:
        call = call_for("PlaceBet", p, account)
        state, _ = enqueue(state, call, fingerprint("PlaceBet", p), policy)
        answer = {"transaction_id": call.transaction_id, "account_id": account, "attempt": 0, "status": "ok",
                  "balance_minor": 10_000, "elapsed_ms": 1}  # fmt: skip
        state, drafts = fold_answer(state, answer, policy)
        assert [d.type for d in drafts][-2:] == ["StakeReserved", "BetPlaced"]
    assert len(state.seen) == 60 and not in_flight(state)
    first, account = bets[0]
    before = copy.deepcopy(state)

    def place(p: dict[str, Any]) -> tuple[SeamlessState, list[Any]]:
        return enqueue(state, call_for("PlaceBet", p, account), fingerprint("PlaceBet", p), policy)

    assert place(first) == (before, [])
    again, drafts = place({**first, "stake_minor": 200})
    assert again == before and [d.payload["reason"] for d in drafts] == ["transfer_id_conflict"]
