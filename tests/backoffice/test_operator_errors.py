"""What an operator on call meets around the back office (issue #30): a read model that cannot be
reached or does not exist, a port already taken, a keyring that cannot sign into the log, a rebuild
beside a running ``serve`` — each one line on stderr naming what to do, exit 2, never "a bug"."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from services.cli import main
from services.integrations.backoffice.apikeys import new_key
from services.runtime.keyring import new_keyring, save_keyring
from tests.backoffice.conftest import free_port, play, running_server

CLI = [sys.executable, "-m", "services.cli"]


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small log written on a keyring file beside it, as the demo writes (``<db>.keyring.json``)."""
    folder = tmp_path_factory.mktemp("ops")
    ring = folder / "log.db.keyring.json"
    save_keyring(new_keyring(), ring)
    return play(folder / "log.db", tables=1, coups=3, seed=3, keyring=ring)


def one_line_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run the command line in this process; assert exit 2 and one line on stderr, return it."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "bug" not in err[0] and "Traceback" not in err[0]
    return err[0]


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("postgresql://postgres:s3cret@127.0.0.1:{closed}/test", "127.0.0.1"),
        ("postgresql://postgres:s3cret@127.0.0.1:5432/no_such_database_here", "no_such_database_here"),
        ("sqlite:////no/such/folder/read.db", "read model"),
        ("nonsense://x", "CASINO_READ_DB"),
    ],
    ids=["server-down", "database-missing", "folder-missing", "not-a-url"],
)
def test_a_read_model_that_cannot_be_used_is_one_line_and_exit_2(
    url: str, said: str, log: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``report`` on a read model that is down, missing, in a missing folder or not a URL: exit 2, one
    line naming it (never its password) and what to check."""
    monkeypatch.setenv("CASINO_READ_DB", url.replace("{closed}", str(free_port())))
    line = one_line_exit_2(["report", "--db", str(log)], capsys)
    assert said in line and "s3cret" not in line


def test_a_port_already_taken_is_one_line_and_exit_2(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``serve --port P`` where something listens on P: exit 2, one line naming the port."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        line = one_line_exit_2(["serve", "--db", str(log), "--port", str(port)], capsys)
    assert f"--port {port}" in line and "in use" in line


def test_a_keyring_of_api_keys_only_is_refused_with_the_one_to_use(
    log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's old recipe: ``apikey new --keyring var/keyring.json`` makes a file of API keys alone;
    ``serve`` on it used to answer every write with a bare 500. Now: exit 2, one line naming the log's
    own keyring."""
    ring = tmp_path / "keyring.json"
    assert main(["apikey", "new", "--role", "admin", "--keyring", str(ring)]) == 0
    capsys.readouterr()
    line = one_line_exit_2(["serve", "--db", str(log), "--keyring", str(ring), "--port", "0"], capsys)
    assert f"{log}.keyring.json" in line


def _serve(log: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    """``serve`` on ``log`` in a process of its own, on a free port, once it answers; (process, URL)."""
    port = free_port()
    env = {**os.environ, "LOG_LEVEL": "WARNING"}
    proc = subprocess.Popen([*CLI, "serve", "--db", str(log), "--port", str(port), *extra], env=env,
                            text=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/v1/health", timeout=2).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"serve did not start: {proc.communicate()[1]}")
        time.sleep(0.1)


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.terminate()
    return proc.communicate(timeout=30)[1]


def test_another_keyring_than_the_logs_serves_reads_and_refuses_commands_saying_why(
    log: Path, tmp_path: Path
) -> None:
    """A whole keyring that did not write this log (its pipeline would sign the log's next records with
    keys the rest was not signed with): reads are served; a deposit answers a problem+json 503 naming the
    log's own keyring (it once answered a bare 500 and logged nothing); serve's log says so at start."""
    ring = tmp_path / "other.json"
    save_keyring(new_keyring(), ring)
    key = new_key(ring, "admin")[0]
    proc, url = _serve(log, "--keyring", str(ring))
    try:
        headers = {"Authorization": f"Bearer {key}", "Idempotency-Key": "k-1"}
        assert httpx.get(f"{url}/v1/tables", headers=headers, timeout=30).status_code == 200
        r = httpx.post(f"{url}/v1/cashier/deposits", headers=headers, timeout=30,
                       json={"account_id": "player:001", "amount_minor": 100, "currency": "EUR"})  # fmt: skip
        assert r.status_code == 503 and r.headers["content-type"].startswith("application/problem+json")
        assert "not the keyring this log was written with" in r.json()["detail"]
        assert f"{log}.keyring.json" in r.json()["detail"]
    finally:
        err = _stop(proc)
    assert "reads only, every command answers 503" in err


def test_the_back_office_key_file_alone_serves_reads_and_says_what_runs_the_commands(
    log: Path, tmp_path: Path
) -> None:
    """The back office's own key file (``keys new --split``) on the embedded log: serve starts, serves
    reads, and says at start that its commands are appended for ``casino-ledger pipeline`` to run (it once
    answered every command 503; the commands themselves: tests/backoffice/test_pipeline_process.py)."""
    from services.runtime.keyring import save_split  # noqa: PLC0415

    key_file = next(p for p in save_split(new_keyring(), tmp_path / "keys") if p.stem == "backoffice")
    key = new_key(key_file, "admin")[0]
    proc, url = _serve(log, "--keyring", str(key_file))
    try:
        headers = {"Authorization": f"Bearer {key}"}
        assert httpx.get(f"{url}/v1/tables", headers=headers, timeout=30).status_code == 200
    finally:
        err = _stop(proc)
    assert "back office's key alone" in err and "casino-ledger pipeline --db" in err, err


def test_a_rebuild_beside_a_running_serve_is_refused_with_a_reason(log: Path, tmp_path: Path) -> None:
    """``project --rebuild`` while ``serve`` runs on the log: exit 2 and one line saying serve holds it
    (it once deadlocked, exit 70); once serve stops, the rebuild runs."""
    env = {**os.environ, "LOG_LEVEL": "WARNING"}
    serve, _url = _serve(log)
    try:
        done = subprocess.run([*CLI, "project", "--db", str(log), "--rebuild"], env=env, capture_output=True,
                              text=True, timeout=120, check=False)  # fmt: skip
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "serve" in lines[0] and "stop it" in lines[0], lines
    finally:
        _stop(serve)
    again = subprocess.run([*CLI, "project", "--db", str(log), "--rebuild"], env=env, capture_output=True,
                           text=True, timeout=120, check=False)  # fmt: skip
    assert again.returncode == 0, again.stderr


def test_a_request_that_fails_answers_problem_json_and_is_logged(log: Path) -> None:
    """A command that fails inside ``serve`` for a reason no route expects (here the read model lost its
    idempotency table) answers a problem+json 500 naming the error's type, and ``serve`` logs one
    ``request failed`` line with the method, path and cause (it once answered a bare 500, logging nothing)."""
    import sqlite3  # noqa: PLC0415

    from structlog.testing import capture_logs  # noqa: PLC0415

    read = log.parent / "broken.read.db"
    ring = Path(f"{log}.keyring.json")
    key = new_key(ring, "admin")[0]
    with running_server(log, f"sqlite:///{read}", ring) as url:
        with sqlite3.connect(read) as c:
            c.execute("DROP TABLE bo_idempotency")
        c.close()
        headers = {"Authorization": f"Bearer {key}", "Idempotency-Key": "k-broken"}
        body = {"account_id": "player:001", "amount_minor": 100, "currency": "EUR"}
        with capture_logs() as logs:
            r = httpx.post(f"{url}/v1/cashier/deposits", timeout=30, headers=headers, json=body)
    assert r.status_code == 500 and r.headers["content-type"].startswith("application/problem+json")
    assert "OperationalError" in r.json()["detail"]
    failed = [e for e in logs if e.get("event") == "request failed"]
    assert failed and failed[0]["path"] == "/v1/cashier/deposits" and failed[0]["error"] == "OperationalError"
    assert "bo_idempotency" in failed[0]["detail"]
