"""The pit boss's page in headless Chromium (Debian's, driven by Playwright): tables, last coups with
their cards, the five roads, today's results, open alerts, and live updates over server-sent events."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import BrowserContext, sync_playwright

from tests.backoffice.conftest import make_keyring, running_server
from tests.backoffice.test_api import copy_log

# a command runs the pipeline and the projector before it answers: on a loaded machine that took more
# than httpx's default 5 s (ReadTimeout while three other suites ran)
http = httpx.Client(timeout=60)

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[BrowserContext]:
    """Headless Chromium with a fresh profile directory."""
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=CHROMIUM, headless=True, args=FLAGS,
            viewport={"width": 1400, "height": 1800},
        )  # fmt: skip
        try:
            yield context
        finally:
            context.close()


def test_the_page_shows_tables_coups_roads_results_and_alerts(
    browser: BrowserContext, demo_log: Path, tmp_path: Path
) -> None:
    """Every table appears with the API's results of the day, its last coups with their cards and the
    five roads drawn cell for cell; the alerts are listed; a deposit made meanwhile reaches the page
    through the event stream. A screenshot is kept in tests/artifacts/."""
    log = copy_log(demo_log, tmp_path / "log.db")
    keys = make_keyring(tmp_path / "keyring.json")
    with running_server(log, f"sqlite:///{tmp_path / 'read.db'}", tmp_path / "keyring.json") as url:
        h = {"Authorization": f"Bearer {keys['operator']}"}
        tables = http.get(f"{url}/v1/tables", headers=h).json()
        alerts = http.get(f"{url}/v1/alerts?limit=500", headers=h).json()["alerts"]
        page = browser.new_page()
        page.goto(f"{url}/#key={keys['operator']}")
        page.wait_for_selector(".table-card .road[data-road=cockroach_pig]")
        page.wait_for_function("document.querySelector('#live').textContent.startsWith('live')")
        assert "key=" not in page.url  # the key does not stay in the address bar
        cards = page.locator(".table-card")
        assert cards.count() == len(tables["tables"]) >= 3
        for t in tables["tables"]:
            card = page.locator(f".table-card[data-table='{t['table_id']}']")
            assert card.locator("[data-field=coups]").inner_text() == str(t["report"]["coups"])
            assert card.locator("[data-field=hold]").inner_text() == f"{t['report']['hold_pct']:.2f} %"
            rounds = http.get(f"{url}/v1/tables/{t['table_id']}/rounds?limit=6", headers=h).json()["rounds"]
            coups = card.locator("li.coup")
            assert coups.count() == len(rounds) > 0
            first = rounds[0]
            shown = coups.first.locator(".card")
            assert [shown.nth(i).get_attribute("data-card") for i in range(shown.count())] == [
                c for hand in first["hands"].values() for c in hand["cards"]
            ]
            roads = http.get(f"{url}/v1/tables/{t['table_id']}/roads", headers=h).json()
            for name in ("bead_plate", "big_road", "big_eye_boy", "small_road", "cockroach_pig"):
                assert card.locator(f".road[data-road={name}] .cell").count() == len(roads[name]), name
        assert page.locator("#alerts tr.alert").count() == min(50, len(alerts))

        before = int(page.evaluate("document.body.dataset.position"))
        r = http.post(f"{url}/v1/cashier/deposits", headers={"Authorization": f"Bearer {keys['cashier']}",
                       "Idempotency-Key": "page-1"}, json={"account_id": "player:001", "amount_minor": 100,
                       "currency": "EUR"})  # fmt: skip
        assert r.status_code == 201
        page.wait_for_function(f"Number(document.body.dataset.position) > {before}", timeout=20_000)
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "backoffice-page.png"), full_page=True)
        assert (ARTIFACTS / "backoffice-page.png").stat().st_size > 10_000


def test_the_page_asks_for_a_key_and_refuses_a_wrong_role(
    browser: BrowserContext, fresh_log: Path, keyring: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """Without a key the page shows the key form; a cashier's key (no table rights) is sent back to it."""
    path, keys = keyring
    with running_server(fresh_log, f"sqlite:///{tmp_path / 'read.db'}", path) as url:
        page = browser.new_page()
        page.goto(url + "/")
        page.wait_for_selector("#login:not([hidden])")
        assert page.locator("#main").is_hidden()
        page.fill("#key", keys["cashier"])
        page.click("#login button")
        page.wait_for_selector("#error:not([hidden])")
        assert "may not" in page.locator("#error").inner_text()
        assert page.locator("#login").is_visible()


def test_an_analyst_pages_filters_and_works_an_alert_on_the_page(
    browser: BrowserContext, tmp_path: Path
) -> None:
    """The alert list reads every alert through the cursor (two per request here) and counts them all;
    the account filter finds the linked alert from its second account; its case panel names both
    accounts, and acknowledging and assigning it there is what the API then says."""
    from tests.backoffice.test_casework import B, linked_log  # noqa: PLC0415

    keys = make_keyring(tmp_path / "keyring.json")
    log = linked_log(tmp_path / "log.db", tmp_path / "keyring.json")
    with running_server(log, f"sqlite:///{tmp_path / 'read.db'}", tmp_path / "keyring.json") as url:
        h = {"Authorization": f"Bearer {keys['analyst']}"}
        every = http.get(f"{url}/v1/alerts?limit=500", headers=h).json()["alerts"]
        pair = next(a for a in every if a["detector"] == "linked_hedge")
        page = browser.new_page()
        page.goto(f"{url}/#key={keys['analyst']}&page=2")
        page.wait_for_function(f"document.querySelector('#alert-count').textContent === '{len(every)}'")
        assert page.locator("#alerts tr.alert").count() == min(50, len(every))
        page.fill("#f-account", B)
        page.dispatch_event("#f-account", "change")
        row = page.locator(f"#alerts tr.alert[data-alert='{pair['event_id']}']")
        row.wait_for()
        page.wait_for_function(  # the list read again under the filter (the pair's row was there before)
            "b => [...document.querySelectorAll('#alerts tr.alert .accounts')]"
            ".every(td => td.textContent.split(/\\s+/).includes(b))",
            arg=B,
        )
        shown = page.locator("#alerts tr.alert .accounts").all_inner_texts()
        assert shown and all(B in text.split() for text in shown)
        row.click()
        page.wait_for_selector("#case:not([hidden])")
        assert set(page.locator("#case-accounts").inner_text().split(", ")) == set(pair["account_ids"])
        page.click("#case button[data-action=acknowledge]")
        page.wait_for_function("document.querySelector('#case-status').textContent === 'acknowledged'")
        page.once("dialog", lambda d: d.accept("analyst:rosa"))
        page.click("#case button[data-action=assign]")
        page.wait_for_function("document.querySelector('#case-status').textContent === 'assigned'")
        got = http.get(f"{url}/v1/alerts/{pair['event_id']}", headers=h).json()
        assert (got["status"], got["assignee"]) == ("assigned", "analyst:rosa")
        assert row.get_attribute("data-status") == "assigned"
        assert page.locator("#error").is_hidden()
