"""Adversaries on the real embedded log, and the alerts an analyst works from it (issue #13)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from services.cli import main
from services.runtime.compose import Composition
from services.runtime.embedded.bus import EmbeddedBus
from services.simulation.adversaries import Structurer
from services.simulation.simulator import Session, TableSpec


@pytest.fixture(scope="module")
def structured_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real SQLite log: one punto banco table, 40 coups, a structurer among honest players."""
    path = tmp_path_factory.mktemp("alerts") / "log.db"
    bus = EmbeddedBus(path, Composition.demo().pipeline())
    Session(bus, seed=11, adversaries=[Structurer(seed=11)]).run([TableSpec("T01", "punto_banco")], 40)
    return path


def logged_alerts(path: Path) -> list[dict]:  # type: ignore[type-arg]
    """The AnomalyDetected records of the log, straight from SQLite."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT body FROM records WHERE topic = 'casino.monitor.alerts'").fetchall()
    return [json.loads(bytes(b)) for (b,) in rows]


def test_alerts_json_lists_every_alert_with_its_explanation(
    structured_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`alerts --json` lists every alert of the log; the structurer's deposits raise an alert keyed by
    its account, with what was seen, the threshold, the honest probability and the event ids."""
    assert main(["alerts", "--db", str(structured_log), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    logged = sorted(e["event_id"] for e in logged_alerts(structured_log))
    assert sorted(a["event_id"] for a in listed) == logged
    deposits = [a for a in listed if a["detector"] == "deposit_structuring"]
    assert deposits and all(a["key"] == "adv:structurer" for a in deposits)
    first = deposits[0]
    assert first["observed"]["deposits_in_band"] >= first["threshold"]["in_band_at"]
    assert float(first["honest_probability"]) < 1e-5 and len(first["subject"]["event_ids"]) >= 1
    assert {"structuring", "deposit_structuring"} <= {a["detector"] for a in listed}


def test_alerts_filters(structured_log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--account keeps only alerts naming the account; --severity warning drops info; the text ends with
    the count by severity."""
    assert main(["alerts", "--db", str(structured_log), "--json", "--account", "adv:structurer"]) == 0
    mine = json.loads(capsys.readouterr().out)
    assert mine and all("adv:structurer" in json.dumps(a) for a in mine)
    assert main(["alerts", "--db", str(structured_log), "--json", "--severity", "warning"]) == 0
    serious = json.loads(capsys.readouterr().out)
    assert serious and all(a["severity"] in ("warning", "critical") for a in serious)
    assert main(["alerts", "--db", str(structured_log), "--since", "2100-01-01"]) == 0
    assert capsys.readouterr().out.strip() == "0 alert(s): 0 info, 0 warning, 0 critical"
    assert main(["alerts", "--db", str(structured_log), "--table", "T01"]) == 0
    text = capsys.readouterr().out
    total = sum(1 for a in logged_alerts(structured_log) if a["payload"]["table_id"] == "T01")
    assert text.splitlines()[-1].startswith(f"{total} alert(s):") and "probability under honest play" in text


def test_alerts_text_fits_80_columns_with_every_word_whole(
    structured_log: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The alerts text at 80 columns: no line wider (an alert's event ids made 200-column lines), and the
    same words in the same order as at 1,000 columns, so no id or figure is cut."""

    def text(columns: int) -> str:
        monkeypatch.setenv("COLUMNS", str(columns))
        assert main(["alerts", "--db", str(structured_log)]) == 0
        return capsys.readouterr().out

    narrow, wide = text(80), text(1000)
    assert max(map(len, wide.splitlines())) > 80, "the alerts have long lines to wrap"
    assert max(map(len, narrow.splitlines())) <= 80, narrow
    assert narrow.split() == wide.split()


def test_monitor_eval_quick_honest_within_budget_and_strong_adversaries_caught() -> None:
    """`monitor-eval --quick`: every honest population plays through the pipeline, and their
    warning-or-worse alerts stay within what the budget allows (1 per table per 10,000 coups: for the
    ~800 coups played, an expected 0.08 at most, so 2 or more would have a chance under 0.3 % if the
    budget held); each strong adversary is caught by one of its detectors."""
    import io  # noqa: PLC0415

    from services.simulation.monitor_eval import evaluate  # noqa: PLC0415
    from services.simulation.populations import POPULATIONS  # noqa: PLC0415

    out = io.StringIO()
    honest, rows = evaluate(True, 1, None, 150, out=out, progress=False)
    assert [h.name for h in honest] == [p.name for p in POPULATIONS]
    coups = sum(h.coups for h in honest)
    assert coups >= 700 and all(h.bets > 0 for h in honest)
    alarms = sum(sum(h.alarms.values()) for h in honest)
    assert alarms <= 1, [h.alarms for h in honest]
    assert {r.label for r in rows} >= {"shoe bias", "winning player", "syndicate", "past posting",
                                      "chip dumping", "in and out"}  # fmt: skip
    for r in rows:
        assert len(r.found) == r.runs, (r.label, r.params)
    text = out.getvalue()
    assert text.startswith("| honest population |") and "| adversary | parameters |" in text


def test_monitor_eval_refuses_a_non_positive_count(capsys: pytest.CaptureFixture[str]) -> None:
    """A count of zero is an operator error: one line on stderr, exit 2."""
    assert main(["monitor-eval", "--honest-coups", "0"]) == 2
    assert "positive" in capsys.readouterr().err


def test_monitor_eval_in_worker_processes_gives_the_same_tables() -> None:
    """`--jobs 2` plays each piece (a population, an adversary's run) in a worker process: every piece is
    a seeded session, so the tables are those of one process."""
    import io  # noqa: PLC0415

    from services.simulation.monitor_eval import evaluate  # noqa: PLC0415

    only = frozenset({"loyal-pair", "in and out"})
    one, two = io.StringIO(), io.StringIO()
    h1, r1 = evaluate(True, 2, None, 40, out=one, progress=False, only=only, jobs=1)
    h2, r2 = evaluate(True, 2, None, 40, out=two, progress=False, only=only, jobs=2)
    assert [h.name for h in h1] == ["loyal-pair"] and [r.label for r in r1] == ["in and out"]
    assert r1[0].runs == 2 and h1[0].coups == 40
    assert one.getvalue() == two.getvalue() and h1 == h2 and r1 == r2
