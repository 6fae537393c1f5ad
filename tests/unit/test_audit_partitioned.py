"""Audit per partition (docs/adr/0013-audit-per-partition.md) without a broker: a session's log split
over partitions as Kafka would (the account stage per account partition, the table stage per table
partition, the payouts and stakes re-keyed by table), every staged record handed to the tree stage in
one order, and what the tree stage writes compared with what the whole audit writes over the same log.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from typing import Any

import pytest

from services.audit.partitioned import STAGED, AuditAccounts, AuditTables, AuditTree
from services.audit.processor import CHECKPOINT, FINDING, Audit
from services.audit.replay.tree_head import parse_tree
from services.core import topics
from services.core.envelope import Draft, Envelope
from services.core.merkle import heads_root
from services.simulation.simulator import Session, demo_tables
from tests.helpers.membus import MemBus

PARTITIONS = 3
EVERY = 2
COMPARED = ("table_id", "rounds", "table_digest", "chain_heads", "findings")
"""What a checkpoint claims that the replay derives and compares (``alerts``, how many the monitor had
raised when audit read it, depends on the order the inputs are read in: the replay checks it against
the log at its end)."""


def _p(key: str) -> int:
    return zlib.crc32(key.encode()) % PARTITIONS


@pytest.fixture(scope="module")
def log() -> list[Envelope]:
    memory = MemBus()
    Session(memory, seed=7).run(demo_tables(3), 5)
    return list(memory.log)


def _whole(log: Iterable[Envelope]) -> list[Draft]:
    audit = Audit(signing=None, checkpoint_every=EVERY)
    state, out = audit.initial(), []
    for rec in log:
        if rec.topic in audit.inputs:
            state, drafts = audit.handle(state, rec)
            out += drafts
    return out


def _partitioned(log: list[Envelope], *, payouts_last: bool) -> list[Draft]:
    """The stages per partition over ``log``; the re-keyed records in log order, or (``payouts_last``)
    all after the table events, newest first, as lagging hops would hand them over (a later coup's
    payouts before an earlier one's); the tree stage over the staged records in the order they were
    derived."""
    accounts = [AuditAccounts(EVERY) for _ in range(PARTITIONS)]
    tables = [AuditTables(EVERY) for _ in range(PARTITIONS)]
    a_states = [s.initial() for s in accounts]
    t_states = [s.initial() for s in tables]
    staged: list[Draft] = []
    rekeyed: list[tuple[int, Envelope]] = []

    def table_stage(p: int, rec: Envelope) -> None:
        t_states[p], drafts = tables[p].handle(t_states[p], rec)
        staged.extend(drafts)

    for rec in log:
        if rec.topic in topics.ACCOUNT_KEYED:
            p = _p(rec.key)
            a_states[p], drafts = accounts[p].handle(a_states[p], rec)
            staged.extend(drafts)
            table = tables[0].route(rec)
            if table is not None:
                rekeyed.append((_p(table), rec))
                if not payouts_last:
                    table_stage(*rekeyed.pop())
        elif rec.topic in (topics.TABLE_EVENTS, topics.MONITOR_ALERTS):
            table_stage(_p(rec.key), rec)
    for p, rec in reversed(rekeyed):
        table_stage(p, rec)
    tree = AuditTree(signing=None)
    state, out = tree.initial(), []
    for d in staged:
        assert d.type == STAGED and d.topic == topics.AUDIT_STAGED and not d.chained
        state, drafts = tree.handle(state, Envelope.model_construct(type=d.type, payload=d.payload))
        out += drafts
    return out


def _checkpoints(drafts: Iterable[Draft]) -> dict[tuple[str, int], dict[str, Any]]:
    found: dict[tuple[str, int], dict[str, Any]] = {}
    for d in drafts:
        if d.type == CHECKPOINT:
            slot = (d.key, d.payload["rounds"])
            assert slot not in found, slot
            found[slot] = {f: d.payload[f] for f in COMPARED}
    return found


@pytest.mark.parametrize("payouts_last", [False, True])
def test_the_tree_stage_writes_the_whole_audits_checkpoints(log: list[Envelope], payouts_last: bool) -> None:
    """Every checkpoint the whole audit writes, with the same claims (rounds, table digest, the table
    chain's head, findings), whichever order the re-keyed payouts arrive in (coups complete in
    resolution order in the table stage); no finding on an honest log; audit's records on
    ``casino.audit.findings``."""
    whole = _whole(log)
    split = _partitioned(log, payouts_last=payouts_last)
    assert [d for d in split if d.type == FINDING] == [] == [d for d in whole if d.type == FINDING]
    assert {d.topic for d in split} == {topics.AUDIT_FINDINGS}
    assert len(_checkpoints(whole)) > 3
    assert _checkpoints(split) == _checkpoints(whole)


def test_each_tree_head_is_the_tree_of_heads_the_log_holds_over_both_stages(log: list[Envelope]) -> None:
    """Each checkpoint's tree head is the RFC 6962 root of the heads it lists, each head is a record of
    the log (its seq and hash), audit's own chains by length; the last ones name chains of the table
    stage and of the account stage, of every partition."""
    held = {(e.topic, e.key, e.seq): e.hash for e in log if e.seq is not None}
    trees = [d.payload["tree"] for d in _partitioned(log, payouts_last=False) if d.type == CHECKPOINT]
    chains: set[tuple[str, str]] = set()
    for n, tree in enumerate(trees, 1):
        parsed = parse_tree(tree)
        assert parsed is not None
        number, size, root, leaves = parsed
        assert number == n and heads_root(leaves) == (size, root)
        for topic, key, seq, digest in leaves:
            if topic == topics.AUDIT_FINDINGS:
                assert digest is None
            else:
                assert held[(topic, key, seq)] == digest
            chains.add((topic, key))
    assert {t for t, _ in chains} >= {topics.TABLE_EVENTS, topics.WALLET_EVENTS, topics.AUDIT_FINDINGS}
    assert {_p(k) for t, k in chains if t == topics.WALLET_EVENTS} == set(range(PARTITIONS))


def test_a_checkpoint_derived_again_is_written_once(log: list[Envelope]) -> None:
    """A stage that re-applied its inputs after a restore may derive a table's checkpoint again from
    another record (another id, which the output index does not know): the tree stage writes one per
    table and round count."""
    tree = AuditTree(signing=None)
    state = tree.initial()
    checkpoint = next(d for d in _whole(log) if d.type == CHECKPOINT)
    drafts = [{"type": CHECKPOINT, "key": checkpoint.key, "payload": dict(checkpoint.payload)}]
    staged = Envelope.model_construct(type=STAGED, payload={"drafts": drafts, "heads": {}})
    state, first = tree.handle(state, staged)
    state, again = tree.handle(state, staged)
    assert [d.type for d in first] == [CHECKPOINT] and again == []
