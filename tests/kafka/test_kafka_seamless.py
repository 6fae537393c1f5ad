"""The seamless adapter on a real broker: the settlement worker runs the adapter stage, the HTTP
caller runs as its own process, the reference wallet answers over real HTTP with faults, and both
the caller and the settlement worker are SIGKILLed mid-session."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from pydantic import SecretStr

from services.core import topics
from services.integrations.seamless.reference_wallet import Faults, serve
from services.runtime.compose import Composition
from services.runtime.kafka.bus import KafkaBus, Workers, quick_settings, worker_env
from services.runtime.kafka.worker import ensure_topics
from services.runtime.replay import replay
from services.runtime.settings import Settings
from services.simulation.simulator import DEFAULT_TABLES, Session
from tests.helpers.seamless import check_done

pytestmark = pytest.mark.kafka

SECRET = "kafka-seamless-test-secret"
FUNDS = 5_000_000
TABLES = [t for t in DEFAULT_TABLES if t.variant in ("punto_banco", "chemin_de_fer")]


def _caller(settings: Settings, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, **worker_env(settings)}
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "services.cli.seamless_caller"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def test_seamless_session_through_sigkills_of_the_caller_and_settlement(
    kafka_broker: str, tmp_path: Path
) -> None:
    """Under timeouts, 5xx after applying and duplicate deliveries, with the caller and then the
    settlement worker SIGKILLed and restarted mid-session: once the faults stop, the operator's
    balances are the rules', each debit closes once, nothing applies twice, reconcile finds nothing,
    and the replay is clean."""
    accounts = {f"player:{n:03d}": FUNDS for n in range(1, 13)}
    faults = Faults(seed=5, error_after=0.15, timeout_after_apply=0.05, duplicate_delivery=0.1, hang_s=0.5)
    with serve(tmp_path / "operator.db", SECRET.encode(), accounts=accounts, faults=faults) as wallet:
        base = Settings(
            bootstrap_servers=kafka_broker, topic_prefix=f"s{uuid.uuid4().hex[:10]}.", partitions=3,
            demo_mode=True, log_level="INFO", seamless_url=wallet.url, seamless_secret=SecretStr(SECRET),
            seamless_timeout_s=0.3, seamless_backoff_base_ms=5, seamless_backoff_max_ms=50,
            seamless_debit_window_ms=2_000,
        )  # fmt: skip
        settings = quick_settings(base, env={})
        asyncio.run(ensure_topics(settings, list(topics.ALL_TOPICS)))
        workers = Workers(settings, tmp_path / "workers")
        workers.start()
        caller = _caller(settings, tmp_path / "caller.log")
        kills = {2: "caller", 5: "settlement"}
        played = 0

        def after_coup() -> None:
            nonlocal played, caller
            played += 1
            if kills.get(played) == "caller":
                caller.send_signal(signal.SIGKILL)
                assert caller.wait(30) == -signal.SIGKILL
                caller = _caller(settings, tmp_path / "caller.log")
            elif kills.get(played) == "settlement":
                assert workers.kill("settlement", signal.SIGKILL) == -signal.SIGKILL
                workers.start(["settlement"])

        try:
            with KafkaBus(settings, workers=workers) as bus:
                bus.inputs["seamless"] = (topics.WALLET_EVENTS,)  # drain waits for the caller's commits too
                session = Session(bus, seed=9, deposits=False)
                session.run(list(TABLES), 4, progress=after_coup)
                faults.clear()
                bus.drain()
                records = bus.consume_all()
        finally:
            caller.send_signal(signal.SIGTERM)
            caller.wait(30)
            status = workers.stop()
        assert played == len(TABLES) * 4
        assert all(code == 0 for code in status.values()), status
        rows, balances = wallet.ledger.transactions(), wallet.ledger.balances()
    assert set(wallet.stats.statuses) - {"ok", "duplicate"}, "no fault was injected"
    check_done(records, rows, balances, accounts)
    report = replay(records, keys=Composition.demo().checkpoint_public_keys())
    assert report.clean, report.to_dict()["findings"][:5]
    assert [e for e in records if e.type == "BetPlaced"]
    assert not [e for e in records if e.topic == topics.DEADLETTER]
