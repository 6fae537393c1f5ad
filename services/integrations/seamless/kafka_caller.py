"""The seamless adapter's HTTP shell on Kafka, run by ``casino-ledger seamless-caller`` (``python -m
services.cli.seamless_caller``, which composes it).

Runs beside the settlement worker (whose wallet stage is the adapter when ``CASINO_SEAMLESS_URL`` is
set). It reads ``casino.wallet.events`` from its committed offsets (consumer group
``<prefix>casino-seamless``, partitions assigned to it whole), makes the ``SeamlessCallRequested``
calls of each batch concurrently, produces their answers (``SeamlessCallAnswered``, signed as settlement) to
``casino.wallet.requests``, waits for every acknowledgement and only then commits the batch.

Any number of replicas may run: each first takes the caller's lease
(:mod:`services.runtime.kafka.lease`, docs/adr/0007-kafka-lease.md), so that a request is never called
by two processes at once. A second member says so in one ``lease_wait`` line and waits (ready, holding
nothing); when the holder stops or dies it takes over from the last commit. A member that loses the
lease stops at once (one ``caller_fenced`` line, exit 75).

With ``CASINO_WEB_ENABLED`` it serves ``/healthz``, ``/readyz`` (its partitions assigned and at most
``CASINO_READY_MAX_LAG`` requests behind) and ``/metrics`` (service ``seamless``) on
``CASINO_WEB_BIND:CASINO_WEB_PORT``, as the workers do
(:func:`services.runtime.kafka.metrics.serve_standalone`).

After a crash (SIGKILL included) it starts again from the last commit: calls whose answers were not
committed are made again with the same transaction id and attempt (the operator answers
``duplicate``), and their answers carry the same derived event id, so the adapter takes the first
and drops the rest. A request whose answer the adapter has already folded is stale and changes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, NamedTuple

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition  # type: ignore[import-untyped]
from aiokafka.errors import KafkaError  # type: ignore[import-untyped]

from services.core import topics
from services.core.envelope import Envelope
from services.core.trust import Guard
from services.integrations.seamless.client import OperatorClient, answer_envelope
from services.runtime import intake
from services.runtime.failures import ConfigError
from services.runtime.kafka import loop as consume_loop
from services.runtime.kafka import metrics
from services.runtime.kafka.lease import Lease
from services.runtime.kafka.topic_io import partitions_of
from services.runtime.logging import get_logger
from services.runtime.settings import SeamlessConfig, Settings


def group_of(settings: Settings) -> str:
    """The caller's consumer group (where its offsets are committed)."""
    return f"{settings.topic_prefix}casino-seamless"


async def _start_consumer(settings: Settings) -> tuple[AIOKafkaConsumer, list[TopicPartition]]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.bootstrap_list, group_id=group_of(settings), enable_auto_commit=False,
        auto_offset_reset="earliest", fetch_max_wait_ms=settings.fetch_max_wait_ms or 500,
        isolation_level=settings.isolation_level, **settings.aiokafka_auth(),
    )  # fmt: skip
    await consumer.start()
    tps = await partitions_of(consumer, [settings.topic(topics.WALLET_EVENTS)])
    await consume_loop.assign_at(consumer, tps, {tp: await consumer.committed(tp) for tp in tps})
    return consumer, tps


SERVICE = "seamless"
"""The caller's ``service`` label in its metrics (and its processor name)."""


def _status(consumer: Any, next_offset: dict[TopicPartition, int]) -> metrics.Status:
    """Assignment and lag of the caller's partitions, from what the consumer already holds."""
    lag: dict[tuple[str, int], int | None] = {}
    for tp, done in next_offset.items():
        try:
            highwater = consumer.highwater(tp)
        except Exception:  # stopping
            highwater = None
        lag[(topics.WALLET_EVENTS, tp.partition)] = None if highwater is None else max(0, highwater - done)
    return metrics.Status(bool(next_offset), lag)


async def _answer(
    client: OperatorClient, guard: Guard, request: Envelope, gate: asyncio.Semaphore
) -> Envelope:
    async with gate:
        answer = await client.call(request.payload)
    return answer_envelope(request, answer, guard)


