"""Issue #28's boundary attacks by insiders holding one legitimate key, on the embedded log: each is
refused at the input with its reason code and an alert, and every table, wallet and audit stream comes
out byte for byte as without it (no minor unit moved beyond the writer's rights; the winners are paid)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from services.core import topics
from services.core.envelope import Envelope, parse_record, request
from services.core.ledger import table_accounts
from services.core.trust import Principal, authenticate
from services.runtime.compose import Composition
from services.runtime.embedded.bus import EmbeddedBus
from services.runtime.keyring import Keyring, new_keyring
from tests.helpers import attacks
from tests.helpers.attacks import T0, T

STREAMS = (topics.TABLE_EVENTS, topics.WALLET_EVENTS)


def _run(db: Path, ring: Keyring, forgeries: list[Envelope]) -> list[Envelope]:
    bus = EmbeddedBus(db, Composition(ring).pipeline())
    try:
        attacks.play(bus, ring, forgeries)
        return [parse_record(raw) for *_, raw in bus.log.iter_all()]
    finally:
        bus.close()


def _as(
    ring: Keyring, who: Principal, type_: str, key: str, payload: dict[str, Any], event_id: str
) -> Envelope:
    topic = topics.TABLE_INBOX if type_ == "Decision" else topics.WALLET_REQUESTS
    env = request(type_, topic, key, payload, event_id=event_id, occurred_at=T0, producer=who.value)
    return authenticate(env, ring.key(who))


def insider_attacks(ring: Keyring, reference: list[Envelope]) -> list[attacks.Attack]:
    """Records written with a cashier's or a terminal's own key, reaching past that principal's rights.
    The ids they squat are the ones the reference run shows settlement derives (ids are derived, so an
    insider predicts them)."""
    coup = next(e for e in reference if e.type == "BettingOpened" and e.payload["coup_number"] == 3)
    won = next(
        e for e in reference
        if e.type == "PayoutIssued" and e.payload["coup_id"] == coup.payload["coup_id"]
        and e.payload["credit_minor"] > 0
    )  # fmt: skip
    winner, bet_id = str(won.payload["account_id"]), str(won.payload["bet_id"])
    accounts = table_accounts(T)
    cash = {"amount_minor": 1_000, "currency": "EUR"}
    bet = {"table_id": T, "coup_id": coup.payload["coup_id"], "spot": "banker", "stake_minor": 1_000,
           "currency": "EUR"}  # fmt: skip
    c, t = Principal.CASHIER, Principal.TERMINAL
    return [
        attacks.Attack("a cashier's Deposit squatting the winner's payout id",
                       _as(ring, c, "Deposit", winner,
                           {"account_id": winner, **cash, "transfer_id": f"payout/{bet_id}"}, "b1"),
                       "transfer_id_not_own"),
        attacks.Attack("a cashier's Withdraw squatting the next bet's stake id",
                       _as(ring, c, "Withdraw", winner,
                           {"account_id": winner, **cash, "transfer_id": "stake/next-bet"}, "b2"),
                       "transfer_id_not_own"),
        attacks.Attack("a cashier's Deposit under the back office's namespace",
                       _as(ring, c, "Deposit", winner,
                           {"account_id": winner, **cash, "transfer_id": "backoffice/x"}, "b3"),
                       "transfer_id_not_own"),
        attacks.Attack("a cashier's Deposit to the table's house account",
                       _as(ring, c, "Deposit", accounts.house, {"account_id": accounts.house, **cash}, "b4"),
                       "not_a_player_account"),
        attacks.Attack("a cashier's Withdraw from the table's escrow",
                       _as(ring, c, "Withdraw", accounts.escrow,
                           {"account_id": accounts.escrow, **cash}, "b5"),
                       "not_a_player_account"),
        attacks.Attack("a cashier's Deposit to the commission account",
                       _as(ring, c, "Deposit", accounts.commission,
                           {"account_id": accounts.commission, **cash}, "b6"),
                       "not_a_player_account"),
        attacks.Attack("a terminal's bet from the table's house account",
                       _as(ring, t, "PlaceBet", accounts.house,
                           {"account_id": accounts.house, "bet_id": "b7", **bet}, "b7"),
                       "not_a_player_account"),
    ]  # fmt: skip


@pytest.fixture(scope="module")
def ring() -> Keyring:
    """A private keyring (production mode)."""
    return new_keyring()


@pytest.fixture(scope="module")
def reference(ring: Keyring, tmp_path_factory: pytest.TempPathFactory) -> list[Envelope]:
    """The scenario of tests/helpers/attacks.py without forgeries."""
    return _run(tmp_path_factory.mktemp("ref") / "log.db", ring, [])


@pytest.fixture(scope="module")
def attacked(
    ring: Keyring, reference: list[Envelope], tmp_path_factory: pytest.TempPathFactory
) -> tuple[list[attacks.Attack], list[Envelope]]:
    """The scenario with every insider record written in the attack coup's betting window."""
    made = insider_attacks(ring, reference)
    return made, _run(tmp_path_factory.mktemp("att") / "log.db", ring, [a.record for a in made])


