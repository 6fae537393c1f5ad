"""Alembic environment: always online, on the connection
:func:`services.integrations.backoffice.migrate.upgrade`
passes in ``config.attributes["connection"]`` (so a PostgreSQL ``search_path`` set on it applies)."""

from __future__ import annotations

from alembic import context

from services.integrations.backoffice.schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
