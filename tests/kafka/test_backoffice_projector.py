"""The back office's projector on Kafka (Tansu): the same balances, statements and reports as on the
embedded log, applied per partition exactly once across restarts."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from sqlalchemy import Engine

from services.app.simulator import Session, demo_tables
from services.backoffice import queries
from services.backoffice.kafka_facts import HEADS_TOPICS
from services.backoffice.kafka_follow import follow_kafka
from services.backoffice.migrate import upgrade
from services.backoffice.projector import INPUTS, Projector, dump_rows
from services.backoffice.schema import make_engine
from services.runtime.embedded.log import EmbeddedBus, EmbeddedLog
from services.runtime.kafka.topic_io import aproduce_raw
from services.runtime.kafka.worker import ensure_topics
from services.runtime.settings import Settings

pytestmark = pytest.mark.kafka


def _engine(path: Path) -> Engine:
    e = make_engine(f"sqlite:///{path}")
    upgrade(e)
    return e


def test_projection_from_kafka_equals_the_embedded_one(kafka_broker: str, tmp_path: Path) -> None:
    """A seeded session's records (with its signed heads) produced to Kafka and projected from there,
    facts only, give every account the same balance, every wallet the same statement and every table
    the same report as the projection of the embedded log; a second run of the loop (a restart) applies
    nothing more."""
    log_path = tmp_path / "log.db"
    bus = EmbeddedBus(log_path)
    try:
        Session(bus, seed=3, players=5).run(demo_tables(2), 5)
    finally:
        bus.close()
    with EmbeddedLog(log_path, readonly=True) as log:
        produced = [r for r in log.iter_all() if r[1] in (*INPUTS, *HEADS_TOPICS)]
        rows = [r for r in produced if r[1] in INPUTS]
        embedded = Projector(_engine(tmp_path / "embedded.db"))
        embedded.catch_up(log)
    prefix = f"bo{uuid.uuid4().hex[:10]}."
    settings = Settings(bootstrap_servers=kafka_broker, topic_prefix=prefix, partitions=3)
    asyncio.run(ensure_topics(settings, [*INPUTS, *HEADS_TOPICS]))
    asyncio.run(aproduce_raw(settings, [(t, k.encode(), raw) for _o, t, k, raw in produced]))

    projector = Projector(_engine(tmp_path / "kafka.db"))
    assert asyncio.run(follow_kafka(settings, projector)) == len(rows)
    before = dump_rows(projector.engine)
    assert asyncio.run(follow_kafka(settings, projector)) == 0
    assert dump_rows(projector.engine) == before

    with embedded.engine.connect() as a, projector.engine.connect() as b:
        accounts = [r["account_id"] for r in dump_accounts(a)]
        assert len(accounts) > 5
        for account in accounts:
            assert queries.balance(a, account) == queries.balance(b, account)
            if account.startswith("player:"):
                assert queries.statement(a, account, limit=500) == queries.statement(b, account, limit=500)
        day = queries.latest_day(a)
        for t in queries.tables_overview(a, day):
            assert queries.table_report(a, t["table_id"], day) == queries.table_report(b, t["table_id"], day)
            assert queries.last_rounds(a, t["table_id"], 100) == queries.last_rounds(b, t["table_id"], 100)


def dump_accounts(conn: object) -> list[dict[str, object]]:
    from sqlalchemy import select  # noqa: PLC0415

    from services.backoffice import schema as s  # noqa: PLC0415

    return [dict(r) for r in conn.execute(select(s.accounts)).mappings()]  # type: ignore[attr-defined]
