"""The back office's projector on Kafka (Tansu): the same balances, statements and reports as on the
embedded log, applied per partition exactly once across restarts."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest
from aiokafka.partitioner import murmur2  # type: ignore[import-untyped]
from sqlalchemy import Engine

from services.core import topics
from services.integrations.backoffice import queries
from services.integrations.backoffice.kafka_facts import HEADS_TOPICS, KafkaFacts
from services.integrations.backoffice.kafka_follow import follow_kafka, source_of
from services.integrations.backoffice.migrate import upgrade
from services.integrations.backoffice.projector import INPUTS, Projector, dump_rows
from services.integrations.backoffice.schema import make_engine
from services.runtime.compose import demo_pipeline
from services.runtime.embedded.bus import EmbeddedBus
from services.runtime.embedded.store import EmbeddedLog
from services.runtime.kafka.topic_io import aproduce_raw
from services.runtime.kafka.worker import ensure_topics
from services.runtime.settings import Settings
from services.simulation.simulator import Session, demo_tables
from tests.backoffice.test_unattested import MILLION, forge

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
    bus = EmbeddedBus(log_path, demo_pipeline())
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


def _partition(key: str, partitions: int = 3) -> int:
    """The partition the producer's default partitioner gives ``key``."""
    return (murmur2(key.encode()) & 0x7FFFFFFF) % partitions


def dump_accounts(conn: object) -> list[dict[str, object]]:
    from sqlalchemy import select  # noqa: PLC0415

    from services.integrations.backoffice import schema as s  # noqa: PLC0415

    return [dict(r) for r in conn.execute(select(s.accounts)).mappings()]  # type: ignore[attr-defined]


def test_forgeries_produced_to_kafka_move_nothing_in_one_run(kafka_broker: str, tmp_path: Path) -> None:
    """An outsider's forgeries produced after a sealed session — a withdrawal forking a real player's
    chain below its signed head, a 1,000,000.00 deposit for a new account — leave every balance as the
    embedded projection has it: the fork is passed over and counted (it can never be attested), the new
    account's deposit waits (no seal was written after it), and nothing of either is applied."""
    log_path = tmp_path / "log.db"
    bus = EmbeddedBus(log_path, demo_pipeline())
    try:
        Session(bus, seed=3, players=5).run(demo_tables(2), 3)
    finally:
        bus.close()
    with EmbeddedLog(log_path, readonly=True) as log:
        produced = [r for r in log.iter_all() if r[1] in (*INPUTS, *HEADS_TOPICS)]
        embedded = Projector(_engine(tmp_path / "embedded.db"))
        embedded.catch_up(log)
    recs = [json.loads(raw) for _o, _t, _k, raw in produced]
    chain = [r for r in recs if r["topic"] == topics.WALLET_EVENTS and r["key"] == "player:001"]
    fork = forge(recs[: recs.index(chain[1])], "withdrawal", "player:001", 1_000, 1, "none")
    assert fork["seq"] == 1  # the signed head is further on
    outsider = forge(recs, "deposit", "player:999", MILLION, 2, "none")
    # after the outsider's deposit, in its partition, a fork of a real chain (passed over on its own): it
    # must wait behind the deposit, never carry the position past it
    part = _partition(outsider["key"])
    other = next(r["key"] for r in recs if r["topic"] == topics.WALLET_EVENTS and r["seq"] == 1
                 and r["key"] != "player:999" and _partition(r["key"]) == part)  # fmt: skip
    mine = [r for r in recs if r["topic"] == topics.WALLET_EVENTS and r["key"] == other]
    behind = forge(recs[: recs.index(mine[1])], "withdrawal", other, 1_000, 3, "none")
    prefix = f"bo{uuid.uuid4().hex[:10]}."
    settings = Settings(bootstrap_servers=kafka_broker, topic_prefix=prefix, partitions=3)
    asyncio.run(ensure_topics(settings, [*INPUTS, *HEADS_TOPICS]))
    body = [(t, k.encode(), raw) for _o, t, k, raw in produced]
    body += [(r["topic"], r["key"].encode(), json.dumps(r, sort_keys=True, separators=(",", ":")).encode())
             for r in (fork, outsider, behind)]  # fmt: skip
    asyncio.run(aproduce_raw(settings, body))

    projector = Projector(_engine(tmp_path / "kafka.db"))
    gate = KafkaFacts(settings, projector.facts.survey.keys)
    asyncio.run(follow_kafka(settings, projector, gate=gate))
    assert gate.unattested == 1 and gate.first_ids == [fork["event_id"]]
    assert len(gate.pending) == 1  # the new account's deposit waits, and the fork behind it
    ((tp, offset),) = gate.pending.items()
    assert tp.partition == part and projector.position(source_of(tp)) == offset - 1
    with embedded.engine.connect() as a, projector.engine.connect() as b:
        accounts = sorted(r["account_id"] for r in dump_accounts(a))
        assert sorted(r["account_id"] for r in dump_accounts(b)) == accounts
        for account in accounts:
            assert queries.balance(a, account) == queries.balance(b, account)
        assert queries.balance(b, "player:999") is None
