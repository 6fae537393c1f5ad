"""The read model's tables (SQLAlchemy Core) and where the read model lives.

Every projected row is a function of the log alone (no clock, no random ids), so a read model dropped
and rebuilt from the same log holds the same rows. JSON values are stored as canonical JSON text (the
same bytes on SQLite and PostgreSQL). Money is integer minor units (``BigInteger``).

The schema is created and upgraded by the Alembic migrations in
:mod:`services.integrations.backoffice.migrations`
(:func:`services.integrations.backoffice.migrate.upgrade`); a test checks that they produce exactly these
tables.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Engine,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    event,
)

READ_DB_ENV = "CASINO_READ_DB"
"""Environment variable with the read model's SQLAlchemy URL (``postgresql+psycopg://…``)."""

metadata = MetaData()

positions = Table(
    "bo_positions", metadata,
    Column("consumer", String(64), primary_key=True),
    Column("source", String(300), primary_key=True),  # "embedded" or "kafka:<topic>:<partition>"
    Column("offset", BigInteger, nullable=False),
)  # fmt: skip
"""The projector's tracking position per source, written in the transaction that applied the rows."""

accounts = Table(
    "bo_accounts", metadata,
    Column("account_id", String(256), primary_key=True),
    Column("currency", String(3), nullable=False),
    Column("balance_minor", BigInteger, nullable=False),
    Column("lines", Integer, nullable=False),
    Column("last_offset", BigInteger, nullable=False),
)  # fmt: skip
"""Every account a posting names (wallets, table escrow/house/commission/bank, the cage): the fold of
its postings."""

