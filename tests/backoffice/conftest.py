"""Fixtures of the back-office tests: a seeded demo log (real SQLite file, real pipeline) and read
models on SQLite and on the machine's PostgreSQL (127.0.0.1:5432, database ``test``, each test in a
schema of its own, created and dropped here)."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text

from services.backoffice.migrate import upgrade
from services.backoffice.schema import make_engine
from services.runtime.embedded import EmbeddedBus
from services.runtime.simulator import Session, demo_tables

PG_SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
BACKENDS = ("sqlite", "postgresql")


def play(path: Path, *, tables: int = 3, coups: int = 14, seed: int = 7) -> Path:
    """A seeded session played through the whole embedded pipeline into the log at ``path``."""
    bus = EmbeddedBus(path)
    try:
        Session(bus, seed=seed, players=6).run(demo_tables(tables), coups)
    finally:
        bus.close()
    return path


@pytest.fixture(scope="session")
def demo_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One seeded demo log shared by the read-only tests (do not write to it)."""
    return play(tmp_path_factory.mktemp("demo") / "demo.db")


@pytest.fixture
def fresh_log(tmp_path: Path) -> Path:
    """A seeded demo log of this test's own (tests that write commands use it)."""
    return play(tmp_path / "log.db", tables=2, coups=6, seed=11)


def pg_schema_url() -> Iterator[str]:
    """The URL of a PostgreSQL schema made for one test (dropped afterwards)."""
    name = f"bo_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_SERVER, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'CREATE SCHEMA "{name}"'))
    try:
        yield f"{PG_SERVER}?options=-csearch_path%3D{name}"
    finally:
        with admin.connect() as c:
            c.execute(text(f'DROP SCHEMA "{name}" CASCADE'))
        admin.dispose()


@pytest.fixture(params=BACKENDS)
def read_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty read model URL on each backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'read.db'}"
    else:
        yield from pg_schema_url()


@pytest.fixture
def engine(read_url: str) -> Iterator[Engine]:
    """A migrated, empty read model on each backend."""
    e = make_engine(read_url)
    upgrade(e)
    yield e
    e.dispose()


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
