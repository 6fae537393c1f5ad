"""The simulator's :class:`~services.simulation.simulator.Bus` over a real Kafka broker
(docs/architecture.md).

The very processors of the embedded demo run as separate faust workers, one process per service
(:class:`Workers`: ``python -m services.cli.worker NAME``, configured by ``CASINO_*`` variables);
:class:`KafkaBus` is the outside party's view of them:

* ``publish`` hands the envelopes to the bus's event loop and returns at once: a task there produces
  them, keyed by ``Envelope.key``, once the previous publish's are acknowledged, so a publish still
  reaches the log before anything published after it (across partitions too: on a cluster they may
  have different leaders), and the caller does not wait for acknowledgements at all (waiting for the
  previous publish's was a sizeable share of a session: docs/performance.md#kafka-bus-publish). A
  failed send fails the
  publishes after it unsent, and the bus's next call raises it (every later one too): ``publish``,
  ``drain``, ``read``, and a ``wait`` still waiting. ``drain`` and ``read`` await every publish first.
* ``drain`` returns once every service has processed everything reachable. It polls, in this order,
  (1) the committed offsets of every service's consumer group on each of its input partitions, then
  (2) the *real* end offset of every input partition, and stops when every committed offset equals its
  end on two polls in a row with the same ends. Why that suffices: a worker sends a record's outputs
  and awaits them before it acknowledges (and later commits) the record, so outputs of everything
  committed at (1) are on the log before (2) reads the ends; when nothing read at (2) is left
  uncommitted, nothing can write anything more until the simulator publishes again.
  The ends come from :func:`real_ends`, not from ListOffsets alone: Tansu answers ListOffsets with the
  base offset of the last record batch plus one (see :mod:`services.runtime.kafka.worker`), so the last
  batch is fetched to find its last offset.
* ``read(topic, key)`` reads the topic's partitions from where the bus stopped up to their real ends
  and returns the new records of ``key`` in offset order (per key, the order its single writer wrote),
  without a re-delivered duplicate (same ``event_id``).
* ``wait(topic, key, match)`` returns the first record on ``topic`` under ``key`` that ``match``
  accepts, as soon as it is on the log: a consumer of its own (the *waiter*, 10 ms fetches), from the
  first wait on a topic, reads the topics waited on from their start, all the time (a task on the
  bus's loop, not only while a wait is in progress), keeps what it read by key and hands each record
  to the waits pending on its key. A record that came while the simulator was busy elsewhere (another
  table's turn) is therefore found by its wait without a fetch, and without a trip to the loop. This
  is what the simulator's event-driven session (``event_driven``) waits with: each bet for its own
  outcome, each table for its own next event, instead of ``advance``/``drain`` polling every consumer
  group's committed offsets.

The bus is synchronous, like the simulator; its calls run on its event loop, which runs in a thread
of the bus (started with it, stopped by :meth:`KafkaBus.close`). Only that thread touches the Kafka
clients and the bus's state, but for one read: :meth:`KafkaBus.wait` first looks through the records
read already without the loop (a list only ever appended to).

The fetch waits are short because Tansu holds a fetch for its whole wait; the latency measured per hop
for each choice is in docs/performance.md#kafka-bus-latency-on-tansu.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition  # type: ignore[import-untyped]
from aiokafka.admin import AIOKafkaAdminClient  # type: ignore[import-untyped]
from pydantic import SecretStr

from services.core import topics
from services.core.envelope import Envelope
from services.core.topics import OBSERVERS, SERVICES
from services.runtime import intake
from services.runtime.compose import Composition
from services.runtime.kafka.topic_io import aconsume_all, new_consumer, partitions_of, read_range, rest
from services.runtime.kafka.worker import RETENTION_FOREVER_MS, TopicSpec, ensure_topics, repartition_topic
from services.runtime.settings import Settings, environment
from services.runtime.waits import Stream

T = TypeVar("T")

QUICK_GROUP_TIMEOUTS: dict[str, Any] = {
    "rebalance_timeout_s": 3.0,
    "session_timeout_s": 6.0,
    "heartbeat_interval_s": 1.0,
    "fetch_max_wait_ms": 10,
    "observer_fetch_max_wait_ms": 100,
    "batch_wait_ms": 1,
}
"""Group timeouts for a demo or test on one machine: a first join waits the rebalance timeout. The
short fetch wait is for Tansu, which does not answer a pending fetch when records arrive; the short
batch top-up because every hop of a chain paid it.