statement_lines = Table(
    "bo_statement_lines", metadata,
    Column("account_id", String(256), primary_key=True),
    Column("line", Integer, primary_key=True),  # 1, 2, … per account, in log order
    Column("transfer_id", String(256), nullable=False),
    Column("event_id", String(64), nullable=False),
    Column("offset", BigInteger, nullable=False),
    Column("occurred_at", String(40), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("amount_minor", BigInteger, nullable=False),
    Column("balance_after_minor", BigInteger, nullable=False),
    Column("currency", String(3), nullable=False),
    Column("table_id", String(256)),
    Column("coup_id", String(256)),
    Column("bet_id", String(256)),
    Index("bo_statement_lines_time", "account_id", "occurred_at"),
    Index("bo_statement_lines_transfer", "transfer_id"),
)  # fmt: skip
"""One line per transfer and account it moves: the signed amount and the balance after it."""

tables = Table(
    "bo_tables", metadata,
    Column("table_id", String(256), primary_key=True),
    Column("variant", String(64), nullable=False),
    Column("rules_version", String(64), nullable=False),
    Column("currency", String(3), nullable=False),
    Column("decks", Integer, nullable=False),
    Column("paytable", Text, nullable=False),
    Column("limits", Text, nullable=False),
    Column("opened_at", String(40), nullable=False),
    Column("shoe_id", String(256)),
    Column("last_coup_id", String(256)),
    Column("last_offset", BigInteger, nullable=False),
)  # fmt: skip

shoes = Table(
    "bo_shoes", metadata,
    Column("shoe_id", String(256), primary_key=True),
    Column("table_id", String(256), nullable=False),
    Column("mode", String(16), nullable=False),
    Column("commitment", String(64)),
    Column("algorithm", String(128)),
    Column("opened_at", String(40), nullable=False),
    Column("closed_at", String(40)),
    Column("seed_hex", String(64)),
    Column("cards_dealt", Integer),
    Column("coups", Integer),
)  # fmt: skip

rounds = Table(
    "bo_rounds", metadata,
    Column("coup_id", String(256), primary_key=True),
    Column("table_id", String(256), nullable=False),
    Column("shoe_id", String(256), nullable=False),
    Column("coup_number", Integer, nullable=False),
    Column("variant", String(64), nullable=False),
    Column("rules_version", String(64), nullable=False),
    Column("paytable", Text, nullable=False),
    Column("gaming_day", String(10), nullable=False),
    Column("shift", Integer, nullable=False),
    Column("status", String(16), nullable=False),  # betting, dealing, resolved
    Column("opened_at", String(40), nullable=False),
    Column("started_at", String(40)),
    Column("ended_at", String(40)),
    Column("outcome", String(64)),
    Column("natural", Boolean),
    Column("hands", Text),
    Column("versus", Text),
    Column("round_events", Text),
    Column("resolved_offset", BigInteger),
    Index("bo_rounds_table", "table_id", "resolved_offset"),
)  # fmt: skip
"""One row per coup: the game-round record a regulator asks for (cards, decisions and bets beside)."""

round_cards = Table(
    "bo_round_cards", metadata,
    Column("coup_id", String(256), primary_key=True),
    Column("n", Integer, primary_key=True),  # deal order from 0
    Column("hand", String(64), nullable=False),
    Column("card", String(2), nullable=False),
    Column("shoe_position", Integer, nullable=False),
    Column("occurred_at", String(40), nullable=False),
)  # fmt: skip

round_decisions = Table(
    "bo_round_decisions", metadata,
    Column("coup_id", String(256), primary_key=True),
    Column("n", Integer, primary_key=True),
    Column("hand", String(64), nullable=False),
    Column("choice", String(8), nullable=False),
    Column("decided_by", String(256), nullable=False),
    Column("occurred_at", String(40), nullable=False),
)  # fmt: skip

bets = Table(
    "bo_bets", metadata,
    Column("bet_id", String(256), primary_key=True),
    Column("account_id", String(256), nullable=False),
    Column("table_id", String(256), nullable=False),
    Column("coup_id", String(256)),
    Column("spot", String(64), nullable=False),
    Column("stake_minor", BigInteger, nullable=False),
    Column("currency", String(3), nullable=False),
    Column("status", String(16), nullable=False),  # reserved, rejected, accepted, refused, settled
    Column("reason", String(64)),
    Column("placed_at", String(40), nullable=False),
    Column("balance_before_minor", BigInteger),
    Column("balance_after_minor", BigInteger),
    Column("result", String(8)),
    Column("win_minor", BigInteger),
    Column("commission_minor", BigInteger),
    Column("credit_minor", BigInteger),
    Column("payout_id", String(256)),
    Column("payout_balance_before_minor", BigInteger),
    Column("payout_balance_after_minor", BigInteger),
    Index("bo_bets_coup", "coup_id"),
)  # fmt: skip
"""Each bet from the wallet's reservation to its payout, with the wallet's balance before and after."""

refusals = Table(
    "bo_refusals", metadata,
    Column("event_id", String(64), primary_key=True),
    Column("transfer_id", String(256), nullable=False),
    Column("account_id", String(256), nullable=False),
    Column("request", String(64), nullable=False),
    Column("reason", String(64), nullable=False),
    Column("detail", Text),
    Column("bet_id", String(256)),
    Column("occurred_at", String(40), nullable=False),
    Index("bo_refusals_transfer", "transfer_id"),
)  # fmt: skip
"""Wallet requests the wallet stage refused (BetRejected, WithdrawalRejected, TransferRefused)."""

table_periods = Table(
    "bo_table_periods", metadata,
    Column("table_id", String(256), primary_key=True),
    Column("day", String(10), primary_key=True),  # the gaming day
    Column("shift", Integer, primary_key=True),  # 0: the whole gaming day; 1, 2, …: its shifts
    Column("coups", Integer, nullable=False),
    Column("bets", Integer, nullable=False),
    Column("handle_minor", BigInteger, nullable=False),
    Column("paid_minor", BigInteger, nullable=False),
    Column("commission_minor", BigInteger, nullable=False),
    Column("refused", Integer, nullable=False),
    Column("reserve_used_minor", BigInteger, nullable=False),
    Column("bank_minor", BigInteger, nullable=False),
)  # fmt: skip
"""Per table, gaming day and shift: the counters of :class:`services.core.figures.Figures` (coups,
accepted bets, refused bets, handle, credits paid back, the house's commission, the cover reserve
used, the player-banker's share); win and hold are derived from them, never stored."""

alerts = Table(
    "bo_alerts", metadata,
    Column("event_id", String(64), primary_key=True),
    Column("offset", BigInteger, nullable=False, unique=True),
    Column("occurred_at", String(40), nullable=False),
    Column("table_id", String(256), nullable=False),
    Column("account_id", String(256)),
    Column("detector", String(64), nullable=False),
    Column("category", String(64), nullable=False),
    Column("severity", String(16), nullable=False),
    Column("subject", Text, nullable=False),
    Column("observed", Text, nullable=False),
    Column("threshold", Text, nullable=False),
    Column("detail", Text, nullable=False),
)  # fmt: skip

alert_accounts = Table(
    "bo_alert_accounts", metadata,
    Column("account_id", String(256), primary_key=True),
    Column("offset", BigInteger, primary_key=True),
    Column("event_id", String(64), nullable=False),
)  # fmt: skip
"""Every account an alert concerns (``account_ids``: both of a linked pair, a group's members), by the
alert's offset: the account filter finds an alert from any of them, in alert order."""

alert_cases = Table(
    "bo_alert_cases", metadata,
    Column("alert_id", String(64), primary_key=True),
    Column("status", String(16), nullable=False),
    Column("assignee", String(256)),
    Column("updated_at", String(40), nullable=False),
    Column("steps", Integer, nullable=False),
)  # fmt: skip
"""Where each alert's case stands (``AlertCaseChanged``); an alert with no row here is ``open``."""

alert_case_steps = Table(
    "bo_alert_case_steps", metadata,
    Column("alert_id", String(64), primary_key=True),
    Column("n", Integer, primary_key=True),
    Column("event_id", String(64), nullable=False),
    Column("offset", BigInteger, nullable=False, unique=True),
    Column("occurred_at", String(40), nullable=False),
    Column("action", String(16), nullable=False),
    Column("actor", String(256), nullable=False),
    Column("assignee", String(256)),
    Column("note", Text),
    Column("status_before", String(16), nullable=False),
    Column("status", String(16), nullable=False),
    Column("refused", String(64)),
)  # fmt: skip
"""Every step asked on an alert's case, in order, refused ones included (who, when, the note)."""

findings = Table(
    "bo_findings", metadata,
    Column("event_id", String(64), primary_key=True),
    Column("offset", BigInteger, nullable=False, unique=True),
    Column("occurred_at", String(40), nullable=False),
    Column("table_id", String(256), nullable=False),
    Column("account_id", String(256)),
    Column("reason", String(64), nullable=False),
    Column("severity", String(16), nullable=False),
    Column("subject", Text, nullable=False),
    Column("expected", Text, nullable=False),
    Column("recorded", Text, nullable=False),
    Column("detail", Text, nullable=False),
)  # fmt: skip

idempotency = Table(
    "bo_idempotency", metadata,
    Column("principal", String(256), primary_key=True),  # the API key's id
    Column("key", String(256), primary_key=True),
    Column("route", String(64), nullable=False),
    Column("request_hash", String(64), nullable=False),
    Column("status_code", Integer, nullable=False),
    Column("response", Text, nullable=False),
)  # fmt: skip
"""Answers to commands by ``Idempotency-Key``: not projected from the log, kept across rebuilds."""

PROJECTED = (
    positions, accounts, statement_lines, tables, shoes, rounds, round_cards, round_decisions, bets,
    refusals, table_periods, alerts, findings, alert_accounts, alert_cases, alert_case_steps,
)  # fmt: skip
"""The tables a rebuild empties and the projector fills (everything but :data:`idempotency`)."""


def default_url(log_path: str | Path) -> str:
    """The read model's URL: ``CASINO_READ_DB`` when set, else SQLite beside the log (``<db>.read.db``)."""
    from services.runtime.settings import setting  # noqa: PLC0415 (the read model's schema loads no wiring)

    url: str = setting("read_db").get_secret_value()
    if url:
        return url
    return f"sqlite:///{Path(f'{log_path}.read.db').resolve()}"


def make_engine(url: str) -> Engine:
    """An engine for ``url`` (``postgresql://`` is read as psycopg 3); SQLite in WAL mode with a busy
    timeout, so the API reads while the projector writes."""
    if url.startswith(("postgresql://", "postgres://")):
        url = "postgresql+psycopg://" + url.split("://", 1)[1]
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: object, _record: object) -> None:
            cur = dbapi_conn.cursor()  # type: ignore[attr-defined]
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True)
