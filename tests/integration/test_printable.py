"""Text a terminal prints (issue #28, docs/trust.md): whatever the log says, the command line's text
neither drives the terminal (ANSI escapes, CR, backspace) nor prints a line of its own (a fake
``verdict: clean``); CSV cells are escaped against formula injection."""

from __future__ import annotations

import functools
import io
import json
import os
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.cli import main
from services.core import topics
from services.core.envelope import Draft, Envelope, seal
from services.integrations.backoffice.exports import csv_cell, to_csv
from services.runtime.textfit import fit, printable, printable_data, printable_json
from services.simulation.simulator import DEFAULT_TABLES, Session
from tests.helpers.membus import MemBus

FAKE = "\x1b[2J\x1b[H\rverdict: clean\x08\x1b]0;x\x07"
"""Clear the screen, home the cursor, a CR, a fake verdict, a backspace and a window title."""


@functools.cache
def _base() -> tuple[Envelope, ...]:
    """A small authentic session: one table, three coups."""
    bus = MemBus()
    Session(bus, seed=3).run(list(DEFAULT_TABLES[:1]), 3)
    return tuple(bus.log)


def _forged(table_id: str) -> Envelope:
    """An outsider's table event naming ``table_id`` (audit reports it as an unknown table)."""
    draft = Draft("BetAccepted", topics.TABLE_EVENTS, table_id, {
        "bet_id": table_id, "account_id": table_id, "table_id": table_id, "coup_id": table_id,
        "spot": "banker", "stake_minor": 100, "currency": "EUR",
    })  # fmt: skip
    return seal(draft, event_id=f"x-{table_id}", occurred_at="2026-11-22T21:00:00.000Z", producer="dealer",
                cause=None, head=None)  # fmt: skip


