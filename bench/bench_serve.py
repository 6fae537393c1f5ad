"""Reads through ``casino-ledger serve`` against a trivial endpoint of the same server, same run.

A seeded demo log (3 tables, 20 coups) is projected and served by a ``serve`` process on a free
loopback port; a local load generator (httpx, ``CONCURRENCY`` requests in flight, a bounded number of
requests, 127.0.0.1 only) then reads: ``/v1/health`` (baseline: no key, no database), a wallet's
``/balance`` and a page of its ``/statement`` (bearer key checked, SQL on the read model). Printed:
requests/s and p50/p99 latency of each, and each read's ratio to the baseline (requests/s: read over
baseline; p99: read over baseline). The client shares the machine's cores with the server, so the
absolute figures are a floor; the ratios say what a read costs over the HTTP stack.

Run: ``.venv/bin/python bench/bench_serve.py`` (or ``python -m bench serve``).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.stats import pct
from services.integrations.backoffice.apikeys import new_key
from services.runtime.compose import demo_pipeline
from services.runtime.embedded.bus import EmbeddedBus
from services.runtime.logging import configure
from services.simulation.simulator import Session, demo_tables

REQUESTS = 1000
CONCURRENCY = 8


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _load(url: str, headers: dict[str, str], requests: int) -> tuple[float, list[float]]:
    """(seconds, per-request latencies) for ``requests`` GETs of ``url``, ``CONCURRENCY`` at a time."""
    latencies: list[float] = []
    queue = iter(range(requests))
    limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
    async with httpx.AsyncClient(headers=headers, limits=limits, timeout=30) as client:

        async def worker() -> None:
            for _ in queue:
                t = time.perf_counter()
                r = await client.get(url)
                latencies.append(time.perf_counter() - t)
                if r.status_code != 200:
                    raise RuntimeError(f"{url}: HTTP {r.status_code}")

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        return time.perf_counter() - started, latencies


def main(requests: int = REQUESTS) -> dict[str, float]:
    """Serve a demo log, load the three endpoints, print requests/s, p99 and the ratios."""
    configure(level="WARNING")
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "log.db"
        bus = EmbeddedBus(log, demo_pipeline())
        try:
            Session(bus, seed=2026, players=12).run(demo_tables(3), 20)
        finally:
            bus.close()
        key, _ = new_key(Path(tmp) / "keyring.json", "auditor")
        port = _free_port()
        env = {k: v for k, v in os.environ.items() if k != "CASINO_READ_DB"}
        cmd = [sys.executable, "-m", "services.cli", "serve", "--db", str(log), "--port", str(port),
               "--keyring", str(Path(tmp) / "keyring.json")]  # fmt: skip
        server = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    if httpx.get(base + "/v1/health", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("serve did not start")
                time.sleep(0.2)
            auth = {"Authorization": f"Bearer {key}"}
            statement = json.loads(httpx.get(f"{base}/v1/accounts/player:001/statement?limit=50",
                                             headers=auth).text)  # fmt: skip
            lines = len(statement["entries"])
            assert lines > 10, lines
            results["statement_lines"] = lines
            targets = {
                "health": (f"{base}/v1/health", {}),
                "balance": (f"{base}/v1/accounts/player:001/balance", auth),
                "statement": (f"{base}/v1/accounts/player:001/statement?limit=50", auth),
            }
            for name, (url, headers) in targets.items():
                asyncio.run(_load(url, headers, min(200, requests)))  # warm-up
                seconds, lat = asyncio.run(_load(url, headers, requests))
                results[f"{name}_rps"] = requests / seconds
                results[f"{name}_p50_ms"] = pct(lat, 0.50) * 1000
                results[f"{name}_p99_ms"] = pct(lat, 0.99) * 1000
        finally:
            server.terminate()
            server.wait(30)
    base_rps, base_p99 = results["health_rps"], results["health_p99_ms"]
    print(
        f"serve baseline /v1/health: {base_rps:,.0f} requests/s, p50 {results['health_p50_ms']:.2f} ms, "
        f"p99 {base_p99:.2f} ms ({requests} requests, {CONCURRENCY} in flight, loopback)"
    )
    print(f"(statement: a page of {int(results['statement_lines'])} lines of player:001)")
    for name in ("balance", "statement"):
        rps, p99 = results[f"{name}_rps"], results[f"{name}_p99_ms"]
        print(
            f"serve {name}: {rps:,.0f} requests/s (ratio {rps / base_rps:.3f} of baseline), "
            f"p50 {results[f'{name}_p50_ms']:.2f} ms, p99 {p99:.2f} ms (ratio {p99 / base_p99:.2f}x)"
        )
    return results


if __name__ == "__main__":
    main()
