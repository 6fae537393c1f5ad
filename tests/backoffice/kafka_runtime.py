"""The back office on the Kafka runtime for the API tests: a real Tansu broker, the four workers as
processes, a seeded session played through them, ``casino-ledger project --kafka --follow`` as a process
into a PostgreSQL schema of its own, and ``serve``'s application with ``kafka`` settings on a real
uvicorn server, signing with the back office's key file alone (``keys new --split``)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.core import topics
from services.core.trust import Principal
from services.integrations.backoffice.apikeys import ROLES, new_key
from services.integrations.backoffice.migrate import upgrade
from services.integrations.backoffice.schema import READ_DB_ENV, make_engine
from services.runtime.kafka.bus import quick_settings, running, worker_env
from services.runtime.kafka.topic_io import aconsume_raw
from services.runtime.keyring import new_keyring, save_keyring, save_split
from services.runtime.settings import Settings
from services.simulation.simulator import Session, demo_tables
from tests.backoffice.conftest import pg_schema_url, serving, wait_until


@dataclass(slots=True)
class KafkaBackOffice:
    """What the tests use of a back office on Kafka."""

    settings: Settings
    keyring: Path
    """The whole keyring (the workers' and the session's)."""
    key_file: Path
    """The back office's own key file, with the API keys: all ``serve`` gets."""
    keys: dict[str, str]
    read_url: str
    follower: subprocess.Popen[bytes]
    public_keyring: Path | None = None
    """The principals' public keys (``keys new --split``): all the follower checks signed heads with."""

    def records(self) -> list[dict[str, Any]]:
        """Every record of every topic as parsed JSON."""
        import asyncio  # noqa: PLC0415
        import json  # noqa: PLC0415

        raw = asyncio.run(aconsume_raw(self.settings, list(topics.ALL_TOPICS)))
        return [json.loads(r.value) for r in raw if r.value]

    def env(self) -> dict[str, str]:
        """The environment of a ``casino-ledger`` process on this deployment (no keyring in it)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("CASINO_")}
        env.update(worker_env(self.settings))
        env.pop("CASINO_KEYRING", None)
        env[READ_DB_ENV] = self.read_url
        if self.public_keyring is not None:
            env["CASINO_PUBLIC_KEYRING"] = str(self.public_keyring)
        return env


def follower(env: dict[str, str], bootstrap: str, log: Path) -> subprocess.Popen[bytes]:
    """``casino-ledger project --kafka BOOTSTRAP --follow`` as a process (its stderr into ``log``)."""
    cmd = [sys.executable, "-m", "services.cli", "project", "--kafka", bootstrap, "--follow"]
    with log.open("ab") as out:
        return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=out)


@contextlib.contextmanager
def kafka_back_office(
    broker: str, tmp: Path, *, tables: int = 2, coups: int = 6
) -> Iterator[KafkaBackOffice]:
    """A seeded session (seed 11, as ``fresh_log``) played on fresh topics through the workers, with the
    follower projecting it; yields once the read model holds every record the session wrote."""
    ring = new_keyring()
    keyring = save_keyring(ring, tmp / "keyring.json")
    split = {p.name: p for p in save_split(ring, tmp / "split")}
    public = next(p for n, p in split.items() if n.startswith("public"))
    key_file = split[f"{Principal.BACKOFFICE.value}.json"]
    keys = {role: new_key(key_file, role)[0] for role in ROLES}
    settings = quick_settings(Settings(
        bootstrap_servers=broker, topic_prefix=f"bo{uuid.uuid4().hex[:10]}.", partitions=3, keyring=keyring,
    ), env={})  # fmt: skip
    schemas = pg_schema_url()
    read_url = next(schemas)
    upgrade(make_engine(read_url))
    try:
        with running(settings, tmp / "workers") as bus:
            Session(bus, seed=11, players=6, keyring=ring).run(demo_tables(tables), coups)
            bus.drain()
            bo = KafkaBackOffice(settings, keyring, key_file, keys, read_url, None, public)  # type: ignore[arg-type]
            bo.follower = follower(bo.env(), broker, tmp / "follower.log")
            try:
                wanted = len([r for r in bo.records() if r["topic"] in _PROJECTED])
                wait_until(lambda: _projected(read_url) >= wanted, 120)
                yield bo
            finally:
                bo.follower.terminate()
                bo.follower.wait(30)
    finally:
        schemas.close()


_PROJECTED = (topics.WALLET_REQUESTS, topics.WALLET_EVENTS, topics.TABLE_EVENTS, topics.AUDIT_FINDINGS,
              topics.MONITOR_ALERTS)  # fmt: skip


def _projected(read_url: str) -> int:
    """How many records the follower applied: the sum of its partitions' positions."""
    from sqlalchemy import func, select  # noqa: PLC0415

    from services.integrations.backoffice import schema as s  # noqa: PLC0415

    engine = make_engine(read_url)
    try:
        with engine.connect() as c:
            p = s.positions.c
            return int(c.execute(select(func.coalesce(func.sum(p.offset), 0)).where(
                p.source.like("kafka:%"))).scalar_one())  # fmt: skip
    finally:
        engine.dispose()


@contextlib.contextmanager
def kafka_server(
    bo: KafkaBackOffice, *, timeout_s: float = 20.0, read_url: str | None = None
) -> Iterator[str]:
    """``serve --kafka``'s application (the back office's key file alone) on a real uvicorn server, over
    the deployment's read model or the one at ``read_url``."""
    from services.integrations.backoffice.api import ServeSettings  # noqa: PLC0415

    read_url = read_url or bo.read_url
    settings = ServeSettings(
        log_path=Path(os.devnull), read_url=read_url, keyring_path=bo.key_file, poll_seconds=0.2,
        kafka=bo.settings.model_copy(update={"keyring": None}), command_timeout_s=timeout_s,
    )  # fmt: skip
    with serving(settings) as url:
        yield url
