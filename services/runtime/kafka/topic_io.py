"""Plain aiokafka reading and writing of the topics: no worker, no processor, no composition root.

What the CLI, the replay (``replay --kafka`` reads the topics with :func:`iter_raw`), the bus and the
tests use to produce records and read topics back; :mod:`services.runtime.kafka.worker` (the workers)
re-exports every name. Kept apart so that a reader of the topics imports no processor: the replay
judges with its own model (an import-linter contract).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition  # type: ignore[import-untyped]
from aiokafka.partitioner import murmur2  # type: ignore[import-untyped]
from aiokafka.structs import ConsumerRecord  # type: ignore[import-untyped]

from services.core.envelope import Envelope
from services.runtime import intake
from services.runtime.failures import BrokerUnreachable
from services.runtime.settings import Settings

READ_FETCH_MS = 10
"""The fetch wait of the plain readers (:func:`new_consumer`). Tansu holds a fetch that finds nothing
for its whole wait (docs/performance.md#kafka-bus-latency-on-tansu), so each round of a read of an idle
partition costs this much there; a broker that answers at once with records (Kafka) is not slowed by it."""

RANGE_FETCH_MS = 100
"""The fetch wait of a range read's rounds that know of records ahead (``ahead_ms`` of :func:`read_range`:
the restore, catch-up, signed heads' resume, whole-topic reads): Tansu's in-memory store lists a
partition's batches from its first at every fetch until the wait runs out, so on a long log a short
wait gathers next to nothing, while a fetch that finds records is answered once it has them (figures:
docs/performance.md#kafka-range-readers-fetch-wait). Rounds with nothing
known ahead (an idle or empty partition, an end to confirm) keep :data:`READ_FETCH_MS`: Tansu holds
those fetches for their whole wait."""

READ_ROUND_MS = 20
"""How long one round of :func:`read_range` waits for records: a partition with nothing new is known
to be read once a fetch response brought its high watermark, a few :data:`READ_FETCH_MS` in, so a
round that waited longer would only add its wait to every read of an idle partition."""


BATCH_BYTES = 512 * 1024
"""The producer's ``max_batch_size`` where records go out in batches (:class:`Outbox`): half of Kafka's
default ``message.max.bytes`` (1 MiB), so a default broker takes every batch. aiokafka's default, 16 KiB,
holds about ten of our records, and aiokafka sends one request at a time per broker: a burst (the
5,000 payouts of one coup) then went out ten records per partition per round trip, and each ``send``
that found its partition's batch full waited for that round trip (figures: :class:`Outbox`)."""

HASHES_MAX = 100_000
"""Keys whose partitioning hash an :class:`Outbox` remembers (then it forgets them all and starts over)."""


@dataclass(frozen=True, slots=True)
class RawRecord:
    """One record as read from Kafka: logical topic, partition, offset, key and value bytes."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


def _settings_for(bootstrap: str | None, settings: Settings | None) -> Settings:
    base = settings if settings is not None else Settings()
    return base.model_copy(update={"bootstrap_servers": bootstrap}) if bootstrap else base


def probe(settings: Settings) -> None:
    """Fail fast, in one line, when no bootstrap server accepts a TCP connection within
    ``connect_timeout_s`` (:class:`BrokerUnreachable`); aiokafka alone would log and retry, or wait for
    its 40 s request timeout on a black-holed address."""
    reasons = []
    for server in settings.bootstrap_list:
        host, _, port = server.rpartition(":")
        try:
            address = (host.strip("[]") or "localhost", int(port))
            with socket.create_connection(address, settings.connect_timeout_s):
                return
        except ValueError:
            reasons.append(f"{server}: not host:port")
        except OSError as exc:
            reasons.append(f"{server}: {exc.strerror or type(exc).__name__}")
    raise BrokerUnreachable(f"no Kafka broker answers at {'; '.join(reasons) or 'no bootstrap servers'}")


def new_consumer(settings: Settings) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        bootstrap_servers=settings.bootstrap_list,
        enable_auto_commit=False,
        fetch_max_wait_ms=READ_FETCH_MS,
        auto_offset_reset="earliest",
        isolation_level=settings.isolation_level,
        **settings.aiokafka_auth(),
    )


async def real_ends(consumer: AIOKafkaConsumer, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
    """The next offset after the last record of each partition now: ListOffsets is only a lower bound
    (Tansu: the base offset of the last record batch plus one), so the last batch of each non-empty
    partition is read, up to the high watermark (one fetch). Replaces the consumer's assignment."""
    if not tps:
        return {}
    known(consumer, tps)
    listed = dict(await consumer.end_offsets(list(tps)))
    probe = {tp: end - 1 for tp, end in listed.items() if end > 0}
    if not probe:
        return listed
    ends = {tp: listed[tp] for tp in probe}
    _, reached = await read_range(consumer, probe, ends, to_end=True, ahead_ms=RANGE_FETCH_MS)
    return {tp: max(end, reached.get(tp, end)) for tp, end in listed.items()}


def key_partition(key: bytes, partitions: Sequence[int]) -> int:
    """The partition aiokafka's default partitioner gives ``key`` among ``partitions`` (murmur2 over the
    ids sorted), where a producer's ``send`` without a partition puts it."""
    ids = sorted(partitions)
    hashed: int = murmur2(key) & 0x7FFFFFFF
    return ids[hashed % len(ids)]


class Outbox:
    """Records sent in batches: one aiokafka record batch (``create_batch``) per topic partition,
    handed to the producer (``send_batch``) when it is full or at :meth:`flush`; the caller awaits the
    acknowledgements that :meth:`flush` returns, once per batch of its own.

    A record goes to the partition aiokafka's default partitioner gives its key (``send`` without a
    partition): murmur2 of the key over the topic's partitions sorted by id, the partitions read from
    the producer's metadata once per flush (a topic that gains partitions is seen at the next batch,
    as ``send`` would). The hashes of up to :data:`HASHES_MAX` keys are kept (murmur2 is pure
    Python in aiokafka). Order is kept per partition: batches of one partition go out in the order
    they were filled, as ``send``'s do.

    Batches of :data:`BATCH_BYTES` cost the producer far less CPU a record than ``send`` per record
    (docs/performance.md#kafka-outbox).
    """

    def __init__(self, producer: AIOKafkaProducer) -> None:
        self.producer = producer
        self._open: dict[tuple[str, int], tuple[Any, list[str]]] = {}
        self._shipped: list[tuple[list[str], asyncio.Future[Any]]] = []
        self._partitions: dict[str, list[int]] = {}
        self._hashes: dict[bytes, int] = {}

    async def partition(self, topic: str, key: bytes) -> int:
        """The partition of ``topic`` that aiokafka's default partitioner gives ``key``."""
        partitions = self._partitions.get(topic)
        if partitions is None:
            partitions = self._partitions[topic] = sorted(await self.producer.partitions_for(topic))
        hashed = self._hashes.get(key)
        if hashed is None:
            if len(self._hashes) >= HASHES_MAX:
                self._hashes.clear()
            hashed = self._hashes[key] = murmur2(key) & 0x7FFFFFFF
        return partitions[hashed % len(partitions)]

    async def add(self, topic: str, key: bytes, value: bytes, ref: str) -> None:
        """Add one record (``ref``: what :meth:`flush` returns for it once its batch is handed over)."""
        where = (topic, await self.partition(topic, key))
        slot = self._open.get(where)
        if slot is None:
            slot = self._open[where] = (self.producer.create_batch(), [])
        if slot[0].append(key=key, value=value, timestamp=None) is None:  # full: ship it, start another
            await self._ship(where, slot)
            slot = self._open[where] = (self.producer.create_batch(), [])
            if slot[0].append(key=key, value=value, timestamp=None) is None:
                raise ValueError(f"a record of {len(value)} bytes is larger than a batch ({topic})")
        slot[1].append(ref)

    async def _ship(self, where: tuple[str, int], slot: tuple[Any, list[str]]) -> None:
        builder, refs = slot
        sent = await self.producer.send_batch(builder, where[0], partition=where[1])
        self._shipped.append((refs, sent))

    async def flush(self) -> list[tuple[list[str], asyncio.Future[Any]]]:
        """Hand every open batch to the producer; returns each batch handed over since the last flush:
        its records' refs and the future of its acknowledgement."""
        for where, slot in list(self._open.items()):
            await self._ship(where, slot)
        self._open.clear()
        self._partitions.clear()
        shipped, self._shipped = self._shipped, []
        return shipped


async def aproduce_raw(settings: Settings, records: Iterable[tuple[str, bytes | None, bytes | None]]) -> int:
    """Send ``(logical topic, key, value)`` records in order and wait for every acknowledgement."""
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.bootstrap_list, acks="all", **settings.aiokafka_auth()
    )
    await producer.start()
    try:
        futures = [await producer.send(settings.topic(t), value, key=key) for t, key, value in records]
        for fut in futures:
            await fut
    finally:
        await producer.stop()
    return len(futures)


async def aproduce(settings: Settings, envelopes: Iterable[Envelope]) -> int:
    """Send envelopes to their topics, keyed by ``Envelope.key``; returns how many were sent."""
    records = ((e.topic, intake.encode_key(e), intake.encode(e)) for e in envelopes)
    return await aproduce_raw(settings, records)


async def partitions_of(consumer: AIOKafkaConsumer, physical: Sequence[str]) -> list[TopicPartition]:
    """The partitions of the named topics (none for a topic that does not exist), from a metadata
    request over every topic: an assigned consumer's own metadata covers only the assigned topics, so
    ``partitions_for_topic`` shows no partition of any other."""
    cluster = await consumer._client.fetch_all_metadata()  # what ``consumer.topics()`` reads
    tps: list[TopicPartition] = []
    for name in physical:
        for p in sorted(cluster.partitions_for_topic(name) or ()):
            tps.append(TopicPartition(name, p))
    return tps


def fetch_wait(consumer: AIOKafkaConsumer, ms: int) -> int:
    """Set the fetch wait of ``consumer``'s next fetch requests; returns the one it had. aiokafka has
    no public setter, but builds each request from its fetcher's ``_fetch_max_wait_ms`` (checked by
    tests/unit/test_topic_io_wait.py against the pinned aiokafka)."""
    fetcher = consumer._fetcher  # started consumers only
    before: int = fetcher._fetch_max_wait_ms
    fetcher._fetch_max_wait_ms = ms
    return before


async def read_range(
    consumer: AIOKafkaConsumer,
    starts: Mapping[TopicPartition, int],
    ends: Mapping[TopicPartition, int],
    *,
    to_end: bool = False,
    ahead_ms: int | None = None,
) -> tuple[dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]], dict[TopicPartition, int]]:
    """Records of each partition from its start offset up to (not including) its end offset.

    ``to_end``: ``ends`` come from ``end_offsets`` (ListOffsets) and are only a lower bound: Tansu
    answers ListOffsets with the base offset of the last record batch plus one, hiding the rest of
    a multi-record batch. Each partition is then read up to the larger of that and the high
    watermark of the first fetch response (which is right). Returns the records and the next
    offset to read per partition.

    ``ahead_ms``: the fetch wait of the rounds that know of records ahead of a partition's position
    (:data:`RANGE_FETCH_MS` for the readers of ranges); the others, and the consumer after the read,
    keep its own. A partition read to its end is paused at once: a fetch of it alone would find
    nothing and hold the next round for its whole wait.
    """
    first = await consumer.beginning_offsets(list(ends)) if ends else {}
    begin = {tp: max(starts.get(tp, 0), first[tp]) for tp in ends}
    target = dict(ends)
    live = [tp for tp in ends if to_end or target[tp] > begin[tp]]
    out: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]] = {tp: [] for tp in live}
    reached = dict(begin)
    if not live:
        return out, reached
    consumer.assign(live)
    for tp in live:
        consumer.seek(tp, begin[tp])
    pending, unconfirmed = set(live), set(live) if to_end else set()
    own = fetch_wait(consumer, ahead_ms) if ahead_ms is not None else None  # the consumer's own
    try:
        while pending:
            if own is not None:  # a long wait only while a fetch is sure to find records
                ahead = any(reached[tp] < target[tp] for tp in pending)
                fetch_wait(consumer, ahead_ms if ahead and ahead_ms is not None else own)
            batch = await consumer.getmany(*pending, timeout_ms=READ_ROUND_MS)
            for tp, msgs in batch.items():
                kept = [m for m in msgs if m.offset < target[tp] or tp in unconfirmed]
                out[tp].extend(kept)
            for tp in list(pending):
                highwater = consumer.highwater(tp)
                if tp in unconfirmed and highwater is not None:
                    target[tp] = max(target[tp], highwater)
                    unconfirmed.discard(tp)
                reached[tp] = await consumer.position(tp)
                if tp not in unconfirmed and reached[tp] >= target[tp]:
                    pending.discard(tp)
                    if own is not None and pending:
                        consumer.pause(tp)
    finally:
        if own is not None:
            fetch_wait(consumer, own)
    for tp in live:  # a fetch may have returned records past the target
        out[tp] = [m for m in out[tp] if m.offset < target[tp]]
        reached[tp] = max(begin[tp], out[tp][-1].offset + 1 if out[tp] else begin[tp])
    rest(consumer)
    return out, reached


