"""Alerts an analyst can work (issue #29): every account of an alert indexed, and each alert's case
(status, assignee, every step with its note). The projected rows are emptied so the projector fills the
new tables from the start of the log.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_PROJECTED = (
    "bo_findings", "bo_alerts", "bo_table_periods", "bo_refusals", "bo_bets", "bo_round_decisions",
    "bo_round_cards", "bo_rounds", "bo_shoes", "bo_tables", "bo_statement_lines", "bo_accounts",
    "bo_positions",
)  # fmt: skip


def upgrade() -> None:
    for table in _PROJECTED:
        op.execute(sa.table(table).delete())
    op.create_table(
        "bo_alert_accounts",
        sa.Column("account_id", sa.String(length=256), nullable=False),
        sa.Column("offset", sa.BigInteger(), nullable=False),
        sa.Column("event_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("account_id", "offset"),
    )
    op.create_table(
        "bo_alert_cases",
        sa.Column("alert_id", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("assignee", sa.String(length=256), nullable=True),
        sa.Column("updated_at", sa.String(length=40), nullable=False),
        sa.Column("steps", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("alert_id"),
    )
    op.create_table(
        "bo_alert_case_steps",
        sa.Column("alert_id", sa.String(length=64), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("event_id", sa.String(length=64), nullable=False),
        sa.Column("offset", sa.BigInteger(), nullable=False),
        sa.Column("occurred_at", sa.String(length=40), nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("actor", sa.String(length=256), nullable=False),
        sa.Column("assignee", sa.String(length=256), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("status_before", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("refused", sa.String(length=64), nullable=True),
        sa.PrimaryKeyConstraint("alert_id", "n"),
        sa.UniqueConstraint("offset"),
    )


def downgrade() -> None:
    op.drop_table("bo_alert_case_steps")
    op.drop_table("bo_alert_cases")
    op.drop_table("bo_alert_accounts")