def test_each_insider_record_is_refused_with_its_reason_and_one_alert(
    attacked: tuple[list[attacks.Attack], list[Envelope]],
) -> None:
    """A cashier squatting settlement's or another writer's transfer id, a deposit or withdrawal on a
    table account, a bet from one: each dead-lettered by its consumer with its own reason code, and
    one ``refused_record`` alert."""
    made, records = attacked
    expected = {a.record.event_id: a.reason for a in made}
    assert attacks.refusals(records) == expected
    assert attacks.alerts(records) == expected


def test_no_minor_unit_moves_and_the_winner_is_paid(
    attacked: tuple[list[attacks.Attack], list[Envelope]], reference: list[Envelope]
) -> None:
    """Every table, wallet and audit stream is byte-identical to the run without the insiders' records:
    the squatted payout was applied to its winner, and no table account took a deposit or paid a bet."""
    _, records = attacked
    assert attacks.by_key(records, STREAMS) == attacks.by_key(reference, STREAMS)
    assert attacks.audit_view(records) == attacks.audit_view(reference)
    assert attacks.balances(records) == attacks.balances(reference)
    assert not [e for e in records if e.type == "TransferRefused"]


def test_a_cashier_may_still_name_ids_in_its_own_namespace(ring: Keyring, tmp_path: Path) -> None:
    """The rule takes nothing a cashier needs: a deposit under ``cashier/…`` is applied under that id."""
    deposit = _as(ring, Principal.CASHIER, "Deposit", "player:009",
                  {"account_id": "player:009", "amount_minor": 700, "currency": "EUR",
                   "transfer_id": "cashier/slip-1"}, "own-1")  # fmt: skip
    records = _run(tmp_path / "log.db", ring, [deposit])
    applied = [e.payload for e in records if e.type == "FundsDeposited" and e.key == "player:009"]
    assert ("cashier/slip-1", 700) in [(p["transfer_id"], p["amount_minor"]) for p in applied]


def test_a_log_written_before_the_rule_replays_with_the_squat_named(
    ring: Keyring, reference: list[Envelope], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's case, replayed: a log written by a pipeline without the boundary's rules (a cashier's
    deposit under ``payout/<bet_id>`` applied, the winner's payout then refused as a conflict) used to
    replay ``clean``; the replay now names the squatted id (``transfer_id_not_own``), so it never is."""
    from services.core import trust  # noqa: PLC0415
    from services.runtime.replay import replay  # noqa: PLC0415

    squat = insider_attacks(ring, reference)[0]
    monkeypatch.setattr(trust, "request_refusal", lambda *_args: None)  # the pipeline before the rule
    records = _run(tmp_path / "old.db", ring, [squat.record])
    monkeypatch.undo()
    conflicts = [
        e for e in records if e.type == "TransferRefused" and e.payload["reason"] == "transfer_id_conflict"
    ]
    assert conflicts, "the squat blocked the winner's payout, as it did before the rule"
    composition = Composition(ring)
    audit_key = composition.checkpoint_key()
    report = replay(
        records, keys={audit_key.key_id: audit_key.public_hex()}, writers=composition.writer_public_keys()
    )
    named = [f for f in report.findings if f["reason"] == "transfer_id_not_own"]
    assert [f["recorded"] for f in named] == [squat.record.payload["transfer_id"]]
    assert report.verdict != "clean"