async def run(
    settings: Settings, seamless: SeamlessConfig | None, guard: Guard, stop: asyncio.Event | None = None
) -> None:
    """Make calls to the operator wallet ``seamless`` and record answers signed with settlement's
    ``guard`` (the composition root's) until ``stop`` is set (or forever)."""
    if seamless is None:
        raise ConfigError("CASINO_SEAMLESS_URL is not set: there is no operator wallet to call")
    client = OperatorClient(seamless)
    gate = asyncio.Semaphore(seamless.concurrency)
    watch = metrics.WorkerMetrics(SERVICE)
    web = None
    if settings.web_enabled:
        web = await metrics.serve_standalone(watch, settings.web_bind, settings.web_port)
    lease = Lease(settings, SERVICE)
    watch.status_source = lambda: metrics.Status(lease.standby, {})  # a standby: ready, holding nothing
    try:
        if await _acquired(lease, stop):
            await _serve(settings, stop, lease, watch, _Calls(client, guard, gate))
    finally:
        await lease.release()  # last: a standby takes over after this member's last commit
        await client.aclose()
        if web is not None:
            await web.cleanup()


async def _acquired(lease: Lease, stop: asyncio.Event | None) -> bool:
    """Whether this member took the lease before ``stop`` was set (a standby stopped while waiting)."""
    taking = asyncio.ensure_future(lease.acquire())
    stopping = asyncio.ensure_future(stop.wait() if stop is not None else asyncio.Event().wait())
    await asyncio.wait({taking, stopping}, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if taking.done():
        taking.result()
        return True
    taking.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await taking
    return False


class _Calls(NamedTuple):
    client: OperatorClient
    guard: Guard
    gate: asyncio.Semaphore


async def _serve(
    settings: Settings, stop: asyncio.Event | None, lease: Lease, watch: metrics.WorkerMetrics, calls: _Calls
) -> None:
    """The caller's loop, while this member holds the lease."""
    client, guard, gate = calls
    logger = get_logger("casino_ledger.seamless")
    consumer, tps = await _start_consumer(settings)
    next_offset = {tp: await consumer.position(tp) for tp in tps}
    watch.status_source = lambda: _status(consumer, next_offset)
    watch.max_lag = settings.ready_max_lag
    tally = metrics.Tally()
    producer = await _start_producer(settings)
    eos = settings.exactly_once

    async def handle(batch: consume_loop.Batch) -> None:
        started = time.perf_counter()
        requests: list[Envelope] = []
        for msgs in batch.values():
            for m in msgs:
                env = None
                with contextlib.suppress(intake.DecodeError):
                    env = intake.decode(m.value)
                    if env.type == "SeamlessCallRequested":
                        requests.append(env)
                tally.input(SERVICE, topics.WALLET_EVENTS, env.type if env is not None else None)
        answers = await asyncio.gather(*(_answer(client, guard, r, gate) for r in requests))
        if eos:
            await producer.begin_transaction()
        sends = [
            await producer.send(settings.topic(a.topic), intake.encode(a), key=intake.encode_key(a))
            for a in answers
        ]
        for sent in sends:
            await sent
        for a in answers:
            tally.output(a)
        done = {tp: msgs[-1].offset + 1 for tp, msgs in batch.items() if msgs}
        if eos:  # the answers and the offsets together (the transaction began before the first send)
            await producer.send_offsets_to_transaction(done, group_of(settings))
            await producer.commit_transaction()
        else:
            await consumer.commit(done)
        next_offset.update(done)
        handled = sum(len(msgs) for msgs in batch.values())
        watch.flush(tally, SERVICE, handled, time.perf_counter() - started)
        if requests:
            logger.info("calls", calls=len(requests), statuses=sorted({a.payload["status"] for a in answers}))

    try:
        fetch = consume_loop.fetcher(consumer, max_records=settings.batch_max, timeout_ms=200)
        await consume_loop.consume(fetch, handle, stop=stop, lease=lease)
    finally:
        await producer.stop()
        await consumer.stop()


async def _start_producer(settings: Settings) -> AIOKafkaProducer:
    """The answers' producer; with ``CASINO_EXACTLY_ONCE`` transactional under the caller's group as its
    id (the next lease holder's start fences a zombie holder's producer). A broker that refuses it:
    :class:`ConfigError` (one line, exit 2), never the idempotent path unasked."""
    eos = settings.exactly_once
    txn = {"transactional_id": group_of(settings), "enable_idempotence": True} if eos else {}
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.bootstrap_list, acks="all", **txn, **settings.aiokafka_auth()
    )
    try:
        await producer.start()
    except KafkaError as exc:
        if not eos:
            raise
        raise ConfigError(
            f"CASINO_EXACTLY_ONCE=true but the broker refused a transactional producer ({exc!r})"
        ) from None
    return producer
