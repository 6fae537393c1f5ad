"""The replay's HTML pages come from Jinja2 templates shipped in the package, autoescaped."""

from __future__ import annotations

import tomllib
from pathlib import Path

import jinja2
import pytest

from services.runtime import report_html
from services.runtime.report_html import render_coup_html, render_html

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = "<script>x</script>\"'&"


def test_every_template_is_package_data() -> None:
    """Each template file matches a package-data pattern of services.runtime: an installed wheel has it."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    package = ROOT / "services" / "runtime"
    files = sorted(p for p in (package / "templates").rglob("*") if p.is_file())
    assert files
    for f in files:
        assert any(f.relative_to(package).match(g) for g in data["services.runtime"]), f


def test_a_hostile_value_anywhere_on_the_coup_page_is_escaped() -> None:
    """Every field of the coup view, even the currency the money is printed in, arrives escaped."""
    bet = {"bet_id": HOSTILE, "account_id": HOSTILE, "spot": HOSTILE, "stake_minor": 100, "currency": HOSTILE}
    payout = {"bet_id": HOSTILE, "postings": [{"account": HOSTILE, "amount_minor": 5}], "credit_minor": 1}
    view = {
        "coup_id": HOSTILE, "verdict": HOSTILE, "table_id": HOSTILE, "bets": [bet], "payouts": [payout],
        "cards": [{"card": HOSTILE}], "decisions": [{"hand": HOSTILE}],
        "hands": {HOSTILE: {"cards": [HOSTILE]}},
        "findings": [{"reason": HOSTILE, "subject": {HOSTILE: HOSTILE}}],
    }  # fmt: skip
    page = render_coup_html(view)
    assert "<script>" not in page and "\"'&" not in page
    assert page.count("&lt;script&gt;x&lt;/script&gt;") >= 15


def test_a_hostile_currency_in_the_report_is_escaped() -> None:
    """Money is printed with its currency, which comes from the log: escaped in the summary and charts."""
    table = {"table_id": "T1", "currency": "<b>EUR</b>", "handle_minor": 100, "house_minor": 5}
    report = {"verdict": "clean", "tables": [table], "coup_list": [{"house_minor": 5, "shoe_id": "S"}]}
    page = render_html(report)
    assert "<b>EUR" not in page and "1.00 &lt;b&gt;EUR&lt;/b&gt;" in page


def test_template_errors_name_their_line() -> None:
    """Dropping the templates' layout keeps their line numbers: an error points at its template line."""
    with pytest.raises(jinja2.TemplateSyntaxError) as err:
        report_html._env().from_string("<p>\n  one\n  {% if %}\n</p>")
    assert err.value.lineno == 3
