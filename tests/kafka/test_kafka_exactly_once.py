"""``CASINO_EXACTLY_ONCE`` on the test broker (Tansu 0.6, memory storage), which has no transactions:
the first test records that fact (if Tansu gains them, it fails, and the transactional path can then be
tested here end to end); a worker asked for transactions on it stops with one line instead of falling
back to the idempotent path unasked."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer  # type: ignore[import-untyped]
from aiokafka.errors import KafkaError  # type: ignore[import-untyped]
from pydantic import SecretStr

from services.core import topics
from services.runtime.kafka.bus import Workers, quick_settings, worker_env
from services.runtime.kafka.worker import EXIT_CONFIG, ensure_topics
from services.runtime.settings import Settings

pytestmark = pytest.mark.kafka

WAIT_S = 90.0
"""Upper bound on any wait (a safety net against a hang, not a timing assertion)."""


def test_tansu_refuses_a_transactional_producer(kafka_broker: str) -> None:
    """``InitProducerId`` with a transactional id is refused by the test broker: its transactions cannot
    be tested here."""

    async def start() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=kafka_broker, transactional_id=f"probe-{uuid.uuid4().hex[:8]}"
        )
        try:
            await producer.start()
        finally:
            await producer.stop()

    with pytest.raises(KafkaError):
        asyncio.run(start())


def test_a_worker_asked_for_transactions_on_a_broker_without_them_stops_loudly(
    kafka_broker: str, tmp_path: Path
) -> None:
    """``CASINO_EXACTLY_ONCE=true`` on Tansu: the dealer's worker exits with status 78 (EX_CONFIG) and
    one ``exactly_once_refused`` line naming the setting; it handles nothing."""
    settings = quick_settings(
        Settings(bootstrap_servers=kafka_broker, topic_prefix=f"x{uuid.uuid4().hex[:10]}.", partitions=2,
                 demo_mode=True, log_level="INFO", exactly_once=True),
        env={},
    )  # fmt: skip
    asyncio.run(ensure_topics(settings, list(topics.ALL_TOPICS)))
    workers = Workers(settings, tmp_path, services=("dealer",))
    workers.start()
    proc = workers.procs["dealer"]
    deadline = time.monotonic() + WAIT_S
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    status = workers.stop()["dealer"]
    log = workers.log("dealer")
    assert status == EXIT_CONFIG, log[-2000:]
    assert log.count('"exactly_once_refused"') == 1
    assert "CASINO_EXACTLY_ONCE" in log and '"batch"' not in log


def test_a_seamless_caller_asked_for_transactions_on_a_broker_without_them_stops_with_one_line(
    kafka_broker: str, tmp_path: Path
) -> None:
    """``CASINO_EXACTLY_ONCE=true`` on Tansu: the caller takes its lease, is refused a transactional
    producer and exits 2 with one ``casino-ledger: error:`` line naming the setting (no traceback)."""
    settings = quick_settings(
        Settings(bootstrap_servers=kafka_broker, topic_prefix=f"x{uuid.uuid4().hex[:10]}.", partitions=2,
                 demo_mode=True, exactly_once=True, seamless_url="http://127.0.0.1:9",
                 seamless_secret=SecretStr("exactly-once-caller-secret")),
        env={},
    )  # fmt: skip
    asyncio.run(ensure_topics(settings, list(topics.ALL_TOPICS)))
    env = {**os.environ, **worker_env(settings)}
    done = subprocess.run(
        [sys.executable, "-m", "services.cli.seamless_caller"],
        env=env, capture_output=True, timeout=WAIT_S, check=False,
    )  # fmt: skip
    errors = [line for line in done.stderr.decode().splitlines() if line.startswith("casino-ledger: error:")]
    assert done.returncode == 2, done.stderr.decode()[-2000:]
    assert len(errors) == 1 and "CASINO_EXACTLY_ONCE" in errors[0]
    assert "Traceback" not in done.stderr.decode()
