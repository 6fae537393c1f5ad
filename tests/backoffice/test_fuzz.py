"""schemathesis against the OpenAPI document of a running server: no request makes it fail (5xx)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from tests.backoffice.conftest import make_keyring, running_server
from tests.backoffice.test_api import copy_log


def test_no_generated_request_gets_a_server_error(demo_log: Path, tmp_path: Path) -> None:
    """Every operation of /openapi.json (but the endless event stream), fuzzed with an admin key in a
    bounded, deterministic run, answers without a server error, commands included."""
    log = copy_log(demo_log, tmp_path / "log.db")
    keys = make_keyring(tmp_path / "keyring.json")
    with running_server(log, f"sqlite:///{tmp_path / 'read.db'}", tmp_path / "keyring.json") as url:
        paths = httpx.get(f"{url}/openapi.json", timeout=30).json()["paths"]
        operations = sum(len(ops) for path, ops in paths.items() if path != "/v1/stream")
        run = subprocess.run(
            [sys.executable, "-m", "schemathesis.cli", "run", f"{url}/openapi.json",
             "-H", f"Authorization: Bearer {keys['admin']}", "--checks", "not_a_server_error",
             "--max-examples", "5", "--exclude-path", "/v1/stream", "--generation-deterministic",
             "--no-color"],
            capture_output=True, text=True, timeout=240, cwd=tmp_path, check=False,
        )  # fmt: skip
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert operations >= 14 and f"Tested: {operations}" in run.stdout, run.stdout[-2000:]
    generated = int(run.stdout.split(" generated,")[0].rsplit(maxsplit=1)[-1])
    assert generated >= 100
