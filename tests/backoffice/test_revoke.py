"""A revoked API key is refused on its next request, without restarting ``serve`` (issue #28): the real
HTTP server reads the keyring's current key set, re-read when the file changes."""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import httpx
import pytest

from services.cli import main
from services.integrations.backoffice.apikeys import new_key
from tests.backoffice.conftest import make_keyring, running_server
from tests.backoffice.test_api import auth, copy_log


@pytest.fixture
def served(tmp_path: Path, demo_log: Path) -> Iterator[tuple[str, Path, dict[str, str]]]:
    """A server of this test's own over a copy of the demo log: (base URL, keyring path, key per role)."""
    log = copy_log(demo_log, tmp_path / "log.db")
    ring = tmp_path / "keyring.json"
    keys = make_keyring(ring)
    with running_server(log, f"sqlite:///{tmp_path / 'read.db'}", ring) as url:
        yield url, ring, keys


def _key_id(key: str) -> str:
    return key.split("_")[1]  # clk_<key id>_<secret>


def _cli(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    with redirect_stdout(io.StringIO()), redirect_stderr(err):
        code = main(list(argv))
    return code, err.getvalue()


def _status(url: str, key: str) -> int:
    return httpx.get(f"{url}/v1/findings", headers=auth(key), timeout=30).status_code


def test_a_revoked_key_is_refused_on_its_next_request(served: tuple[str, Path, dict[str, str]]) -> None:
    """The auditor's key works; ``apikey revoke`` removes it from the keyring; the very next request with
    it is 401, while every other key still works — the server was never restarted."""
    url, ring, keys = served
    assert _status(url, keys["auditor"]) == 200
    code, err = _cli("apikey", "revoke", _key_id(keys["auditor"]), "--keyring", str(ring))
    assert code == 0, err
    assert _status(url, keys["auditor"]) == 401
    assert _status(url, keys["admin"]) == 200
    assert _key_id(keys["auditor"]) not in ring.read_text(encoding="utf-8")
    assert '"principals"' in ring.read_text(encoding="utf-8")  # the secrets beside the API keys are kept


def test_a_key_added_while_serving_works_at_once(served: tuple[str, Path, dict[str, str]]) -> None:
    """The same re-read admits a key created after the server started."""
    url, ring, _ = served
    key, _api_key = new_key(ring, "auditor")
    assert _status(url, key) == 200


def test_a_keyring_gone_refuses_every_key(served: tuple[str, Path, dict[str, str]]) -> None:
    """A keyring that disappears holds no key: the server fails closed."""
    url, ring, keys = served
    ring.rename(ring.with_name("moved.json"))
    assert _status(url, keys["admin"]) == 401


def test_revoking_an_unknown_key_fails_in_one_line(tmp_path: Path) -> None:
    """An unknown key id: one line on stderr, exit 2, the keyring unchanged."""
    ring = tmp_path / "keyring.json"
    make_keyring(ring)
    before = ring.read_bytes()
    code, err = _cli("apikey", "revoke", "auditor-00000000", "--keyring", str(ring))
    assert code == 2 and err.startswith("casino-ledger: error: ") and err.count("\n") == 1
    assert ring.read_bytes() == before
