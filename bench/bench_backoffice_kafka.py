"""A deposit through ``serve --kafka`` (write your reads) against the pipeline's own hop, same run, broker
and workers.

One Tansu broker, the four workers, ``casino-ledger project --kafka --follow`` as a process into a SQLite
read model, and ``serve``'s application with Kafka settings on a loopback uvicorn server (the back
office's key file alone). Measured, one request at a time:

* **API**: ``POST /v1/cashier/deposits`` until its 201: the command signed and produced, settlement's
  ``FundsDeposited``, the projector's transaction, the API's poll of the read model;
* **baseline**: the same deposit published straight to ``casino.wallet.requests`` until the bus's waiter
  sees ``FundsDeposited`` (``bench_kafka``'s hop): what the pipeline alone costs.

Printed: p50 and p99 of each (ms) and the API's over the baseline's. The difference is the projector's
fetch and transaction and the API's polling (:data:`services.integrations.backoffice.commands.POLL_S`).

Run: ``python -m bench backoffice_kafka`` (``BENCH_BO_REQUESTS``, default 60).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from bench.stats import pct
from services.core import topics
from services.core.envelope import name_id, request
from services.core.trust import Principal, authenticate
from services.integrations.backoffice.apikeys import new_key
from services.integrations.backoffice.migrate import upgrade
from services.integrations.backoffice.schema import make_engine
from services.runtime.kafka.bus import KafkaBus, quick_settings, running, worker_env
from services.runtime.keyring import new_keyring, save_keyring, save_split
from services.runtime.logging import configure
from services.runtime.settings import Settings
from tests.helpers.broker import free_port, tansu

REQUESTS = int(os.environ.get("BENCH_BO_REQUESTS", "60"))


@contextmanager
def _server(settings: Settings, read_url: str, key_file: Path) -> Iterator[str]:
    import uvicorn  # noqa: PLC0415

    from services.integrations.backoffice.api import ServeSettings, create_app  # noqa: PLC0415

    engine = make_engine(read_url)
    serve = ServeSettings(log_path=Path(os.devnull), read_url=read_url, keyring_path=key_file,
                          kafka=settings.model_copy(update={"keyring": None}), command_timeout_s=30)  # fmt: skip
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(serve, engine), host="127.0.0.1", port=port,
                                           log_level="warning"))  # fmt: skip
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
        engine.dispose()


def _api(url: str, key: str, n: int) -> list[float]:
    out = []
    with httpx.Client(headers={"Authorization": f"Bearer {key}"}, timeout=60) as client:
        for i in range(n + 1):
            body = {"account_id": f"player:{i % 7:03d}", "amount_minor": 100, "currency": "EUR"}
            started = time.perf_counter()
            r = client.post(f"{url}/v1/cashier/deposits", json=body, headers={"Idempotency-Key": f"b-{i}"})
            if r.status_code != 201:
                raise RuntimeError(f"deposit answered {r.status_code}: {r.text[:200]}")
            if i:  # the first one opens the producer
                out.append((time.perf_counter() - started) * 1000)
    return out


def _hops(bus: KafkaBus, cashier: object, n: int) -> list[float]:
    out = []
    for i in range(n + 1):
        account = f"player:{i % 7:03d}"
        env = request("Deposit", topics.WALLET_REQUESTS, account,
                      {"account_id": account, "amount_minor": 100, "currency": "EUR"},
                      event_id=name_id("bench", "bo-hop", str(i)), occurred_at="2026-11-28T20:00:00.000Z",
                      producer=Principal.CASHIER.value)  # fmt: skip
        started = time.perf_counter()
        bus.publish([authenticate(env, cashier)])  # type: ignore[arg-type]
        bus.wait(topics.WALLET_EVENTS, account, lambda e, cause=env.event_id: e.causation_id == cause)
        if i:  # the first wait also assigns the waiter
            out.append((time.perf_counter() - started) * 1000)
    return out


def main(requests: int = REQUESTS) -> dict[str, float]:
    """Run both measurements on one deployment and print them; returns the figures."""
    configure()
    with tempfile.TemporaryDirectory() as tmp, tansu(Path(tmp) / "tansu.log") as broker:
        ring = new_keyring()
        keyring = save_keyring(ring, Path(tmp) / "keyring.json")
        split = save_split(ring, Path(tmp) / "keys")
        key_file = next(p for p in split if p.stem == "backoffice")
        public = next(p for p in split if p.stem == "public-keyring")
        cashier_key = new_key(key_file, "cashier")[0]
        settings = quick_settings(Settings(bootstrap_servers=broker, topic_prefix=f"bb{uuid.uuid4().hex[:8]}.",
                                           partitions=3, keyring=keyring), env={})  # fmt: skip
        read_url = f"sqlite:///{Path(tmp) / 'read.db'}"
        upgrade(make_engine(read_url))
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("CASINO_")}, **worker_env(settings),
               "CASINO_READ_DB": read_url, "CASINO_PUBLIC_KEYRING": str(public)}  # fmt: skip
        with running(settings, Path(tmp) / "workers") as bus:
            bus.drain()
            follower = subprocess.Popen([sys.executable, "-m", "services.cli", "project", "--kafka", broker,
                                         "--follow"], env=env, stderr=subprocess.DEVNULL)  # fmt: skip
            try:
                base = _hops(bus, ring.key(Principal.CASHIER), requests)
                with _server(settings, read_url, key_file) as url:
                    api = _api(url, cashier_key, requests)
            finally:
                follower.terminate()
                follower.wait(30)
    figures = {"api_p50_ms": statistics.median(api), "api_p99_ms": pct(api, 0.99),
               "hop_p50_ms": statistics.median(base), "hop_p99_ms": pct(base, 0.99)}  # fmt: skip
    figures["p50_ratio"] = figures["api_p50_ms"] / figures["hop_p50_ms"]
    print(json.dumps({k: round(v, 2) for k, v in figures.items()}, indent=2))
    return figures


if __name__ == "__main__":
    main()
