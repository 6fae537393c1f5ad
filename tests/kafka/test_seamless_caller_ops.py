# ruff: noqa: E501 (subprocess and scrape lines read best whole)

"""The seamless caller as its Deployment runs it (``casino-ledger seamless-caller``) on a real broker
(Tansu) against the reference wallet: /healthz, /readyz and /metrics over HTTP, and a clean stop."""

from __future__ import annotations

import asyncio
import json
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
from services.runtime.kafka.bus import quick_settings, worker_env
from services.runtime.kafka.metrics import probe, samples
from services.runtime.kafka.topic_io import aproduce_raw
from services.runtime.kafka.worker import ensure_topics
from services.runtime.settings import Settings
from tests.helpers.broker import free_port

pytestmark = pytest.mark.kafka

WAIT_S = 90.0
"""Upper bound on any wait (a safety net against a hang, not a timing assertion)."""
SECRET = "seamless-caller-ops-secret"


def _wait(what: str, check: object) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_the_caller_serves_health_readiness_and_metrics(kafka_broker: str, tmp_path: Path) -> None:
    """Started as the manifests start it, the caller answers /healthz 200, turns /readyz 200 with every
    partition of casino.wallet.events assigned and caught up, counts in /metrics what it read (a record
    that does not decode included) under service "seamless", and stops with status 0 on SIGTERM."""
    with serve(tmp_path / "operator.db", SECRET.encode(), accounts={"player:001": 1_000}) as wallet:
        base = Settings(
            bootstrap_servers=kafka_broker, topic_prefix=f"c{uuid.uuid4().hex[:10]}.", partitions=2,
            demo_mode=True, seamless_url=wallet.url, seamless_secret=SecretStr(SECRET),
        )  # fmt: skip
        settings = quick_settings(base, env={})
        asyncio.run(ensure_topics(settings, list(topics.ALL_TOPICS)))
        port = free_port()
        env = {**os.environ, **worker_env(settings), "CASINO_WEB_ENABLED": "true", "CASINO_WEB_PORT": str(port),
               "CASINO_READY_MAX_LAG": "0", "CASINO_LOG_FORMAT": "json"}  # fmt: skip
        env.pop("CASINO_WEB_BIND", None)  # the default: loopback only
        exe = Path(sys.executable).parent / "casino-ledger"
        log = tmp_path / "caller.log"
        with log.open("wb") as out:
            caller = subprocess.Popen(
                [str(exe), "seamless-caller"], env=env, stdout=out, stderr=subprocess.STDOUT
            )
        url = f"http://127.0.0.1:{port}"
        try:
            healths: list[int] = []

            def ready() -> bool:
                assert caller.poll() is None, log.read_text(errors="replace")[-2000:]
                healths.append(probe(f"{url}/healthz")[0])
                return probe(f"{url}/readyz")[0] == 200

            _wait("/readyz 200", ready)
            code, body = probe(f"{url}/readyz")
            assert code == 200
            assert json.loads(body) == {"ready": True, "assigned": True,
                                        "lag": {f"{topics.WALLET_EVENTS}[{p}]": 0 for p in range(2)}}  # fmt: skip
            asyncio.run(aproduce_raw(settings, [(topics.WALLET_EVENTS, b"player:001", b"\xff not json")]))
            handled = ('casino_records_handled_total{processor="seamless",service="seamless",'
                       f'topic="{topics.WALLET_EVENTS}",type="undecodable"}}')  # fmt: skip
            _wait(
                "the undecodable record counted",
                lambda: samples(probe(f"{url}/metrics")[1]).get(handled) == 1,
            )
            s = samples(probe(f"{url}/metrics")[1])
            assert s['casino_assigned_partitions{service="seamless"}'] == 2
            assert s['casino_ready{service="seamless"}'] == 1
            assert probe(f"{url}/readyz")[0] == 200  # caught up again after the record
            assert set(healths) <= {0, 200} and 200 in healths
        finally:
            caller.send_signal(signal.SIGTERM)
            try:
                status = caller.wait(30)
            except subprocess.TimeoutExpired:
                caller.kill()
                status = caller.wait(30)
    assert status == 0, log.read_text(errors="replace")[-2000:]
