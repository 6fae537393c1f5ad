"""One set of figures (services.core.figures): refused bets, the cover reserve used and the
player-banker's share per table period; a read model projected before counted a french club banker's
cover as bets and paid, so its projected rows are emptied and projected again from the log.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_ADDED = (("refused", sa.Integer()), ("reserve_used_minor", sa.BigInteger()), ("bank_minor", sa.BigInteger()))

_PROJECTED = (
    "bo_findings", "bo_alerts", "bo_table_periods", "bo_refusals", "bo_bets", "bo_round_decisions",
    "bo_round_cards", "bo_rounds", "bo_shoes", "bo_tables", "bo_statement_lines", "bo_accounts",
    "bo_positions",
)  # fmt: skip
"""Every projected table (children first); the projector fills them again from the start."""


def upgrade() -> None:
    for table in _PROJECTED:
        op.execute(sa.table(table).delete())
    with op.batch_alter_table("bo_table_periods", schema=None) as batch_op:
        for name, kind in _ADDED:
            batch_op.add_column(sa.Column(name, kind, nullable=False, server_default="0"))
    with op.batch_alter_table("bo_table_periods", schema=None) as batch_op:
        for name, kind in _ADDED:
            batch_op.alter_column(name, existing_type=kind, server_default=None)


def downgrade() -> None:
    with op.batch_alter_table("bo_table_periods", schema=None) as batch_op:
        for name, _ in reversed(_ADDED):
            batch_op.drop_column(name)
