"""Two seamless callers on a real broker (Tansu) and the reference wallet: the lease
(docs/adr/0007-kafka-lease.md) lets one call the operator, the other says so once and waits, and takes
over when the first is SIGKILLed, without calling the wallet twice for anything."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from pydantic import SecretStr

from services.core import topics
from services.integrations.seamless.reference_wallet import serve
from services.runtime.compose import Composition
from services.runtime.kafka.bus import KafkaBus, Workers, quick_settings, worker_env
from services.runtime.kafka.worker import ensure_topics
from services.runtime.replay import replay
from services.runtime.settings import Settings
from services.simulation.simulator import DEFAULT_TABLES, Session
from tests.helpers.seamless import check_done

pytestmark = pytest.mark.kafka

SECRET = "kafka-seamless-lease-secret"
FUNDS = 5_000_000
TABLES = [t for t in DEFAULT_TABLES if t.variant == "punto_banco"][:2]
WAIT_S = 90.0
"""Upper bound on any wait (a safety net against a hang, not a timing assertion)."""


def _caller(settings: Settings, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, **worker_env(settings), "CASINO_LOG_FORMAT": "json"}
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "services.cli.seamless_caller"],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip


def _wait_line(log: Path, line: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + WAIT_S
    while line not in (log.read_text(errors="replace") if log.exists() else ""):
        assert proc.poll() is None, log.read_text(errors="replace")[-2000:]
        if time.monotonic() > deadline:
            pytest.fail(f"no {line} in {log}")
        time.sleep(0.2)


def test_a_second_caller_waits_then_takes_over_without_calling_twice(
    kafka_broker: str, tmp_path: Path
) -> None:
    """Caller A holds the lease, caller B logs one ``lease_wait`` and makes no call; with everything
    drained A is SIGKILLed and B takes over: the wallet never answered ``duplicate`` (no request was
    called twice), B called the second half, the balances are the rules' and the replay is clean."""
    accounts = {f"player:{n:03d}": FUNDS for n in range(1, 13)}
    with serve(tmp_path / "operator.db", SECRET.encode(), accounts=accounts) as wallet:
        base = Settings(
            bootstrap_servers=kafka_broker, topic_prefix=f"l{uuid.uuid4().hex[:10]}.", partitions=3,
            demo_mode=True, log_level="INFO", seamless_url=wallet.url, seamless_secret=SecretStr(SECRET),
        )  # fmt: skip
        settings = quick_settings(base, env={})
        asyncio.run(ensure_topics(settings, list(topics.ALL_TOPICS)))
        workers = Workers(settings, tmp_path / "workers")
        workers.start()
        log_a, log_b = tmp_path / "a.log", tmp_path / "b.log"
        a = _caller(settings, log_a)
        _wait_line(log_a, '"lease_held"', a)
        b = _caller(settings, log_b)
        _wait_line(log_b, '"lease_wait"', b)
        coups, played, calls_by_a = 4, 0, 0

        def after_coup() -> None:
            nonlocal played, calls_by_a
            played += 1
            if played == len(TABLES) * coups // 2:
                bus.drain()  # every call so far answered and committed
                calls_by_a = wallet.stats.calls
                a.send_signal(signal.SIGKILL)
                assert a.wait(30) == -signal.SIGKILL

        try:
            with KafkaBus(settings, workers=workers) as bus:
                bus.inputs["seamless"] = (topics.WALLET_EVENTS,)  # drain waits for the caller's commits
                Session(bus, seed=11, deposits=False).run(list(TABLES), coups, progress=after_coup)
                bus.drain()
                records = bus.consume_all()
        finally:
            for proc in (a, b):
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
                    proc.wait(30)
            status = workers.stop()
        assert all(code == 0 for code in status.values()), status
        assert b.returncode == 0, log_b.read_text(errors="replace")[-2000:]
        rows, balances = wallet.ledger.transactions(), wallet.ledger.balances()
        statuses = dict(wallet.stats.statuses)
    text_b = log_b.read_text(errors="replace")
    assert text_b.count('"lease_wait"') == 1
    assert '"calls"' not in text_b.split('"lease_held"')[0], "B called while A held the lease"
    assert 0 < calls_by_a < sum(statuses.values()), "A did not call, or B took nothing over"
    assert statuses.get("duplicate", 0) == 0, statuses
    check_done(records, rows, balances, accounts)
    report = replay(records, keys=Composition.demo().checkpoint_public_keys())
    assert report.clean, report.to_dict()["findings"][:5]
