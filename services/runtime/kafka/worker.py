"""The Kafka runtime: any core :class:`~services.core.processor.Processor` as a worker in a faust app.

One service per process (``casino-ledger worker NAME`` or ``python -m services.cli.worker NAME``);
the service's processors come from its entry point (:data:`services.cli.worker.PROCESSORS`, the
composition root's). The faust app gives the process its lifecycle, signals and web server
(``/metrics``, ``/healthz``, ``/readyz``); one app task, :meth:`Shell.run`, owns an
``AIOKafkaConsumer`` in the service's consumer group (``{prefix}casino-{service}``) on every input
topic and an ``AIOKafkaProducer`` (faust's own consumer and producer are not started: see below).
For each record the worker decodes the bytes (:mod:`services.runtime.intake`; undecodable bytes become a
``casino.deadletter`` record with the reason and the original; a record the worker wrote itself to a topic
it reads, settlement's payouts, is the envelope it sealed: :class:`OwnOutputs`), runs the pure
:func:`services.core.processor.step` of the processor of that topic and produces the outputs keyed by
``Envelope.key``. Records come in batches (``getmany``: at most ``CASINO_BATCH_MAX``); a batch's outputs
go out in aiokafka record batches, one per output partition (:class:`~services.runtime.kafka.topic_io.Outbox`:
``create_batch``/``send_batch``), their acknowledgements are awaited once for the whole
batch, and only then are the batch's offsets committed, so an offset is never committed ahead of its
outputs. The acknowledgements and the commit of one batch happen while the worker handles the next
(:meth:`Shell._pipelined`: at most two batches in flight, commits in batch order), and a short batch is
topped up only while the previous one is in flight (:meth:`Shell._batch`). Each batch writes one INFO
``batch`` line per input partition (first and last offset, records, outputs sent, dead letters,
refusals, records by type); each dead letter and business refusal written gets a WARNING line naming
the input's offset; the line per record (``record``: topic, partition, offset, type, key, table, coup)
is DEBUG (docs/operations.md, "Logs").

**State and restarts, without transactions.** Kafka delivers at least once and the test broker has no
transactions, so correctness rests on determinism, event ids and a state store per input partition
(:mod:`services.runtime.kafka.state`, docs/adr/0001-kafka-state-store.md):

* *Snapshots.* Each pipe keeps its state per scope (an input partition; every partition for a
  multi-input processor) with the next offset applied and the last ``seq`` applied per chained input
  stream. A scope is snapshotted (as data, the project's codec) every ``CASINO_STATE_SNAPSHOT_RECORDS``
  records or ``CASINO_STATE_SNAPSHOT_INTERVAL_S`` seconds, after its batch's commit, to the stage's
  compacted changelog topic and then to a local RocksDB store with the changelog offset it got; the ids
  applied go to the local store with their snapshot, never ahead of it.
* *Restore.* On every assignment (a start, a rebalance, another worker's crash), before any record of
  it is handled, each scope is restored from the local store when its snapshot is the changelog's
  latest, else from the changelog, and each partition is sought to its snapshot's offset. The outputs
  written since the snapshots (their output positions: every output of a later record lies after them)
  are read back into the :class:`OutputIndex`: the records after a snapshot are applied again and their
  outputs already on the log are not sent twice. Until a scope has applied every record that was on
  its partitions once those outputs were read, its snapshots name the restored output positions, not
  the worker's (:meth:`Pipe.held`): a snapshot before the causes of outputs already written must not
  name positions past them. A scope with no snapshot starts from its partition's beginning (and the
  index from the output topics' beginnings: a first start on an old log).
* *Re-deliveries.* ``step`` is deterministic with derived ids, so re-applied records re-derive
  byte-identical outputs: the ones already on the topic are in the index and skipped, the rest are
  sent: no loss, no duplicate, same order per key. A chained record at or below its stream's last
  ``seq`` is a duplicate and changes nothing.
* *A lost log is loud.* A state or committed offset past a partition's end, a log start past the
  state, a local snapshot ahead of the changelog, or a high watermark below the state's offset (a
  broker that came back empty): one ``log_lost`` line, ``casino_log_lost_total``, exit :data:`EXIT_LOST`.
* *Fail fast.* Any error while handling a record ends the process (exit status 70) instead of carrying
  on with an in-memory state that may be ahead of what was sent; the restart path is the tested path.
  A commit refused because a rebalance took the partitions is not an error: their next owner restores
  them and finds the outputs in its index.

**Transactions, as an option.** With ``CASINO_EXACTLY_ONCE=true`` (a broker with transactions: Apache
Kafka, the docker-compose and Kubernetes deployments) each batch is one transaction
(:meth:`Shell._transact`): its outputs and its input offsets (``send_offsets_to_transaction``) commit
together or not at all, every reader of the runtime reads ``read_committed`` (an aborted batch's
outputs never enter the output index), batches are not pipelined, the idle signed heads go in a
transaction of their own and the snapshots through a plain producer after the commit (a changelog
holds no transaction markers). The transactional id is stable per member (:meth:`Shell.transactional`).
Everything above still holds: the transactions only narrow what a crash leaves to the idempotent
path. A broker that refuses a transactional producer (Tansu 0.6: ``InitProducerId`` answers
``UNKNOWN_SERVER_ERROR``) stops the worker: one ``exactly_once_refused`` line, exit :data:`EXIT_CONFIG`.

Limits: the state a record reads must belong to its partition's keys (true of the reference processors,
which key by table or account). A multi-input processor whose inputs are keyed alike, as they are
(audit's account stage: ``copartitioned``) or once some went through a repartition topic (the monitor,
audit's table stage: :class:`Repartition`, docs/adr/0011, docs/adr/0013) keeps its state per partition
number, its group assigned by the range assignor (partition *p* of every input to one member), and
scales out like the others. A multi-input processor keyed otherwise is snapshotted only while one
worker holds all its input partitions, so such a service runs one member at a time, as does one whose
processor says it is ``single`` (audit's tree stage, the one writer of audit's records): each replica first
takes the service's lease (:mod:`services.runtime.kafka.lease`, docs/adr/0007), the others say so in one
``lease_wait`` line and wait; it re-applies its inputs partition by partition, so only its verdicts, not
the interleaving of its outputs, are guaranteed equal after a restart; a zombie worker (alive but out of
the group) can still write a duplicate, which every consumer drops by ``event_id`` or ``seq``. Topics
keep their records forever (``retention.ms=-1``: docs/event-contract.md, "Retention"); only the
changelogs are compacted.

**Why a plain aiokafka loop and not faust's agents** (docs/adr/0003-kafka-worker-loop.md): faust's
per-event machinery cost more than the processor's own work per record, and the per-record costs of the
shell (an INFO line per record, ``send`` per output, an acknowledgement wait per partition) were cut to
a line per batch, an :class:`Outbox` and one wait per batch. The measurements:
docs/performance.md#kafka-worker-faust-agent-or-aiokafka-loop and
docs/performance.md#kafka-worker-own-cost-per-record.

Plain aiokafka helpers (:func:`produce`, :func:`consume_all`, :func:`iter_raw` and their async forms)
serve the CLI, the replay and the tests; they live in :mod:`services.runtime.kafka.topic_io` (a reader of
the topics imports no processor); :func:`ensure_topics` and
:func:`load_topic_specs` create the topology.
The shell tallies what each batch did for :mod:`services.runtime.kafka.metrics` (``/metrics``, ``/healthz``,
``/readyz`` on faust's web server where ``CASINO_WEB_*`` say; docs/operations.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import re
import socket
import sys
import time
from collections import Counter, OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, cast

import faust
import yaml  # type: ignore[import-untyped]
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition  # type: ignore[import-untyped]
from aiokafka.abc import ConsumerRebalanceListener  # type: ignore[import-untyped]
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # type: ignore[import-untyped]
from aiokafka.coordinator.assignors.range import RangePartitionAssignor  # type: ignore[import-untyped]
from aiokafka.errors import (  # type: ignore[import-untyped]
    CommitFailedError,
    KafkaError,
    OffsetOutOfRangeError,
)
from faust.app.base import BootStrategy

from services.core import topics
from services.core.envelope import Envelope
from services.core.processor import Processor, ProcessorState, initial_state, step_encoded
from services.core.topics import OBSERVERS
from services.core.trust import SEALED_KEPT, PrincipalKey, Refusal, Sealed, verify
from services.runtime import intake
from services.runtime.embedded import snapshot as snapshot_codec
from services.runtime.failures import BadInput
from services.runtime.kafka import attesting, metrics
from services.runtime.kafka import loop as consume_loop
from services.runtime.kafka import state as state_store
from services.runtime.kafka.lease import EXIT_LEASE, Lease, LeaseLost
from services.runtime.kafka.standby import Standby
from services.runtime.kafka.topic_io import (
    BATCH_BYTES,
    RANGE_FETCH_MS,
    Outbox,
    known,
    new_consumer,
    probe,
    read_range,
    real_ends,
)
from services.runtime.keyring import KeyringError
from services.runtime.logging import configure, get_logger
from services.runtime.settings import Settings

FETCH_WAIT_MS = 1500
"""The consumer's fetch wait where ``CASINO_FETCH_MAX_WAIT_MS`` sets none (faust's, which it replaced).

