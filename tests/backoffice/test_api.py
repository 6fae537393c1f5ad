"""``serve``: the HTTP API on a real server on a loopback port, over SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import io
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import delete

from services.integrations.backoffice import schema as s
from services.integrations.backoffice.api import PERMISSIONS
from services.integrations.backoffice.apikeys import ROLES
from services.integrations.backoffice.projector import dump_rows
from services.integrations.backoffice.schema import default_url, make_engine
from tests.backoffice.conftest import (
    make_keyring,
    pg_schema_url,
    running_server,
    serve_process,
)
from tests.backoffice.folds import fold, records
from tests.backoffice.kafka_runtime import KafkaBackOffice, kafka_back_office, kafka_server
from tests.backoffice.kafka_runtime import follower as kafka_follower

T = "T01-punto-banco"

# Who may do what (docs/integration.md roles), written out here rather than read from the code under test.
EXPECTED_ROLES = {
    "balance": {"auditor", "cashier", "terminal", "admin"},
    "statement": {"auditor", "cashier", "admin"},
    "rounds": {"analyst", "auditor", "operator", "admin"},
    "tables": {"analyst", "auditor", "operator", "admin"},
    "alerts": {"analyst", "auditor", "operator", "admin"},
    "casework": {"analyst", "admin"},
    "findings": {"auditor", "operator", "admin"},
    "cashier": {"cashier", "admin"},
    "bets": {"terminal", "admin"},
}
MONEY = {"account_id": "player:001", "amount_minor": 1000, "currency": "EUR"}
BET = {"account_id": "player:001", "table_id": T, "spot": "banker", "stake_minor": 1000, "currency": "EUR"}
ROUTES = [
    ("GET", "/v1/accounts/player:001/balance", "balance", None),
    ("GET", "/v1/accounts/player:001/statement", "statement", None),
    ("GET", "/v1/rounds/no-such-coup", "rounds", None),
    ("GET", "/v1/tables", "tables", None),
    ("GET", f"/v1/tables/{T}/report", "tables", None),
    ("GET", f"/v1/tables/{T}/shifts", "tables", None),
    ("GET", f"/v1/tables/{T}/rounds", "tables", None),
    ("GET", f"/v1/tables/{T}/roads", "tables", None),
    ("GET", "/v1/stream?max_seconds=1", "tables", None),
    ("GET", "/v1/alerts", "alerts", None),
    ("GET", "/v1/alerts/no-such-alert/evidence", "alerts", None),
    ("GET", "/v1/accounts/player:001/case", "alerts", None),
    ("POST", "/v1/alerts/no-such-alert/acknowledge", "casework", {}),
    ("GET", "/v1/findings", "findings", None),
    ("POST", "/v1/cashier/deposits", "cashier", MONEY),
    ("POST", "/v1/cashier/withdrawals", "cashier", MONEY),
    ("POST", "/v1/bets", "bets", BET),
]


def copy_log(src: Path, dst: Path) -> Path:
    """A copy of a log (SQLite's backup API: consistent whatever its WAL holds)."""
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    a.close()
    b.close()
    return dst


@dataclass(frozen=True, slots=True)
class Served:
    """A running back office: its base URL, an API key per role, its read model, its log's records."""

    url: str
    keys: dict[str, str]
    read_url: str
    records: Callable[[], list[dict[str, Any]]]


RUNTIMES = ["sqlite", "postgresql", pytest.param("kafka", marks=pytest.mark.kafka)]
"""The embedded log with its read model on SQLite and on PostgreSQL; Kafka with PostgreSQL."""


@pytest.fixture(scope="module")
def kafka_bo(kafka_broker: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBackOffice]:
    """The module's back office on Kafka: workers, a seeded session, the follower (one for its tests)."""
    with kafka_back_office(kafka_broker, tmp_path_factory.mktemp("kafka")) as bo:
        yield bo


@pytest.fixture(scope="module")
def kafka_url(kafka_bo: KafkaBackOffice) -> Iterator[str]:
    """``serve --kafka``'s application over the module's back office on Kafka."""
    with kafka_server(kafka_bo) as url:
        yield url


@pytest.fixture(scope="module")
def shared_embedded(tmp_path_factory: pytest.TempPathFactory, demo_log: Path) -> Iterator[Served]:
    """One server over a copy of the demo log on SQLite, with a key per role."""
    tmp = tmp_path_factory.mktemp("shared")
    log = copy_log(demo_log, tmp / "log.db")
    keys = make_keyring(tmp / "keyring.json")
    with running_server(log, f"sqlite:///{tmp / 'read.db'}", tmp / "keyring.json") as url:
        yield Served(url, keys, f"sqlite:///{tmp / 'read.db'}", lambda: records(log))


@pytest.fixture(params=["embedded", pytest.param("kafka", marks=pytest.mark.kafka)])
def shared(request: pytest.FixtureRequest) -> Served:
    """The module's server on each runtime (tests that write use Idempotency-Keys of their own)."""
    if request.param == "kafka":
        bo: KafkaBackOffice = request.getfixturevalue("kafka_bo")
        return Served(request.getfixturevalue("kafka_url"), bo.keys, bo.read_url, bo.records)
    served: Served = request.getfixturevalue("shared_embedded")
    return served


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_the_permission_table_is_the_documented_one() -> None:
    """The routes' role table in the code is the one this suite (and the README) states."""
    assert {k: set(v) for k, v in PERMISSIONS.items()} == EXPECTED_ROLES


ROUTE_IDS = [f"{m} {p}" for m, p, _, _ in ROUTES]


@pytest.mark.parametrize(("method", "path", "group", "body"), ROUTES, ids=ROUTE_IDS)
@pytest.mark.parametrize("role", [None, "bogus", *ROLES])
def test_every_route_needs_a_key_and_a_role_that_may(
    shared_embedded: Served, method: str, path: str, group: str, body: Any, role: str | None
) -> None:
    """No key or an unknown key: 401 (problem+json, WWW-Authenticate); a role that may not: 403;
    a role that may: neither."""
    url, keys = shared_embedded.url, shared_embedded.keys
    headers = {"Idempotency-Key": f"auth-{role}-{group}-{path}"}
    if role == "bogus":
        headers.update(auth("clk_admin-00000000_not-a-key"))
    elif role is not None:
        headers.update(auth(keys[role]))
    r = httpx.request(method, url + path, headers=headers, json=body, timeout=30)
    if role in (None, "bogus"):
        assert r.status_code == 401
        assert r.headers["content-type"].startswith("application/problem+json")
        assert r.headers["www-authenticate"] == "Bearer"
    elif role in EXPECTED_ROLES[group]:
        assert r.status_code not in (401, 403), r.text
    else:
        assert r.status_code == 403
        assert r.json()["status"] == 403


@pytest.mark.kafka
def test_every_route_on_kafka_needs_a_key_and_a_role_that_may(
    kafka_bo: KafkaBackOffice, kafka_url: str
) -> None:
    """The same rule on Kafka, each route once without a key (401), with a role that may not (403) and
    with one that may (neither; a command is carried out)."""
    for method, path, group, body in ROUTES:
        allowed = sorted(EXPECTED_ROLES[group])
        forbidden = sorted(set(ROLES) - EXPECTED_ROLES[group])
        for role, expected in (
            (None, {401}),
            (forbidden[0] if forbidden else None, {403 if forbidden else 401}),
        ):
            headers = {"Idempotency-Key": f"kafka-auth-{role}-{group}"}
            headers.update(auth(kafka_bo.keys[role]) if role else {})
            r = httpx.request(method, kafka_url + path, headers=headers, json=body, timeout=30)
            assert r.status_code in expected, (path, role, r.text)
            assert r.headers["content-type"].startswith("application/problem+json")
        headers = {"Idempotency-Key": f"kafka-auth-{allowed[0]}-{group}", **auth(kafka_bo.keys[allowed[0]])}
        r = httpx.request(method, kafka_url + path, headers=headers, json=body, timeout=30)
        assert r.status_code not in (401, 403), (path, r.text)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_done_when_api_balances_and_statements_equal_the_fold_of_postings(
    backend: str, demo_log: Path, tmp_path: Path
) -> None:
    """For a seeded demo, `casino-ledger serve` returns for every account the balance and the statement
    (followed page by page) that the log's postings fold to; a rebuilt read model is identical."""
    log = copy_log(demo_log, tmp_path / "log.db")
    keys = make_keyring(tmp_path / "keyring.json")
    env = {k: v for k, v in os.environ.items() if k != "CASINO_READ_DB"}
    schemas = pg_schema_url() if backend == "postgresql" else None
    if schemas is not None:
        env["CASINO_READ_DB"] = next(schemas)
    try:
        proc, url = serve_process(["--db", str(log), "--keyring", str(tmp_path / "keyring.json")], env)
        try:
            balances, lines = fold(log)
            h = auth(keys["auditor"])
            for account, expected in balances.items():
                b = httpx.get(f"{url}/v1/accounts/{account}/balance", headers=h, timeout=30)
                assert b.json() == {"account_id": account, "currency": "EUR", "balance_minor": expected}
                got: list[tuple[str, int, int]] = []
                cursor: str | None = None
                while True:
                    params = {"limit": "40", **({"cursor": cursor} if cursor else {})}
                    page = httpx.get(f"{url}/v1/accounts/{account}/statement", params=params, headers=h,
                                     timeout=30).json()  # fmt: skip
                    got += [(e["transfer_id"], e["amount_minor"], e["balance_after_minor"])
                            for e in page["entries"]]  # fmt: skip
                    cursor = page["next_cursor"]
                    if cursor is None:
                        break
                assert got == lines[account], account
        finally:
            proc.terminate()
            proc.wait(30)
        read_url = env.get("CASINO_READ_DB") or default_url(log)
        engine = make_engine(read_url)
        before = dump_rows(engine)
        subprocess.run([sys.executable, "-m", "services.cli", "project", "--db", str(log), "--rebuild"],
                       env=env, check=True, capture_output=True)  # fmt: skip
        assert dump_rows(engine) == before
        assert len(before["bo_statement_lines"]) == sum(len(v) for v in lines.values())
        engine.dispose()
    finally:
        if schemas is not None:
            schemas.close()


@pytest.fixture(params=RUNTIMES)
def own(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Served]:
    """A server over a seeded session (seed 11, 2 tables, 6 coups) on each runtime: of this test's own
    over a fresh embedded log on SQLite and PostgreSQL; on Kafka, the module's (tests use their own
    Idempotency-Keys and read balances before they move them)."""
    if request.param == "kafka":
        bo: KafkaBackOffice = request.getfixturevalue("kafka_bo")
        yield Served(request.getfixturevalue("kafka_url"), bo.keys, bo.read_url, bo.records)
        return
    fresh_log: Path = request.getfixturevalue("fresh_log")
    ring, keys = request.getfixturevalue("keyring")
    schemas = pg_schema_url() if request.param == "postgresql" else None
    read_url = next(schemas) if schemas is not None else f"sqlite:///{tmp_path / 'read.db'}"
    try:
        with running_server(fresh_log, read_url, ring) as url:
            yield Served(url, keys, read_url, lambda: records(fresh_log))
    finally:
        if schemas is not None:
            schemas.close()


def balance_of(url: str, key: str, account: str) -> int:
    r = httpx.get(f"{url}/v1/accounts/{account}/balance", headers=auth(key), timeout=30)
    return int(r.json()["balance_minor"])


def test_deposits_are_idempotent_by_key(own: Served) -> None:
    """Same Idempotency-Key and body: the same answer and one credit; same key, other body: 409;
    the deposit enters the log once, written by the back office."""
    url, keys = own.url, own.keys
    h = auth(keys["cashier"])
    before = balance_of(url, keys["cashier"], "player:002")
    body = {"account_id": "player:002", "amount_minor": 12_345, "currency": "EUR"}
    first = httpx.post(f"{url}/v1/cashier/deposits", json=body, headers={**h, "Idempotency-Key": "d-1"})
    again = httpx.post(f"{url}/v1/cashier/deposits", json=body, headers={**h, "Idempotency-Key": "d-1"})
    assert first.status_code == again.status_code == 201
    assert first.json() == again.json()
    assert first.json()["status"] == "applied" and first.json()["balance_minor"] == before + 12_345
    other = httpx.post(f"{url}/v1/cashier/deposits", json={**body, "amount_minor": 1},
                       headers={**h, "Idempotency-Key": "d-1"})  # fmt: skip
    assert other.status_code == 409 and other.headers["content-type"].startswith("application/problem+json")
    assert balance_of(url, keys["cashier"], "player:002") == before + 12_345
    logged = own.records()
    deposits = [r for r in logged if r["type"] == "Deposit" and r["producer"] == "backoffice"
                and r["event_id"] == first.json()["request_id"]]  # fmt: skip
    assert len(deposits) == 1 and deposits[0]["payload"]["amount_minor"] == 12_345
    assert deposits[0]["auth"]["key_id"].startswith("backoffice-")
    applied = [r for r in logged if r["type"] == "FundsDeposited"
               and r["payload"]["transfer_id"] == first.json()["transfer_id"]]  # fmt: skip
    assert len(applied) == 1


def test_a_withdrawal_beyond_the_balance_is_refused(own: Served) -> None:
    """A withdrawal the wallet cannot cover: 422 problem+json with the wallet's reason; nothing moves;
    a covered one is applied."""
    url, keys = own.url, own.keys
    h = {**auth(keys["admin"]), "Idempotency-Key": "w-1"}
    before = balance_of(url, keys["admin"], "player:003")
    too_much = {"account_id": "player:003", "amount_minor": before + 1, "currency": "EUR"}
    r = httpx.post(f"{url}/v1/cashier/withdrawals", headers=h, json=too_much)
    assert r.status_code == 422
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["outcome"] == "refused" and r.json()["reason"] == "insufficient_funds"
    assert balance_of(url, keys["admin"], "player:003") == before
    ok = httpx.post(f"{url}/v1/cashier/withdrawals", headers={**h, "Idempotency-Key": "w-2"},
                    json={"account_id": "player:003", "amount_minor": 500, "currency": "EUR"})  # fmt: skip
    assert ok.status_code == 201 and ok.json()["balance_minor"] == before - 500


def test_a_bet_without_an_open_coup_is_refused_and_refunded(own: Served) -> None:
    """A bet at a table whose shoe is closed reaches the dealer, is refused, and its stake comes back."""
    url, keys = own.url, own.keys
    before = balance_of(url, keys["terminal"], "player:001")
    r = httpx.post(f"{url}/v1/bets", headers={**auth(keys["terminal"]), "Idempotency-Key": "b-1"},
                   json={**BET, "table_id": "T01-punto-banco"})  # fmt: skip
    assert r.status_code == 422 and r.json()["outcome"] == "refused"
    assert balance_of(url, keys["terminal"], "player:001") == before
    kinds = [e["kind"] for e in httpx.get(f"{url}/v1/accounts/player:001/statement?limit=500",
                                          headers=auth(keys["admin"])).json()["entries"]]  # fmt: skip
    assert kinds[-2:] == ["bet", "refund"]


def test_statement_windows_and_csv(own: Served) -> None:
    """since/until select the lines in the window; CSV (by ?format= or Accept) holds the same lines."""
    url, keys = own.url, own.keys
    h = auth(keys["auditor"])
    full = httpx.get(f"{url}/v1/accounts/player:004/statement?limit=500", headers=h).json()["entries"]
    assert len(full) > 4
    lo, hi = full[1]["occurred_at"], full[-2]["occurred_at"]
    window = httpx.get(f"{url}/v1/accounts/player:004/statement", headers=h,
                       params={"since": lo, "until": hi, "limit": 500}).json()["entries"]  # fmt: skip
    assert window == [e for e in full if lo <= e["occurred_at"] < hi]
    for extra in ({"params": {"format": "csv"}}, {"headers": {**h, "Accept": "text/csv"}}):
        r = httpx.get(f"{url}/v1/accounts/player:004/statement", **({"headers": h} | extra))
        assert r.headers["content-type"].startswith("text/csv")
        rows = list(csv.DictReader(io.StringIO(r.text)))
        assert [(x["transfer_id"], int(x["balance_after_minor"])) for x in rows] == [
            (e["transfer_id"], e["balance_after_minor"]) for e in full
        ]
    # the day the session played (not the latest with play: a module's other tests may bet today)
    coup = httpx.get(f"{url}/v1/tables/{T}/rounds?limit=1", headers=h).json()["rounds"][0]["coup_id"]
    day = httpx.get(f"{url}/v1/rounds/{coup}", headers=h).json()["gaming_day"]
    report = httpx.get(f"{url}/v1/tables/{T}/report?format=csv&day={day}", headers=h)
    json_report = httpx.get(f"{url}/v1/tables/{T}/report?day={day}", headers=h).json()
    (row,) = csv.DictReader(io.StringIO(report.text))
    assert int(row["handle_minor"]) == json_report["handle_minor"] > 0
    assert set(json_report) == {"table_id", "day", "coups", "bets", "handle_minor", "win_minor",
                                "commission_minor", "hold_pct", "paid_minor", "refused",
                                "bank_minor"}  # fmt: skip


def test_errors_are_problem_json(shared: Served) -> None:
    """Unknown things are 404, malformed parameters 400/422, all as problem+json with their status."""
    url, keys = shared.url, shared.keys
    h = auth(keys["admin"])
    cases = [
        ("/v1/accounts/nobody/balance", 404), ("/v1/rounds/nothing", 404), ("/v1/tables/none/report", 404),
        ("/v1/accounts/player:001/statement?since=yesterday", 422),
        ("/v1/accounts/player:001/statement?since=2026-02-30", 400),
        ("/v1/accounts/player:001/statement?cursor=abc", 422), (f"/v1/tables/{T}/report?day=22-11-2026", 422),
        (f"/v1/tables/{T}/report?day=2026-11-31", 400),
        ("/v1/alerts?severity=loud", 422), ("/v1/alerts?limit=0", 422),
    ]  # fmt: skip
    for path, status in cases:
        r = httpx.get(url + path, headers=h)
        assert r.status_code == status, path
        assert r.headers["content-type"].startswith("application/problem+json"), path
        assert r.json()["status"] == status
    r = httpx.post(f"{url}/v1/cashier/deposits", headers=h, json=MONEY)  # no Idempotency-Key
    assert r.status_code == 422


def test_openapi_document_lists_the_design_endpoints(shared: Served) -> None:
    """/openapi.json is OpenAPI 3.1 and has every endpoint docs/integration.md names."""
    doc = httpx.get(shared.url + "/openapi.json").json()
    assert doc["openapi"].startswith("3.1")
    for path in ("/v1/accounts/{account_id}/balance", "/v1/accounts/{account_id}/statement",
                 "/v1/rounds/{coup_id}", "/v1/tables/{table_id}/report", "/v1/alerts", "/v1/findings",
                 "/v1/cashier/deposits", "/v1/cashier/withdrawals", "/v1/bets"):  # fmt: skip
        assert path in doc["paths"], path


def test_round_record_over_http(shared: Served) -> None:
    """GET /v1/rounds/{coup_id} answers the coup's cards in deal order as the dealer recorded them."""
    url, keys = shared.url, shared.keys
    dealt = [r["payload"] for r in shared.records() if r["type"] == "CardDealt"]
    coup = dealt[0]["coup_id"]
    got = httpx.get(f"{url}/v1/rounds/{coup}", headers=auth(keys["auditor"])).json()
    assert [c["card"] for c in got["cards"]] == [d["card"] for d in dealt if d["coup_id"] == coup]
    assert got["coup_id"] == coup and got["variant"] and got["bets"]


def test_the_stream_announces_the_position(shared: Served) -> None:
    """GET /v1/stream is text/event-stream and starts with the read model's position."""
    url, keys = shared.url, shared.keys
    with httpx.stream("GET", f"{url}/v1/stream?max_seconds=1", headers=auth(keys["operator"])) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        text = "".join(r.iter_text())
    assert text.startswith('event: position\ndata: {"position": ')
    position = int(text.split('"position": ')[1].split("}")[0])
    assert position > 0


def test_a_key_whose_answer_was_lost_is_a_conflict_not_a_crash(own: Served) -> None:
    """When the stored answers are gone (a read model replaced), reusing an Idempotency-Key whose
    request is already in the log answers 409 problem+json and credits nothing twice."""
    url, keys = own.url, own.keys
    h = {**auth(keys["cashier"]), "Idempotency-Key": "lost-1"}
    body = {"account_id": "player:001", "amount_minor": 777, "currency": "EUR"}
    assert httpx.post(f"{url}/v1/cashier/deposits", headers=h, json=body).status_code == 201
    after = balance_of(url, keys["cashier"], "player:001")
    engine = make_engine(own.read_url)
    with engine.begin() as c:
        c.execute(delete(s.idempotency))
    engine.dispose()
    again = httpx.post(f"{url}/v1/cashier/deposits", headers=h, json=body)
    assert again.status_code == 409
    assert again.headers["content-type"].startswith("application/problem+json")
    assert balance_of(url, keys["cashier"], "player:001") == after


@pytest.mark.kafka
def test_on_kafka_a_late_outcome_answers_504_and_a_retry_reads_it_on_any_server(
    kafka_bo: KafkaBackOffice, tmp_path: Path
) -> None:
    """On a read model no projector follows, a deposit is written but its outcome never shows: 504
    problem+json saying to retry with the same key (a retry then: 504 again). Once a follower runs, the
    same request under the same key on another server of that read model answers 201 with the outcome,
    the same answer again after, and the log holds the request and the deposit once."""
    schemas = pg_schema_url()
    read_url = next(schemas)
    follower = None
    try:
        h = {**auth(kafka_bo.keys["cashier"]), "Idempotency-Key": "late-1"}
        body = {"account_id": "player:005", "amount_minor": 4_321, "currency": "EUR"}
        with kafka_server(kafka_bo, timeout_s=1.0, read_url=read_url) as url:
            late = httpx.post(f"{url}/v1/cashier/deposits", headers=h, json=body, timeout=60)
            still = httpx.post(f"{url}/v1/cashier/deposits", headers=h, json=body, timeout=60)
        assert late.status_code == still.status_code == 504, late.text
        assert late.headers["content-type"].startswith("application/problem+json")
        assert "retry with the same Idempotency-Key" in late.json()["detail"]
        env = {**kafka_bo.env(), "CASINO_READ_DB": read_url}
        follower = kafka_follower(env, kafka_bo.settings.bootstrap_servers, tmp_path / "follower.log")
        with kafka_server(kafka_bo, read_url=read_url) as url:
            first = httpx.post(f"{url}/v1/cashier/deposits", headers=h, json=body, timeout=60)
            again = httpx.post(f"{url}/v1/cashier/deposits", headers=h, json=body, timeout=60)
        assert first.status_code == again.status_code == 201, first.text
        assert first.json() == again.json() and first.json()["status"] == "applied"
        transfer = first.json()["transfer_id"]
        applied = [r for r in kafka_bo.records() if r["type"] == "FundsDeposited"
                   and r["payload"]["transfer_id"] == transfer]  # fmt: skip
        assert len(applied) == 1
        requests = [r for r in kafka_bo.records() if r["type"] == "Deposit"
                    and r["event_id"] == first.json()["request_id"]]  # fmt: skip
        assert len(requests) == 1  # the retries waited for it, none wrote it again
    finally:
        if follower is not None:
            follower.terminate()
            follower.wait(30)
        schemas.close()


@pytest.mark.kafka
def test_on_kafka_statement_and_report_read_the_projected_read_model(
    kafka_bo: KafkaBackOffice,
    kafka_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``statement --read-model`` and ``report --read-model`` read the read model CASINO_READ_DB names
    (the projector's, on Kafka) and print what the API answers; without CASINO_READ_DB, or with --db
    too: one line, exit 2."""
    from services.cli import main  # noqa: PLC0415

    h = auth(kafka_bo.keys["auditor"])
    coup = httpx.get(f"{kafka_url}/v1/tables/{T}/rounds?limit=1", headers=h).json()["rounds"][0]["coup_id"]
    day = httpx.get(f"{kafka_url}/v1/rounds/{coup}", headers=h).json()["gaming_day"]
    monkeypatch.setenv("CASINO_READ_DB", kafka_bo.read_url)
    assert main(["report", "--read-model", "--table", T, "--day", day]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report == [httpx.get(f"{kafka_url}/v1/tables/{T}/report?day={day}", headers=h).json()]
    assert report[0]["bets"] > 0
    assert main(["statement", "--read-model", "--account", "player:004"]) == 0
    lines = json.loads(capsys.readouterr().out)
    api = httpx.get(f"{kafka_url}/v1/accounts/player:004/statement?limit=500", headers=h).json()["entries"]
    assert lines["account_id"] == "player:004"
    assert [e["transfer_id"] for e in api] == [e["transfer_id"] for e in lines["entries"]] and api
    assert main(["report", "--read-model", "--db", "x.db"]) == 2
    monkeypatch.delenv("CASINO_READ_DB")
    assert main(["report", "--read-model"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("casino-ledger: error:") and "CASINO_READ_DB" in err[-1]
