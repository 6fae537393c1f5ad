"""The seamless wallet's settings, its selection by the composition root, its trust rule and its state."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import SecretStr, ValidationError

from services.cli import main
from services.core import topics
from services.core.envelope import request
from services.core.processor import initial_state, step
from services.core.trust import Principal, authenticate
from services.integrations.seamless.client import answer_envelope
from services.runtime.compose import Composition
from services.runtime.embedded import snapshot
from services.runtime.keyring import demo_keyring
from services.runtime.settings import Settings
from services.settlement.seamless_stage import AdapterState, SeamlessWalletStage
from services.settlement.wallet_stage import WalletStage

SECRET = "a-seamless-secret-of-some-length"
AT = "2026-11-23T00:00:00Z"


def _settings(**kw: Any) -> Settings:
    return Settings(demo_mode=True, **kw)


@pytest.mark.parametrize(("url", "secret", "extra", "why"), [
    ("ftp://op.example", SECRET, {}, "http(s) URL"),
    ("http://op.example", SECRET, {}, "https"),
    ("https://op.example", "", {}, "CASINO_SEAMLESS_SECRET"),
    ("https://op.example", "short", {}, "CASINO_SEAMLESS_SECRET"),
    ("https://op.example", SECRET, {"seamless_currencies": "EUR,euro"}, "3-letter"),
    ("https://op.example", SECRET, {"seamless_backoff_base_ms": 5, "seamless_backoff_max_ms": 4}, "backoff"),
])  # fmt: skip
def test_bad_seamless_settings_are_refused_without_showing_the_secret(
    url: str, secret: str, extra: dict[str, Any], why: str
) -> None:
    """A setting that cannot work is refused with a reason, and the secret never appears in it."""
    with pytest.raises(ValidationError) as caught:
        _settings(seamless_url=url, seamless_secret=SecretStr(secret), **extra)
    assert why in str(caught.value)
    assert SECRET not in str(caught.value)


def test_the_composition_root_selects_the_adapter_only_when_configured() -> None:
    """Without a URL settlement runs the internal wallet stage; with one, the adapter, guarded as
    settlement, for the configured currencies, with the configured retry policy."""
    plain = Composition.from_settings(_settings())
    assert type(plain.wallet_stage()) is WalletStage
    seamless = Composition.from_settings(_settings(
        seamless_url="http://127.0.0.1:9", seamless_secret=SecretStr(SECRET), seamless_currencies="EUR, USD",
        seamless_backoff_base_ms=7, seamless_backoff_max_ms=70, seamless_debit_window_ms=700,
    ))  # fmt: skip
    stage = seamless.wallet_stage()
    assert isinstance(stage, SeamlessWalletStage)
    assert stage.currencies == frozenset({"EUR", "USD"})
    policy = stage.policy
    assert (policy.backoff_base_ms, policy.backoff_max_ms, policy.debit_window_ms) == (7, 70, 700)
    assert stage.guard is not None and stage.guard.own.principal == Principal.SETTLEMENT
    assert any(isinstance(p, SeamlessWalletStage) for p in seamless.service("settlement"))
    assert SECRET not in repr(seamless.seamless)


def _bet() -> Any:
    ring = demo_keyring()
    payload = {"account_id": "p0", "bet_id": "b1", "table_id": "T1", "coup_id": "c1", "spot": "banker",
               "stake_minor": 100, "currency": "EUR"}  # fmt: skip
    env = request("PlaceBet", topics.WALLET_REQUESTS, "p0", payload, event_id="pb1", occurred_at=AT,
                  producer="terminal")  # fmt: skip
    return authenticate(env, ring.key(Principal.TERMINAL))


def test_an_answer_written_by_anyone_but_settlement_is_refused_and_changes_nothing() -> None:
    """A terminal forging the operator's ``ok`` cannot place a bet: not_permitted, no state change;
    the same answer from settlement's shell places it."""
    composition = Composition.from_settings(
        _settings(seamless_url="http://127.0.0.1:9", seamless_secret=SecretStr(SECRET))
    )
    stage = composition.wallet_stage()
    state = initial_state(stage)
    [asked] = step(stage, state, _bet())
    answer = {"transaction_id": "debit/b1", "account_id": "p0", "attempt": 0, "status": "ok",
              "balance_minor": 900, "elapsed_ms": 1}  # fmt: skip
    forged = answer_envelope(asked, answer, demo_keyring().guard(Principal.TERMINAL))
    before = state.inner
    [dead] = step(stage, state, forged)
    assert (dead.type, dead.payload["reason"]) == ("DeadLetter", "not_permitted")
    assert state.inner == before
    real = answer_envelope(asked, answer, composition.settlement_guard())
    assert "BetPlaced" in [e.type for e in step(stage, state, real)]


def test_the_adapter_state_survives_a_snapshot() -> None:
    """A state with a call in flight is written and read back as data, equal to itself."""
    stage = SeamlessWalletStage()
    state = initial_state(stage)
    step(stage, state, _bet())
    tp = snapshot.state_type(stage)
    assert tp is AdapterState
    again = snapshot.loads(snapshot.dumps(state.inner, tp), tp)
    assert again.seamless.wallets["p0"].queue == state.inner.seamless.wallets["p0"].queue
    assert again == state.inner


def test_demo_seamless_with_a_url_but_no_secret_is_one_line_and_exit_2(tmp_path: Any, capsys: Any) -> None:
    """Pointing the demo at an operator without CASINO_SEAMLESS_SECRET is refused before any call."""
    code = main(["demo", "--seamless", "https://op.example", "--db", str(tmp_path / "d.db"), "--coups", "1"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "CASINO_SEAMLESS_SECRET" in err