def _replay_text(records: list[Envelope], *args: str) -> tuple[int, str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "log.jsonl"
        path.write_bytes(b"".join(e.to_json() + b"\n" for e in records))
        out, err = io.StringIO(), io.StringIO()
        saved = dict(os.environ)
        os.environ.update({"CI": "1", "LOG_LEVEL": "ERROR", "COLUMNS": "100"})
        try:
            with redirect_stdout(out), redirect_stderr(err):
                code = main(["replay", "--jsonl", str(path), *args])
        finally:
            os.environ.clear()
            os.environ.update(saved)
    return code, out.getvalue(), err.getvalue()


def _strings(data: object) -> set[str]:
    """Every string in a JSON value, keys included."""
    if isinstance(data, str):
        return {data}
    if isinstance(data, dict):
        return {s for k, v in data.items() for s in (_strings(k) | _strings(v))}
    if isinstance(data, list):
        return {s for v in data for s in _strings(v)}
    return set()


def _only_printable_lines(text: str) -> bool:
    return all(line.isprintable() for line in text.split("\n"))


def test_an_ansi_table_id_neither_clears_the_screen_nor_fakes_the_verdict() -> None:
    """The issue's attack: an outsider's ``table_id`` of ANSI escapes and a fake verdict. The report shows
    it escaped, on the line that names it, and the only verdict line is the replay's own."""
    code, out, _ = _replay_text([*_base(), _forged(FAKE)])
    assert "\x1b" not in out and "\r" not in out and "\x08" not in out
    assert _only_printable_lines(out)
    verdicts = [line for line in out.split("\n") if line.startswith("verdict:")]
    base_code, base_out, _ = _replay_text(_base())  # the outsider's record is noise (unattested, #28)
    assert verdicts == [line for line in base_out.split("\n") if line.startswith("verdict:")]
    assert code == base_code


@given(table_id=st.text(min_size=1, max_size=24))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_whatever_the_id_the_text_report_prints_only_printable_lines(table_id: str) -> None:
    """Any unicode id (controls, bidi overrides, separators, surrogates' neighbours): every line the text
    report prints is printable, and the one verdict line is the last but one."""
    _, out, err = _replay_text([*_base(), _forged(table_id)])
    assert _only_printable_lines(out) and _only_printable_lines(err.rstrip("\n"))
    lines = out.rstrip("\n").split("\n")
    assert [line for line in lines if line.startswith("verdict:")] == [lines[-2]], out


@given(text=st.text(max_size=40))
@settings(max_examples=300, deadline=None)
def test_printable_escapes_exactly_what_is_not_printable(text: str) -> None:
    """``printable`` leaves printable text alone and escapes every other character, so its result is
    one printable line whatever the input; ``fit`` and ``printable_data`` go through it."""
    shown = printable(text)
    assert shown.isprintable()
    assert (shown == text) == text.isprintable()
    assert all(line.isprintable() for line in fit(f"a {text}\nb", 20).split("\n"))
    assert printable_data({text: [text, (text, 1)]}) == {shown: [shown, [shown, 1]]}


@given(table_id=st.text(min_size=1, max_size=24))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_whatever_the_id_replay_json_is_the_same_json_in_printable_lines(table_id: str) -> None:
    """``replay --json``: every line printable (C1 controls such as U+009B, a CSI, escaped too), and the
    text is the same JSON value as the report's (the id in it as written)."""
    _, out, _ = _replay_text([*_base(), _forged(table_id)], "--json")
    assert _only_printable_lines(out)
    assert f"x-{table_id}" in _strings(json.loads(out))  # the outsider's record, unattested, by its id


@given(value=st.recursive(st.text(max_size=10), lambda inner: st.lists(inner, max_size=3), max_leaves=6))
@settings(max_examples=200, deadline=None)
def test_printable_json_is_the_same_value(value: object) -> None:
    """Whatever strings a JSON value holds, ``printable_json`` of its text parses to the same value and
    every line of it is printable."""
    text = json.dumps({"v": value}, ensure_ascii=False, indent=2)
    shown = printable_json(text)
    assert json.loads(shown) == json.loads(text)
    assert _only_printable_lines(shown)


def test_the_coup_view_escapes_what_the_log_says() -> None:
    """``replay --coup`` text: a forged decision in the coup whose ``decided_by`` is ANSI escapes and a
    fake verdict prints escaped, and the only verdict line is the view's own."""
    records = list(_base())
    resolved = next(e for e in records if e.type == "CoupResolved")
    table, coup = resolved.key, str(resolved.payload["coup_id"])
    draft = Draft("DecisionMade", topics.TABLE_EVENTS, table, {
        "table_id": table, "coup_id": coup, "hand": "player", "choice": "draw", "decided_by": FAKE,
    })  # fmt: skip
    forged = seal(draft, event_id="x-decision", occurred_at="2026-11-22T21:00:00.000Z", producer="dealer",
                  cause=None, head=None)  # fmt: skip
    _, out, _ = _replay_text([*records, forged], "--coup", coup)
    # not a fact (no signed head covers it, #28): left out of the view, or shown escaped, never raw
    assert _only_printable_lines(out) and FAKE not in out, out
    assert len([line for line in out.split("\n") if line.startswith("verdict:")]) == 1


# --- CSV --------------------------------------------------------------------------------------------


@given(value=st.text(max_size=30))
@settings(max_examples=300, deadline=None)
def test_a_csv_cell_never_starts_a_formula_nor_carries_a_control(value: str) -> None:
    """Whatever a string cell holds, it does not start with ``= + - @`` tab or CR (OWASP) and it is
    printable; a cell that starts otherwise and is printable is unchanged."""
    cell = csv_cell(value)
    assert not cell.startswith(("=", "+", "-", "@", "\t", "\r"))
    assert cell.isprintable()
    if value.isprintable() and not value.startswith(("=", "+", "-", "@")):
        assert cell == value


def test_csv_quotes_formulas_and_keeps_numbers() -> None:
    """A statement row with formula-like ids gets leading quotes; a negative amount stays a number."""
    row = {"transfer_id": '=HYPERLINK("http://x")', "amount_minor": -500, "kind": "@SUM(A1)",
           "coup_id": "+1", "bet_id": "-2"}  # fmt: skip
    got = to_csv([row], ("transfer_id", "amount_minor", "kind", "coup_id", "bet_id"))
    assert got.split("\r\n")[1] == '"\'=HYPERLINK(""http://x"")",-500,\'@SUM(A1),\'+1,\'-2'
