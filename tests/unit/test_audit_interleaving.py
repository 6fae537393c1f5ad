"""Audit's checkpoints depend on the streams, not on how the topics interleave (a bug until 2026-11-24).

On Kafka, audit reads its topics as the broker hands them out: a coup's payouts (``casino.wallet.requests``)
may come after the table's later events, the ``ShoeClosed`` included, and the replay reads a Kafka log
topic by topic, payouts first. A checkpoint that claimed the rounds completed *when audit read the close*,
or the table chain's head *when audit read the last payout*, differed between the two: the demo on Kafka
reported ``checkpoint_mismatch`` on a clean log in about half the runs once audit fetched every 100 ms.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.audit.processor import Audit
from services.core import topics
from services.core.attest import AttestChain, attestation
from services.core.envelope import Envelope
from services.core.processor import initial_state, step
from services.core.signing import DEMO_PUBLIC_KEYS
from services.core.trust import Principal
from services.runtime.keyring import demo_keyring
from services.runtime.replay import replay
from services.simulation.simulator import DEFAULT_TABLES, Session
from tests.helpers.membus import MemBus

EVERY = 5
Order = Callable[[list[Envelope]], list[Envelope]]


@pytest.fixture(scope="module")
def inputs() -> list[Envelope]:
    """Two tables, 12 coups each (a checkpoint every 5 rounds, and at each shoe close), without audit's
    own records: what audit reads."""
    bus = MemBus()
    Session(bus, seed=5).run(list(DEFAULT_TABLES[:2]), 12)
    return [
        e
        for e in bus.log
        if e.topic != topics.AUDIT_FINDINGS and not (e.topic == topics.ATTEST and e.key == "audit")
    ]


def by_topic(log: list[Envelope]) -> list[Envelope]:
    """Topic by topic, in each topic's order: as the replay reads a Kafka log (payouts first)."""
    return [e for t in topics.ALL_TOPICS for e in log if e.topic == t]


def payouts_late(log: list[Envelope]) -> list[Envelope]:
    """Every wallet request after every other record: audit behind on the topic that carries the
    payouts, as a lagging consumer on Kafka reads them."""
    late = [e for e in log if e.topic == topics.WALLET_REQUESTS]
    return [e for e in log if e.topic != topics.WALLET_REQUESTS] + late


def audited(log: Sequence[Envelope]) -> list[Envelope]:
    """What a fresh audit writes reading ``log`` in that order, its heads signed at the end."""
    audit = Audit(checkpoint_every=EVERY)
    state = initial_state(audit)
    outs = [out for rec in log for out in step(audit, state, rec)]
    guard = demo_keyring().guard(Principal.AUDIT)
    at = max(e.occurred_at for e in outs)
    return outs + [
        e for e, _ in attestation(AttestChain("audit"), state.heads, guard, occurred_at=at, seal="idle")
    ]


def claims(outputs: list[Envelope]) -> dict[tuple[str, int], dict[str, Any]]:
    """Each checkpoint's claims the replay compares, by (table, rounds)."""
    cps = [e.payload for e in outputs if e.type == "AuditCheckpoint"]
    fields = ("table_digest", "chain_heads", "findings")
    return {(p["table_id"], p["rounds"]): {f: p[f] for f in fields} for p in cps}


@pytest.mark.parametrize("order", [by_topic, payouts_late], ids=lambda f: f.__name__)
def test_checkpoints_are_the_same_whatever_order_audit_reads_the_topics_in(
    inputs: list[Envelope], order: Order
) -> None:
    in_log_order = claims(audited(inputs))
    tables = sorted({e.key for e in inputs if e.type == "TableOpened"})
    assert sorted(in_log_order) == [(t, n) for t in tables for n in (5, 10, 12)]
    assert claims(audited(order(inputs))) == in_log_order


@pytest.mark.parametrize("order", [by_topic, payouts_late], ids=lambda f: f.__name__)
def test_a_replay_verifies_the_checkpoints_of_an_audit_that_read_the_payouts_late(
    inputs: list[Envelope], order: Order
) -> None:
    """The regulator's view: live audit read the topics in one order, the replay reads them topic by
    topic; every checkpoint verifies and the log is clean."""
    log = inputs + audited(order(inputs))
    report = replay(by_topic(log), keys=DEMO_PUBLIC_KEYS, checkpoint_every=EVERY)
    assert report.clean, report.to_dict()["findings"]
    assert report.checkpoints["verified"] == 6


@settings(max_examples=15)
@given(st.randoms(use_true_random=False))
def test_any_interleaving_of_the_topics_gives_the_same_checkpoints(inputs: list[Envelope], rnd: Any) -> None:
    """Each topic read in its own order, the topics interleaved at random (a consumer's fetches)."""
    queues = [[e for e in inputs if e.topic == t] for t in topics.ALL_TOPICS]
    merged: list[Envelope] = []
    while any(queues):
        queue, n = rnd.choice([q for q in queues if q]), rnd.randint(1, 40)
        merged.extend(queue[:n])
        del queue[:n]
    assert claims(audited(merged)) == claims(audited(inputs))
