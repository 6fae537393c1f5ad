"""What a replay report covers: tables and a half-open time range (the verification always covers
the whole log)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


def iso_instant(text: str) -> str:
    """``text`` (ISO 8601, any offset; a date alone means its midnight UTC) as the log's own form,
    ``YYYY-MM-DDTHH:MM:SS.mmmZ`` in UTC, so that instants compare as strings."""
    moment = datetime.fromisoformat(text.strip())
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@dataclass(frozen=True, slots=True)
class Scope:
    """What the report covers: some tables (``None``: all) and a half-open time range."""

    tables: frozenset[str] | None = None
    since: str | None = None
    until: str | None = None

    @property
    def everything(self) -> bool:
        """Whether the scope selects every table at every instant (the replay then skips the tests)."""
        return self.tables is None and self.since is None and self.until is None

    def at(self, occurred_at: str) -> bool:
        """Whether an instant falls in ``[since, until)``."""
        if self.since is None and self.until is None:
            return True
        when = occurred_at if len(occurred_at) == 24 and occurred_at[-1] == "Z" else iso_instant(occurred_at)
        return (self.since is None or when >= self.since) and (self.until is None or when < self.until)

    def table(self, table_id: str) -> bool:
        """Whether a table is selected."""
        return self.tables is None or table_id in self.tables

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        tables = sorted(self.tables) if self.tables is not None else None
        return {"since": self.since, "tables": tables, "until": self.until}
