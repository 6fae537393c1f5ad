"""Statements and table reports as CSV and JSON (the API's ``?format=`` and the command line)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from typing import Any

from sqlalchemy import Connection

from services.integrations.backoffice import queries
from services.runtime.textfit import printable

STATEMENT_FIELDS = (
    "transfer_id", "occurred_at", "amount_minor", "balance_after_minor", "kind", "coup_id", "bet_id",
)  # fmt: skip
REPORT_FIELDS = (
    "table_id", "day", "coups", "bets", "handle_minor", "win_minor", "commission_minor", "hold_pct",
    "paid_minor", "refused", "bank_minor",
)  # fmt: skip
SHIFT_FIELDS = (*REPORT_FIELDS[:2], "shift", *REPORT_FIELDS[2:])

FORMATS = ("json", "csv")


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""What a spreadsheet reads as the start of a formula (OWASP, CSV injection)."""


def csv_cell(value: Any) -> Any:
    """A value as a CSV cell that a spreadsheet shows as text and a terminal prints as written: a string
    starting with ``= + - @``, a tab or a CR gets a leading ``'`` (OWASP's advice against formula
    injection: ``=HYPERLINK(…)`` in an id taken from the log stays text), and its unprintable characters
    are escaped (:func:`~services.runtime.textfit.printable`). Numbers are ours and stay numbers (a
    negative amount keeps its sign); ``None`` is an empty cell."""
    if value is None:
        return ""
    if not isinstance(value, str):
        return value
    quoted = f"'{value}" if value.startswith(FORMULA_STARTS) else value
    return printable(quoted)


def to_csv(rows: Iterable[dict[str, Any]], fields: tuple[str, ...]) -> str:
    """``rows`` as CSV text with a header line (``\\r\\n`` line ends, RFC 4180); every cell by
    :func:`csv_cell`."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(fields), extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: csv_cell(row.get(k)) for k in fields})
    return buf.getvalue()


def all_statement_entries(
    conn: Connection, account_id: str, *, since: str | None, until: str | None
) -> Iterator[dict[str, Any]]:
    """Every statement entry of the account in the window, page after page."""
    cursor = 0
    while True:
        page = queries.statement(conn, account_id, since=since, until=until, cursor=cursor,
                                 limit=queries.MAX_PAGE)  # fmt: skip
        yield from page["entries"]
        if page["next_cursor"] is None:
            return
        cursor = int(page["next_cursor"])


def statement_export(conn: Connection, account_id: str, *, since: str | None, until: str | None,
                     fmt: str) -> str:  # fmt: skip
    """The whole statement of ``account_id`` in the window, as JSON (``{"account_id", "entries"}``) or
    CSV."""
    entries = list(all_statement_entries(conn, account_id, since=since, until=until))
    if fmt == "csv":
        return to_csv(entries, STATEMENT_FIELDS)
    return json.dumps({"account_id": account_id, "entries": entries}, indent=2) + "\n"


def reports_export(reports: list[dict[str, Any]], fmt: str, *, shifts: bool = False) -> str:
    """Table reports as CSV (one line each) or as a JSON list."""
    if fmt == "csv":
        return to_csv(reports, SHIFT_FIELDS if shifts else REPORT_FIELDS)
    return json.dumps(reports, indent=2) + "\n"
