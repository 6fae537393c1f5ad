"""Alerts an analyst can work (issue #29), on a real server on a loopback port over SQLite: every filter,
cursor paging, the evidence behind an alert (JSON and CSV), the case view of linked accounts, and the
case's lifecycle written to the log, answered by the monitor's casework stage and projected."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from services.core import topics
from services.core.contract import AlertCaseChanged, WorkAlert
from services.core.envelope import parse_record
from services.integrations.backoffice import alert_queries as aq
from services.integrations.backoffice import exports
from services.integrations.backoffice.facts import writer_keys_for
from services.integrations.backoffice.projector import Projector, dump_rows
from services.integrations.backoffice.schema import make_engine
from services.runtime.compose import Composition
from services.runtime.embedded.bus import EmbeddedBus
from services.runtime.embedded.store import EmbeddedLog
from services.runtime.keyring import load_keyring
from services.runtime.replay import read_db, replay
from services.simulation.adversaries import Hedger
from services.simulation.simulator import Session, demo_tables
from tests.backoffice.conftest import make_keyring, running_server

http = httpx.Client(timeout=60)
A, B = "adv:hedger-a", "adv:hedger-b"


def linked_log(path: Path, keyring: Path, coups: int = 60) -> Path:
    """Two accounts hedging each other at one table (a ``linked_hedge`` naming both) among honest play."""
    ring = load_keyring(keyring)
    bus = EmbeddedBus(path, Composition.demo(ring).pipeline())
    try:
        Session(bus, seed=3, players=4, keyring=ring, adversaries=[Hedger(3, mode="linked")]).run(
            demo_tables(2), coups
        )
    finally:
        bus.close()
    return path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str], Path, Path]]:
    """(base URL, a key per role, the log, the read model's file) over the linked log."""
    tmp = tmp_path_factory.mktemp("casework")
    keys = make_keyring(tmp / "keyring.json")
    log = linked_log(tmp / "log.db", tmp / "keyring.json")
    with running_server(log, f"sqlite:///{tmp / 'read.db'}", tmp / "keyring.json") as url:
        yield url, keys, log, tmp / "read.db"


def get(url: str, key: str, **params: Any) -> Any:
    r = http.get(url, headers={"Authorization": f"Bearer {key}"}, params=params)
    assert r.status_code == 200, r.text
    return r.json() if r.headers["content-type"].startswith("application/json") else r.text


def all_alerts(url: str, key: str, **params: Any) -> list[dict[str, Any]]:
    """Every alert, read one page of ``limit`` at a time by the cursor."""
    out: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = get(f"{url}/v1/alerts", key, **params, **({"cursor": cursor} if cursor else {}))
        out += page["alerts"]
        cursor = page["next_cursor"]
        if cursor is None:
            return out


def linked(url: str, key: str) -> dict[str, Any]:
    found = [a for a in all_alerts(url, key, limit=500) if a["detector"] == "linked_hedge"]
    assert found, "the hedging pair raised no linked_hedge"
    return found[0]


def test_the_account_filter_finds_a_linked_alert_from_either_account(served: Any) -> None:
    """Both accounts of a linked pair find its alert; the alert lists both accounts."""
    url, keys, _, _ = served
    alert = linked(url, keys["analyst"])
    assert set(alert["account_ids"]) == {A, B}
    for account in (A, B):
        ids = [a["event_id"] for a in all_alerts(url, keys["analyst"], account=account)]
        assert alert["event_id"] in ids, account
    assert all_alerts(url, keys["analyst"], account="nobody:at-all") == []


def test_filters_by_detector_and_time_range_and_cursor_pages_past_any_count(served: Any) -> None:
    """A page of one alert at a time reads every alert in order; detector and ``since`` ≤ t < ``until``
    keep exactly the alerts that match."""
    url, keys, _, _ = served
    every = all_alerts(url, keys["operator"], limit=500)
    assert len(every) >= 3
    assert all_alerts(url, keys["operator"], limit=1) == every
    detector = every[0]["detector"]
    assert all_alerts(url, keys["operator"], detector=detector) == [
        a for a in every if a["detector"] == detector
    ]
    lo, hi = every[1]["occurred_at"], every[-1]["occurred_at"]
    window = all_alerts(url, keys["operator"], since=lo, until=hi)
    assert window == [a for a in every if lo <= a["occurred_at"] < hi]
    assert every[-1] not in window and every[1] in window
    r = http.get(f"{url}/v1/alerts", headers={"Authorization": f"Bearer {keys['operator']}"},
                 params={"detector": "Not A Detector"})  # fmt: skip
    assert r.status_code == 422


def test_evidence_holds_every_bet_the_alert_names_in_json_and_csv(served: Any) -> None:
    """The linked alert's evidence has each bet it names, with the coup it was in and that coup's other
    bets; the CSV has a row per bet and its cells agree with the JSON."""
    url, keys, _, _ = served
    alert = linked(url, keys["auditor"])
    ev = get(f"{url}/v1/alerts/{alert['event_id']}/evidence", keys["auditor"])
    named = set(alert["subject"]["bet_ids"])
    assert {b["bet_id"] for b in ev["bets"]} == named
    assert ev["missing"] == {"coup_ids": [], "bet_ids": []}
    assert {b["account_id"] for b in ev["bets"]} == {A, B}
    assert [c["coup_id"] for c in ev["coups"]] == list(
        dict.fromkeys(alert["subject"]["coup_ids"] + [alert["subject"]["coup_id"]])
    )
    for coup in ev["coups"]:
        mine = [b for b in coup["bets"] if b["named"]]
        assert {b["account_id"] for b in mine} == {A, B}, coup["coup_id"]
        assert {b["spot"] for b in mine} == {"player", "banker"}
    text = get(f"{url}/v1/alerts/{alert['event_id']}/evidence", keys["auditor"], format="csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    bets = {r["bet_id"]: r for r in rows if r["kind"] == "bet"}
    assert named <= set(bets)
    some = ev["bets"][0]
    assert bets[some["bet_id"]]["stake_minor"] == str(some["stake_minor"])
    assert bets[some["bet_id"]]["account_id"] == some["account_id"]


def test_the_evidence_export_escapes_formulas() -> None:
    """An id taken from the log that a spreadsheet would run as a formula is written as text."""
    bet = {"bet_id": "-b1", "account_id": "=cmd|' /C calc'!A0", "spot": "player", "stake_minor": -5,
           "named": True}  # fmt: skip
    coup = {"coup_id": "+c1", "coup_number": 1, "outcome": "banker", "table_id": "@t", "ended_at": None,
            "bets": [bet]}  # fmt: skip
    ev = {
        "alert": {"event_id": "e1", "detector": "linked_hedge", "table_id": "=HYPERLINK(1)"},
        "coups": [coup], "bets": [], "event_ids": ["\tx"],
    }  # fmt: skip
    rows = list(csv.DictReader(io.StringIO(exports.to_csv(aq.evidence_rows(ev), aq.EVIDENCE_CSV_FIELDS))))
    assert rows[0]["account_id"] == "'=cmd|' /C calc'!A0"
    assert rows[0]["bet_id"] == "'-b1" and rows[0]["coup_id"] == "'+c1" and rows[0]["table_id"] == "'@t"
    assert rows[0]["stake_minor"] == "-5"
    assert rows[1]["kind"] == "record" and rows[1]["table_id"] == "'=HYPERLINK(1)"


def test_the_case_view_links_the_pair_and_their_tables(served: Any) -> None:
    """An account's case names the account its alerts link it to, its table with its bets and alerts,
    and the linked alert; the alert's own case covers both accounts."""
    url, keys, _, _ = served
    alert = linked(url, keys["analyst"])
    view = get(f"{url}/v1/accounts/{A}/case", keys["analyst"])
    assert B in [x["account_id"] for x in view["linked_accounts"]]
    assert alert["event_id"] in [a["event_id"] for a in view["alerts"]]
    table = next(t for t in view["tables"] if t["table_id"] == alert["table_id"])
    assert table["bets"] > 0 and table["staked_minor"] > 0 and table["alerts"] >= 1
    both = get(f"{url}/v1/alerts/{alert['event_id']}/case", keys["analyst"])
    assert set(both["accounts"]) == {A, B}
    assert both["alerts_total"] >= view["alerts_total"]
    r = http.get(f"{url}/v1/accounts/nobody:x/case", headers={"Authorization": f"Bearer {keys['analyst']}"})
    assert r.status_code == 404


def step(
    url: str, key: str, alert_id: str, action: str, idem: str, body: dict[str, Any] | None = None
) -> Any:
    return http.post(f"{url}/v1/alerts/{alert_id}/{action}", json=body or {},
                     headers={"Authorization": f"Bearer {key}", "Idempotency-Key": idem})  # fmt: skip


def test_an_alert_is_acknowledged_assigned_and_closed_with_a_note_on_the_log(served: Any) -> None:
    """open → acknowledged → assigned → closed, each a ``WorkAlert`` on the log answered by a chained
    ``AlertCaseChanged``; a step the status does not allow is 409 and stays on the record; an operator
    may not work a case; a retry with the same key answers the same; the status filter follows."""
    url, keys, log, _ = served
    alert_id = linked(url, keys["analyst"])["event_id"]
    analyst = keys["analyst"]
    assert step(url, keys["operator"], alert_id, "acknowledge", "op-1").status_code == 403
    first = step(url, analyst, alert_id, "acknowledge", "ack-1")
    assert first.status_code == 200, first.text
    assert first.json()["status_before"] == "open" and first.json()["status"] == "acknowledged"
    again = step(url, analyst, alert_id, "acknowledge", "ack-1")
    assert again.status_code == 200 and again.json() == first.json()  # the same key: the same answer
    twice = step(url, analyst, alert_id, "acknowledge", "ack-2")
    assert twice.status_code == 409 and twice.headers["content-type"].startswith("application/problem+json")
    assert step(url, analyst, alert_id, "close", "close-0", {"note": "   "}).status_code == 422
    assigned = step(url, analyst, alert_id, "assign", "assign-1", {"assignee": "analyst:rosa"})
    assert assigned.json()["status"] == "assigned" and assigned.json()["assignee"] == "analyst:rosa"
    closed = step(
        url, keys["admin"], alert_id, "close", "close-1", {"note": "pair barred, referred to security"}
    )
    assert closed.status_code == 200 and closed.json()["status"] == "closed"
    assert step(url, analyst, alert_id, "assign", "assign-2", {"assignee": "x"}).status_code == 409
    assert step(url, analyst, "no-such-alert", "acknowledge", "ack-x").status_code == 404

    got = get(f"{url}/v1/alerts/{alert_id}", analyst)
    assert got["status"] == "closed" and got["assignee"] == "analyst:rosa"
    assert [(s["action"], s["status"], s["refused"]) for s in got["steps"]] == [
        ("acknowledge", "acknowledged", None), ("acknowledge", "acknowledged", "step_not_allowed"),
        ("assign", "assigned", None), ("close", "closed", None), ("assign", "closed", "step_not_allowed"),
    ]  # fmt: skip
    assert got["steps"][3]["note"] == "pair barred, referred to security"
    assert alert_id in [a["event_id"] for a in all_alerts(url, analyst, status="closed")]
    assert alert_id not in [a["event_id"] for a in all_alerts(url, analyst, status="open")]

    with EmbeddedLog(log, readonly=True) as read:
        rows = read.read((topics.CASEWORK, topics.MONITOR_ALERTS), 0, 100_000)
    envs = [parse_record(raw) for _, _, _, raw in rows]
    asked = [e for e in envs if e.type == "WorkAlert"]
    answered = [e for e in envs if e.type == "AlertCaseChanged"]
    assert len(asked) == len(answered) == 5
    assert all(e.producer == "backoffice" and e.auth is not None for e in asked)
    assert [a.causation_hash for a in answered] == [q.hash for q in asked]
    assert [a.seq for a in answered] == list(range(5)) and all(a.key == alert_id for a in answered)
    WorkAlert.model_validate(asked[0].payload)
    AlertCaseChanged.model_validate(answered[-1].payload)


def test_the_case_tables_rebuild_from_the_log(served: Any, tmp_path: Path) -> None:
    """A read model projected afresh from the same log holds the same alerts, accounts and cases."""
    url, keys, log, read_db = served
    alert_id = linked(url, keys["analyst"])["event_id"]
    step(url, keys["analyst"], alert_id, "assign", "rebuild-1", {"assignee": "analyst:ivo"})
    from services.integrations.backoffice.migrate import upgrade  # noqa: PLC0415

    fresh = make_engine(f"sqlite:///{tmp_path / 'fresh.db'}")
    upgrade(fresh)
    with EmbeddedLog(log, readonly=True) as read:
        Projector(fresh, writers=writer_keys_for(log, log.parent / "keyring.json")).catch_up(read)
    served_rows, fresh_rows = dump_rows(make_engine(f"sqlite:///{read_db}")), dump_rows(fresh)
    for table in ("bo_alerts", "bo_alert_accounts", "bo_alert_cases", "bo_alert_case_steps"):
        assert served_rows[table] == fresh_rows[table], table
    assert fresh_rows["bo_alert_case_steps"]


def test_a_log_with_worked_cases_replays_clean(served: Any) -> None:
    """The case steps are facts like any other: the log with them (refused steps included) replays
    ``clean``, every record attested by its writer's signed heads."""
    url, keys, log, _ = served
    alert_id = linked(url, keys["analyst"])["event_id"]
    step(url, keys["analyst"], alert_id, "close", "replay-1", {"note": "seen"})
    step(url, keys["analyst"], alert_id, "close", "replay-2", {"note": "seen twice"})
    made = Composition(load_keyring(log.parent / "keyring.json"))
    with EmbeddedLog(log, readonly=True) as read:
        n = len([r for r in read.read((topics.MONITOR_ALERTS,), 0, 100_000) if b"AlertCaseChanged" in r[3]])
    assert n >= 2
    report = replay(read_db(log), keys=made.checkpoint_public_keys(), writers=made.writer_public_keys())
    assert report.verdict == "clean", report.to_dict().get("groups", [])[:3]


def test_postgresql_holds_the_same_cases_and_answers_the_same_queries(served: Any) -> None:
    """The log (with worked cases) projected into PostgreSQL gives the rows SQLite holds, and the
    account filter, the evidence and the case view answer the same there."""
    url, keys, log, read_db = served
    alert_id = linked(url, keys["analyst"])["event_id"]
    step(url, keys["analyst"], alert_id, "assign", "pg-1", {"assignee": "analyst:pg"})
    from services.integrations.backoffice.migrate import upgrade  # noqa: PLC0415
    from tests.backoffice.conftest import pg_schema_url  # noqa: PLC0415

    for pg_url in pg_schema_url():
        pg = make_engine(pg_url)
        try:
            upgrade(pg)
            with EmbeddedLog(log, readonly=True) as read:
                Projector(pg, writers=writer_keys_for(log, log.parent / "keyring.json")).catch_up(read)
            lite = make_engine(f"sqlite:///{read_db}")
            for table in ("bo_alerts", "bo_alert_accounts", "bo_alert_cases", "bo_alert_case_steps"):
                assert dump_rows(lite)[table] == dump_rows(pg)[table], table
            with pg.connect() as p, lite.connect() as q:
                assert aq.alerts(p, account_id=B) == aq.alerts(q, account_id=B)
                assert aq.alerts(p, status="assigned") == aq.alerts(q, status="assigned")
                assert aq.evidence(p, alert_id) == aq.evidence(q, alert_id)
                assert aq.case(p, [A]) == aq.case(q, [A])
        finally:
            pg.dispose()


def test_the_openapi_document_names_the_casework_roles(served: Any) -> None:
    """Each case step says in the OpenAPI document that analysts (and admins) may take it."""
    doc = http.get(f"{served[0]}/openapi.json").json()
    for action in ("acknowledge", "assign", "close"):
        op = doc["paths"][f"/v1/alerts/{{alert_id}}/{action}"]["post"]
        assert op["x-roles"] == ["admin", "analyst"], action
    assert "analyst" in doc["paths"]["/v1/alerts/{alert_id}/evidence"]["get"]["x-roles"]
