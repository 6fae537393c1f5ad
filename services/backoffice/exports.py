"""Statements and table reports as CSV and JSON (the API's ``?format=`` and the command line)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from typing import Any

from sqlalchemy import Connection

from services.backoffice import queries

STATEMENT_FIELDS = (
    "transfer_id", "occurred_at", "amount_minor", "balance_after_minor", "kind", "coup_id", "bet_id",
)  # fmt: skip
REPORT_FIELDS = (
    "table_id", "day", "coups", "bets", "handle_minor", "win_minor", "commission_minor", "hold_pct",
    "paid_minor", "refused", "bank_minor",
)  # fmt: skip
SHIFT_FIELDS = (*REPORT_FIELDS[:2], "shift", *REPORT_FIELDS[2:])

FORMATS = ("json", "csv")


def to_csv(rows: Iterable[dict[str, Any]], fields: tuple[str, ...]) -> str:
    """``rows`` as CSV text with a header line (``\\r\\n`` line ends, RFC 4180); None as an empty cell."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(fields), extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if row.get(k) is None else row[k] for k in fields})
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
