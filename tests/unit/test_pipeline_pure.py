"""The dealer, settlement and audit processors together, over an in-memory log."""

from __future__ import annotations

from collections import Counter

import pytest

from services.core import topics
from services.core.envelope import Envelope, canonical, request, sha256_hex
from services.core.processor import initial_state, step
from services.runtime.replay import replay
from services.settlement.wallet_stage import WalletStage
from services.simulation.simulator import CURRENCY, DEFAULT_TABLES, Session, TablePlay, TableSpec
from tests.helpers.membus import MemBus


def _session(seed: int = 7, coups: int = 25, tables: int = 1) -> MemBus:
    bus = MemBus()
    Session(bus, seed=seed).run(list(DEFAULT_TABLES[:tables]), coups)
    return bus


@pytest.fixture(scope="module")
def played() -> MemBus:
    """One punto banco session of 25 coups."""
    return _session()


def test_every_transfer_balances_and_money_is_conserved(played: MemBus) -> None:
    """Every transfer's postings sum to zero, so all accounts together still hold zero."""
    totals: Counter[str] = Counter()
    for env in played.log:
        rows = env.payload.get("postings")
        if rows is None or env.topic != topics.WALLET_EVENTS:
            continue
        assert sum(r["amount_minor"] for r in rows) == 0, env.event_id
        for r in rows:
            totals[r["account"]] += r["amount_minor"]
    assert sum(totals.values()) == 0
    escrow = [v for a, v in totals.items() if a.endswith(":escrow")]
    assert escrow and all(v == 0 for v in escrow), "every stake held in escrow was released"


def test_every_accepted_bet_ends_exactly_once(played: MemBus) -> None:
    """Each accepted bet is paid, pushed or lost exactly once; each refused bet is refunded once."""
    accepted = Counter(e.payload["bet_id"] for e in played.of_type("BetAccepted"))
    paid = Counter(e.payload["bet_id"] for e in played.of_type("PayoutApplied"))
    refused = Counter(e.payload["bet_id"] for e in played.of_type("BetRefused"))
    refunded = Counter(e.payload["bet_id"] for e in played.of_type("StakeRefunded"))
    assert accepted and set(accepted.values()) == {1}
    assert paid == accepted
    assert refunded == refused


def test_wallet_balances_follow_payouts(played: MemBus) -> None:
    """A wallet's last balance equals its deposits less stakes plus credits, from the events alone."""
    expected: Counter[str] = Counter()
    last: dict[str, int] = {}
    for env in (
        played.of_type("FundsDeposited")
        + played.of_type("StakeReserved")
        + played.of_type("PayoutApplied")
        + played.of_type("StakeRefunded")
    ):
        sign = -1 if env.type == "StakeReserved" else 1
        expected[env.key] += sign * env.payload["amount_minor"]
    for env in played.log:
        if env.topic == topics.WALLET_EVENTS and "balance_after_minor" in env.payload:
            last[env.key] = env.payload["balance_after_minor"]
    assert dict(expected) == last


def test_audit_is_clean_and_replay_agrees(played: MemBus) -> None:
    """Audit raised nothing in play, and a fresh replay of the log finds nothing either."""
    assert played.of_type("AuditFinding") == []
    report = replay(played.log)
    assert report.clean, report.to_dict()
    assert report.coups == 25


def test_same_seed_same_log() -> None:
    """Two sessions with one seed write byte-identical logs; another seed writes another log."""
    a, b, c = _session(seed=3, coups=8), _session(seed=3, coups=8), _session(seed=4, coups=8)
    assert [e.to_json() for e in a.log] == [e.to_json() for e in b.log]
    assert [e.to_json() for e in a.log] != [e.to_json() for e in c.log]
    assert replay(a.log).digest == replay(b.log).digest != replay(c.log).digest


def test_redelivering_every_record_changes_nothing(played: MemBus) -> None:
    """Feeding every input record to fresh processors twice gives the outputs of feeding it once."""
    inputs = [e for e in played.log if e.producer in ("operator", "terminal")]
    once, twice = MemBus(), MemBus()
    for env in inputs:
        once.publish([env])
        once.drain()
        twice.publish([env, env])
        twice.drain()
    # twice's log holds each input twice; drop the repeats and compare outputs
    seen: set[str] = set()
    dedup = [e for e in twice.log if not (e.event_id in seen or seen.add(e.event_id))]  # type: ignore[func-returns-value]
    assert [e.to_json() for e in dedup] == [e.to_json() for e in once.log]


def test_tampered_payout_is_found(played: MemBus) -> None:
    """A payout whose credit was inflated is reported with its bet id, even with its hash redone."""
    log = list(played.log)
    i = next(i for i, e in enumerate(log) if e.type == "PayoutIssued" and e.payload["result"] == "win")
    env = log[i]
    rows = [dict(r) for r in env.payload["postings"]]
    for r in rows:  # a careful forger keeps the postings balanced and the wallet row equal to the credit
        if r["account"] == env.payload["account_id"]:
            r["amount_minor"] += 100
        elif r["account"].endswith(":house"):
            r["amount_minor"] -= 100
    payload = dict(env.payload, credit_minor=env.payload["credit_minor"] + 100, postings=rows)
    body = env.body() | {"payload": payload}
    log[i] = Envelope(**body, hash=sha256_hex(canonical(body)))
    report = replay(log)
    assert not report.clean
    reasons = {f["reason"] for f in report.findings}
    assert "payout_mismatch" in reasons
    assert any(f["subject"].get("bet_id") == env.payload["bet_id"] for f in report.findings)