def known(consumer: AIOKafkaConsumer, tps: Sequence[TopicPartition]) -> None:
    """Let a plain reader list ``tps``' offsets without learning their topics one by one: assigned (and
    paused: nothing is fetched), their topics go into its next metadata request together, where
    ``end_offsets`` and ``beginning_offsets`` alone learn one unknown topic per retry backoff (figures:
    docs/performance.md#kafka-range-readers-fetch-wait).
    Replaces the reader's assignment (the next read assigns its own)."""
    consumer.assign(list(tps))
    consumer.pause(*tps)


def rest(consumer: AIOKafkaConsumer) -> None:
    """Stop a plain reader's background fetches until its next ``assign``: aiokafka keeps fetching the
    assigned partitions after the read, a fetch every :data:`READ_FETCH_MS` on an idle topic, for
    nothing (the next read assigns and seeks again). Pausing its partitions stops that (an ``assign``
    starts them unpaused). Background fetches cost the broker and the workers CPU for nothing
    (docs/performance.md#kafka-readers-paused)."""
    consumer.pause(*consumer.assignment())


async def aconsume_raw(settings: Settings, logical_topics: Sequence[str]) -> list[RawRecord]:
    """Every record of the topics up to their end offsets now: topic by topic, partition, offset."""
    consumer = new_consumer(settings)
    await consumer.start()
    try:
        tps = await partitions_of(consumer, [settings.topic(t) for t in logical_topics])
        ends = await consumer.end_offsets(tps) if tps else {}
        read, _ = await read_range(consumer, {}, ends, to_end=True, ahead_ms=RANGE_FETCH_MS)
    finally:
        await consumer.stop()
    return [
        RawRecord(settings.logical(tp.topic), tp.partition, m.offset, m.key, m.value)
        for tp in tps
        for m in read.get(tp, [])
    ]