A broker answers a pending fetch as soon as records arrive, so the wait costs nothing there. Tansu
(0.6) holds a fetch that finds records for its whole wait, and answers an empty one about a third of
the wait after a record arrives, so the demo and tests set a short one (10 ms:
:data:`services.runtime.kafka.bus.QUICK_GROUP_TIMEOUTS`, figures in that module)."""

KEPT_CHUNK = 20_000
"""Changelog offsets a restore or a standby reads and stores at a time when it takes kept entries from
the changelog (:meth:`Shell.absorb`): what it holds in memory at once."""

SNAPSHOT_WINDOW = 4096
"""Changelog records a restore reads back at a time, after the last one, to find a scope's last snapshot
(:meth:`Shell.latest_snapshot`): more than the kept entries one snapshot covers at the default
``CASINO_STATE_SNAPSHOT_RECORDS``, so one window finds it after a death between the two."""

KEPT_FLUSH = 1_000
"""Kept entries taken in at once from which :meth:`Shell.absorb` flushes the store's memtable: what a
restore from the changelog read stays on disk, not in memory (a standby round's few entries wait for
RocksDB's own flush)."""

EXIT_CRASH = 70
"""Exit status of a worker that stopped on an error while handling a record (EX_SOFTWARE)."""

EXIT_LOST = 74
"""Exit status of a worker whose log lost what its state says was applied (EX_IOERR): a broker that
came back empty, a topic recreated, a log start past the state (:class:`state_store.StateLost`)."""

EXIT_CONFIG = 78
"""Exit status of a worker whose settings ask for what the broker refuses (EX_CONFIG):
``CASINO_EXACTLY_ONCE=true`` on a broker without transactions."""


class ExactlyOnceRefused(RuntimeError):
    """``CASINO_EXACTLY_ONCE=true`` and the broker refused a transactional producer."""


RETENTION_FOREVER_MS = -1
"""``retention.ms`` of every topic: game and account records are kept for years (docs/architecture.md)."""

ServiceFactory = Callable[[], "Processor[Any] | Sequence[Processor[Any]]"]


def _log() -> Any:
    return get_logger("casino_ledger.kafka")  # looked up per use: configure() may run after import


# -- topics ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """One topic to create: logical name, partitions (None: the settings'), ``retention.ms``, compacted
    (a changelog: only each key's last record must stay)."""

    name: str
    partitions: int | None = None
    retention_ms: int = RETENTION_FOREVER_MS
    compact: bool = False


def _retention_ms(value: object) -> int:
    if isinstance(value, bool) or value is None:
        return RETENTION_FOREVER_MS
    if isinstance(value, int):
        return value
    found = re.search(r"retention\.ms\s*=\s*(-?\d+)", str(value))
    return int(found.group(1)) if found else RETENTION_FOREVER_MS


def load_topic_specs(path: str | Path) -> list[TopicSpec]:
    """The topics of ``schemas/topics.yaml``: a list of ``{topic, key, partitions?, retention?}``.

    Accepts the list at the top level or under ``topics:``; entries without a topic name are ignored;
    ``retention`` may be a number of milliseconds or a text containing ``retention.ms=N``.
    """
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    entries = data.get("topics", []) if isinstance(data, dict) else data
    specs: list[TopicSpec] = []
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict):
            continue
        name = entry.get("topic") or entry.get("name")
        if not isinstance(name, str) or not name:
            continue
        partitions = entry.get("partitions")
        specs.append(
            TopicSpec(
                name=name,
                partitions=partitions if isinstance(partitions, int) and partitions > 0 else None,
                retention_ms=_retention_ms(entry.get("retention_ms", entry.get("retention"))),
            )
        )
    return specs


async def ensure_topics(settings: Settings, specs: Iterable[TopicSpec | str]) -> list[str]:
    """Create the topics that do not exist yet (prefix applied); returns the physical names created."""
    wanted = {s.name if isinstance(s, TopicSpec) else s: s for s in specs}
    probe(settings)
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap_list, **settings.aiokafka_auth())
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        new = [
            NewTopic(
                settings.topic(name),
                (spec.partitions if isinstance(spec, TopicSpec) else None) or settings.partitions,
                settings.replication_factor,
                topic_configs=_topic_configs(spec),
            )
            for name, spec in sorted(wanted.items())
            if settings.topic(name) not in existing
        ]
        if new:
            response = await admin.create_topics(new)
            errors = [
                (t, code) for t, code, *_ in getattr(response, "topic_errors", []) if code not in (0, 36)
            ]
            if errors:  # 36: TOPIC_ALREADY_EXISTS (another worker won the race)
                raise RuntimeError(f"topic creation failed: {errors}")
    finally:
        await admin.close()
    return [t.name for t in new]


def _topic_configs(spec: TopicSpec | str) -> dict[str, str]:
    if not isinstance(spec, TopicSpec):
        return {"retention.ms": str(RETENTION_FOREVER_MS)}
    configs = {"retention.ms": str(spec.retention_ms)}
    if spec.compact:
        configs["cleanup.policy"] = "compact"
    return configs


def service_topics(processors: Sequence[Processor[Any]]) -> list[TopicSpec | str]:
    """Logical topics a service touches: the topology's, its inputs and declared outputs; a topic a
    processor makes its own (``creates``: audit's staged records, one partition) with its count."""
    names = set(topics.ALL_TOPICS)
    for p in processors:
        names.update(p.inputs)
        names.update(_outputs_of(p))
    made = {t: n for p in processors for t, n in getattr(p, "creates", {}).items()}
    return [TopicSpec(n, made[n], RETENTION_FOREVER_MS) if n in made else n for n in sorted(names)]


def _outputs_of(processor: Processor[Any]) -> tuple[str, ...]:
    declared = getattr(processor, "outputs", None)
    outputs = tuple(declared) if declared else topics.ALL_TOPICS
    return outputs if topics.DEADLETTER in outputs else (*outputs, topics.DEADLETTER)


def repartition_topic(stage: str, logical: str) -> str:
    """The logical name of the topic a co-partitioned stage's input ``logical`` is re-keyed to
    (:class:`Repartition`; the settings' prefix is added like any topic's)."""
    return f"casino.repartition.{stage}.{logical.removeprefix('casino.')}"


# -- the worker --------------------------------------------------------------------------------------


@dataclass(slots=True)
class OutputIndex:
    """Event ids written by the service's producers since the snapshots a restore started from: the
    tail of the output topics after each snapshot's output positions (:mod:`state_store`), read once per
    assignment (:meth:`Shell.restore`), bounded by what was written since the last snapshots, never
    whole topics."""

    producers: frozenset[str]
    logical_topics: tuple[str, ...]
    own_keys: Mapping[str, PrincipalKey] | None = None
    """The service's own keys by key id: when set, only records authenticated by one of them count
    (a forgery written under the id the service is about to derive must not make it skip the real
    output: docs/trust.md)."""
    passing: frozenset[str] = frozenset()
    """Physical repartition topics: records of any writer passed on unchanged, known by
    :func:`passed_id` (a forgery under a real record's event id is another record)."""
    ids: set[str] = field(default_factory=set)

    async def read_tail(
        self,
        consumer: AIOKafkaConsumer,
        starts: Mapping[TopicPartition, int],
        ends: Mapping[TopicPartition, int],
    ) -> dict[TopicPartition, int]:
        """Replace the ids by those of the records from ``starts`` to the real ends; returns the ends."""
        read, reached = await read_range(consumer, starts, ends, to_end=True, ahead_ms=RANGE_FETCH_MS)
        self.ids = set()
        for msgs in read.values():
            for m in msgs:
                if m.topic in self.passing:
                    self.ids.add(passed_id(m.value))
                    continue
                event_id, producer = intake.identity_of(m.value)
                if event_id is not None and producer in self.producers and self._ours(m.value):
                    self.ids.add(event_id)
        return reached

    def _ours(self, raw: bytes | None) -> bool:
        """Whether ``raw`` is authenticated by one of the service's own keys (always, without keys)."""
        if self.own_keys is None:
            return True
        try:
            env = intake.decode(raw)
        except intake.DecodeError:
            return False
        return not isinstance(verify(env, self.own_keys), Refusal)


def passed_id(value: bytes | None) -> str:
    """How the output index knows a record passed on to a repartition topic: its bytes' digest."""
    return "sha256:" + hashlib.sha256(value or b"").hexdigest()


Output = tuple[Envelope, bytes]
"""An output of a step and its record's bytes (``Envelope.to_json()``), as the worker sends it."""


class OwnOutputs:
    """What a worker sealed, for its own pipes reading it back: settlement's payout stage writes a
    ``PayoutIssued`` per bet that its wallet stage, in the same worker, reads from
    ``casino.wallet.requests``.

    Two memos, both by exact bytes. :attr:`envelopes`: the envelopes sent to a topic one of the pipes
    reads, by their record bytes, until a pipe reads them back; a record whose bytes are exactly those
    is that envelope, not decoded again (the bytes were made from it:
    :func:`~services.core.envelope.seal_encoded`). :attr:`sealed`: every output the pipes sealed
    (:class:`~services.core.trust.Sealed`, filled by :func:`~services.core.processor.step_encoded`): a
    record whose bytes are exactly bytes sealed here is admitted without verifying its hash and MAC
    again (authorized all the same). The payload is validated either way; audit gets neither memo
    (:class:`Pipe`). Per ``PayoutIssued`` the wallet stage spent 30 CPU us decoding and verifying, 7-8
    of them decoding and 4-5 verifying (``BENCH_CORE_PARTS=settlement .venv/bin/python -m bench core``).
    A record written by another run (a restart, a rebalance) is in neither and is decoded and verified
    as any other.

    Both keep only outputs to a topic the pipes read, each at most ``kept`` (:data:`SEALED_KEPT`: four
    speed-baccarat coups' payouts), the oldest going first; the envelopes are let go as they are read
    back, the sealed bytes stay until pushed out (about 1.5 kB a record). One forgotten is decoded and
    verified in full, never refused."""

    def __init__(self, read: Iterable[str], kept: int = SEALED_KEPT) -> None:
        self.read = frozenset(read)
        """The logical topics the worker's pipes read."""
        self.most = kept
        self.envelopes: OrderedDict[bytes, Envelope] = OrderedDict()
        self.sealed = Sealed(kept, self.read)
        """The records the worker's pipes sealed (:func:`~services.core.processor.step_encoded` adds
        each output), for admitting one read back without verifying it again."""

    def keep(self, env: Envelope, value: bytes) -> None:
        """Keep ``env`` (sealed as ``value``) if one of the worker's pipes reads its topic."""
        if env.topic in self.read:
            self.envelopes[value] = env
            if len(self.envelopes) > self.most:
                self.envelopes.popitem(last=False)

    def take(self, value: bytes | None, topic: str) -> Envelope | None:
        """The envelope kept under exactly these bytes for ``topic`` (let go), else ``None``."""
        if value is None or not self.envelopes:
            return None
        env = self.envelopes.pop(value, None)
        return env if env is not None and env.topic == topic else None


