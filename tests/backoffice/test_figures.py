"""One set of figures for a table (issue #30): the demo's summary, the replay's report, the read model
(on SQLite and PostgreSQL), the HTTP API and its CSV all say the same coups, bets, handle, paid back,
commission, win, hold and player-banker's share, on every variant, the player-banked ones included;
and those figures are what the postings say when recounted here from the raw records."""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine

from services.cli.demo import summarise
from services.core.baccarat import VARIANTS
from services.integrations.backoffice import exports, queries
from services.integrations.backoffice.projector import Projector
from services.runtime.embedded.store import EmbeddedLog
from services.runtime.replay import read_db, replay
from tests.backoffice.conftest import make_keyring, play, running_server
from tests.backoffice.folds import records

FIELDS = ("coups", "bets", "handle_minor", "paid_minor", "commission_minor", "win_minor", "bank_minor")


@pytest.fixture(scope="module")
def every_variant(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A seeded session at one table of every variant (french club's banker reserves covers)."""
    return play(tmp_path_factory.mktemp("figures") / "log.db", tables=len(VARIANTS), coups=12, seed=5)


def from_postings(log: Path) -> dict[str, dict[str, int]]:
    """Each table's figures recounted from the raw records, sharing no code with the reports: win from
    the house's own accounts, commission from the commission account, the bank's share from the bank
    holder's payouts, the punters' from theirs."""
    out: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys((*FIELDS, "punters_minor"), 0))
    for r in records(log):
        p = r["payload"]
        if r["type"] == "BetAccepted" and p["spot"] != "bank_cover":
            out[p["table_id"]]["bets"] += 1
            out[p["table_id"]]["handle_minor"] += p["stake_minor"]
        elif r["type"] == "CoupResolved":
            out[p["table_id"]]["coups"] += 1
        elif r["type"] == "PayoutIssued" and r["topic"].endswith("casino.wallet.requests"):
            t, row = p["table_id"], out[p["table_id"]]
            if p["spot"] != "bank_cover":
                row["paid_minor"] += p["credit_minor"]
            for posting in p["postings"]:
                if posting["account"] in (f"table:{t}:house", f"table:{t}:commission"):
                    row["win_minor"] += posting["amount_minor"]
                if posting["account"] == f"table:{t}:commission":
                    row["commission_minor"] += posting["amount_minor"]
            side = "bank_minor" if p["spot"] in ("bank", "bank_cover") else "punters_minor"
            row[side] += p["credit_minor"] - p["stake_minor"]
    return dict(out)


def test_the_figures_are_the_postings_on_every_variant(every_variant: Path) -> None:
    """Recounted from the postings, every variant's table: the house's win, the bank's share and the
    punters' result add up to nothing (money only moves between the three); french club, whose text
    names no levy, leaves the house nothing; the demo's summary says the same figures."""
    truth = from_postings(every_variant)
    summary = summarise(read_db(every_variant))
    variants = {t: s.variant for t, s in summary.items()}
    assert set(variants.values()) == set(VARIANTS), "one table of every variant"
    accepted = [r["payload"] for r in records(every_variant) if r["type"] == "BetAccepted"]
    covers = [p for p in accepted if p["spot"] == "bank_cover"]
    assert covers, "the session must exercise a french club banker's cover"
    for table_id, s in summary.items():
        t = truth[table_id]
        assert t["win_minor"] + t["bank_minor"] + t["punters_minor"] == 0, table_id
        assert {k: getattr(s, k) for k in FIELDS} == {k: t[k] for k in FIELDS}, table_id
        assert s.punters_minor == t["punters_minor"]
        if VARIANTS[s.variant].house_banked:
            assert s.bank_minor == 0 and s.win_minor == s.handle_minor - s.paid_minor
        else:
            assert s.bank_minor != 0, f"{table_id}: the bank won or lost something in 12 coups"
    french = next(s for s in summary.values() if s.variant == "french_club")
    assert (french.win_minor, french.commission_minor) == (0, 0)


def test_demo_replay_read_model_api_and_csv_agree(
    every_variant: Path, engine: Engine, tmp_path: Path
) -> None:
    """Per table: the demo's summary, the replay's table row, the read model's gaming-day report (this
    backend), the API's JSON and CSV reports and the ``report`` export's CSV give the same figures."""
    demo = {t: {k: getattr(s, k) for k in FIELDS} | {"hold_pct": s.hold_pct} for t, s in
            summarise(read_db(every_variant)).items()}  # fmt: skip
    replayed = {row["table_id"]: row for row in replay(read_db(every_variant)).to_dict()["tables"]}
    with EmbeddedLog(every_variant, readonly=True) as log:
        Projector(engine).catch_up(log)
    with engine.connect() as c:
        day = queries.latest_day(c)
        assert day is not None
        reports = {t: queries.table_report(c, t, day) for t in demo}
    exported = {row["table_id"]: row for row in csv.DictReader(io.StringIO(
        exports.reports_export(list(reports.values()), "csv")))}  # fmt: skip
    keys = make_keyring(tmp_path / "keyring.json")
    with running_server(every_variant, str(engine.url.render_as_string(hide_password=False)),
                        tmp_path / "keyring.json") as url:  # fmt: skip
        headers = {"Authorization": f"Bearer {keys['auditor']}"}
        api = {t: httpx.get(f"{url}/v1/tables/{t}/report?day={day}", headers=headers, timeout=30).json()
               for t in demo}  # fmt: skip
        api_csv = {t: next(csv.DictReader(io.StringIO(httpx.get(
            f"{url}/v1/tables/{t}/report?day={day}&format=csv", headers=headers, timeout=30).text)))
            for t in demo}  # fmt: skip
    for table_id, want in demo.items():
        row = replayed[table_id]
        assert {k: row[k] for k in FIELDS} == {k: want[k] for k in FIELDS}, ("replay", table_id)
        assert row["house_minor"] == want["win_minor"]
        for name, got in (("read model", reports[table_id]), ("API", api[table_id])):
            assert {k: got[k] for k in FIELDS} == {k: want[k] for k in FIELDS}, (name, table_id)
            assert got["hold_pct"] == pytest.approx(want["hold_pct"], abs=1e-4), (name, table_id)
        for name, text_row in (("CSV", exported[table_id]), ("API CSV", api_csv[table_id])):
            got_csv: dict[str, Any] = {k: int(text_row[k]) for k in FIELDS}
            assert got_csv == {k: want[k] for k in FIELDS}, (name, table_id)