def iter_raw(
    bootstrap: str | None, logical_topics: Sequence[str], settings: Settings | None = None, chunk: int = 2_000
) -> Iterator[RawRecord]:
    """Every record of the topics as of the call, streamed in the order of :func:`aconsume_raw` (topic
    by topic, partition, offset) with at most ``chunk`` records in memory: a replay of years of topics.

    Blocking (its own event loop); must not be called from inside a running loop.
    """
    settings = _settings_for(bootstrap, settings)
    probe(settings)
    loop = asyncio.new_event_loop()

    async def started() -> AIOKafkaConsumer:  # aiokafka builds its clients inside a running loop
        made = new_consumer(settings)
        try:
            await made.start()
        except BaseException:
            await made.stop()
            raise
        return made

    consumer = loop.run_until_complete(started())
    try:
        physical = [settings.topic(t) for t in logical_topics]
        tps = loop.run_until_complete(partitions_of(consumer, physical))
        listed = loop.run_until_complete(consumer.end_offsets(tps)) if tps else {}
        for tp in sorted(tps, key=lambda tp: (physical.index(tp.topic), tp.partition)):
            logical = settings.logical(tp.topic)
            for msgs in _chunks(loop, consumer, tp, listed[tp], chunk):
                yield from (RawRecord(logical, tp.partition, m.offset, m.key, m.value) for m in msgs)
    finally:
        loop.run_until_complete(consumer.stop())
        loop.close()


