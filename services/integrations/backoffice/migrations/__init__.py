"""Alembic migrations of the read model (run by :func:`services.integrations.backoffice.migrate.upgrade`)."""
