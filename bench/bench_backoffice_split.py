"""A deposit through ``serve --db`` on the back office's key alone, beside ``casino-ledger pipeline --follow``,
against the same deposit through ``serve --db`` holding the whole keyring (it runs the pipeline itself):
same run, copies of one seeded log.

Both ``serve`` runs are processes of the command line on loopback ports, one request at a time:

* **baseline**: ``serve --keyring keyring.json``: the command appended, the pipeline run to idle and the
  read model projected inside the request;
* **split**: ``serve --keyring keys/backoffice.json`` and ``pipeline --follow`` in two processes: the
  command appended, the pipeline process seeing the log's head move (every
  :data:`services.cli.pipeline.POLL_S`), running to idle, and ``serve`` projecting and polling the
  read model (every :data:`services.integrations.backoffice.commands.POLL_S`) until the outcome is there.

Printed: p50 and p99 of each (ms) and the split's over the baseline's.

Run: ``python -m bench backoffice_split`` (``BENCH_BO_REQUESTS``, default 60).
"""

from __future__ import annotations

import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from bench.stats import pct
from services.integrations.backoffice.apikeys import new_key
from services.runtime.keyring import load_keyring, new_keyring, save_keyring, save_split
from tests.backoffice.conftest import free_port, play

REQUESTS = int(os.environ.get("BENCH_BO_REQUESTS", "60"))
CLI = [sys.executable, "-m", "services.cli"]


def _env() -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("CASINO_")}, "LOG_LEVEL": "WARNING"}


@contextmanager
def _serve(log: Path, keyring: Path) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([*CLI, "serve", "--db", str(log), "--keyring", str(keyring), "--port", str(port),
                             "--wait", "60"], env=_env(), stderr=subprocess.DEVNULL)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("serve did not start")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(60)


def _deposits(url: str, key: str, n: int) -> list[float]:
    out = []
    with httpx.Client(headers={"Authorization": f"Bearer {key}"}, timeout=120) as client:
        for i in range(n + 1):
            body = {"account_id": f"player:{i % 6 + 1:03d}", "amount_minor": 100, "currency": "EUR"}
            started = time.perf_counter()
            r = client.post(f"{url}/v1/cashier/deposits", json=body, headers={"Idempotency-Key": f"b-{i}"})
            if r.status_code != 201:
                raise RuntimeError(f"deposit answered {r.status_code}: {r.text[:200]}")
            if i:  # the first one opens the log for writing
                out.append((time.perf_counter() - started) * 1000)
    return out


def _copy(src: Path, dst: Path) -> Path:
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    a.close()
    b.close()
    return dst


def main(requests: int = REQUESTS) -> dict[str, float]:
    """Run both measurements on copies of one log and print them; returns the figures."""
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        whole = save_keyring(new_keyring(), tmp / "keyring.json")
        seeded = play(tmp / "seed.db", tables=2, coups=6, seed=11, keyring=whole)
        key_file = next(p for p in save_split(load_keyring(whole), tmp / "keys") if p.stem == "backoffice")
        admin = new_key(key_file, "admin")[0]
        whole_admin = new_key(whole, "admin")[0]
        with _serve(_copy(seeded, tmp / "base.db"), whole) as url:
            base = _deposits(url, whole_admin, requests)
        log = _copy(seeded, tmp / "split.db")
        runner = subprocess.Popen([*CLI, "pipeline", "--db", str(log), "--keyring", str(whole), "--follow"],
                                  env=_env(), stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            with _serve(log, key_file) as url:
                split = _deposits(url, admin, requests)
        finally:
            runner.terminate()
            runner.wait(60)
    figures = {"split_p50_ms": statistics.median(split), "split_p99_ms": pct(split, 0.99),
               "base_p50_ms": statistics.median(base), "base_p99_ms": pct(base, 0.99)}  # fmt: skip
    figures["p50_ratio"] = figures["split_p50_ms"] / figures["base_p50_ms"]
    print(json.dumps({k: round(v, 2) for k, v in figures.items()}, indent=2))
    return figures


if __name__ == "__main__":
    main()