The observers (audit, monitor) fetch less often: nothing a table or a wallet waits for comes from them,
and on Tansu every fetch costs the broker CPU whether it brings records or not (audit's and monitor's
consumers read every topic). Figures: docs/performance.md#kafka-bus-latency-on-tansu."""


DRAIN_TIMEOUT_S = 120.0
"""Longest wait for the workers to drain (covers a first group join and a restarted worker)."""

POLL_S = 0.02

WAIT_FETCH_MS = 10
"""The waiter's longest fetch wait: Tansu does not answer a pending fetch when records arrive, so this
bounds how long a record already on the log can go unseen."""


_Pending = tuple[Callable[[Envelope], bool], "asyncio.Future[Envelope]"]
"""A wait in progress (:meth:`KafkaBus.wait`): its match and the future the waiter's task resolves."""


class DrainTimeout(TimeoutError):
    """The workers did not drain in time; the message names the groups and partitions behind."""


class WorkerDied(RuntimeError):
    """A worker process exited while the bus was waiting for it."""


def quick_settings(base: Settings | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """``base`` (default: from the environment) with :data:`QUICK_GROUP_TIMEOUTS` where ``env`` sets none."""
    environ = environment() if env is None else env
    settings = base if base is not None else Settings()
    update = {k: v for k, v in QUICK_GROUP_TIMEOUTS.items() if f"CASINO_{k.upper()}" not in environ}
    return settings.model_copy(update=update)


def worker_env(settings: Settings) -> dict[str, str]:
    """The ``CASINO_*`` variables that make a worker process see ``settings`` (secrets included)."""
    out: dict[str, str] = {}
    for name in Settings.model_fields:
        value = getattr(settings, name)
        if value is None:
            continue
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        elif isinstance(value, bool):
            value = "true" if value else "false"
        out[f"CASINO_{name.upper()}"] = str(value)
    return out


def service_inputs(names: Iterable[str] = SERVICES) -> dict[str, tuple[str, ...]]:
    """Each service's input topics (logical), from the processors the composition root builds (their
    inputs do not depend on the keys), with the repartition topics its workers read (the monitor's
    re-keyed dead letters: a drain waits for them too)."""
    composition = Composition.demo()
    return {
        name: tuple(sorted({
            t for p in composition.service(name)
            for t in (*p.inputs, *(repartition_topic(p.name, r) for r in getattr(p, "repartitioned", ())))
        }))
        for name in names
    }  # fmt: skip


def made_topics(names: Iterable[str] = SERVICES) -> dict[str, int]:
    """The topics the services' processors make their own, with their partition counts (audit's staged
    records: one partition)."""
    composition = Composition.demo()
    return {
        t: n
        for name in names
        for p in composition.service(name)
        for t, n in getattr(p, "creates", {}).items()
    }


def group_id(settings: Settings, service: str) -> str:
    """The consumer group of a service's worker (its faust app id, see
    :func:`services.runtime.kafka.worker.build_app`)."""
    return f"{settings.topic_prefix}casino-{service}"


# -- worker processes ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Workers:
    """The service workers as child processes, each logging to ``log_dir/NAME.log``."""

    settings: Settings
    log_dir: Path
    services: tuple[str, ...] = SERVICES
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(self, names: Iterable[str] | None = None) -> None:
        """Start the named services (default all) that are not running."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        env = {**environment(), **worker_env(self.settings)}
        for name in self.services if names is None else names:
            if name in self.procs and self.procs[name].poll() is None:
                continue
            env["CASINO_DATA_DIR"] = str(self.log_dir / f"faust-{name}")
            with (self.log_dir / f"{name}.log").open("ab") as log:
                self.procs[name] = subprocess.Popen(  # noqa: S603 (our own interpreter and module)
                    [sys.executable, "-m", "services.cli.worker", name],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )

    def kill(self, name: str, sig: signal.Signals = signal.SIGKILL) -> int:
        """Send ``sig`` to one worker and wait for it; returns its exit status."""
        proc = self.procs[name]
        if proc.poll() is None:
            proc.send_signal(sig)
        return self._reap(name)

    def _reap(self, name: str) -> int:
        """Wait for one worker to exit (SIGKILL after 30 s); its exit status."""
        proc = self.procs[name]
        try:
            return proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait(30)

    def check(self) -> None:
        """Raise :class:`WorkerDied` (with the log's tail) if a started worker has exited."""
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                tail = (self.log_dir / f"{name}.log").read_text(errors="replace")[-2000:]
                raise WorkerDied(f"worker {name} exited with {proc.returncode}:\n{tail}")

    def stop(self) -> dict[str, int]:
        """SIGTERM every running worker once (SIGKILL after 30 s); returns each exit status.

        Once: a second SIGTERM reaching a worker that is already shutting down, after faust has put
        back the default handler, killed it (status -15) instead of letting it finish.
        """
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        return {name: self._reap(name) for name in list(self.procs)}

    def log(self, name: str) -> str:
        """A worker's log so far."""
        path = self.log_dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""


# -- end offsets ------------------------------------------------------------------------------------


async def real_ends(consumer: AIOKafkaConsumer, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
    """The next offset after the last record of each partition, as of the call.

    ListOffsets may stop inside the last record batch (Tansu: its base offset plus one), so each
    non-empty partition's last batch is fetched from ``listed - 1`` and its last offset taken; the
    fetch has data, so it answers at once. The consumer's assignment is replaced.
    """
    listed: dict[TopicPartition, int] = await consumer.end_offsets(list(tps)) if tps else {}
    ends = dict(listed)
    probe = [tp for tp in tps if listed[tp] > 0]
    if not probe:
        return ends
    consumer.assign(probe)
    for tp in probe:
        consumer.seek(tp, listed[tp] - 1)
    waiting = set(probe)
    deadline = time.monotonic() + 30.0
    while waiting:
        batch = await consumer.getmany(*waiting, timeout_ms=200)
        for tp, msgs in batch.items():
            if msgs:
                ends[tp] = max(ends[tp], msgs[-1].offset + 1)
                waiting.discard(tp)
        if time.monotonic() > deadline:
            raise DrainTimeout(f"no record at the listed end of {sorted(map(str, waiting))}")
    rest(consumer)
    return ends


# -- the bus ------------------------------------------------------------------------------------------


class KafkaBus:
    """The simulator's bus over Kafka, with the services' workers running elsewhere (see the module)."""

    def __init__(
        self,
        settings: Settings,
        services: Iterable[str] = SERVICES,
        *,
        workers: Workers | None = None,
        drain_timeout_s: float = DRAIN_TIMEOUT_S,
    ) -> None:
        self.settings = settings
        self.inputs = service_inputs(services)
        self.workers = workers
        self.drain_timeout_s = drain_timeout_s
        self.drains = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="kafka-bus", daemon=True)
        self._thread.start()
        self._producer: AIOKafkaProducer | None = None
        self._admin: AIOKafkaAdminClient | None = None
        self._probe: AIOKafkaConsumer | None = None
        self._reader: AIOKafkaConsumer | None = None
        self._coordinators: dict[str, int] = {}
        self._positions: dict[TopicPartition, int] = {}
        self._buffer: dict[tuple[str, str], list[Envelope]] = defaultdict(list)
        self._seen: set[str] = set()
        self._tps: dict[str, list[TopicPartition]] = {}
        self._sending: asyncio.Future[None] | None = None
        self._send_failure: BaseException | None = None
        self._send_failure_raised = False
        self._waiter: AIOKafkaConsumer | None = None
        self._waited_topics: set[str] = set()
        self._wait_positions: dict[TopicPartition, int] = {}
        self._waited: dict[tuple[str, str], Stream] = defaultdict(Stream)
        self._waited_ids: set[str] = set()
        self._waiters: dict[tuple[str, str], list[_Pending]] = defaultdict(list)
        self._following: asyncio.Task[None] | None = None
        self._logical = {settings.topic(t): t for t in topics.ALL_TOPICS}
        try:
            self._run(self._start())
        except BaseException:
            with contextlib.suppress(Exception):  # the error to raise is the start's
                self.close()
            raise

    event_driven = True
    """The simulator waits on this bus for each record it needs (:meth:`wait`), not for idle groups."""

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the bus's loop (its own thread, always running) and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    async def _start(self) -> None:
        rekeyed = sorted({t for inputs in self.inputs.values() for t in inputs} - set(topics.ALL_TOPICS))
        made = made_topics(self.inputs)
        specs = [TopicSpec(t, made[t], RETENTION_FOREVER_MS) if t in made else t for t in rekeyed]
        await ensure_topics(self.settings, [*topics.ALL_TOPICS, *specs])  # as the workers make them
        auth = self.settings.aiokafka_auth()
        self._producer = AIOKafkaProducer(bootstrap_servers=self.settings.bootstrap_list, acks="all", **auth)
        await self._producer.start()
        self._admin = AIOKafkaAdminClient(bootstrap_servers=self.settings.bootstrap_list, **auth)
        await self._admin.start()
        self._probe = new_consumer(self.settings)
        self._reader = new_consumer(self.settings)
        self._waiter = AIOKafkaConsumer(
            bootstrap_servers=self.settings.bootstrap_list, enable_auto_commit=False,
            fetch_max_wait_ms=WAIT_FETCH_MS, auto_offset_reset="earliest", **auth,
        )  # fmt: skip
        await self._probe.start()
        await self._reader.start()
        await self._waiter.start()
        # Every topic's partitions now, before real_ends assigns the probe (an assigned consumer's
        # metadata covers only its assigned topics): read() may ask for a topic that no service of
        # the bus consumes (a bus of the settlement service alone, reading the wallet events).
        physical = {self.settings.topic(t): t for t in (*topics.ALL_TOPICS, *rekeyed)}
        for tp in await partitions_of(self._probe, list(physical)):
            self._tps.setdefault(physical[tp.topic], []).append(tp)

    def close(self) -> None:
        """Stop the clients and the loop."""

        async def stop() -> None:
            await self._unfollow()
            try:
                if not self._send_failure_raised:  # else raised already: the caller knows
                    await self._drain()
            finally:
                for client in (self._producer, self._probe, self._reader, self._waiter):
                    if client is not None:
                        await client.stop()
                if self._admin is not None:
                    await self._admin.close()

        try:
            self._run(stop())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()

    def __enter__(self) -> KafkaBus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- Bus --------------------------------------------------------------------------------------
    def publish(self, envelopes: list[Envelope]) -> None:
        """Produce the envelopes to their topics, keyed by ``Envelope.key``, once every earlier publish
        is acknowledged; returns at once, waiting for neither (see the module). Raises the failure of
        an earlier publish, as does every later call of the bus."""
        self._raise_send_failure()
        self._loop.call_soon_threadsafe(self._chain, list(envelopes))

    def _raise_send_failure(self) -> None:
        if self._send_failure is not None:
            self._send_failure_raised = True
            raise self._send_failure

    def _chain(self, envelopes: list[Envelope]) -> None:
        """On the loop: a task that sends ``envelopes`` once the last publish is acknowledged."""
        sending = self._loop.create_task(self._send_after(self._sending, envelopes))
        sending.add_done_callback(self._sent)
        self._sending = sending

    async def _send_after(self, before: asyncio.Future[None] | None, envelopes: Sequence[Envelope]) -> None:
        if before is not None:
            await before  # its failure fails this publish too: nothing is sent after a failed send
        producer, topic = self._producer, self.settings.topic
        assert producer is not None
        sends = [
            await producer.send(topic(e.topic), intake.encode(e), key=intake.encode_key(e)) for e in envelopes
        ]
        for sent in sends:
            await sent

    def _sent(self, sending: asyncio.Future[None]) -> None:
        """A publish's task ended: its failure, if the first, is the bus's from now on."""
        if sending is self._sending:
            self._sending = None
        if not sending.cancelled() and sending.exception() is not None and self._send_failure is None:
            self._send_failure = sending.exception()

    async def _drain(self) -> None:
        """Await the acknowledgements of every publish so far (raising a failed one's error)."""
        if self._sending is not None:
            with contextlib.suppress(Exception):  # kept by _sent, raised below
                await self._sending
        self._raise_send_failure()

    def publish_raw(self, records: Iterable[tuple[str, bytes | None, bytes | None]]) -> None:
        """Produce ``(logical topic, key, value)`` records as they are (malformed ones included)."""

        async def send() -> None:
            assert self._producer is not None
            await self._drain()
            sends = [await self._producer.send(self.settings.topic(t), v, key=k) for t, k, v in records]
            for sent in sends:
                await sent

        self._run(send())

    def drain(self) -> None:
        """Wait until every service has committed every record of its inputs (see the module)."""
        self._run(self._until_idle())
        self.drains += 1

    def advance(self, envelopes: Sequence[Envelope] = ()) -> None:
        """Publish ``envelopes``, then wait only for the services a table waits for (all but
        :data:`OBSERVERS`, which no table event or wallet credit waits for). The observers keep
        running and catch up on their own; ``drain`` waits for them too. (The simulator's step
        before it waited for its own records with :meth:`wait`; still polls every group but two.)"""
        if envelopes:
            self.publish(list(envelopes))
        self._run(self._until_idle(observers=False))

    def read(self, topic: str, key: str) -> list[Envelope]:
        """The records on ``topic`` under ``key`` not yet returned by an earlier call, in order."""
        self._run(self._advance(topic))
        return self._buffer.pop((topic, key), [])

    def wait(
        self, topic: str, key: str, match: Callable[[Envelope], bool], timeout_s: float | None = None
    ) -> Envelope:
        """The first record on ``topic`` under ``key`` (in offset order) that ``match`` accepts, once it
        is on the log (see the module); :class:`DrainTimeout` after ``timeout_s`` (default the drain
        timeout). Returns a record found by an earlier wait too: waiting consumes nothing, and
        :meth:`read` is not affected."""
        read = self._waited.get((topic, key))
        seen = len(read) if read is not None else 0  # the waiter only appends: the loop need not
        if read is not None and (env := read.first(match, stop=seen)) is not None:  # look at these again
            return env  # read already: no need to run the loop
        return self._run(
            self._wait(topic, key, match, self.drain_timeout_s if timeout_s is None else timeout_s, seen)
        )

    # -- internals --------------------------------------------------------------------------------
    async def _partitions(self, logical: str) -> list[TopicPartition]:
        if logical not in self._tps:
            assert self._probe is not None
            self._tps[logical] = await partitions_of(self._probe, [self.settings.topic(logical)])
        return self._tps[logical]

    async def _committed(self, service: str, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        assert self._admin is not None
        group = group_id(self.settings, service)
        if group not in self._coordinators:
            self._coordinators[group] = await self._admin.find_coordinator(group)
        found = await self._admin.list_consumer_group_offsets(
            group, group_coordinator_id=self._coordinators[group], partitions=list(tps)
        )
        return {tp: max(0, found[tp].offset) if tp in found else 0 for tp in tps}

    async def _lagging(self, observers: bool = True) -> tuple[dict[TopicPartition, int], list[str]]:
        """One poll: the real ends of every input partition and what is behind them (committed first);
        without ``observers``, of the services but :data:`OBSERVERS` only."""
        assert self._probe is not None
        wanted = {
            service: [tp for t in inputs for tp in await self._partitions(t)]
            for service, inputs in self.inputs.items()
            if observers or service not in OBSERVERS
        }
        all_tps = sorted({tp for tps in wanted.values() for tp in tps})
        # every group's committed offsets (concurrently), and only then the ends: see the module
        found = await asyncio.gather(*(self._committed(service, tps) for service, tps in wanted.items()))
        committed = dict(zip(wanted, found, strict=True))
        ends = await real_ends(self._probe, all_tps)
        behind = [
            f"{service} {tp.topic}[{tp.partition}] {committed[service][tp]}/{ends[tp]}"
            for service, tps in wanted.items()
            for tp in tps
            if committed[service][tp] < ends[tp]
        ]
        return ends, behind

    async def _until_idle(self, observers: bool = True) -> None:
        await self._drain()
        deadline = time.monotonic() + self.drain_timeout_s
        previous: dict[TopicPartition, int] | None = None
        while True:
            ends, behind = await self._lagging(observers)
            if not behind and ends == previous:
                return
            previous = None if behind else ends
            if self.workers is not None:
                self.workers.check()
            if time.monotonic() > deadline:
                raise DrainTimeout(f"workers still behind after {self.drain_timeout_s} s: {behind[:12]}")
            if behind:  # else the confirming poll at once: waiting adds nothing to what it proves
                await asyncio.sleep(POLL_S)

    async def _advance(self, logical: str) -> None:
        """Read ``logical`` from the bus's positions to the real ends into the per-key buffers."""
        assert self._reader is not None and self._probe is not None
        await self._drain()
        tps = await self._partitions(logical)
        ends = await real_ends(self._probe, tps)
        read, reached = await read_range(self._reader, self._positions, ends)
        for tp in tps:
            for m in read.get(tp, []):
                with contextlib.suppress(intake.DecodeError):
                    env = intake.decode(m.value)
                    if env.event_id not in self._seen:
                        self._seen.add(env.event_id)
                        self._buffer[(logical, env.key)].append(env)
        self._positions.update(reached)

    async def _wait(
        self, topic: str, key: str, match: Callable[[Envelope], bool], timeout_s: float, seen: int = 0
    ) -> Envelope:
        """:meth:`wait` on the loop: the records read under the key from the ``seen``-th on (the ones
        before it the caller looked through), then each record as the waiter reads it (:meth:`_hand`).
        Each record is looked at once, and only the records the match's hints leave
        (:class:`services.runtime.waits.Stream`): on the speed table, where every table event is waited
        for under the one key, looking through the key's records on every wait made the simulator's
        thread time grow with the records read so far (quadratic in a coup)."""
        read = self._waited.get((topic, key))
        if read is not None and (env := read.first(match, start=seen)) is not None:
            return env
        if topic not in self._waited_topics:
            await self._wait_on(topic)
        found: asyncio.Future[Envelope] = self._loop.create_future()
        entry = (match, found)
        self._waiters[(topic, key)].append(entry)
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                watched: set[asyncio.Future[Any]] = {found}
                if self._following is not None:
                    watched.add(self._following)
                left = max(0.0, min(1.0, deadline - time.monotonic()))
                done, _ = await asyncio.wait(watched, timeout=left, return_when=asyncio.FIRST_COMPLETED)
                if found in done:
                    return found.result()
                if self._following is not None and self._following.done():
                    self._following.result()  # the follower failed: its error
                    raise RuntimeError("the bus's waiter stopped")
                self._raise_send_failure()  # what is waited for may never come
                if time.monotonic() >= deadline:
                    raise DrainTimeout(f"no record on {topic} under {key} came in {timeout_s} s")
                if self.workers is not None:
                    self.workers.check()
        finally:
            waiting = self._waiters.get((topic, key), [])
            if entry in waiting:
                waiting.remove(entry)

    async def _follow(self) -> None:
        """The waiter's task, all the time the bus has waited topics: read them as records come (a
        fetch at most :data:`WAIT_FETCH_MS` long), keep each record by key, and hand it to the waits
        pending on its key (:meth:`wait`), so that a record is usually read before it is waited for."""
        assert self._waiter is not None
        while True:
            batch = await self._waiter.getmany(timeout_ms=WAIT_FETCH_MS * 5)
            for tp, msgs in batch.items():
                logical = self._logical.get(tp.topic, tp.topic)
                for m in msgs:
                    with contextlib.suppress(intake.DecodeError):
                        env = intake.decode(m.value)
                        if env.event_id not in self._waited_ids:
                            self._waited_ids.add(env.event_id)
                            self._waited[(logical, env.key)].add(env)
                            self._hand(logical, env)
                if msgs:
                    self._wait_positions[tp] = msgs[-1].offset + 1

    def _hand(self, logical: str, env: Envelope) -> None:
        """Resolve the pending waits on ``env``'s topic and key that ``env`` matches."""
        waiting = self._waiters.get((logical, env.key))
        if not waiting:
            return
        for entry in list(waiting):
            match, found = entry
            if found.done():
                continue
            try:
                matched = match(env)
            except Exception as exc:  # the wait's own error, raised to its caller; the waiter reads on
                found.set_exception(exc)
                waiting.remove(entry)
                continue
            if matched:
                found.set_result(env)
                waiting.remove(entry)

    async def _unfollow(self) -> None:
        if self._following is not None:
            self._following.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._following
            self._following = None

    async def _wait_on(self, topic: str) -> None:
        """Add ``topic``'s partitions to the waiter's, from their start (the others where it stopped),
        and (re)start the waiter's task (:meth:`_follow`)."""
        assert self._waiter is not None
        await self._unfollow()  # positions are only taken with the records they follow, so none is lost
        self._waited_topics.add(topic)
        tps = [tp for t in sorted(self._waited_topics) for tp in await self._partitions(t)]
        self._waiter.assign(tps)
        for tp in tps:
            self._waiter.seek(tp, self._wait_positions.get(tp, 0))
        self._following = self._loop.create_task(self._follow())

    def consume_all(self) -> list[Envelope]:
        """Every envelope of every topic now (as :func:`consume_all`: topic, partition, offset)."""
        self._run(self._drain())
        return self._run(aconsume_all(self.settings, list(topics.ALL_TOPICS)))


@contextlib.contextmanager
def running(settings: Settings, log_dir: Path) -> Iterator[KafkaBus]:
    """The whole pipeline on a broker: the topics created once (before the services race to), every
    service's worker started, and a bus over them; the workers are stopped on the way out."""
    asyncio.run(ensure_topics(settings, list(topics.ALL_TOPICS)))
    workers = Workers(settings, log_dir)
    workers.start()
    try:
        with KafkaBus(settings, workers=workers) as bus:
            yield bus
    finally:
        workers.stop()