def _wallet_request(type_: str, account: str, payload: dict[str, object], n: int) -> Envelope:
    at = "2026-11-22T20:00:00.000Z"
    body = {"account_id": account, **payload}
    return request(
        type_, topics.WALLET_REQUESTS, account, body, event_id=f"req-{n}", occurred_at=at, producer="terminal"
    )


def test_wallet_refuses_overdraft_and_conflicting_transfer_ids() -> None:
    """A bet the wallet cannot cover is rejected; a reused transfer id with other content is refused,
    with the same content it is a no-op."""
    stage = WalletStage()
    state = initial_state(stage)
    dep = {"amount_minor": 1000, "currency": "EUR", "transfer_id": "dep-1"}
    out = step(stage, state, _wallet_request("Deposit", "player:1", dep, 1))
    assert [e.type for e in out] == ["FundsDeposited"]
    bet = {"bet_id": "b1", "table_id": "T", "spot": "player", "stake_minor": 1001, "currency": "EUR"}
    out = step(stage, state, _wallet_request("PlaceBet", "player:1", bet, 2))
    assert [(e.type, e.payload["reason"]) for e in out] == [("BetRejected", "insufficient_funds")]
    assert step(stage, state, _wallet_request("Deposit", "player:1", dep, 3)) == []
    out = step(stage, state, _wallet_request("Deposit", "player:1", dep | {"amount_minor": 5}, 4))
    assert [(e.type, e.payload["reason"]) for e in out] == [("TransferRefused", "transfer_id_conflict")]
    assert state.inner.balances["player:1"] == 1000


def test_contract_breaking_payout_is_found(played: MemBus) -> None:
    """A payout whose credit no longer matches its own wallet posting breaks the contract: a finding."""
    log = list(played.log)
    i = next(i for i, e in enumerate(log) if e.type == "PayoutIssued" and e.payload["result"] == "win")
    env = log[i]
    body = env.body() | {"payload": dict(env.payload, credit_minor=env.payload["credit_minor"] + 1)}
    log[i] = Envelope(**body, hash=sha256_hex(canonical(body)))
    report = replay(log)
    reasons = [f["reason"] for f in report.findings]
    assert reasons[0] == "invalid_payload"
    assert report.findings[0]["subject"]["event_id"] == env.event_id
    # the round it belonged to can no longer complete: a later signed checkpoint disagrees too, and the
    # wallet's signed record of that payout names the hash it had (cause_missing)
    assert set(reasons[1:]) <= {"checkpoint_mismatch", "cause_missing"}


def test_malformed_request_goes_to_dead_letter() -> None:
    """A request with a float amount is dead-lettered with a reason and the original; state unchanged."""
    stage = WalletStage()
    state = initial_state(stage)
    out = step(
        stage, state, _wallet_request("Deposit", "player:1", {"amount_minor": 10.5, "currency": "EUR"}, 1)
    )
    assert [e.topic for e in out] == [topics.DEADLETTER]
    assert out[0].payload["reason"] == "invalid_payload"
    assert "amount_minor" in out[0].payload["detail"]
    assert "10.5" in out[0].payload["original"]
    assert state.inner.balances == {}


def test_chain_break_is_found(played: MemBus) -> None:
    """Deleting one dealer event breaks its table's chain: replay reports a sequence gap."""
    log = list(played.log)
    i = next(i for i, e in enumerate(log) if e.type == "CardDealt")
    del log[i]
    report = replay(log)
    assert "seq_gap" in {f["reason"] for f in report.findings}


def test_sealed_event_is_self_consistent(played: MemBus) -> None:
    """Every event's hash is the SHA-256 of its canonical body."""
    for env in played.log:
        assert env.hash == env.expected_hash()


def test_a_stake_off_the_tables_unit_is_refused_and_refunded() -> None:
    """A baccarat banque table with a stake unit of 1.00 refuses a punter's 10.50 (``bad_amount``) like
    any other bet it cannot take, and the stake goes back to the wallet (it was a dead letter at the
    dealer, the stake left in escrow for good)."""
    bus = MemBus()
    session = Session(bus, seed=3, players=2)
    play = TablePlay(session, TableSpec("T-banque", "baccarat_banque", {"stake_unit_minor": 100}))
    banker, punter = session.accounts()
    for account in (banker, punter):
        session.wallet("Deposit", account, {"amount_minor": 100_000, "currency": CURRENCY})
    play.open()
    session.command("OpenBetting", "T-banque", {})
    session.drain()
    coup_id = session.finish(play._opened_coup())
    for account, spot, stake in ((banker, "bank", 20_000), (punter, "right", 1_050)):
        bet = {"bet_id": f"{spot}-bet", "table_id": "T-banque", "coup_id": coup_id, "spot": spot,
               "stake_minor": stake, "currency": CURRENCY}  # fmt: skip
        session.wallet("PlaceBet", account, bet)
        session.drain()
    assert [(e.payload["bet_id"], e.payload["reason"]) for e in bus.of_type("BetRefused")] == [
        ("right-bet", "bad_amount")
    ]
    assert bus.of_type("DeadLetter") == []
    refunds = bus.of_type("StakeRefunded")
    assert [(e.payload["bet_id"], e.key) for e in refunds] == [("right-bet", punter)]
    assert refunds[0].payload["balance_after_minor"] == 100_000
