"""The projector on Kafka: a consumer loop that applies each partition's records in their order.

Each partition is its own source (``kafka:<topic>:<partition>``) with its own position in
``bo_positions``: the next offset to read, written in the transaction that applied the records before
it (offsets are stored plus one, so that position 0 means "nothing applied"). On start the loop seeks
every partition to its stored position: a restart after a crash re-reads nothing it applied and loses
nothing it did not. No consumer group is used (positions live with the read model, not in Kafka).

Kafka orders records per partition only; the projector's rows do not depend on how partitions of
different topics interleave (a bet's row is built from whichever of its records comes first), except
that a payout seen before its coup's ``BettingOpened`` counts in the gaming day of its own time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from aiokafka import TopicPartition  # type: ignore[import-untyped]

from services.backoffice.projector import INPUTS, Projector, Row
from services.runtime.kafka import loop as consume_loop
from services.runtime.kafka.bus import real_ends
from services.runtime.kafka.topic_io import new_consumer, partitions_of
from services.runtime.settings import Settings


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
) -> int:
    """Apply the input topics' records to the read model, per partition in order. With ``until_idle``
    return once every partition is applied up to its end as of the start; otherwise run until ``stop``
    is set. Returns how many records were applied."""
    consumer = new_consumer(settings)
    await consumer.start()
    applied = 0
    try:
        logical = {settings.topic(t): t for t in topics}
        tps = await partitions_of(consumer, list(logical))
        ends = await real_ends(consumer, tps) if until_idle else {}
        at = {tp: projector.position(source_of(tp)) for tp in tps}
        await consume_loop.assign_at(consumer, tps, at)

        async def handle(batch: consume_loop.Batch) -> None:
            nonlocal applied
            for tp, messages in batch.items():
                topic = logical[tp.topic]
                rows: list[Row] = [
                    (m.offset + 1, topic, (m.key or b"").decode("utf-8", "replace"), m.value or b"")
                    for m in messages
                ]
                applied += await asyncio.to_thread(projector.apply, rows, source_of(tp))
                if rows:
                    at[tp] = max(at[tp], rows[-1][0])

        def caught_up() -> bool:
            return until_idle and all(at[tp] >= ends[tp] for tp in tps)

        fetch = consume_loop.fetcher(consumer, max_records=1000, timeout_ms=200)
        await consume_loop.consume(fetch, handle, stop=stop, done=caught_up)
        return applied
    finally:
        await consumer.stop()
