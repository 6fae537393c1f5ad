# ruff: noqa: E501 (the scrape assertions read best whole)

"""``casino-ledger serve`` operated like the workers (issue #15): /healthz, /readyz and /metrics of a real
server on a free loopback port, over a real demo log."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

from services.runtime.kafka.metrics import samples
from tests.backoffice.conftest import free_port, play, wait_until


def test_serve_answers_health_readiness_and_metrics(
    tmp_path: Path, keyring: tuple[Path, dict[str, str]]
) -> None:
    """Started on a log, serve turns /readyz 200 at the log's last projected offset, answers /healthz
    200 without a key, counts requests in /metrics by route template and status (a 401 and an unknown
    path included) and shows the read model's position and readiness under service "serve"."""
    ring, keys = keyring
    log = play(tmp_path / "log.db", tables=1, coups=3, seed=4, keyring=ring)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "services.cli", "serve", "--db", str(log), "--port", str(port),
                             "--keyring", str(ring)], env={**os.environ, "LOG_LEVEL": "WARNING"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        try:
            return httpx.get(url + "/readyz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_until(ready, 60)
        body = httpx.get(url + "/readyz", timeout=5).json()
        assert body["ready"] is True and body["position"] > 0
        health = httpx.get(url + "/healthz", timeout=5)
        assert health.status_code == 200 and health.json()["status"] == "ok"
        account = "player:001"
        auth = {"Authorization": f"Bearer {keys['auditor']}"}
        assert httpx.get(f"{url}/v1/accounts/{account}/balance", headers=auth, timeout=5).status_code == 200
        assert httpx.get(f"{url}/v1/accounts/{account}/balance", timeout=5).status_code == 401
        assert httpx.get(f"{url}/no/such/path", timeout=5).status_code == 404
        s = samples(httpx.get(url + "/metrics", timeout=5).text)
    finally:
        proc.terminate()
        proc.wait(30)
    route = "/v1/accounts/{account_id}/balance"
    assert s[f'casino_http_requests_total{{method="GET",route="{route}",service="serve",status="200"}}'] == 1
    assert s[f'casino_http_requests_total{{method="GET",route="{route}",service="serve",status="401"}}'] == 1
    assert s['casino_http_requests_total{method="GET",route="unmatched",service="serve",status="404"}'] == 1
    assert s[f'casino_http_request_duration_seconds_count{{route="{route}",service="serve"}}'] == 2
    assert s['casino_read_model_position{service="serve"}'] == body["position"]
    assert s['casino_ready{service="serve"}'] == 1
    assert s['casino_projection_failures_total{service="serve"}'] == 0
    assert any(k.startswith("process_cpu_seconds_total") for k in s)
