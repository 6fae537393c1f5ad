"""The projector on Kafka: a consumer loop that applies each partition's records in their order.

Each partition is its own source (``kafka:<topic>:<partition>``) with its own position in
``bo_positions``: the next offset to read, written in the transaction that applied the records before
it (offsets are stored plus one, so that position 0 means "nothing applied"). On start the loop seeks
every partition to its stored position: a restart after a crash re-reads nothing it applied and loses
nothing it did not. No consumer group is used (positions live with the read model, not in Kafka).

Kafka orders records per partition only; the projector's rows do not depend on how partitions of
different topics interleave (a bet's row is built from whichever of its records comes first), except
that a payout seen before its coup's ``BettingOpened`` counts in the gaming day of its own time.

Facts only (issue 28): a record is applied once a signed head of its expected writer covers it
(:mod:`services.integrations.backoffice.kafka_facts`, the gate). A partition whose next record is still
pending is
held back (paused, read again from its position after the gate's next refresh); noise that can never be
attested is passed over and counted.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from aiokafka import TopicPartition  # type: ignore[import-untyped]

from services.integrations.backoffice.kafka_facts import KafkaFacts
from services.integrations.backoffice.projector import INPUTS, Projector, Row
from services.runtime.kafka import loop as consume_loop
from services.runtime.kafka.bus import real_ends
from services.runtime.kafka.topic_io import new_consumer, partitions_of
from services.runtime.settings import Settings

REFRESH_S = 0.2
"""How long a partition held at a record already surveyed waits at least before the gate reads the
signed heads again (at once when it stopped at a record the gate has not read yet)."""


def source_of(tp: TopicPartition) -> str:
    """The projector's source name of a partition."""
    return f"kafka:{tp.topic}:{tp.partition}"


async def follow_kafka(
    settings: Settings,
    projector: Projector,
    *,
    until_idle: bool = True,
    stop: asyncio.Event | None = None,
    topics: Sequence[str] = INPUTS,
    gate: KafkaFacts | None = None,
) -> int:
    """Apply the input topics' facts to the read model, per partition in order. With ``until_idle``
    return once every partition is read up to its end as of the start (what is still pending is left
    for the next run); otherwise run until ``stop`` is set, holding a pending partition back. Returns
    how many records were applied (or passed over as never attested)."""
    consumer = new_consumer(settings)
    gate = gate if gate is not None else KafkaFacts(settings, projector.facts.survey.keys)
    await consumer.start()
    applied = 0
    try:
        logical = {settings.topic(t): t for t in topics}
        tps = await partitions_of(consumer, list(logical))
        ends = await real_ends(consumer, tps) if until_idle else {}
        at = {tp: projector.position(source_of(tp)) for tp in tps}
        await consume_loop.assign_at(consumer, tps, at)
        await gate.refresh(at)
        held: set[TopicPartition] = set()
        unread = False
        refreshed = time.monotonic()

        async def handle(batch: consume_loop.Batch) -> None:
            nonlocal applied, unread
            for tp, messages in batch.items():
                topic = logical[tp.topic]
                rows: list[Row] = [
                    (m.offset + 1, topic, (m.key or b"").decode("utf-8", "replace"), m.value or b"")
                    for m in messages
                ]
                view = gate.view(tp)
                applied += await asyncio.to_thread(projector.apply, rows, source_of(tp), gate=view)
                if view.pending_at is not None:  # held back: read again after a refresh (or next run)
                    consumer.seek(tp, projector.position(source_of(tp)))
                    consumer.pause(tp)
                    held.add(tp)
                    unread = unread or view.pending_at > view.read  # new records: refresh at once
                elif rows:
                    at[tp] = max(at[tp], rows[-1][0])
            await refresh_held()

        async def refresh_held() -> None:
            nonlocal unread, refreshed
            if held and not until_idle and (unread or time.monotonic() - refreshed >= REFRESH_S):
                await gate.refresh({tp: projector.position(source_of(tp)) for tp in tps})
                consumer.resume(*held)
                held.clear()
                unread = False
                refreshed = time.monotonic()

        def caught_up() -> bool:
            return until_idle and all(at[tp] >= ends[tp] or tp in held for tp in tps)

        fetch = consume_loop.fetcher(consumer, max_records=1000, timeout_ms=200)
        await consume_loop.consume(fetch, handle, stop=stop, done=caught_up, idle=refresh_held)
        return applied
    finally:
        await gate.close()
        await consumer.stop()
