"""The back office's commands keep to the boundary (issue #28, docs/trust.md): a deposit, withdrawal or
bet naming a table's, the cage's or the operator's account is a 422 problem and nothing enters the log;
a deposit's transfer id is in the back office's own namespace."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.backoffice.conftest import make_keyring, play, running_server
from tests.backoffice.test_api import auth


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path, dict[str, str]]]:
    """A server over a small log of its own, on its own keyring: (base URL, log, key per role)."""
    ring = tmp_path / "keyring.json"
    keys = make_keyring(ring)
    log = play(tmp_path / "log.db", tables=1, coups=2, seed=5, keyring=ring)
    with running_server(log, f"sqlite:///{tmp_path / 'read.db'}", ring) as url:
        yield url, log, keys


def _records(log: Path) -> int:
    with sqlite3.connect(log) as c:
        return int(c.execute("SELECT count(*) FROM records").fetchone()[0])


@pytest.mark.parametrize("account", ["table:T1:house", "table:T1:escrow", "cage:EUR", "operator:EUR"])
@pytest.mark.parametrize("route", ["cashier/deposits", "cashier/withdrawals", "bets"])
def test_money_names_only_player_accounts(
    served: tuple[str, Path, dict[str, str]], route: str, account: str
) -> None:
    """422 problem naming ``not_a_player_account``; the log holds nothing more."""
    url, log, keys = served
    body = {"account_id": account, "amount_minor": 100, "currency": "EUR"}
    if route == "bets":
        body = {
            "account_id": account,
            "table_id": "T1",
            "spot": "banker",
            "stake_minor": 100,
            "currency": "EUR",
        }
    before = _records(log)
    r = httpx.post(f"{url}/v1/{route}", json=body, timeout=60,
                   headers={**auth(keys["admin"]), "Idempotency-Key": f"{route}-{account}"})  # fmt: skip
    assert r.status_code == 422 and "not_a_player_account" in r.json()["detail"], r.text
    assert _records(log) == before


def test_a_deposit_goes_by_an_id_in_the_back_offices_namespace(
    served: tuple[str, Path, dict[str, str]],
) -> None:
    """The API's deposit is applied under ``backoffice/…``, which the policy lets the back office name."""
    url, _, keys = served
    body = {"account_id": "player:777", "amount_minor": 2_500, "currency": "EUR"}
    r = httpx.post(f"{url}/v1/cashier/deposits", json=body, timeout=60,
                   headers={**auth(keys["cashier"]), "Idempotency-Key": "dep-1"})  # fmt: skip
    assert r.status_code == 201, r.text
    assert r.json()["transfer_id"].startswith("backoffice/") and r.json()["status"] == "applied"
