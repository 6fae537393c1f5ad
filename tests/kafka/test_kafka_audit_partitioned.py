"""Audit per partition (issue #31, docs/adr/0013-audit-per-partition.md): three audit replicas on six
partitions, each doing the work of its partitions (the account stage over the wallet topics, the table
stage over the table events, the alerts and the payouts and stakes re-keyed by table), one tree stage
under the lease writing what a regulator reads; replicas SIGKILLed mid-session.

Before, audit ran one member at a time under a lease (ADR 0007): the others waited.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from services.audit.replay.tree_head import parse_tree
from services.core import topics
from services.core.merkle import heads_root
from tests.kafka.test_kafka_crash_soak import check, soak

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
