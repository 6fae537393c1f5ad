"""Mutation tests: plausible settlement and dealer bugs, injected into their code, are each caught by audit
(live and in the replay) with the right reason, because audit judges with its own model.

Each bug is monkeypatched into the *settlement's or dealer's own module namespace* while a session is
played; audit imports neither, so it runs unchanged beside the bug. The log the bug wrote is then
replayed (the patch removed) and must give a root finding with the bug's reason code.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import pytest

import services.dealer.processor as dealer_mod
import services.settlement.payout_stage as settlement_mod
from services.core.baccarat.engine import CoupResult, TableConfig
from services.core.contract import Written
from services.core.envelope import Envelope
from services.core.ledger import Accounts, Payout, Wager, table_accounts
from services.core.signing import DEMO_PUBLIC_KEYS
from services.runtime.replay import replay
from services.simulation.simulator import DEFAULT_TABLES, Session
from tests.helpers.membus import MemBus

SIDE_SPOTS = (
    "player_pair", "banker_pair", "dragon_bonus_player", "dragon_bonus_banker", "dragon_7", "panda_8",
)  # fmt: skip


class _Variant:
    """A variant whose ``settle`` is rewritten by a bug (everything else delegated)."""

    def __init__(self, inner: Any, bug: Callable[[Payout, Accounts], Payout], rounding: str | None) -> None:
        self.inner, self.bug, self.rounding = inner, bug, rounding

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def settle(
        self, result: CoupResult, wagers: Sequence[Wager], config: TableConfig, accounts: Accounts
    ) -> tuple[Payout, ...]:
        if self.rounding is not None:
            config = replace(config, commission_rounding=self.rounding)
        return tuple(self.bug(p, accounts) for p in self.inner.settle(result, wagers, config, accounts))


def _settle_bug(bug: Callable[[Payout, Accounts], Payout], rounding: str | None = None) -> Any:
    real = settlement_mod.get_variant

    def patch(m: pytest.MonkeyPatch) -> None:
        m.setattr(settlement_mod, "get_variant", lambda vid: _Variant(real(vid), bug, rounding))

    return patch


def _moved(p: Payout, accounts: Accounts, to_wallet: int) -> Payout:
    """``p`` with ``to_wallet`` more credited to the wallet, taken from the house (postings stay balanced)."""
    rows = dict(p.postings)
    rows[p.account_id] = rows.get(p.account_id, 0) + to_wallet
    rows[accounts.house] = rows.get(accounts.house, 0) - to_wallet
    postings = tuple((a, m) for a, m in rows.items() if m)
    return replace(p, credit_minor=p.credit_minor + to_wallet, postings=postings)


def _tie_not_pushed(p: Payout, accounts: Accounts) -> Payout:
    if p.result != "push" or p.spot not in ("banker", "player"):
        return p
    lost = _moved(p, accounts, -p.credit_minor)
    return replace(lost, result="lose")


def _side_bet_ratio(p: Payout, accounts: Accounts) -> Payout:
    if p.result != "win" or p.spot not in SIDE_SPOTS:
        return p
    paid = _moved(p, accounts, p.stake_minor)  # one more unit per unit staked
    return replace(paid, win_minor=p.win_minor + p.stake_minor)


def _stake_not_returned(p: Payout, accounts: Accounts) -> Payout:
    if p.result != "win":
        return p
    return _moved(p, accounts, -p.stake_minor)


def _commission_to_house(m: pytest.MonkeyPatch) -> None:
    def accounts(table_id: str) -> Accounts:
        real = table_accounts(table_id)
        return replace(real, commission=real.house)

    m.setattr(settlement_mod, "table_accounts", accounts)


def _commission_reported_zero(m: pytest.MonkeyPatch) -> None:
    real = settlement_mod.payout_payload

    def payload(p: Payout, coup_id: str, table_id: str, currency: str) -> Written:
        out = real(p, coup_id, table_id, currency)
        free = Written(out.model, {**out.data, "commission_minor": 0})
        return free if out.data["commission_minor"] else out

    m.setattr(settlement_mod, "payout_payload", payload)


def _paid_twice(m: pytest.MonkeyPatch) -> None:
    real = settlement_mod.PayoutStage.decide

    def decide(self: Any, state: Any, record: Any, payload: Any) -> Any:
        events = real(self, state, record, payload)
        wins = [e for e in events if isinstance(e.payload, Written) and e.payload.data["result"] == "win"]
        again = [  # the first winning bet of each coup gets a second payout under another transfer id
            replace(e, payload=Written(p.model, {**p.data, "payout_id": f"{p.data['payout_id']}/again"}))
            for e in wins[:1]
            if isinstance(p := e.payload, Written)
        ]
        return [*events, *again]

    m.setattr(settlement_mod.PayoutStage, "decide", decide)


def _wrong_account(m: pytest.MonkeyPatch) -> None:
    real = settlement_mod.payout_payload

    def payload(p: Payout, coup_id: str, table_id: str, currency: str) -> Written:
        out = real(p, coup_id, table_id, currency)
        if out.data["result"] != "win":
            return out
        other = "acct-not-the-bettor"
        rows = [{**r, "account": other} if r["account"] == p.account_id else r for r in out.data["postings"]]
        return Written(out.model, {**out.data, "account_id": other, "postings": rows})

    m.setattr(settlement_mod, "payout_payload", payload)


def _card_out_of_order(m: pytest.MonkeyPatch) -> None:
    real = dealer_mod._card_drawn

    def dealt(t: Any, hand: str, card: str) -> Any:
        pos = t.shoe.position
        if pos in (10, 11):  # the 11th and 12th cards of each shoe dealt in swapped order
            card = t.shoe.order[21 - pos]
        return real(t, hand, card)

    m.setattr(dealer_mod, "_card_drawn", dealt)


MUTATIONS: list[tuple[str, Callable[[pytest.MonkeyPatch], None], str]] = [
    ("commission rounded up, not down", _settle_bug(lambda p, a: p, rounding="ceil"), "commission_mismatch"),
    ("commission booked to the house account", _commission_to_house, "commission_posting_mismatch"),
    ("commission reported as 0 while posted", _commission_reported_zero, "commission_posting_mismatch"),
    ("tie not pushed", _settle_bug(_tie_not_pushed), "payout_mismatch"),
    ("side bet paid at the wrong ratio", _settle_bug(_side_bet_ratio), "payout_mismatch"),
    ("stake not returned on a win", _settle_bug(_stake_not_returned), "payout_mismatch"),
    ("a bet paid twice", _paid_twice, "duplicate_payout"),
    ("a payout to the wrong account", _wrong_account, "payout_mismatch"),
    ("a card dealt out of order", _card_out_of_order, "card_mismatch"),
]


def _play(patch: Callable[[pytest.MonkeyPatch], None] | None, coups: int = 40) -> list[Envelope]:
    with pytest.MonkeyPatch.context() as m:
        if patch is not None:
            patch(m)
        bus = MemBus()
        Session(bus, seed=11).run(list(DEFAULT_TABLES[:2]), coups)
    return bus.log


@pytest.fixture(scope="module")
def clean_log() -> list[Envelope]:
    """The session with no bug: the baseline each mutation must differ from."""
    return _play(None)


def test_the_unmutated_session_is_clean(clean_log: list[Envelope]) -> None:
    """Without a bug, neither live audit nor replay finds anything (so each finding below is the bug's)."""
    assert [e for e in clean_log if e.type == "AuditFinding"] == []
    report = replay(
        clean_log, keys=DEMO_PUBLIC_KEYS
    )  # the keys supplied: the session signs with the demo key
    assert report.verdict == "clean", report.to_dict()["groups"][:3]


@pytest.mark.parametrize(("bug", "patch", "reason"), MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_each_injected_bug_is_caught_with_its_reason(
    clean_log: list[Envelope], bug: str, patch: Callable[[pytest.MonkeyPatch], None], reason: str
) -> None:
    """The bug changes what is written, and audit (live, and the replay of the log) reports it under the
    bug's reason code as a root finding naming the events concerned."""
    log = _play(patch)
    written = [e.payload for e in log if e.type in ("PayoutIssued", "CardDealt")]
    assert written != [e.payload for e in clean_log if e.type in ("PayoutIssued", "CardDealt")], (
        f"{bug}: the session never exercised the bug"
    )
    live = {e.payload["reason"] for e in log if e.type == "AuditFinding"}
    assert reason in live, (bug, live)
    report = replay(log)
    assert report.verdict == "findings"
    roots = [g["root"] for g in report.groups]
    assert reason in {r["reason"] for r in roots}, (bug, [r["reason"] for r in roots])
    hit = next(r for r in roots if r["reason"] == reason)
    assert hit["explanation"]
    assert hit["subject"].get("event_id") or hit["subject"].get("event_ids")