class Pipe:
    """One processor inside a worker: its state per scope (:mod:`services.runtime.kafka.state`: an input
    partition, or every input partition of a multi-input processor) and the next offset applied per
    input partition."""

    def __init__(
        self,
        processor: Processor[Any],
        settings: Settings,
        own: OwnOutputs | None = None,
        store: state_store.LocalStore | None = None,
    ) -> None:
        self.processor = processor
        self.settings = settings
        self.own = own if processor.validates_inputs else None
        """The worker's own outputs, read back without decoding (:class:`OwnOutputs`); ``None``: none, and
        never for a processor that judges its inputs' bytes itself (audit decodes every record)."""
        self.store = store
        rekeyed = tuple(getattr(processor, "repartitioned", ()))
        self.copartitioned = bool(rekeyed) or bool(getattr(processor, "copartitioned", False))
        """A multi-input processor whose inputs are keyed alike once ``rekeyed`` ones went through their
        repartition topics (:class:`Repartition`), or are so already (``copartitioned``: audit's account
        stage): its state is per partition number (the monitor, audit's stages)."""
        self.reads_as = {repartition_topic(processor.name, t): t for t in rekeyed}
        """Each repartition topic read, to the logical input whose records it holds unchanged."""
        self.inputs: tuple[str, ...] = tuple(
            repartition_topic(processor.name, t) if t in rekeyed else t for t in processor.inputs
        )
        """The logical topics the pipe reads on Kafka."""
        self.whole = len(processor.inputs) > 1 and not self.copartitioned
        """A multi-input processor (audit) keeps one state over every input partition."""
        self.states: dict[int, ProcessorState[Any]] = {}
        self.kept: dict[int, list[state_store.StoredKept]] = {}
        """Per scope, its state's kept maps as bound to the local store (none without a store)."""
        self.signed_heads: dict[int, Any] = {}
        """Per scope, what its writer attested (:class:`services.runtime.kafka.attesting.PipeHeads`)."""
        self.seqs: dict[int, dict[tuple[str, str], int]] = {}
        """Per scope, the last ``seq`` applied per chained input stream: a record at or below it is a
        duplicate (never for audit, which reports duplicates itself)."""
        self.since: dict[int, int] = {}
        """Per scope, records applied since its last snapshot."""
        self.snapped_at: dict[int, float] = {}
        self.positions: dict[int, dict[tuple[str, int], int]] = {}
        """Per scope, the output positions its latest snapshot names (``Snapshot.outputs``)."""
        self.until: dict[int, dict[tuple[str, int], int]] = {}
        """Per scope restored, the end of each of its input partitions when the restore had read the
        outputs back: the outputs on the log then (in the :class:`OutputIndex`) were all caused by
        records before these ends, so until the scope has applied them its snapshots keep naming the
        restored positions (:meth:`held`)."""
        self.next_offset: dict[tuple[str, int], int] = {}
        self.current = state_store.WHOLE if self.whole else 0
        """The scope of the record last applied (:attr:`state`)."""
        self.record: Envelope | None = None
        self.reason: str | None = None
        stage_name = getattr(processor, "stage_name", None)
        self.stage: str = stage_name() if callable(stage_name) else processor.name
        self.by_seq = processor.validates_inputs
        self.stored_as = f"{settings.topic_prefix}{self.stage}"
        """The stage's name in the local store: with the topic prefix, so that one data directory used
        with two prefixes (two pipelines on one broker) never takes one's snapshots for the other's."""
        self.complete = True
        """A multi-input pipe: whether the worker holds every input partition (else its state covers
        only some and is never snapshotted)."""

    def rename(self, stage: str) -> None:
        """Name the pipe's state ``stage`` (changelog, local store, dead-letter positions)."""
        self.stage = stage
        self.stored_as = f"{self.settings.topic_prefix}{stage}"

    def scope(self, partition: int) -> int:
        """The scope a record of input partition ``partition`` belongs to."""
        return state_store.WHOLE if self.whole else partition

    def fresh(self, scope: int) -> ProcessorState[Any]:
        """An initial state for ``scope``, its applied ids and kept maps in the store (in memory without
        one)."""
        fresh = initial_state(self.processor)
        if self.store is not None:
            fresh.applied = state_store.StoredIds(self.store, self.stored_as, scope)
            self.kept[scope] = state_store.bind_kept(fresh, self.store, self.stored_as, scope)
        return fresh

    def state_of(self, scope: int) -> ProcessorState[Any]:
        """The state of ``scope`` (a fresh one the first time)."""
        found = self.states.get(scope)
        if found is None:
            found = self.states[scope] = self.fresh(scope)
        return found

    @property
    def state(self) -> ProcessorState[Any]:
        """The state of the scope of the record last applied (partition 0's before any)."""
        return self.state_of(self.current)

    @state.setter
    def state(self, value: ProcessorState[Any]) -> None:
        self.states[self.current] = value

    def install(self, scope: int, snap: state_store.Snapshot | None) -> None:
        """Start ``scope`` from ``snap`` (from scratch when ``None``: the store's kept entries of the scope
        are dropped, the records that wrote them are applied again)."""
        if snap is None and self.store is not None:
            self.store.forget_kept(self.stored_as, scope)
        fresh = self.fresh(scope)
        if snap is not None:
            snap.state.applied = fresh.applied
            fresh = snap.state
            if self.store is not None:
                self.kept[scope] = state_store.bind_kept(fresh, self.store, self.stored_as, scope)
            self.next_offset.update(snap.offsets)
        self.states[scope] = fresh
        self.seqs[scope] = dict(snap.seqs) if snap is not None else {}
        self.positions[scope] = dict(snap.outputs) if snap is not None else {}
        self.since[scope] = 0

    def forget(self) -> None:
        """Drop every scope (a new assignment restores them)."""
        self.states.clear()
        self.kept.clear()
        self.positions.clear()
        self.until.clear()
        self.signed_heads.clear()  # a scope assigned again resumes its attestation chain from the log
        self.seqs.clear()
        self.since.clear()
        self.next_offset.clear()

    def held(self, scope: int) -> dict[tuple[str, int], int] | None:
        """The output positions a snapshot of ``scope`` taken now must name: the restored ones (its
        latest snapshot's) while the scope has not yet applied every record before the ends of
        :attr:`until`, else ``None`` (the worker's current ones).

        Outputs already on the log when a restore read them back may be caused by records after the
        restored offsets (a worker killed after sending a batch's outputs, before committing it): they
        are in the index and not sent again, but a snapshot whose offsets are still before their causes
        must not name positions past them, or a restore from it would not read them back and would
        send them a second time."""
        until = self.until.get(scope)
        if until is None:
            return None
        offsets = self.offsets_of(scope)
        if all(offsets.get(tp, 0) >= end for tp, end in until.items()):
            del self.until[scope]  # passed for good: the positions of the worker from now on
            return None
        return dict(self.positions.get(scope, {}))

    def offsets_of(self, scope: int) -> dict[tuple[str, int], int]:
        """The next input offset of each partition ``scope`` covers."""
        if scope == state_store.WHOLE:
            return dict(self.next_offset)
        return {tp: o for tp, o in self.next_offset.items() if tp[1] == scope}

    def apply(self, topic: str, partition: int, offset: int, value: bytes | None) -> list[Output]:
        """Decode and step one record of a logical topic (one of the worker's own outputs is the envelope
        it sealed, not decoded again: :class:`OwnOutputs`); undecodable bytes give one dead letter. Each
        output comes with its record's bytes (:func:`~services.core.processor.step_encoded`: made from
        the JSON its hash was taken over, not serialised a second time). A record of a chained stream
        at or below the last ``seq`` applied from it is a duplicate: no outputs.

        ``record`` then holds the envelope (None when undecodable, ``reason`` saying why): what the
        record's log lines name (:meth:`facts`)."""
        self.current = scope = self.scope(partition)
        state = self.state_of(scope)
        topic = self.reads_as.get(topic, topic)
        try:
            own = self.own.take(value, topic) if self.own is not None else None
            record = own if own is not None else intake.decode(value, topic)
        except intake.DecodeError as exc:
            self.record, self.reason = None, exc.reason.value
            position = f"dead/{self.stage}/{topic}/{partition}/{offset}"
            dead = intake.dead_letter_of(self.processor, exc, topic, position)
            return [(dead, intake.encode(dead))]
        self.record, self.reason = record, None
        self.since[scope] = self.since.get(scope, 0) + 1
        sealed = self.own.sealed if self.own is not None else None
        seq = record.seq
        if seq is None or not self.by_seq:
            return step_encoded(self.processor, state, record, value, sealed)
        seqs = self.seqs.setdefault(scope, {})
        stream = (topic, record.key)
        last = seqs.get(stream)
        if last is not None and seq <= last:
            return []
        applied = state.records
        out = step_encoded(self.processor, state, record, value, sealed)
        if state.records > applied:
            seqs[stream] = seq
        return out

    @property
    def type(self) -> str | None:
        """The type of the record last applied (None: it did not decode)."""
        return None if self.record is None else self.record.type

    def facts(self) -> dict[str, Any]:
        """What the record last applied concerns: type, event id, key, table, coup (or the reason it
        did not decode); only the fields it has."""
        record = self.record
        if record is None:
            return {"type": None, "reason": self.reason}
        p = record.payload
        found = {"type": record.type, "event_id": record.event_id, "key": record.key,
                 "table_id": p.get("table_id"), "coup_id": p.get("coup_id")}  # fmt: skip
        return {k: v for k, v in found.items() if v is not None}


class _Hop:
    """What a :class:`Repartition` pipe is to the shell's snapshots: a stage with no state of its own
    (its snapshots carry only its input offsets and output positions)."""

    validates_inputs = False
    guard = None
    writer = ""

    def __init__(self, target: Processor[Any], logical: str) -> None:
        self.name = target.name
        self.inputs = (logical,)
        self.outputs = (repartition_topic(target.name, logical),)
        self.stage = f"{target.name}-repartition"

    def stage_name(self) -> str:
        return self.stage

    def initial(self) -> int:
        return 0


class Repartition(Pipe):
    """The stateless hop in front of a co-partitioned pipe (docs/adr/0011-partitioned-audit-monitor.md,
    Kafka Streams' repartition topic): each record of one input, its bytes unchanged (signature and
    hash intact: the pipe behind authenticates them as before), written to the input's repartition
    topic keyed by ``route(record)`` of the processor behind, so that it lands in the partition number
    of the keys its outputs go to. A record that does not decode is dead-lettered here, as the pipe
    behind would have (same position, same id)."""

    def __init__(self, target: Pipe, logical: str, store: state_store.LocalStore | None = None) -> None:
        super().__init__(cast(Processor[Any], _Hop(target.processor, logical)), target.settings, None, store)
        self.target = target
        self.to = repartition_topic(target.processor.name, logical)

    def apply(self, topic: str, partition: int, offset: int, value: bytes | None) -> list[Output]:
        """The record re-keyed for the repartition topic, or its dead letter."""
        self.current = partition
        self.state_of(partition)
        self.since[partition] = self.since.get(partition, 0) + 1
        try:
            record = intake.decode(value, topic)
        except intake.DecodeError as exc:
            self.record, self.reason = None, exc.reason.value
            if not getattr(self.target.processor, "hop_dead_letters", True):
                return []  # another stage reads the topic itself and dead-letters it (audit's)
            position = f"dead/{self.target.stage}/{topic}/{partition}/{offset}"
            dead = intake.dead_letter_of(self.target.processor, exc, topic, position)
            return [(dead, intake.encode(dead))]
        self.record, self.reason = record, None
        key = self.target.processor.route(record)  # type: ignore[attr-defined]
        if key is None:  # nothing the stage behind needs (audit's table stage: a record joining no coup)
            return []
        assert value is not None
        return [(record.model_copy(update={"topic": self.to, "key": key}), value)]


NOTABLE = frozenset({"DeadLetter", *metrics.REFUSAL_TYPES})
"""Output types that get a WARNING line of their own, naming the input record that caused them."""


