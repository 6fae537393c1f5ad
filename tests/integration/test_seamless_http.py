"""The seamless adapter against the reference operator wallet over real HTTP (uvicorn on a loopback
port), on the embedded log, under seeded fault mixes; and `casino-ledger reconcile` on its export."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from services.cli import main
from services.core.seamless import RetryPolicy
from services.integrations.seamless.caller import SeamlessBus
from services.integrations.seamless.client import signature
from services.integrations.seamless.reference_wallet import Faults, export, serve
from services.runtime.compose import Composition
from services.runtime.replay import read_db, replay
from services.runtime.settings import SeamlessConfig
from services.simulation.simulator import Session, demo_tables
from tests.helpers.seamless import check_done

SECRET = "reference-wallet-test-secret"
FUNDS = 5_000_000
POLICY = RetryPolicy(backoff_base_ms=5, backoff_max_ms=40, debit_window_ms=600)

MIXES: dict[str, dict[str, Any]] = {
    "healthy": {},
    "latency": {"latency_ms": 30},
    "timeouts_after_applying": {"timeout_after_apply": 0.15},
    "5xx_before_applying": {"error_before": 0.3},
    "5xx_after_applying": {"error_after": 0.3},
    "duplicate_deliveries": {"duplicate_delivery": 0.3},
    "insufficient_funds": {"insufficient": 0.1},
    "operator_down": {"down_s": 1.5},
    "everything_at_once": {"latency_ms": 10, "timeout_after_apply": 0.05, "error_before": 0.1,
                           "error_after": 0.1, "duplicate_delivery": 0.1, "insufficient": 0.03},
}  # fmt: skip


def play(
    tmp_path: Path, mix: dict[str, Any], *, coups: int = 4, seed: int = 11
) -> tuple[Path, Any, dict[str, int]]:
    """A seeded session of two tables through the adapter, the wallet faulty as ``mix`` says, then
    healthy again until every call has its answer. Returns the log, the wallet and the funding."""
    faults = Faults(seed=seed, hang_s=0.3, **{k: v for k, v in mix.items() if k != "down_s"})
    accounts = {f"player:{n:03d}": FUNDS for n in range(1, 13)}
    log = tmp_path / "log.db"
    with serve(tmp_path / "operator.db", SECRET.encode(), accounts=accounts, faults=faults) as wallet:
        config = SeamlessConfig(url=wallet.url, secret=SecretStr(SECRET), timeout_s=0.2, policy=POLICY)
        composition = replace(Composition.demo(), seamless=config)
        bus = SeamlessBus(log, composition.pipeline(), config, composition.settlement_guard())
        if "down_s" in mix:
            faults.down(mix["down_s"])
        try:
            Session(bus, seed=seed, keyring=composition.keyring, deposits=False).run(demo_tables(2), coups)
            faults.clear()
            bus.drain()
        finally:
            bus.close()
        export(wallet.ledger, tmp_path / "operator.json")
        export(wallet.ledger, tmp_path / "operator.csv")
        rows, balances, stats = wallet.ledger.transactions(), wallet.ledger.balances(), wallet.stats
    return log, {"rows": rows, "balances": balances, "stats": stats}, accounts


@pytest.mark.parametrize("name", list(MIXES))
def test_under_each_fault_mix_the_operator_ends_as_the_rules_say(tmp_path: Path, name: str) -> None:
    """After the faults stop: balances to the minor unit, one closure per debit, nothing applied twice,
    reconcile finds nothing, and the replay of the log is clean."""
    log, wallet, funded = play(tmp_path, MIXES[name])
    records = list(read_db(log))
    check_done(records, wallet["rows"], wallet["balances"], funded)
    assert replay(read_db(log), keys=Composition.demo().checkpoint_public_keys()).clean
    assert wallet["stats"].bad_signatures == 0
    faulted = set(wallet["stats"].statuses) - {"ok", "duplicate", "insufficient_funds"}
    if name not in ("healthy", "latency", "duplicate_deliveries", "insufficient_funds"):
        assert faulted, "the mix injected no fault"
    if name == "duplicate_deliveries":
        assert wallet["stats"].statuses.get("duplicate", 0) > 0


def test_a_long_outage_rolls_debits_back_and_bets_are_rejected_not_lost(tmp_path: Path) -> None:
    """With the operator down past the betting window, debits are rolled back (bets rejected as
    wallet_unavailable) and, once it is back, every rollback lands: nothing is left open."""
    log, wallet, funded = play(tmp_path, {"down_s": 2.5}, coups=2)
    records = list(read_db(log))
    rejected = [r for r in records if b'"wallet_unavailable"' in r and b'"BetRejected"' in r]
    assert rejected
    check_done(records, wallet["rows"], wallet["balances"], funded)


def test_reconcile_reports_nothing_then_every_kind_of_difference(tmp_path: Path, capsys: Any) -> None:
    """`reconcile` exits 0 on a matching export (JSON or CSV); a dropped row, a changed amount and a
    row applied twice are each listed, exit 1; an unreadable export is one line and exit 2."""
    log, _, _ = play(tmp_path, {"error_after": 0.2})
    for name in ("operator.json", "operator.csv"):
        assert main(["reconcile", "--operator", str(tmp_path / name), "--db", str(log)]) == 0
    capsys.readouterr()
    data = json.loads((tmp_path / "operator.json").read_text())
    rows = data["transactions"]
    credit = next(r for r in rows if r["kind"] == "credit" and r["amount_minor"] > 0)
    dropped = next(r for r in rows if r["kind"] == "debit")
    data["transactions"] = [
        {**r, "amount_minor": r["amount_minor"] + 1} if r is credit else r for r in rows if r is not dropped
    ] + [rows[-1]]
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(data))
    assert main(["reconcile", "--operator", str(tampered), "--db", str(log), "--json"]) == 1
    kinds = {d["kind"]: d["transaction_id"] for d in json.loads(capsys.readouterr().out)["differences"]}
    assert kinds["missing_at_operator"] == dropped["transaction_id"]
    assert kinds["amount_mismatch"] == credit["transaction_id"]
    assert kinds["applied_twice"] == rows[-1]["transaction_id"]
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}')
    assert main(["reconcile", "--operator", str(bad), "--db", str(log)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_the_wallet_refuses_an_unsigned_or_forged_call(tmp_path: Path) -> None:
    """Without the right X-Signature a call is refused (401) and moves nothing."""
    with serve(tmp_path / "op.db", SECRET.encode(), accounts={"p": 100}) as wallet:
        body = json.dumps({"transaction_id": "debit/x", "account_id": "p", "round_id": "r", "bet_id": "x",
                           "amount_minor": 50, "currency": "EUR"}).encode()  # fmt: skip
        forged = signature(b"not-the-secret-at-all", body)
        for headers in ({}, {"X-Signature": forged}):
            assert httpx.post(f"{wallet.url}/debit", content=body, headers=headers).status_code == 401
        good = httpx.post(
            f"{wallet.url}/debit", content=body, headers={"X-Signature": signature(SECRET.encode(), body)}
        )
        assert good.json() == {"status": "ok", "balance_minor": 50}
        assert wallet.ledger.balances() == {"p": 50}
        assert wallet.stats.bad_signatures == 2


def test_demo_seamless_plays_against_the_reference_wallet_and_reconciles(tmp_path: Path, capsys: Any) -> None:
    """`demo --seamless` with no URL plays the seeded session against the in-process reference wallet:
    a clean verdict and reconcile with no difference."""
    db = tmp_path / "demo.db"
    assert main(["demo", "--seamless", "--tables", "2", "--coups", "3", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "reconcile against" in out and ": 0 differences" in out
    assert "clean" in out
    assert main(["reconcile", "--operator", f"{db}.operator.json", "--db", str(db)]) == 0
    assert main(["demo", "--seamless", "--tables", "1", "--coups", "2", "--db", str(db), "--force"]) == 0
    assert ": 0 differences" in capsys.readouterr().out, "a forced rerun starts a fresh operator ledger"


def test_the_back_office_read_model_shows_the_operators_balances(tmp_path: Path) -> None:
    """Projected from a seamless log, every player's balance in the back office is the operator's."""
    from services.integrations.backoffice import queries  # noqa: PLC0415 (the back office is optional here)
    from services.integrations.backoffice.migrate import upgrade  # noqa: PLC0415
    from services.integrations.backoffice.projector import Projector  # noqa: PLC0415
    from services.integrations.backoffice.schema import make_engine  # noqa: PLC0415
    from services.runtime.embedded.store import EmbeddedLog  # noqa: PLC0415

    log, wallet, _ = play(tmp_path, {"error_after": 0.2}, coups=3)
    engine = make_engine(f"sqlite:///{tmp_path / 'read.db'}")
    upgrade(engine)
    with EmbeddedLog(log, readonly=True) as opened:
        Projector(engine).catch_up(opened, batch=500)
    players = {r["account_id"] for r in wallet["rows"]}
    assert players
    with engine.connect() as c:
        for account in players:
            assert queries.balance(c, account)["balance_minor"] == wallet["balances"][account], account
    engine.dispose()
