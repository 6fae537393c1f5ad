"""``serve --db`` on the back office's key file alone, the pipeline in a process of its own (issue #30):
``casino-ledger pipeline --db X --keyring KEYS [--follow]`` holds the services' keys, ``serve`` holds the
back office's key only; commands are appended signed as backoffice and answered once the read model shows
their outcome. Real SQLite files, real processes, real HTTP on loopback ports."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from services.integrations.backoffice.apikeys import new_key
from services.runtime.keyring import load_keyring, new_keyring, save_keyring, save_split
from tests.backoffice.conftest import free_port, play, wait_until

CLI = [sys.executable, "-m", "services.cli"]
T = "T01-punto-banco"


class Deployment:
    """A log written on a whole keyring, that keyring split into key files, an admin API key in the
    back office's key file."""

    def __init__(self, folder: Path) -> None:
        self.whole = folder / "keyring.json"
        save_keyring(new_keyring(), self.whole)
        self.log = play(folder / "log.db", tables=2, coups=6, seed=11, keyring=self.whole)
        files = {p.stem: p for p in save_split(load_keyring(self.whole), folder / "keys")}
        self.back_office, self.public = files["backoffice"], files["public-keyring"]
        self.admin = new_key(self.back_office, "admin")[0]


@pytest.fixture
def dep(tmp_path: Path) -> Deployment:
    return Deployment(tmp_path)