@dataclass(slots=True)
class BatchSummary:
    """What one pipe did with one partition's records of a batch: the facts of its ``batch`` line."""

    processor: str
    topic: str
    partition: int
    first: int = -1
    last: int = -1
    records: int = 0
    outputs: int = 0
    sent: int = 0
    dead_letters: int = 0
    refusals: int = 0
    types: dict[str | None, int] = field(default_factory=dict)

    def line(self) -> dict[str, Any]:
        """The ``batch`` log line's fields (undecodable records counted as ``undecodable``)."""
        types = {metrics.UNDECODABLE if t is None else t: n for t, n in self.types.items()}
        return {"processor": self.processor, "topic": self.topic, "partition": self.partition,
                "first": self.first, "last": self.last, "records": self.records, "outputs": self.outputs,
                "sent": self.sent, "dead_letters": self.dead_letters, "refusals": self.refusals,
                "types": types}  # fmt: skip


Records = Sequence[tuple[str, int, int, bytes | None]]
"""Delivered records: ``(physical topic, partition, offset, value)``."""

Shipped = list[tuple[list[str], "asyncio.Future[Any]"]]
"""Record batches handed to the producer (:meth:`Outbox.flush`): the event ids in each, its ack."""


@dataclass(frozen=True, slots=True)
class Due:
    """A snapshot taken when a batch was handled (the state's data, copied), written once the batch's
    commit lands (:meth:`Shell.write_snapshots`), with the ids applied and the kept entries written (by
    map name) since the scope's last one."""

    pipe: Pipe
    scope: int
    data: dict[str, Any]
    ids: set[str]
    kept: dict[str, dict[str, str]] = field(default_factory=dict)
    outputs: dict[tuple[str, int], int] | None = None
    """The output positions the snapshot must name (:meth:`Pipe.held`); ``None``: the worker's when it
    is written (:attr:`Shell.out_positions`)."""


@dataclass(frozen=True, slots=True)
class Shipment:
    """A handled batch whose outputs are on their way: their acknowledgements, the offsets to commit
    once they are all in, and the snapshots to write after the commit."""

    acks: Shipped
    offsets: dict[TopicPartition, int]
    snapshots: list[Due] = field(default_factory=list)


