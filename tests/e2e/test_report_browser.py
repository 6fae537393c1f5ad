"""The regulator's HTML report and coup page, looked at in headless Chromium (Debian's /usr/bin/chromium,
driven by Playwright; ``make`` installs Chromium): DOM assertions, and screenshots kept under
``tests/artifacts/`` for a person to look at."""

from __future__ import annotations

import io
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, Page, sync_playwright

import services.settlement.payout_stage as payout_mod
import services.settlement.wallet_stage as wallet_mod
from services.cli import main
from services.core.ledger import Accounts, table_accounts
from services.simulation.simulator import DEFAULT_TABLES, Session
from tests.helpers.membus import MemBus

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    saved = dict(os.environ)
    os.environ.update({"SOURCE_DATE_EPOCH": "1795000000", "CI": "1"})
    os.environ.pop("CASINO_PUBLIC_KEYRING", None)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = main(list(args))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def buggy_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two tables, 15 coups each, played with settlement booking commission to the house account."""

    def accounts(table_id: str) -> Accounts:
        real = table_accounts(table_id)
        return Accounts(real.escrow, real.house, real.house, real.bank)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(payout_mod, "table_accounts", accounts)
        m.setattr(wallet_mod, "table_accounts", accounts)
        bus = MemBus()
        Session(bus, seed=3).run(list(DEFAULT_TABLES[:2]), 15)
    path = tmp_path_factory.mktemp("report") / "log.jsonl"
    path.write_bytes(b"".join(e.to_json() + b"\n" for e in bus.log))
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[BrowserContext]:
    """Headless Debian Chromium with a fresh user-data-dir (never a downloaded browser)."""
    assert Path(CHROMIUM).exists(), (
        "Chromium is missing: run `make test` (it installs it) or apt-get install chromium"
    )
    with tempfile.TemporaryDirectory() as profile, sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            profile,
            executable_path=CHROMIUM,
            headless=True,
            args=FLAGS,
            viewport={"width": 1280, "height": 1000},
        )
        yield context
        context.close()


def _open(browser: BrowserContext, path: Path) -> Page:
    page = browser.new_page()
    page.goto(path.as_uri())
    return page


def test_report_reads_in_order_with_charts_and_linkable_coups(
    buggy_log: Path, browser: BrowserContext, tmp_path: Path
) -> None:
    """The page shows the verdict, the facts it rests on, the table summary before the findings, one
    article per root cause, both charts, and an anchor for every coup that every in-page link reaches."""
    html = tmp_path / "report.html"
    code, _, err = _cli("replay", "--jsonl", str(buggy_log), "--html", str(html))
    assert code == 1 and str(html) in err
    _, data, _ = _cli("replay", "--jsonl", str(buggy_log), "--json")
    report: dict[str, Any] = json.loads(data)
    page = _open(browser, html)
    try:
        assert page.locator("#verdict").inner_text() == "findings"
        about = page.locator("#about").inner_text()
        assert "2026-11-18" in about and "casino-ledger" in about and "audit-demo" in about
        assert report["digest"] in about
        order = page.evaluate("[...document.querySelectorAll('main > section')].map(s => s.id)")
        assert order[:4] == ["about", "summary", "findings", "alerts"] and "shoes" in order
        assert page.locator("#summary tbody tr").count() == len(report["tables"]) + 1  # + all tables
        assert "EUR" in page.locator("#summary").inner_text()
        assert page.locator("article.finding").count() == report["root_findings"] > 0
        first = page.locator("article.finding").first.inner_text()
        assert "commission_posting_mismatch" in first and "minor units" in first
        assert page.locator("#charts svg circle.observed").count() >= 3 * len(report["tables"])
        assert page.locator("#charts svg rect.band").count() >= 3
        assert page.locator("#charts svg polyline.house").count() == 1
        ids = page.evaluate("[...document.querySelectorAll('#shoes tr[id]')].map(r => r.id)")
        assert ids and sorted(ids) == sorted("coup-" + c["coup_id"] for c in report["coup_list"])
        broken = page.evaluate(
            "[...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href'))"
            ".filter(h => !h.startsWith('#') || !document.getElementById(decodeURIComponent(h.slice(1))))"
        )
        assert broken == []
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "replay-report.png"), full_page=True)
        page.locator("#charts").screenshot(path=str(ARTIFACTS / "replay-report-charts.png"))
        page.locator("#findings").screenshot(path=str(ARTIFACTS / "replay-report-findings.png"))
        page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(path=str(ARTIFACTS / "replay-report-top.png"))
    finally:
        page.close()


def test_coup_page_shows_the_round_readably(buggy_log: Path, browser: BrowserContext, tmp_path: Path) -> None:
    """``replay --coup ID --html`` writes the round's page and says where; it lists every card in the
    order dealt, every bet and payout in currency units, and the finding on the round."""
    _, data, _ = _cli("replay", "--jsonl", str(buggy_log), "--json")
    report = json.loads(data)
    coup_id = next(
        g["root"]["subject"]["coup_id"] for g in report["groups"] if g["root"]["subject"].get("coup_id")
    )
    _, view_json, _ = _cli("replay", "--jsonl", str(buggy_log), "--coup", coup_id, "--json")
    view = json.loads(view_json)
    html = tmp_path / "coup.html"
    code, out, _ = _cli("replay", "--jsonl", str(buggy_log), "--coup", coup_id, "--html", str(html))
    assert code == 1 and str(html) in out
    code, text, _ = _cli("replay", "--jsonl", str(buggy_log), "--coup", coup_id)
    assert f"coup {coup_id}" in text and "cards:" in text and "payouts:" in text
    assert "recomputed from the recorded cards" in text and text.rstrip().endswith("verdict: findings")
    page = _open(browser, html)
    try:
        body = page.locator("main").inner_text()
        assert coup_id in body and page.locator("#verdict").inner_text() == "findings"
        cards = page.evaluate(
            "[...document.querySelectorAll('table')[1].querySelectorAll('tbody tr')].length"
        )
        assert cards == len(view["cards"]) > 0
        assert all(c["card"] in body for c in view["cards"])
        assert "EUR" in body and "commission_posting_mismatch" in body
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "replay-coup.png"), full_page=True)
    finally:
        page.close()
