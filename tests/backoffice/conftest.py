"""Fixtures of the back-office tests: a seeded demo log (real SQLite file, real pipeline) and read
models on SQLite and on the machine's PostgreSQL (127.0.0.1:5432, database ``test``, each test in a
schema of its own, created and dropped here)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest
from sqlalchemy import Engine, create_engine, text

from services.integrations.backoffice.apikeys import ROLES, new_key
from services.integrations.backoffice.migrate import upgrade
from services.integrations.backoffice.schema import make_engine
from services.runtime.compose import Composition
from services.runtime.embedded.bus import EmbeddedBus
from services.runtime.keyring import demo_keyring, load_keyring, new_keyring, save_keyring
from services.simulation.simulator import Session, demo_tables

if TYPE_CHECKING:
    from services.integrations.backoffice.api import ServeSettings

PG_SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
BACKENDS = ("sqlite", "postgresql")


def play(path: Path, *, tables: int = 3, coups: int = 14, seed: int = 7, keyring: Path | None = None) -> Path:
    """A seeded session played through the whole embedded pipeline into the log at ``path``, on the
    keyring file ``keyring`` (the one ``serve`` will sign and verify with), else the demo keyring."""
    ring = load_keyring(keyring) if keyring is not None else demo_keyring()
    bus = EmbeddedBus(path, Composition.demo(ring).pipeline())
    try:
        Session(bus, seed=seed, players=6, keyring=ring).run(demo_tables(tables), coups)
    finally:
        bus.close()
    return path


@pytest.fixture(scope="session")
def demo_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One seeded demo log shared by the read-only tests (do not write to it)."""
    return play(tmp_path_factory.mktemp("demo") / "demo.db")


@pytest.fixture
def fresh_log(tmp_path: Path, keyring: tuple[Path, dict[str, str]]) -> Path:
    """A seeded demo log of this test's own, on this test's keyring (tests that write commands use it)."""
    return play(tmp_path / "log.db", tables=2, coups=6, seed=11, keyring=keyring[0])


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


@contextlib.contextmanager
def running_server(log_path: Path, read_url: str, keyring: Path | None) -> Iterator[str]:
    """``serve``'s application on a real uvicorn server on a free loopback port; yields its base URL."""
    from services.integrations.backoffice.api import ServeSettings  # noqa: PLC0415
    from services.runtime.compose import keyring_pipeline  # noqa: PLC0415

    settings = ServeSettings(
        log_path=log_path,
        read_url=read_url,
        keyring_path=keyring,
        poll_seconds=0.2,
        pipeline=keyring_pipeline,
    )
    with serving(settings) as url:
        yield url


@contextlib.contextmanager
def serving(settings: ServeSettings) -> Iterator[str]:
    """The application of ``settings`` over its read model, migrated, on a real
    uvicorn server on a free loopback port; yields its base URL and stops it after."""
    import uvicorn  # noqa: PLC0415

    from services.integrations.backoffice.api import create_app  # noqa: PLC0415

    engine = make_engine(settings.read_url)
    upgrade(engine)
    app = create_app(settings, engine)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
        engine.dispose()


def serve_process(options: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    """``casino-ledger serve OPTIONS --port P`` as a process on a free loopback port, once it answers
    ``/v1/health``; its stderr is kept (a serve that exits fails the wait with it)."""
    port = free_port()
    cmd = [sys.executable, "-m", "services.cli", "serve", *options, "--port", str(port)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"serve exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        try:
            return httpx.get(url + "/v1/health", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    wait_until(up, 60)
    return proc, url


def make_keyring(path: Path) -> dict[str, str]:
    """A fresh keyring file (every principal, which the back office must keep intact) with one API key
    per role."""
    save_keyring(new_keyring(), path)
    return {role: new_key(path, role)[0] for role in ROLES}


@pytest.fixture
def keyring(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """(keyring path, API key per role)."""
    path = tmp_path / "keyring.json"
    return path, make_keyring(path)


def wait_until(predicate: Callable[[], bool], seconds: float = 20) -> None:
    """Poll ``predicate`` until true (the projector thread catches up), failing after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)
