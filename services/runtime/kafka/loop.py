"""The one consume loop of the Kafka runtime: the service workers
(:class:`~services.runtime.kafka.worker.Shell`), the seamless caller
(:mod:`services.integrations.seamless.kafka_caller`) and the read model's follower
(:mod:`services.integrations.backoffice.kafka_follow`) all run :func:`consume`.

What differs between them is what they hand in: how a batch is fetched (a group consumer's
``getmany``, topped up or not, checked against the log's ends), what handling a batch means (apply and
produce, then commit; call the operator; write rows and positions in one transaction), what to do when
a fetch brings nothing, when to stop (a signal's event, a condition such as "every partition applied
to its end as of the start") and whether a lease (:mod:`services.runtime.kafka.lease`) must be held
between batches. The order of those steps is the loop's, written once:

    stop? -> done? -> hold the lease -> fetch -> handle the batch, or idle when it is empty -> again
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition  # type: ignore[import-untyped]

from services.runtime.kafka.lease import Lease

Batch = Mapping[TopicPartition, Sequence[Any]]
"""What one fetch brought: records (aiokafka ``ConsumerRecord``) per partition, in offset order."""

Fetch = Callable[[], Awaitable[Batch]]
Handle = Callable[[Batch], Awaitable[Any]]


async def consume(
    fetch: Fetch,
    handle: Handle,
    *,
    stop: asyncio.Event | None = None,
    done: Callable[[], bool] | None = None,
    idle: Callable[[], Awaitable[None]] | None = None,
    lease: Lease | None = None,
) -> None:
    """Fetch and handle batches until ``stop`` is set or ``done()`` says so (neither: forever). With a
    ``lease``, each fetch waits while a rebalance of the lease group is on, and
    :class:`~services.runtime.kafka.lease.LeaseLost` ends the loop once another member holds it. A fetch
    that brings nothing calls ``idle`` (when given) instead of ``handle``."""
    while not (stop is not None and stop.is_set()) and not (done is not None and done()):
        if lease is not None:
            await lease.hold()
        batch = await fetch()
        if batch:
            await handle(batch)
        elif idle is not None:
            await idle()


def fetcher(consumer: AIOKafkaConsumer, *, max_records: int, timeout_ms: int) -> Fetch:
    """A plain fetch: one ``getmany`` of at most ``max_records``, waiting at most ``timeout_ms``."""

    async def fetch() -> Batch:
        found: Batch = await consumer.getmany(timeout_ms=timeout_ms, max_records=max_records)
        return found

    return fetch


async def assign_at(
    consumer: AIOKafkaConsumer, tps: Iterable[TopicPartition], positions: Mapping[TopicPartition, int | None]
) -> None:
    """Assign ``tps`` to a started consumer and seek each to its position (``None`` or missing: the
    partition's beginning): the start of a member that keeps its positions itself (the follower, in
    its read model) or takes all the partitions whole (the caller, from its group's commits)."""
    wanted = list(tps)
    consumer.assign(wanted)
    for tp in wanted:
        at = positions.get(tp)
        if at is None:
            await consumer.seek_to_beginning(tp)
        else:
            consumer.seek(tp, at)