def _env() -> dict[str, str]:
    """The environment without any CASINO_* variable: no keyring reaches a process but by --keyring."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("CASINO_")}, "LOG_LEVEL": "WARNING"}


def _public_env(dep: Deployment) -> dict[str, str]:
    """:func:`_env` and the services' public keyring, which the read model verifies the log's signed heads
    with (public keys only: no secret but the back office's own key file reaches serve)."""
    return {**_env(), "CASINO_PUBLIC_KEYRING": str(dep.public)}


def _serve(dep: Deployment, wait: float) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    proc = subprocess.Popen([*CLI, "serve", "--db", str(dep.log), "--port", str(port), "--keyring",
                             str(dep.back_office), "--wait", str(wait)], env=_public_env(dep), text=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"serve exited: {proc.communicate()[1]}")
        try:
            return httpx.get(f"{url}/v1/health", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    wait_until(up, 60)
    return proc, url


def _pipeline_once(dep: Deployment) -> subprocess.CompletedProcess[str]:
    """``pipeline`` until idle, to its end."""
    argv = [*CLI, "pipeline", "--db", str(dep.log), "--keyring", str(dep.whole)]
    return subprocess.run(argv, env=_env(), capture_output=True, text=True, timeout=300, check=False)


def _pipeline(dep: Deployment, *extra: str) -> subprocess.Popen[str]:
    argv = [*CLI, "pipeline", "--db", str(dep.log), "--keyring", str(dep.whole), *extra]
    return subprocess.Popen(argv, env=_env(), text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _stop(proc: subprocess.Popen[str]) -> tuple[int, str]:
    proc.send_signal(signal.SIGTERM)
    err = proc.communicate(timeout=60)[1]
    return proc.returncode, err


def _post(url: str, key: str, path: str, idem: str, body: dict[str, object]) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}", "Idempotency-Key": idem}
    return httpx.post(f"{url}{path}", headers=headers, json=body, timeout=60)


def _copies(log: Path, event_id: str) -> int:
    with sqlite3.connect(f"file:{log}?mode=ro", uri=True) as c:
        n = int(c.execute("SELECT count(*) FROM records WHERE event_id = ?", (event_id,)).fetchone()[0])
    c.close()
    return n


def _dead_letter_text(log: Path, event_id: str) -> str:
    with sqlite3.connect(f"file:{log}?mode=ro", uri=True) as c:
        rows = c.execute("SELECT body FROM records WHERE topic = 'casino.deadletter'").fetchall()
    c.close()
    texts = (bytes(body).decode("utf-8", "replace") for (body,) in rows)
    return "\n".join(t for t in texts if f'"causation_id":"{event_id}"' in t)


def _balance(url: str, key: str) -> int:
    r = httpx.get(f"{url}/v1/accounts/player:001/balance", headers={"Authorization": f"Bearer {key}"})
    return int(r.json()["balance_minor"])


def test_serve_on_the_back_office_key_alone_with_a_pipeline_process(dep: Deployment) -> None:
    """serve holds the back office's key file alone (no other principal's entry, no CASINO_KEYRING);
    ``pipeline --follow`` holds the whole keyring: a deposit, a withdrawal and a bet (refused at a closed
    shoe, its stake refunded) run end to end; a retry under the same Idempotency-Key answers the same and
    appends nothing; a second pipeline, or a serve holding every key, is refused (one runner); SIGTERM
    ends the pipeline cleanly; the replay of the log with the public keyring is clean."""
    assert set(json.loads(dep.back_office.read_text())["principals"]) == {"backoffice"}
    runner = _pipeline(dep, "--follow")
    try:
        serve, url = _serve(dep, wait=30)
    except BaseException:
        runner.kill()
        raise
    try:  # ready once serve has seen the pipeline process
        wait_until(lambda: httpx.get(f"{url}/readyz", timeout=5).status_code == 200, 30)
        before = _balance(url, dep.admin)
        money = {"account_id": "player:001", "amount_minor": 1000, "currency": "EUR"}
        d = _post(url, dep.admin, "/v1/cashier/deposits", "d-1", money)
        assert d.status_code == 201 and d.json()["status"] == "applied", d.text
        assert d.json()["balance_minor"] == before + 1000
        again = _post(url, dep.admin, "/v1/cashier/deposits", "d-1", money)
        assert again.status_code == 201 and again.json() == d.json()
        assert _copies(dep.log, d.json()["request_id"]) == 1
        w = _post(url, dep.admin, "/v1/cashier/withdrawals", "w-1", {**money, "amount_minor": 300})
        assert w.status_code == 201 and w.json()["balance_minor"] == before + 700, w.text
        bet = {
            "account_id": "player:001",
            "table_id": T,
            "spot": "banker",
            "stake_minor": 200,
            "currency": "EUR",
        }
        b = _post(url, dep.admin, "/v1/bets", "b-1", bet)
        assert b.status_code == 422 and b.json()["outcome"] == "refused", b.text
        assert _balance(url, dep.admin) == before + 700  # the stake came back
        second = _pipeline_once(dep)
        assert second.returncode == 2 and "pipeline.lock" in second.stderr, second.stderr
        assert len(second.stderr.strip().splitlines()) == 1
    finally:
        _, serve_err = _stop(serve)
    try:  # serve stopped, the pipeline still running: a serve holding every key would run it too
        argv = [*CLI, "serve", "--db", str(dep.log), "--keyring", str(dep.whole), "--port", str(free_port())]
        whole = subprocess.run(argv, env=_env(), capture_output=True, text=True, timeout=120, check=False)
        assert whole.returncode == 2 and "pipeline.lock" in whole.stderr, whole.stderr
    finally:
        code, err = _stop(runner)
    assert code == 0 and "records through the pipeline" in err, err
    assert "back office's key alone" in serve_err
    replay = subprocess.run([*CLI, "replay", "--db", str(dep.log), "--keys", str(dep.public)], env=_env(),
                            capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert replay.returncode == 0, replay.stdout[-2000:] + replay.stderr


def test_without_a_pipeline_a_command_answers_504_and_its_retry_reads_the_outcome(dep: Deployment) -> None:
    """No pipeline runs: serve is not ready (503), the deposit is appended and answers 504 problem+json
    naming the command that runs the pipeline; once ``pipeline`` (until idle) has run, the same request
    under the same Idempotency-Key answers its outcome, and the log holds the request once."""
    serve, url = _serve(dep, wait=1)
    try:
        ready = httpx.get(f"{url}/readyz", timeout=5)
        assert ready.status_code == 503 and ready.json()["ready"] is False  # no pipeline process runs
        money = {"account_id": "player:002", "amount_minor": 500, "currency": "EUR"}
        late = _post(url, dep.admin, "/v1/cashier/deposits", "late-1", money)
        assert late.status_code == 504 and late.headers["content-type"].startswith("application/problem+json")
        assert (
            "casino-ledger pipeline" in late.json()["detail"] and "Idempotency-Key" in late.json()["detail"]
        )
        once = _pipeline_once(dep)
        assert once.returncode == 0, once.stderr
        retry = _post(url, dep.admin, "/v1/cashier/deposits", "late-1", money)
        assert retry.status_code == 201 and retry.json()["status"] == "applied", retry.text
        assert _copies(dep.log, retry.json()["request_id"]) == 1
    finally:
        _stop(serve)


def test_a_back_office_key_file_of_another_keyring_moves_nothing(dep: Deployment, tmp_path: Path) -> None:
    """The back office's key file of another keyring than the log's: the pipeline dead-letters its command
    (unknown key id), no money moves, and the command answers 504 (no outcome ever comes)."""
    other = next(p for p in save_split(new_keyring(), tmp_path / "other") if p.stem == "backoffice")
    dep.back_office, dep.admin = other, new_key(other, "admin")[0]
    runner = _pipeline(dep, "--follow")
    try:
        serve, url = _serve(dep, wait=2)
    except BaseException:
        runner.kill()
        raise
    try:
        before = _balance(url, dep.admin)
        money = {"account_id": "player:001", "amount_minor": 700, "currency": "EUR"}
        r = _post(url, dep.admin, "/v1/cashier/deposits", "x-1", money)
        assert r.status_code == 504, r.text
        event_id = r.json()["detail"].split()[2]
        wait_until(lambda: bool(_dead_letter_text(dep.log, event_id)), 30)
        assert "unknown key id 'backoffice-" in _dead_letter_text(dep.log, event_id)
        assert _balance(url, dep.admin) == before
    finally:
        _stop(serve)
        code, err = _stop(runner)
    assert code == 0, err


def test_keys_split_writes_an_existing_keyrings_key_files_once(tmp_path: Path) -> None:
    """``keys split``: the key files of an existing keyring (the back office's holds its entry alone, with
    the same key id as the keyring's), never overwritten: a second run is one line, exit 2."""
    from services.cli import main  # noqa: PLC0415

    ring = tmp_path / "ring.json"
    save_keyring(new_keyring(), ring)
    assert main(["keys", "split", "--in", str(ring), "--out", str(tmp_path / "k")]) == 0
    own = json.loads((tmp_path / "k" / "backoffice.json").read_text())["principals"]
    assert list(own) == ["backoffice"]
    assert own["backoffice"]["key_id"] == json.loads(ring.read_text())["principals"]["backoffice"]["key_id"]
    assert (tmp_path / "k" / "backoffice.json").stat().st_mode & 0o777 == 0o600
    assert main(["keys", "split", "--in", str(ring), "--out", str(tmp_path / "k")]) == 2


def test_serve_without_the_services_public_keys_says_its_read_model_applies_nothing(dep: Deployment) -> None:
    """serve on the back office's key alone and no CASINO_PUBLIC_KEYRING: nothing of the log verifies
    (the key file holds no service's public key), so it says at start how to supply them, and the
    read model shows no account's balance rather than an unverified one."""
    port = free_port()
    proc = subprocess.Popen([*CLI, "serve", "--db", str(dep.log), "--port", str(port), "--keyring",
                             str(dep.back_office)], env=_env(), text=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(f"{url}/v1/health", timeout=2).status_code == 200
        except httpx.TransportError:
            return proc.poll() is not None

    try:
        wait_until(up, 60)
        auth = {"Authorization": f"Bearer {dep.admin}"}
        r = httpx.get(f"{url}/v1/accounts/player:001/balance", headers=auth)
        assert r.status_code == 404, r.text
    finally:
        _, err = _stop(proc)
    assert "CASINO_PUBLIC_KEYRING" in err and "applies nothing" in err, err
