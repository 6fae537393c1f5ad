"""Audit per partition (issue #31, docs/adr/0013-audit-per-partition.md): three audit replicas on six
partitions, each doing the work of its partitions (the account stage over the wallet topics, the table
stage over the table events, the alerts and the payouts and stakes re-keyed by table), one tree stage
under the lease writing what a regulator reads; replicas SIGKILLed mid-session.

Before, audit ran one member at a time under a lease (ADR 0007): the others waited.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from services.audit.replay.tree_head import parse_tree
from services.core import topics
from services.core.merkle import heads_root
from services.runtime.kafka.bus import KafkaBus, Workers, quick_settings
from services.runtime.kafka.topic_io import aconsume_raw
from services.runtime.kafka.worker import EXIT_CONFIG, TopicSpec, ensure_topics
from services.runtime.settings import Settings
from tests.kafka.test_kafka_crash_soak import check, soak

AUDIT = ("audit", "audit-tree")

pytestmark = pytest.mark.kafka

TABLE_EVENTS = "casino.table.events"
WALLET_EVENTS = "casino.wallet.events"


def _lines(text: str, event: str) -> list[dict[str, Any]]:
    found = [json.loads(line) for line in text.splitlines() if line.startswith("{") and f'"{event}"' in line]
    return [line for line in found if line.get("event") == event]


def test_three_audit_replicas_share_the_partitions_and_survive_kills(
    kafka_broker: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three audit replicas, two SIGKILLs (each started again a coup later): every event id once, the
    replay clean with the in-memory digest, checkpoints (every two rounds of a table) signed with tree
    heads over the chains of both stages; one writer per findings chain; no audit replica waiting for a
    lease; table events and wallet events handled by more than one replica; every table stage's scope
    restored over partition *p* of all its inputs."""
    monkeypatch.setenv("CASINO_AUDIT_CHECKPOINT_EVERY", "2")  # the workers' and the replays' cadence
    result = soak(
        kafka_broker, tmp_path, seed=13, tables=4, coups=4, kills=2, replicated=("audit",), copies=2
    )
    check(result)
    assert result["kills"] == 2
    records = result["records"]
    assert isinstance(records, list)
    checkpoints = [e for e in records if e.type == "AuditCheckpoint"]
    assert checkpoints, "no checkpoint written"
    chains: set[tuple[str, str]] = set()
    for c in checkpoints:
        assert c.topic == topics.AUDIT_FINDINGS and c.payload.get("signature")
        parsed = parse_tree(c.payload["tree"])
        assert parsed is not None
        _, size, root, leaves = parsed
        assert heads_root(leaves) == (size, root)
        chains.update((t, k) for t, k, _, _ in leaves)
    assert {t for t, _ in chains} >= {TABLE_EVENTS, WALLET_EVENTS}  # heads of both stages in one tree
    for key in {e.key for e in records if e.topic == topics.AUDIT_FINDINGS}:  # one writer per chain
        seqs = [e.seq for e in records if e.topic == topics.AUDIT_FINDINGS and e.key == key]
        assert seqs == list(range(len(seqs))), (key, seqs)
    logs = result["logs"]
    assert isinstance(logs, dict)
    audit: list[str] = logs["audit"]
    assert not any('"lease_wait"' in text or '"lease_held"' in text for text in audit)
    for topic in (TABLE_EVENTS, WALLET_EVENTS):
        handled = [
            {b["partition"] for b in _lines(text, "batch") if b["topic"].endswith(topic)} for text in audit
        ]
        assert sum(1 for parts in handled if parts) >= 2, (topic, handled)
    restored = [r for text in audit for r in _lines(text, "state_restored") if r["stage"] == "audit.tables"]
    for r in restored:
        assert len(r["offsets"]) == 4 and all(o.endswith(f"[{r['scope']}]") for o in r["offsets"]), r


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_audit_replicas_soak(kafka_broker: str, tmp_path: Path, seed: int) -> None:
    """Seven tables, six coups each, three audit replicas, four kills per run: nothing written twice,
    clean with the in-memory digest."""
    result = soak(
        kafka_broker, tmp_path, seed=seed, tables=7, coups=6, kills=4, replicated=("audit",), copies=2
    )
    check(result)
    assert result["kills"] == 4


def _settings(broker: str) -> Settings:
    return quick_settings(
        Settings(bootstrap_servers=broker, topic_prefix=f"a{uuid.uuid4().hex[:10]}.", partitions=6,
                 demo_mode=True, log_level="INFO"),
        env={},
    )  # fmt: skip


def test_a_record_that_does_not_decode_is_dead_lettered_once(kafka_broker: str, tmp_path: Path) -> None:
    """Bytes that are no record on the wallet topics: the account stage dead-letters each once; the hop
    that reads the same partitions for the table stage passes nothing on and writes no second one."""
    settings = _settings(kafka_broker)
    asyncio.run(ensure_topics(settings, list(topics.ALL_TOPICS)))
    garbage = [
        (topics.WALLET_REQUESTS, b"player:001", b'{"event_id": "half an envelope"}'),
        (topics.WALLET_EVENTS, b"player:002", b"\xff not json"),
    ]
    workers = Workers(settings, tmp_path, services=AUDIT)
    workers.start()
    try:
        with KafkaBus(settings, workers=workers, services=AUDIT) as bus:
            bus.publish_raw(garbage)
            bus.drain()
            raw_dead = [r.value for r in asyncio.run(aconsume_raw(settings, [topics.DEADLETTER]))]
    finally:
        status = workers.stop()
    assert set(status.values()) == {0}, status
    letters = [json.loads(v or b"{}") for v in raw_dead]
    assert sorted(d["payload"]["source_topic"] for d in letters) == sorted(t for t, _, _ in garbage)
    assert {d["producer"] for d in letters} == {"audit"}


def test_a_staged_topic_of_several_partitions_stops_audit(kafka_broker: str, tmp_path: Path) -> None:
    """``casino.audit.staged`` made by hand with six partitions: the tree stage would keep a state, so
    a chain head, per partition and fork audit's chains; the workers do not start (one
    ``partitions_mismatch`` line, exit 78)."""
    settings = _settings(kafka_broker)
    asyncio.run(ensure_topics(settings, [*topics.ALL_TOPICS, TopicSpec(topics.AUDIT_STAGED, 6, -1)]))
    workers = Workers(settings, tmp_path, services=AUDIT)
    workers.start()
    try:
        status = {name: workers.procs[name].wait(120) for name in AUDIT}
    finally:
        workers.stop()
    assert status == dict.fromkeys(AUDIT, EXIT_CONFIG), [workers.log(n)[-1500:] for n in AUDIT]
    for name in AUDIT:
        [line] = _lines(workers.log(name), "partitions_mismatch")
        assert line["partitions"] == 6 and line["wanted"] == 1
