"""``casino-ledger serve --kafka`` as a process: it runs on the back office's key file alone, is not
ready while the broker is unreachable (and says so to a command), and refuses what an operator must fix
in one line, exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from services.integrations.backoffice.apikeys import new_key
from services.runtime.keyring import new_keyring, save_split
from tests.backoffice.conftest import free_port, pg_schema_url, serve_process, wait_until

MONEY = {"account_id": "player:001", "amount_minor": 1000, "currency": "EUR"}


@pytest.fixture
def split(tmp_path: Path) -> dict[str, Path]:
    """A fresh keyring split into key files, by principal."""
    return {p.stem: p for p in save_split(new_keyring(), tmp_path / "keys") if p.stem != "public-keyring"}


@pytest.fixture
def read_db() -> Iterator[str]:
    """A PostgreSQL schema of this test's own."""
    schemas = pg_schema_url()
    yield next(schemas)
    schemas.close()


def _env(read_db: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CASINO_")}
    if read_db is not None:
        env["CASINO_READ_DB"] = read_db
    return env


def _serve(bootstrap: str, key_file: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    return serve_process(["--kafka", bootstrap, "--keyring", str(key_file), "--wait", "2"], env)


@pytest.mark.kafka
def test_serve_on_kafka_runs_on_the_back_office_key_file_and_is_ready_only_with_a_broker(
    kafka_broker: str, split: dict[str, Path], read_db: str
) -> None:
    """With nothing but the back office's key file (and API keys in it), ``serve --kafka`` serves; it is
    ready while the broker answers, and with a broker nobody listens on it is not ready (503) and a
    command answers 503 problem+json (nothing written) while reads go on."""
    key_file = split["backoffice"]
    cashier = new_key(key_file, "cashier")[0]
    for bootstrap, ready in ((kafka_broker, True), (f"127.0.0.1:{free_port()}", False)):
        proc, url = _serve(bootstrap, key_file, _env(read_db))
        try:
            if ready:
                wait_until(lambda u=url: httpx.get(u + "/readyz", timeout=5).status_code == 200, 30)  # type: ignore[misc]
            else:
                r = httpx.get(url + "/readyz", timeout=5)
                assert r.status_code == 503 and r.json()["ready"] is False
                h = {"Authorization": f"Bearer {cashier}", "Idempotency-Key": "down-1"}
                r = httpx.post(url + "/v1/cashier/deposits", headers=h, json=MONEY, timeout=30)
                assert r.status_code == 503, r.text
                assert r.headers["content-type"].startswith("application/problem+json")
                assert "not written" in r.json()["detail"]
                assert (
                    httpx.get(url + "/v1/accounts/player:001/balance", headers=h, timeout=5).status_code
                    == 404
                )
        finally:
            proc.terminate()
            proc.wait(30)


@pytest.mark.parametrize("case", ["no-read-model", "not-the-back-office-key"])
def test_serve_on_kafka_refuses_what_an_operator_must_fix(case: str, split: dict[str, Path]) -> None:
    """No CASINO_READ_DB, or a keyring without the back office's own key (a service's key file holds
    its MAC secret to verify with, not to sign): one line on stderr, exit 2, saying what is missing."""
    read_db = None if case == "no-read-model" else "sqlite:///unused.db"
    key_file = split["backoffice" if case == "no-read-model" else "dealer"]
    cmd = [sys.executable, "-m", "services.cli", "serve", "--kafka", "127.0.0.1:9",
           "--port", str(free_port()), "--keyring", str(key_file)]  # fmt: skip
    done = subprocess.run(cmd, env=_env(read_db), capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("casino-ledger: error:")
    assert ("CASINO_READ_DB" if case == "no-read-model" else "backoffice") in lines[0]
