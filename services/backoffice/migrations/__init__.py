"""Alembic migrations of the read model (run by :func:`services.backoffice.migrate.upgrade`)."""