class Shell:
    """The I/O around the pipes of one worker: the output index, the catch-up reader, the sends."""

    def __init__(
        self,
        app: faust.App,
        settings: Settings,
        processors: Sequence[Processor[Any]],
        service: str = "",
        store: state_store.LocalStore | None = None,
    ) -> None:
        self.app = app
        self.settings = settings
        self.store = store
        """The local state store; ``None``: state in memory only, nothing restored (unit tests)."""
        self.own = OwnOutputs(t for p in processors for t in p.inputs)
        self.pipes = [Pipe(p, settings, self.own, store) for p in processors]
        self.pipes += [
            Repartition(pipe, logical, store) for pipe in self.pipes for logical in pipe.reads_as.values()
        ]
        stages = Counter(pipe.stage for pipe in self.pipes)
        for pipe in self.pipes:  # two stages of one name (the monitor's three) would share snapshot keys
            if stages[pipe.stage] > 1 and pipe.processor.writer:
                pipe.rename(pipe.processor.writer)
            elif stages[pipe.stage] > 1 and isinstance(pipe, Repartition):  # two hops (audit's)
                pipe.rename(f"{pipe.stage}.{pipe.processor.inputs[0].removeprefix('casino.')}")
        self.outputs = sorted({t for p in self.pipes for t in _outputs_of(p.processor)})
        self.out_positions: dict[tuple[str, int], int] = {}
        """Per output partition, the next offset after the outputs of the batches landed so far (and
        after what the last restore read): the snapshots' output positions."""
        self.owned: set[TopicPartition] | None = None
        """The input partitions of the last assignment (``None`` before any): a record of another is
        not handled (fetched before a rebalance took its partition)."""
        self.restored: set[TopicPartition] = set()
        """The input partitions restored since the last assignment (readiness)."""
        guards = [p.guard for p in processors if p.guard is not None]
        own = {g.own.key_id: g.own for g in guards} if guards else None
        self.passing = frozenset(settings.topic(p.to) for p in self.pipes if isinstance(p, Repartition))
        """The repartition topics written (records of other writers, passed on unchanged)."""
        self.index = OutputIndex(
            frozenset(p.name for p in processors), tuple(self.outputs), own, self.passing
        )
        self._reader: AIOKafkaConsumer | None = None
        self.consumer: AIOKafkaConsumer | None = None  # the group's consumer (:meth:`run`)
        self.producer: AIOKafkaProducer | None = None
        self.snapshot_producer: AIOKafkaProducer | None = None
        """With ``CASINO_EXACTLY_ONCE``: the snapshots' own plain producer (a changelog never holds
        transaction markers, whose offsets the restore would take for a snapshot's)."""
        self._outbox: Outbox | None = None
        self.committed: dict[TopicPartition, int] = {}  # the offsets this worker has committed
        self.routes: dict[str, list[Pipe]] = {}
        for pipe in self.pipes:
            for logical in pipe.inputs:
                self.routes.setdefault(settings.topic(logical), []).append(pipe)
        self._one_at_a_time = asyncio.Lock()
        self._landing: asyncio.Future[None] | None = None  # the last batch shipped, until committed
        self.handled = 0
        self.assigned = False  # the group has assigned partitions (readiness)
        self.service = service or processors[0].name
        self.metrics = metrics.WorkerMetrics(self.service)
        self.tally = metrics.Tally()  # what the current batch did, flushed into the metrics once per batch
        self._log: Any = None
        self._debug = False  # whether the per-record DEBUG line is on (looked up once per batch)
        self.lease: Lease | None = None
        """Held by a service whose state spans its input partitions (:attr:`single`) before it joins
        its group (:mod:`services.runtime.kafka.lease`)."""

    @property
    def standby(self) -> bool:
        """Waiting while another member holds the lease: ready, holding nothing (as a spare member of a
        group with fewer partitions than members)."""
        return self.lease is not None and self.lease.standby

    @property
    def single(self) -> bool:
        """Whether the service runs as one member at a time: a pipe keeps one state over every input
        partition (audit), so a second member holding some of them would write checkpoints
        and verdicts over half the log; or a processor says it is ``single`` (audit's tree stage, the one
        writer of audit's records). Its other replicas wait for the lease (docs/adr/0007)."""
        return any(pipe.whole or getattr(pipe.processor, "single", False) for pipe in self.pipes)

    async def reader(self) -> AIOKafkaConsumer:
        """The plain consumer (no group) used for catch-up and the output index."""
        if self._reader is None:
            self._reader = new_consumer(self.settings)
            await self._reader.start()
        return self._reader

    async def close(self) -> None:
        """Stop the plain consumer."""
        if self._reader is not None:
            await self._reader.stop()
            self._reader = None

    @property
    def outbox(self) -> Outbox:
        """The batches the outputs go out in (over :attr:`producer`, which starts with :meth:`run`)."""
        if self._outbox is None or self._outbox.producer is not self.producer:
            assert self.producer is not None, "the worker's producer starts with run()"
            self._outbox = Outbox(self.producer)
        return self._outbox

    async def send(self, outputs: Sequence[Output]) -> list[Envelope]:
        """Add the outputs (envelope and record bytes) not yet in the output index to the outbox, in
        order; returns the envelopes added. They go out when a batch fills or at the next :meth:`confirm`."""
        added = []
        outbox = self.outbox
        for env, value in outputs:
            physical = self.settings.topic(env.topic)
            known = passed_id(value) if physical in self.passing else env.event_id
            if known in self.index.ids:  # written before a crash or a rebalance: never twice
                continue
            await outbox.add(physical, intake.encode_key(env), value, env.event_id)
            self.own.keep(env, value)
            added.append(env)
            self.tally.output(env)
        return added

    async def confirm(self) -> int:
        """Hand every output added to the producer and wait for every acknowledgement. Returns how many
        were confirmed."""
        return await self.confirmed(await self.outbox.flush())

    async def confirmed(self, shipped: Shipped, *, note: bool = False) -> int:
        """Wait for the acknowledgement of every batch ``shipped`` (:meth:`Outbox.flush`); returns how
        many records were confirmed. ``note``: a landing batch's, whose positions the next snapshots
        name (:attr:`out_positions`; never a catch-up's, whose records follow a snapshot being made)."""
        confirmed = 0
        for event_ids, acked in shipped:
            meta = await acked
            confirmed += len(event_ids)
            offset = getattr(meta, "offset", None)
            if note and isinstance(offset, int) and offset >= 0:
                where = (self.settings.logical(meta.topic), meta.partition)
                self.out_positions[where] = max(self.out_positions.get(where, 0), offset + len(event_ids))
        return confirmed

    async def on_batch(self, pipe: Pipe, records: Records) -> None:
        """Handle delivered records of any partitions with ``pipe``: :meth:`on_batches`, one part per
        topic partition (records in the order given)."""
        parts: dict[tuple[str, int], list[tuple[str, int, int, bytes | None]]] = {}
        for record in records:
            parts.setdefault((record[0], record[1]), []).append(record)
        await self.on_batches([(pipe, part) for part in parts.values()])

    async def on_batches(self, parts: Sequence[tuple[Pipe, Records]]) -> None:
        """:meth:`process` the parts, then wait for every acknowledgement of their outputs."""
        await self.confirmed(await self.process(parts))

    async def process(self, parts: Sequence[tuple[Pipe, Records]]) -> Shipped:
        """Handle each part's delivered records in order (a part: records of one topic partition and the
        pipe that reads them), hand their outputs to the producer, and return the acknowledgements to
        await (:meth:`confirmed`): only once they are in does :meth:`consume` commit the parts' offsets,
        so an offset is never committed ahead of its outputs. Waiting once per batch instead of once
        per record is what lets a worker keep up with a busy table. Then one ``batch`` log line per part
        (``ms``: the handling, without the acknowledgements).

        The pipes share the reader, the output index and the sends, so a worker handles one batch at a
        time (when each pipe was a faust agent, two first records at once raced to start the reader,
        and one of them used it unstarted: a crash with no broker known).
        """
        async with self._one_at_a_time:
            started = time.perf_counter()
            self._log = log = _log()  # once per batch (configure() may still run after import)
            self._debug = log.is_enabled_for(logging.DEBUG)
            summaries = []
            for pipe, records in parts:
                if not records:
                    continue
                physical, partition = records[0][0], records[0][1]
                summary = BatchSummary(pipe.processor.name, self.settings.logical(physical), partition)
                for _, _, offset, value in records:
                    await self._on_record(pipe, summary, physical, offset, value)
                if summary.records:
                    summaries.append(summary)
            await attesting.attest_pipes(self, parts)
            shipped = await self.outbox.flush()
            seconds = time.perf_counter() - started
            for summary in summaries:
                for type_, n in summary.types.items():
                    self.tally.input(summary.processor, summary.topic, type_, n)
                self.metrics.flush(self.tally, summary.processor, summary.records, seconds)
            ms = round(seconds * 1000, 3)
            for summary in summaries:
                log.info("batch", **summary.line(), ms=ms)
            return shipped

    async def run(self) -> None:
        """The worker's loop (:meth:`consume`), ending the process on any error it does not handle (a
        Kafka client that cannot start, a fetch that fails): an app task that died quietly would leave
        a live process that consumes nothing."""
        try:
            await self.consume()
        except ExactlyOnceRefused as exc:
            _log().critical("exactly_once_refused", service=self.service, error=str(exc))
            sys.stderr.flush()
            os._exit(EXIT_CONFIG)
        except LeaseLost as exc:  # another member took over: stop writing at once (the log line is said)
            _log().critical("worker_fenced", service=self.service, error=str(exc))
            sys.stderr.flush()
            os._exit(EXIT_LEASE)
        except Exception as exc:
            _log().critical("worker_failed", error=repr(exc), exc_info=True)
            sys.stderr.flush()
            os._exit(EXIT_CRASH)

    def fetch_wait_ms(self) -> int:
        """The group consumer's fetch wait: an observer's (:data:`~services.core.topics.OBSERVERS`)
        where ``CASINO_OBSERVER_FETCH_MAX_WAIT_MS`` sets one, else ``CASINO_FETCH_MAX_WAIT_MS``, else
        :data:`FETCH_WAIT_MS`."""
        settings = self.settings
        if self.service in OBSERVERS and settings.observer_fetch_max_wait_ms is not None:
            return settings.observer_fetch_max_wait_ms
        return settings.fetch_max_wait_ms or FETCH_WAIT_MS

    async def consume(self) -> None:
        """:meth:`consume_group`, with the standby rounds beside it (``CASINO_STANDBY_STORES``:
        :mod:`services.runtime.kafka.standby`), from the start: a member waiting for a lease keeps
        warm the state it would take over."""
        if not self.settings.standby_stores or self.store is None:
            await self.consume_group()
            return
        rounds = asyncio.create_task(Standby(self).run())
        try:
            await self.consume_group()
        finally:
            rounds.cancel()
            with contextlib.suppress(BaseException):
                await rounds

    async def consume_group(self) -> None:
        """The service's consumer group, a batch at a time (``getmany``), each batch's outputs
        acknowledged before its offsets are committed; a :attr:`single` service's member first takes
        the lease and holds it between batches."""
        if self.single:
            self.lease = Lease(self.settings, self.service)
            try:
                await self.lease.acquire()
            except BaseException:  # a stop while waiting: leave the lease group at once
                await self.lease.release()
                raise
        self._clients()
        assert self.consumer is not None and self.producer is not None
        await self._start_producers()
        await self.ensure_copartitioned()
        self.consumer.subscribe(sorted(self.routes), listener=_Rebalance(self))
        await self.consumer.start()
        handle = self._transact if self.settings.exactly_once else self._pipelined
        try:
            await consume_loop.consume(self._fetch, handle, idle=self._idle, lease=self.lease)
        finally:
            try:
                if self._landing is not None:  # a stop: let the last batch land (its commit may fail)
                    with contextlib.suppress(Exception):
                        await self._landing
                with contextlib.suppress(Exception):  # and snapshot: the next start replays nothing
                    await self._snapshot_idle(stopping=True)
            finally:  # whatever ended those (a cancelled landing too): leave the group, stop the clients
                await self.consumer.stop()
                await self.producer.stop()
                if self.snapshot_producer is not None:
                    await self.snapshot_producer.stop()
                await self.close()
                if self.lease is not None:  # last: a standby takes over after this member's last commit
                    await self.lease.release()

    def _clients(self) -> None:
        """The group's consumer and the producer (transactional with ``CASINO_EXACTLY_ONCE``: then the
        snapshots have a plain producer of their own, outside the batches' transactions)."""
        settings, auth = self.settings, self.settings.aiokafka_auth()
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=settings.bootstrap_list,
            group_id=self.app.conf.id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",  # every assigned partition is sought by the restore anyway
            fetch_max_wait_ms=self.fetch_wait_ms(),
            max_poll_records=settings.batch_max,
            session_timeout_ms=int(settings.session_timeout_s * 1000),
            heartbeat_interval_ms=int(settings.heartbeat_interval_s * 1000),
            rebalance_timeout_ms=int(settings.rebalance_timeout_s * 1000),
            isolation_level=settings.isolation_level,
            **self.assignment(),
            **auth,
        )
        self.producer = AIOKafkaProducer(
            bootstrap_servers=settings.bootstrap_list, acks="all", max_batch_size=BATCH_BYTES,
            **self.transactional(), **auth,
        )  # fmt: skip
        if settings.exactly_once:
            self.snapshot_producer = AIOKafkaProducer(
                bootstrap_servers=settings.bootstrap_list, acks="all", **auth
            )

    def assignment(self) -> dict[str, Any]:
        """The group's assignor where a pipe is co-partitioned: the range assignor gives partition *p* of
        every topic of equal partition count to one member (Kafka Streams' co-partitioning), so one
        member holds all of a partition number's inputs; else aiokafka's default."""
        if any(pipe.copartitioned for pipe in self.pipes):
            return {"partition_assignment_strategy": (RangePartitionAssignor,)}
        return {}

    def transactional(self) -> dict[str, Any]:
        """The producer's transactional settings with ``CASINO_EXACTLY_ONCE`` (else none).

        The id is stable per member: the service's group for a service run one member at a time (the
        next lease holder's ``InitProducerId`` fences a zombie holder's producer), else the group and a
        digest of the host and the data directory (a member started again on its own state aborts the
        transaction its last run left open at once, instead of read_committed readers waiting for the
        transaction timeout; two replicas on one host have two data directories)."""
        if not self.settings.exactly_once:
            return {}
        group = self.app.conf.id
        if self.single:
            return {"transactional_id": group, "enable_idempotence": True}
        member = f"{socket.gethostname()}|{Path(self.settings.data_dir).resolve()}"
        digest = hashlib.sha256(member.encode()).hexdigest()[:16]
        return {"transactional_id": f"{group}.{digest}", "enable_idempotence": True}

    async def _start_producers(self) -> None:
        """Start the producer(s); a broker that refuses transactions asked for: :class:`ExactlyOnceRefused`
        (the worker stops: it never falls back to the idempotent path unasked)."""
        assert self.producer is not None
        try:
            await self.producer.start()
        except KafkaError as exc:
            if not self.settings.exactly_once:
                raise
            raise ExactlyOnceRefused(
                "CASINO_EXACTLY_ONCE=true but the broker refused a transactional producer "
                f"(InitProducerId: {exc!r}); set it false on a broker without transactions"
            ) from exc
        if self.snapshot_producer is not None:
            await self.snapshot_producer.start()

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        """A transaction around what is sent inside, with ``CASINO_EXACTLY_ONCE`` (else nothing)."""
        if not self.settings.exactly_once or self.producer is None:
            yield
            return
        async with self.producer.transaction():
            yield

    async def _transact(self, batch: Mapping[TopicPartition, Sequence[Any]]) -> None:
        """Handle one ``getmany`` batch in one transaction (``CASINO_EXACTLY_ONCE``): its outputs and its
        input offsets (``send_offsets_to_transaction``) commit together or not at all, then the
        snapshots due are written. One batch at a time (no pipelining: one transaction per producer)."""
        assert self.producer is not None
        await self.producer.begin_transaction()
        shipment = await self._ship(batch)
        try:
            await self.confirmed(shipment.acks, note=True)
            if shipment.offsets:
                await self.producer.send_offsets_to_transaction(shipment.offsets, self.app.conf.id)
            await self.producer.commit_transaction()
        except Exception as exc:  # the open transaction is aborted by the broker (this id's next start
            _log().critical("record_failed", offsets={str(tp): o for tp, o in shipment.offsets.items()},
                            error=repr(exc), exc_info=True)  # fmt: skip
            sys.stderr.flush()  # or the transaction timeout): its outputs never count as written
            os._exit(EXIT_CRASH)
        self.committed.update(shipment.offsets)
        if shipment.snapshots:
            await self.write_snapshots(shipment.snapshots)

    async def _fetch(self) -> dict[TopicPartition, list[Any]]:
        """The next batch (:meth:`_batch`), its partitions checked against the log (:meth:`lost`: an
        offset out of range, a high watermark below the state)."""
        try:
            batch = await self._batch()
        except OffsetOutOfRangeError as exc:
            self.lost(state_store.StateLost(f"an offset the worker reads is out of range: {exc}"))
        self.check_highwaters()
        return batch

    async def _idle(self) -> None:
        """Input drained, nothing in flight: each writer seals its signed heads, then the snapshots due."""
        if self._landing is None or self._landing.done():
            async with self._one_at_a_time, self.transaction():
                await attesting.seal_idle(self)
            await self._snapshot_idle()

    async def _batch(self) -> dict[TopicPartition, list[Any]]:
        """The records of the next fetch, at most ``batch_max``; when it brings fewer while the last
        batch is still landing (:meth:`_pipelined`), one more fetch waiting at most ``batch_wait_ms``
        tops the batch up (as faust's ``take_events`` did).

        Only then: the outputs of a batch handled at once would queue behind the last batch's, which
        the producer is still sending (one request at a time per broker), so waiting for more records
        costs them nothing; with nothing in flight, as on an interactive table where records come one
        hop at a time, the wait would only delay every hop (by ``batch_wait_ms``: 1 ms of the 10 of a
        hop in the demo and test settings)."""
        assert self.consumer is not None
        most = self.settings.batch_max
        batch = {
            tp: list(msgs)
            for tp, msgs in (await self.consumer.getmany(timeout_ms=1000, max_records=most)).items()
        }
        count = sum(map(len, batch.values()))
        landing = self._landing
        if batch and count < most and landing is not None and not landing.done():
            more = await self.consumer.getmany(
                timeout_ms=self.settings.batch_wait_ms, max_records=most - count
            )
            for tp, msgs in more.items():
                batch.setdefault(tp, []).extend(msgs)
        return batch

    def check_highwaters(self) -> None:
        """:class:`StateLost` (the worker exits) when an owned partition's high watermark, as the last
        fetch saw it, is below the offset its state has applied to: the broker lost records the state
        holds (a broker that came back empty resets the fetch position to the log's start, where the
        records below the state's offset would otherwise be skipped without a word)."""
        consumer = self.consumer
        if consumer is None or self.store is None:
            return
        for tp in self.restored:
            highwater = consumer.highwater(tp)
            applied = self._next_of(tp)
            if highwater is not None and applied is not None and highwater < applied:
                where = f"{self.settings.logical(tp.topic)}[{tp.partition}]"
                self.lost(state_store.StateLost(
                    f"the log of {where} ends at {highwater}, below the offset {applied} the state applied"
                ))  # fmt: skip

    async def _snapshot_idle(self, *, stopping: bool = False) -> None:
        """With nothing fetched and nothing in flight, snapshot every scope with records applied since
        its last snapshot once the interval has passed (``stopping``: at once); its state is then the
        committed one."""
        if self.store is None:
            return
        async with self._one_at_a_time:
            if any(self.committed.get(tp) != self._next_of(tp) for tp in self.owned or ()):
                return  # a commit refused by a rebalance: the state is ahead of the group
            due = self.due_snapshots(idle=stopping)
            due += self.quiet_behind(stopping=stopping, besides={(d.pipe.stage, d.scope) for d in due})
            if due:
                await self.write_snapshots(due)

    def quiet_behind(self, *, stopping: bool, besides: set[tuple[str, int]]) -> list[Due]:
        """Snapshots of the scopes with nothing applied since their last one whose output positions are
        behind the worker's (other scopes wrote since), at most once an interval (``stopping``: at once).
        Caught up (the caller's condition), such a scope has no record after its offsets, so no output of
        one lies before the current positions: without this, a quiet partition's old snapshot would make
        every restart read back every output written since it (the least position of all scopes)."""
        now, interval = time.monotonic(), self.settings.state_snapshot_interval_s
        due = []
        for pipe in self.pipes:
            for scope in list(pipe.states):
                if (
                    pipe.since.get(scope)
                    or (pipe.stage, scope) in besides
                    or (pipe.whole and not pipe.complete)
                    or pipe.held(scope) is not None
                ):
                    continue
                behind = pipe.positions.get(scope) != self.out_positions and bool(self.out_positions)
                if behind and (stopping or now - pipe.snapped_at.get(scope, -interval) >= interval):
                    taken = self.take_snapshot(pipe, scope, now)
                    if taken is not None:
                        due.append(taken)
        return due

    def _next_of(self, tp: TopicPartition) -> int | None:
        logical = self.settings.logical(tp.topic)
        found = [p.next_offset.get((logical, tp.partition)) for p in self.routes.get(tp.topic, [])]
        return min((o for o in found if o is not None), default=None)

    async def _handle(self, batch: Mapping[TopicPartition, Sequence[Any]]) -> None:
        """Handle one ``getmany`` batch and commit it once its outputs are acknowledged (:meth:`_ship`,
        :meth:`_land`); fail fast (see the module docstring)."""
        await self._land(await self._ship(batch))

    async def _pipelined(self, batch: Mapping[TopicPartition, Sequence[Any]]) -> None:
        """Handle one ``getmany`` batch while the batch before it lands: ship it (:meth:`_ship`), let it
        land (:meth:`_land`: acknowledgements, then the commit) after the one before, and return once
        that one has landed. So a worker applies the next batch while the broker acknowledges the last
        one's outputs and takes its commit, instead of waiting for both; at most two batches are in
        flight, and their commits go in order, each after its own outputs' acknowledgements."""
        shipment = await self._ship(batch)
        before = self._landing
        self._landing = asyncio.ensure_future(self._land(shipment, after=before))
        if before is not None:
            await before

    async def _ship(self, batch: Mapping[TopicPartition, Sequence[Any]]) -> Shipment:
        """Handle one ``getmany`` batch and hand its outputs to the producer (:meth:`process`); what is
        left to do before its offsets can be committed. Any error ends the process."""
        owned = self.owned
        parts = [
            (pipe, [(m.topic, m.partition, m.offset, m.value) for m in msgs])
            for tp, msgs in batch.items()
            if owned is None or tp in owned
            for pipe in self.routes.get(tp.topic, [])
        ]
        try:
            shipped = await self.process(parts)
            due = self.due_snapshots()
        except Exception as exc:
            first = next((records[0] for _, records in parts if records), ("", 0, 0, None))
            last = next((records[-1] for _, records in reversed(parts) if records), first)
            _log().critical(
                "record_failed", topic=first[0], first=first[1:3], last=last[1:3],
                records=sum(len(records) for _, records in parts), error=repr(exc), exc_info=True,
            )  # fmt: skip
            sys.stderr.flush()
            os._exit(EXIT_CRASH)
        offsets = {
            tp: msgs[-1].offset + 1 for tp, msgs in batch.items() if msgs and (owned is None or tp in owned)
        }
        return Shipment(shipped, offsets, due)

    async def _land(self, shipment: Shipment, after: asyncio.Future[None] | None = None) -> None:
        """Once the batch before (``after``) has landed, wait for the acknowledgements of the batch's
        outputs, then commit its offsets. A failed send ends the process (its records were applied in
        memory but their outputs may not be on the log); a commit refused by a rebalance does not."""
        assert self.consumer is not None
        try:
            if after is not None:
                await after
            await self.confirmed(shipment.acks, note=True)
        except Exception as exc:
            _log().critical("record_failed", offsets={str(tp): o for tp, o in shipment.offsets.items()},
                            error=repr(exc), exc_info=True)  # fmt: skip
            sys.stderr.flush()
            os._exit(EXIT_CRASH)
        try:
            await self.consumer.commit(shipment.offsets)
        except CommitFailedError as exc:  # a rebalance took the partitions: their next owner re-reads
            _log().warning("commit_failed", error=repr(exc))  # them, and finds the outputs in its index
            return
        self.committed.update(shipment.offsets)
        if shipment.snapshots:
            await self.write_snapshots(shipment.snapshots)

    async def _on_record(
        self, pipe: Pipe, summary: BatchSummary, physical: str, offset: int, value: bytes | None
    ) -> None:
        """Catch up if behind, apply, add the outputs to the outbox."""
        logical, partition = summary.topic, summary.partition
        tp = (logical, partition)
        expected = pipe.next_offset.get(tp, 0)
        if offset < expected:
            return  # applied and sent by this worker already (delivered again after a restore's seek)
        if summary.first < 0:
            summary.first = offset
        summary.last = offset
        summary.records += 1
        if offset > expected:
            await self.catch_up(pipe, physical, partition, expected, offset)
        outputs = pipe.apply(logical, partition, offset, value)
        attesting.note_dead_letters(pipe, partition, outputs)
        sent = await self.send(outputs)
        pipe.next_offset[tp] = offset + 1
        self.handled += 1
        type_ = pipe.type
        summary.types[type_] = summary.types.get(type_, 0) + 1
        summary.outputs += len(outputs)
        summary.sent += len(sent)
        for env in sent:
            if env.type in NOTABLE and not (isinstance(pipe, Repartition) and env.topic == pipe.to):
                self.log_notable(pipe, summary, offset, env)
        if self._debug:
            facts = {"outputs": len(outputs), "sent": len(sent)}
            self.log_record(pipe, logical, partition, offset, **facts, log=self._log)

    def log_notable(self, pipe: Pipe, summary: BatchSummary, offset: int, env: Envelope) -> None:
        """The WARNING line of one dead letter (``dead_letter``) or business refusal (``refusal``) sent:
        its reason and id, and the input record that caused it (topic, partition, offset, facts)."""
        dead = env.type == "DeadLetter"
        if dead:
            summary.dead_letters += 1
        else:
            summary.refusals += 1
        facts = pipe.facts()
        facts.pop("reason", None)  # an undecodable record's: the dead letter's own says it
        facts["input_type"] = facts.pop("type", None)
        (self._log or _log()).warning(
            "dead_letter" if dead else "refusal", processor=pipe.processor.name, topic=summary.topic,
            partition=summary.partition, offset=offset, **facts, output=env.type,
            output_id=env.event_id, reason=env.payload.get("reason"),
        )  # fmt: skip

    @staticmethod
    def log_record(
        pipe: Pipe, logical: str, partition: int, offset: int, *, outputs: int, sent: int, log: Any = None
    ) -> None:
        """The DEBUG line of one record handled: where it came from, what it concerns, what it caused
        (``log``: a logger looked up once per batch, else looked up here)."""
        (log or _log()).debug("record", processor=pipe.processor.name, topic=logical, partition=partition,
                              offset=offset, **pipe.facts(), outputs=outputs, sent=sent)  # fmt: skip

    async def catch_up(self, pipe: Pipe, physical: str, partition: int, start: int, end: int) -> None:
        """Apply a partition's records [start, end) that another run handled; send only missing outputs."""
        tp = TopicPartition(physical, partition)
        read, _ = await read_range(await self.reader(), {tp: start}, {tp: end}, ahead_ms=RANGE_FETCH_MS)
        logical = self.settings.logical(physical)
        missing = 0
        for m in read.get(tp, []):
            missing += len(await self.send(pipe.apply(logical, partition, m.offset, m.value)))
        await self.confirm()
        pipe.next_offset[(logical, partition)] = end
        self.tally.replayed(pipe.processor.name, logical, len(read.get(tp, [])))
        _log().info(
            "catch_up",
            processor=pipe.processor.name,
            topic=logical,
            partition=partition,
            start=start,
            end=end,
            records=len(read.get(tp, [])),
            missing_outputs_sent=missing,
        )

    # -- state: snapshots and restores (:mod:`services.runtime.kafka.state`) ----------------------------

    def due_snapshots(self, *, idle: bool = False) -> list[Due]:
        """The snapshots due after the batch just handled: a scope with records applied since its last
        one, after ``CASINO_STATE_SNAPSHOT_RECORDS`` of them or ``CASINO_STATE_SNAPSHOT_INTERVAL_S``
        seconds (``idle``: any such scope). Each is the scope's state copied out now, as of the offsets
        the batch leaves; written once the batch's commit lands."""
        if self.store is None:
            return []
        every, interval = self.settings.state_snapshot_records, self.settings.state_snapshot_interval_s
        now = time.monotonic()
        due = []
        for pipe in self.pipes:
            for scope, since in pipe.since.items():
                if not since or scope not in pipe.states or (pipe.whole and not pipe.complete):
                    continue
                if idle or since >= every or now - pipe.snapped_at.get(scope, -interval) >= interval:
                    taken = self.take_snapshot(pipe, scope, now)
                    if taken is not None:
                        due.append(taken)
        return due

    def take_snapshot(self, pipe: Pipe, scope: int, now: float) -> Due | None:
        """``scope``'s state as snapshot data now (``None``, with a warning, for a state the codec
        cannot write: the scope is then restored from an older snapshot and the log)."""
        st = pipe.states[scope]
        snap = state_store.Snapshot(st, pipe.offsets_of(scope), {}, pipe.seqs.get(scope, {}))
        try:
            data = state_store.encode_data(pipe.processor, snap)
        except snapshot_codec.SnapshotError as exc:
            _log().warning("snapshot_skipped", stage=pipe.stage, scope=scope, why=str(exc))
            return None
        ids = st.applied.take() if isinstance(st.applied, state_store.StoredIds) else set()
        kept = {stored.name: stored.take() for stored in pipe.kept.get(scope, ())}
        pipe.since[scope], pipe.snapped_at[scope] = 0, now
        return Due(pipe, scope, data, ids, kept, pipe.held(scope))

    async def write_snapshots(self, snapshots: Sequence[Due]) -> None:
        """Write each snapshot to its stage's changelog (after the kept entries it covers, a record each),
        then, with the changelog offset it got, to the local store (with the ids and kept entries it
        covers). A failed write is not fatal: the scope restores from the last snapshot written and
        replays the records after it."""
        producer = self.snapshot_producer or self.producer
        assert producer is not None and self.store is not None
        current = dict(self.out_positions)
        for due in snapshots:
            stage = due.pipe.stage
            positions = current if due.outputs is None else due.outputs
            blob = state_store.finish(due.data, positions)
            topic = self.settings.topic(state_store.changelog_topic(stage))
            key = state_store.scope_key(stage, due.scope)
            partition = max(due.scope, 0)
            try:
                kept = []
                for name, entries in due.kept.items():
                    for entry, value in entries.items():
                        record_key = state_store.kept_key(stage, due.scope, name, entry)
                        kept.append(
                            await producer.send(topic, value.encode(), key=record_key, partition=partition)
                        )
                for sent in kept:
                    await sent
                meta = await (await producer.send(topic, blob, key=key, partition=partition))
                self.store.save(due.pipe.stored_as, due.scope, meta.offset, blob, due.ids, kept=due.kept)
            except Exception as exc:
                _log().warning("snapshot_failed", stage=stage, scope=due.scope, error=repr(exc))
                continue
            self.snapshot_written(due)
            due.pipe.positions[due.scope] = positions
            self.metrics.snapshot(len(blob))

    @staticmethod
    def snapshot_written(due: Due) -> None:
        """What ``due`` covers is in the store now: its ids and kept entries no longer held in memory."""
        state = due.pipe.states.get(due.scope)
        if state is not None and isinstance(state.applied, state_store.StoredIds):
            state.applied.written(due.ids)
        for stored in due.pipe.kept.get(due.scope, ()):
            if stored.name in due.kept:
                stored.written(due.kept[stored.name])

    async def _partitions(self, logical: Iterable[str]) -> list[TopicPartition]:
        """The partitions of logical topics, from the producer's metadata (a reader's narrows to what it
        was last assigned)."""
        assert self.producer is not None
        out = []
        for name in logical:
            physical = self.settings.topic(name)
            out += [TopicPartition(physical, p) for p in sorted(await self.producer.partitions_for(physical))]
        return out

    async def ensure_copartitioned(self) -> None:
        """Create each co-partitioned pipe's repartition topics with its keyed inputs' partition count
        (docs/adr/0011-partitioned-audit-monitor.md), and the topics a processor makes its own with theirs;
        inputs of unequal counts (a topic grown, or made by hand) stop the worker: one
        ``copartition_mismatch`` line, exit :data:`EXIT_CONFIG` (``partitions_mismatch`` for a topic of
        its own with another count than it needs)."""
        pipes = [pipe for pipe in self.pipes if pipe.copartitioned]
        own = {  # the topics a processor makes its own (audit's staged records: one partition)
            t: n for pipe in self.pipes for t, n in getattr(pipe.processor, "creates", {}).items()
        }
        specs = [TopicSpec(t, n, RETENTION_FOREVER_MS) for t, n in own.items()]
        for pipe in pipes:
            keyed = [t for t in pipe.inputs if t not in pipe.reads_as]
            count = len(await self._partitions(keyed[:1]))
            specs += [TopicSpec(t, count, RETENTION_FOREVER_MS) for t in pipe.reads_as]
        if specs:
            await ensure_topics(self.settings, specs)
        for topic, wanted in own.items():  # made another way (by hand, or auto-created by a producer)
            count = len(await self._partitions([topic]))
            if count != wanted:
                _log().critical("partitions_mismatch", topic=topic, partitions=count, wanted=wanted)
                sys.stderr.flush()
                os._exit(EXIT_CONFIG)
        for pipe in pipes:
            counts = {t: len(await self._partitions([t])) for t in pipe.inputs}
            if len(set(counts.values())) > 1:
                _log().critical("copartition_mismatch", stage=pipe.stage, partitions=counts)
                sys.stderr.flush()
                os._exit(EXIT_CONFIG)

    async def ensure_changelogs(self) -> None:
        """Create each stage's changelog topic (compacted, as many partitions as its most partitioned
        input) where missing."""
        specs = []
        for pipe in self.pipes:
            most = max([len(await self._partitions([t])) for t in pipe.inputs], default=1)
            name = state_store.changelog_topic(pipe.stage)
            specs.append(TopicSpec(name, max(most, 1), RETENTION_FOREVER_MS, compact=True))
        await ensure_topics(self.settings, specs)

    async def latest_snapshot(
        self, tp: TopicPartition, key: bytes, reader: AIOKafkaConsumer | None = None
    ) -> tuple[int, bytes] | None:
        """The last snapshot (records under ``key``) of a changelog partition: (offset, value); ``None``
        when it holds none. Read back from the end: the last record first (a snapshot, but where its
        writer died between the kept entries it writes first and the snapshot itself: ADR 0010), then
        windows of :data:`SNAPSHOT_WINDOW` records, doubling (with ``reader``, the plain reader's by
        default)."""
        reader = reader or await self.reader()
        known(reader, [tp])
        listed = (await reader.end_offsets([tp]))[tp]
        if listed <= 0:
            return None
        first: int | None = None
        upto, window = listed, 1
        while True:
            start = max(upto - window, first or 0)
            read, _ = await read_range(
                reader, {tp: start}, {tp: upto}, to_end=upto == listed, ahead_ms=RANGE_FETCH_MS
            )
            for m in reversed(read.get(tp) or []):
                if m.key == key and m.value is not None:
                    return m.offset, m.value
            if first is None:
                first = (await reader.beginning_offsets([tp]))[tp]
            if start <= first:
                return None
            upto, window = start, max(window * 2, SNAPSHOT_WINDOW)

    async def load(self, pipe: Pipe, scope: int) -> state_store.Snapshot | None:
        """The scope's latest snapshot: the local store's when its changelog offset is the changelog's
        latest, else the changelog's (kept locally for the next start); ``None``: none, or one that does
        not decode (the scope is rebuilt from its partitions' beginnings). :class:`StateLost` when the
        local store is ahead of the changelog (the broker lost it)."""
        if self.store is None:
            return None
        stage = pipe.stage
        topic = self.settings.topic(state_store.changelog_topic(stage))
        local = self.store.snapshot(pipe.stored_as, scope)
        tp = TopicPartition(topic, max(scope, 0))
        latest = await self.latest_snapshot(tp, state_store.scope_key(stage, scope))
        if local is not None and (latest is None or local[0] > latest[0]):
            raise state_store.StateLost(
                f"the local state of {stage} scope {scope} was written at offset {local[0]} of {topic}, "
                f"whose last snapshot is now at {'none' if latest is None else latest[0]}: the changelog "
                "was lost"
            )
        if latest is None:
            return None
        offset, value = latest
        source, blob = (
            ("local", local[1]) if local is not None and local[0] == offset else ("changelog", value)
        )
        try:
            snap = state_store.decode(pipe.processor, blob)
        except snapshot_codec.SnapshotError as exc:
            _log().warning("snapshot_ignored", stage=stage, scope=scope, why=str(exc))
            return None
        kept: int | None = 0
        if source == "changelog":
            since = local[0] + 1 if local is not None else 0
            kept = await self.absorb(await self.reader(), pipe, scope, since=since, offset=offset, blob=blob)
        offsets = {f"{t}[{p}]": o for (t, p), o in snap.offsets.items()}
        _log().info("state_restored", stage=stage, scope=scope, source=source, changelog_offset=offset,
                    offsets=offsets, bytes=len(blob), kept_read=kept)  # fmt: skip
        return snap

    async def absorb(
        self,
        reader: AIOKafkaConsumer,
        pipe: Pipe,
        scope: int,
        *,
        since: int,
        offset: int,
        blob: bytes,
        unless: Callable[[], bool] = lambda: False,
        chunk: int = KEPT_CHUNK,
    ) -> int | None:
        """Take the changelog's snapshot of ``scope`` at ``offset`` (``blob``) into the local store with
        the kept entries before it from ``since`` (what another worker kept since this store's own
        latest snapshot: everything, for an empty store), read and stored ``chunk`` offsets at
        a time (memory bounded by a chunk, not by the transfers ever made), the snapshot last. Returns
        how many kept entries were read; ``None`` when ``unless()`` said stop, as checked right before
        each write (the standby's: the scope became the worker's)."""
        assert self.store is not None
        stage = pipe.stage
        tp = TopicPartition(self.settings.topic(state_store.changelog_topic(stage)), max(scope, 0))
        count = 0
        for first in range(since, offset, chunk):
            read, _ = await read_range(
                reader, {tp: first}, {tp: min(first + chunk, offset)}, ahead_ms=RANGE_FETCH_MS
            )
            entries: dict[str, dict[str, str]] = {}
            for m in read.get(tp, ()):
                named = state_store.kept_entry(stage, scope, m.key)
                if named is not None and m.value is not None:
                    entries.setdefault(named[0], {})[named[1]] = m.value.decode()
                    count += 1
            if unless():
                return None
            self.store.save_kept(pipe.stored_as, scope, entries)
        if unless():
            return None
        self.store.save(pipe.stored_as, scope, offset, blob)
        if count >= KEPT_FLUSH:
            self.store.flush()
        return count

    async def restore(self, assigned: Iterable[TopicPartition]) -> None:
        """Restore the state of the assigned input partitions, check the log still holds what it says,
        read the outputs written since the snapshots (:class:`OutputIndex`) and seek each partition to
        the next offset its state needs (see the module docstring)."""
        started = time.perf_counter()
        mine = sorted(
            (tp for tp in assigned if tp.topic in self.routes), key=lambda tp: (tp.topic, tp.partition)
        )
        self.owned, self.restored = set(mine), set()
        if self.store is not None:
            await self.ensure_changelogs()
        snaps: list[state_store.Snapshot] = []
        scratch: set[TopicPartition] = set()  # partitions of a scope started from nothing
        ends = await self._ends(mine)
        empty: list[tuple[Pipe, int]] = []  # scopes started from nothing over empty partitions
        for pipe in self.pipes:
            pipe.forget()
            tps = [tp for tp in mine if pipe in self.routes[tp.topic]]
            if not tps:
                continue
            everything = await self._partitions(pipe.inputs)
            pipe.complete = set(tps) == set(everything)
            scopes = {pipe.scope(tp.partition) for tp in tps}
            for scope in sorted(scopes):
                snap = await self.load(pipe, scope) if pipe.complete or not pipe.whole else None
                pipe.install(scope, snap)
                if snap is not None:
                    snaps.append(snap)
                else:
                    covered = [tp for tp in tps if pipe.scope(tp.partition) == scope]
                    scratch.update(covered)
                    if all(ends[tp] == 0 for tp in covered):
                        empty.append((pipe, scope))
            for tp in tps:
                pipe.next_offset.setdefault((self.settings.logical(tp.topic), tp.partition), 0)
        starts = await self.check_log(mine)
        rebuild = any(ends[tp] > 0 for tp in scratch)  # outputs may exist for records of any offset
        await self.read_outputs(snaps, rebuild=rebuild)
        # the ends after the outputs were read back: each of those outputs was caused before them
        after = await real_ends(await self.reader(), mine)
        for pipe in self.pipes:
            for scope in pipe.states:
                if not pipe.positions.get(scope):  # from scratch: its outputs are read from the start
                    pipe.positions[scope] = dict.fromkeys(self.out_positions, 0)
                pipe.until[scope] = {
                    (self.settings.logical(tp.topic), tp.partition): after[tp]
                    for tp in mine
                    if pipe in self.routes[tp.topic] and pipe.scope(tp.partition) == scope
                }
        consumer = self.consumer
        for tp in mine:
            if consumer is not None:
                consumer.seek(tp, starts[tp])
        self.restored = set(mine)
        if self.store is not None:  # a first snapshot: a crash before the next one reads outputs from here
            due = [self.take_snapshot(pipe, scope, time.monotonic()) for pipe, scope in empty
                   if not pipe.whole or pipe.complete]  # fmt: skip
            await self.write_snapshots([d for d in due if d is not None])
        ms = round((time.perf_counter() - started) * 1000, 1)
        _log().info("restored", partitions=len(mine), snapshots=len(snaps), rebuild=rebuild,
                    output_ids=len(self.index.ids), ms=ms)  # fmt: skip

    async def _ends(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        if not tps:
            return {}
        reader = await self.reader()
        known(reader, tps)
        return dict(await reader.end_offsets(list(tps)))

    async def check_log(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """The offset each input partition is read from next (the least any pipe needs); raises
        :class:`StateLost` when the log no longer holds it: the state or the group's committed offset
        beyond the partition's end, or the log's start past the state."""
        reader = await self.reader()
        known(reader, tps)
        begins = await reader.beginning_offsets(list(tps)) if tps else {}
        ends = await self._ends(tps)
        starts = {}
        for tp in tps:
            logical = self.settings.logical(tp.topic)
            start = min(p.next_offset[(logical, tp.partition)] for p in self.routes[tp.topic])
            committed = await self.consumer.committed(tp) if self.consumer is not None else None
            end = ends[tp]
            if max(start, committed or 0) > end:
                last = {tp: max(end - 1, 0)}
                end = (await read_range(reader, last, {tp: end}, to_end=True, ahead_ms=RANGE_FETCH_MS))[1][tp]
            where = f"{logical}[{tp.partition}]"
            if start > end:
                raise state_store.StateLost(
                    f"the state of {where} is at offset {start}, the log ends at {end}"
                )
            if committed is not None and committed > end:
                raise state_store.StateLost(
                    f"the group's committed offset of {where} is {committed}, the log ends at {end}"
                )
            if begins[tp] > start:
                raise state_store.StateLost(
                    f"the log of {where} starts at {begins[tp]}, after the state's offset {start}"
                )
            starts[tp] = start
        return starts

    async def read_outputs(self, snaps: Sequence[state_store.Snapshot], *, rebuild: bool) -> None:
        """Read the service's outputs written since the snapshots restored (from each output partition's
        least position they name; from the beginning where a partition is ``rebuild`` from scratch) into
        :class:`OutputIndex`; their ends become the output positions of the next snapshots."""
        tps = await self._partitions(self.outputs)
        reader = await self.reader()
        known(reader, tps)
        ends = await reader.end_offsets(tps) if tps else {}
        least = state_store.min_positions(dict(enumerate(snaps)))
        starts = {}
        for tp in tps:
            where = (self.settings.logical(tp.topic), tp.partition)
            if rebuild or (snaps and where not in least):
                starts[tp] = 0
            else:
                starts[tp] = least.get(where, ends[tp])
        reached = await self.index.read_tail(reader, starts, ends)
        self.out_positions = {(self.settings.logical(tp.topic), tp.partition): o for tp, o in reached.items()}

    def lost(self, exc: state_store.StateLost) -> NoReturn:
        """A log that lost what the state says was applied: one line, a metric, exit :data:`EXIT_LOST`."""
        self.metrics.lost()
        _log().critical("log_lost", service=self.service, error=str(exc))
        sys.stderr.flush()
        os._exit(EXIT_LOST)


def _tp_order(tp: TopicPartition) -> tuple[str, int]:
    return tp.topic, tp.partition


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    """After every assignment: notes the group's committed offsets and restores the assigned partitions'
    state (:meth:`Shell.restore`: it seeks each to the offset its state needs; readiness waits for it)."""

    def __init__(self, shell: Shell) -> None:
        self.shell = shell

    async def on_partitions_revoked(self, revoked: Any) -> None:
        landing = self.shell._landing  # the batches in flight commit before the partitions go, if they
        if landing is not None:  # can: the next owner then re-reads fewer records
            await asyncio.wait({landing}, timeout=self.shell.settings.rebalance_timeout_s / 2)
        if self.shell.owned is not None:  # a batch fetched before is not handled: its partitions' next
            self.shell.owned = set()  # owner may have read back the outputs written so far already
        self.shell.restored = set()

    async def on_partitions_assigned(self, assigned: Any) -> None:
        shell = self.shell
        consumer = shell.consumer
        shell.assigned = True
        shell.restored = set()
        if consumer is not None:
            for tp in assigned:
                done = await consumer.committed(tp) or 0
                shell.committed[tp] = max(shell.committed.get(tp, 0), done)
        try:  # the listener's errors would be logged by aiokafka and the worker carry on: never
            async with shell._one_at_a_time:
                await shell.restore(assigned)
        except state_store.StateLost as exc:
            shell.lost(exc)
        except Exception as exc:
            _log().critical("restore_failed", error=repr(exc), exc_info=True)
            sys.stderr.flush()
            os._exit(EXIT_CRASH)


class _NoKafkaBoot(BootStrategy):
    """Faust without its consumer and producer: the app keeps its web server, signals and lifecycle,
    and :meth:`Shell.run`, an app task, owns the Kafka clients (see the module docstring)."""

    enable_kafka = False


def _as_processors(made: Processor[Any] | Sequence[Processor[Any]]) -> list[Processor[Any]]:
    return [made] if isinstance(made, Processor) else list(made)


def build_app(
    processor: Processor[Any] | Sequence[Processor[Any]],
    settings: Settings,
    *,
    service: str | None = None,
    with_store: bool = True,
) -> faust.App:
    """A faust app (id and consumer group ``{prefix}casino-{service}``) whose one task, :meth:`Shell.run`,
    consumes every processor's inputs; faust's own Kafka clients are not started.

    The shell is ``app.casino_shell`` (tests and tools read its pipes' state).
    """
    processors = _as_processors(processor)
    name = service or processors[0].name
    app = _App(
        f"{settings.topic_prefix}casino-{name}",
        broker=[f"kafka://{s}" for s in settings.bootstrap_list],
        **metrics.web_settings(settings),
        store="memory://",
        datadir=str(settings.data_dir),
        autodiscover=False,
    )
    store = state_store.LocalStore.open(Path(settings.data_dir) / "state", name) if with_store else None
    shell = Shell(app, settings, processors, service=name, store=store)
    app.casino_shell = shell  # type: ignore[attr-defined]
    metrics.serve(app, shell)  # /metrics, /healthz, /readyz where CASINO_WEB_* say

    app.task(shell.run)
    return app


class _App(faust.App):
    """A faust app that starts neither faust's consumer nor its producer (:class:`_NoKafkaBoot`)."""

    BootStrategy = _NoKafkaBoot


def run_worker(name: str, settings: Settings, factory: ServiceFactory) -> NoReturn:
    """Run the service ``name``, the processor(s) ``factory`` builds (the composition root's, from
    :mod:`services.cli.worker`), as a faust worker until a signal stops it (never returns)."""
    try:
        made = factory()
        processors = _as_processors(made)
    except KeyringError as exc:
        print(f"casino-ledger: error: {exc}", file=sys.stderr)  # noqa: T201
        raise SystemExit(2) from None
    try:
        Path(settings.data_dir).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(
            f"cannot create the data directory {settings.data_dir} (CASINO_DATA_DIR): {exc.strerror or exc}"
        ) from None
    configure(level=settings.log_level or None, fmt=settings.log_format)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    created = loop.run_until_complete(ensure_topics(settings, service_topics(processors)))
    _log().info("worker_start", service=name, bootstrap=settings.bootstrap_servers, topics_created=created)
    app = build_app(processors, settings, service=name)
    worker = faust.Worker(
        app,
        loop=loop,
        loglevel=settings.log_level or "WARNING",
        quiet=True,
        redirect_stdouts=False,
        override_logging=False,
    )
    worker.spinner = None  # faust's terminal spinner writes escape sequences to stdout, between log lines
    worker.execute_from_commandline()


def create_topics_main(settings: Settings, spec_path: Path) -> int:
    """Create every topic of ``spec_path`` (``schemas/topics.yaml``) that does not exist yet.

    Idempotent (a topic that exists is left as it is, whatever its partition count). Exit status 0;
    2 with one line on stderr for an unreadable or empty topic list or an unreachable broker; 1 when
    the broker refuses.
    """
    try:
        specs = load_topic_specs(spec_path)
    except (OSError, yaml.YAMLError) as exc:
        print(f"casino-ledger: error: cannot read the topic list {spec_path}: {exc}", file=sys.stderr)  # noqa: T201
        return 2
    if not specs:
        print(f"casino-ledger: error: no topics in {spec_path}", file=sys.stderr)  # noqa: T201
        return 2
    try:
        created = asyncio.run(ensure_topics(settings, specs))
    except (KafkaError, OSError, RuntimeError) as exc:
        where = settings.bootstrap_servers
        print(f"casino-ledger: error: topic creation on {where} failed: {exc}", file=sys.stderr)  # noqa: T201
        return 1
    print(f"created {len(created)} of {len(specs)} topics: {', '.join(created) or '-'}")  # noqa: T201
    return 0


PACKAGED_TOPIC_SPEC = Path(__file__).with_name("topics.yaml")
"""The topic spec the package ships (``schemas/topics.yaml`` as ``make schemas`` writes it)."""


def topic_spec_path(settings: Settings) -> Path:
    """``CASINO_TOPIC_SPEC`` where it names a file, else (its default, ``schemas/topics.yaml``, outside the
    source tree) the copy the package ships."""
    chosen = Path(settings.topic_spec)
    if chosen.exists() or "topic_spec" in settings.model_fields_set:
        return chosen
    return PACKAGED_TOPIC_SPEC