def _chunks(
    loop: asyncio.AbstractEventLoop, consumer: AIOKafkaConsumer, tp: TopicPartition, listed: int, chunk: int
) -> Iterator[list[ConsumerRecord[bytes, bytes]]]:
    """One partition from its beginning to its end as of the first fetch (``listed`` may stop short of
    it on Tansu: see :func:`read_range`), ``chunk`` records at a time."""

    async def fetch(position: int | None) -> tuple[list[ConsumerRecord[bytes, bytes]], int | None, int]:
        consumer.assign([tp])
        if position is None:
            position = (await consumer.beginning_offsets([tp]))[tp]
        consumer.seek(tp, position)
        fetch_wait(consumer, RANGE_FETCH_MS if position < max(listed, target or 0) else READ_FETCH_MS)
        batch = await consumer.getmany(tp, timeout_ms=200, max_records=chunk)
        return batch.get(tp, []), consumer.highwater(tp), max(position, await consumer.position(tp))

    position: int | None = None
    target: int | None = None  # known once a fetch has answered with the high watermark
    idle = 0
    while target is None or (position or 0) < target:
        got, highwater, reached = loop.run_until_complete(fetch(position))
        if target is None and highwater is not None:
            target = max(listed, highwater)
        msgs = [m for m in got if target is None or m.offset < target]
        position = msgs[-1].offset + 1 if msgs else reached
        if msgs:
            idle = 0
            yield msgs
        elif (idle := idle + 1) > 50:
            where = f"{tp.topic}[{tp.partition}]"
            raise RuntimeError(f"{where}: nothing fetched at offset {position} (end {target})")


async def aconsume_all(settings: Settings, logical_topics: Sequence[str]) -> list[Envelope]:
    """The envelopes of :func:`aconsume_raw`; undecodable records are left out (they are dead letters)."""
    out: list[Envelope] = []
    for rec in await aconsume_raw(settings, logical_topics):
        try:
            out.append(intake.decode(rec.value))
        except intake.DecodeError:
            continue
    return out


def produce(bootstrap: str, envelopes: Iterable[Envelope], settings: Settings | None = None) -> int:
    """Blocking :func:`aproduce` against ``bootstrap`` (``host:port[,…]``)."""
    return asyncio.run(aproduce(_settings_for(bootstrap, settings), list(envelopes)))


def consume_all(
    bootstrap: str, logical_topics: Sequence[str], settings: Settings | None = None
) -> list[Envelope]:
    """Blocking :func:`aconsume_all`: every envelope on the topics up to their end offsets now."""
    return asyncio.run(aconsume_all(_settings_for(bootstrap, settings), logical_topics))
