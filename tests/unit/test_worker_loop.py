"""The Kafka worker's loop without a broker: batches, commits after the acks, readiness (issue #16)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka import TopicPartition  # type: ignore[import-untyped]
from aiokafka.coordinator.assignors.range import RangePartitionAssignor  # type: ignore[import-untyped]
from aiokafka.errors import CommitFailedError  # type: ignore[import-untyped]
from aiokafka.partitioner import DefaultPartitioner  # type: ignore[import-untyped]
from aiokafka.producer.message_accumulator import BatchBuilder  # type: ignore[import-untyped]
from aiokafka.record.default_records import DefaultRecordBatch  # type: ignore[import-untyped]
from structlog.testing import capture_logs

from services.core import topics
from services.core.envelope import Draft, Envelope, seal, seal_encoded
from services.core.processor import dead_letter
from services.runtime import intake
from services.runtime.compose import Composition
from services.runtime.kafka.bus import quick_settings
from services.runtime.kafka.metrics import shell_status
from services.runtime.kafka.topic_io import Outbox
from services.runtime.kafka.worker import Repartition, Shell, repartition_topic
from services.runtime.logging import configure
from services.runtime.settings import Settings
from tests.kafka.toy import Toy, add

SETTINGS = Settings(batch_max=4, batch_wait_ms=7)
TP0 = TopicPartition(SETTINGS.topic(topics.WALLET_REQUESTS), 0)
REKEYED = repartition_topic("monitor", topics.DEADLETTER)
AT = "2026-01-01T00:00:00.000Z"
TP1 = TopicPartition(SETTINGS.topic(topics.WALLET_REQUESTS), 1)


def _msg(tp: TopicPartition, offset: int, key: str = "acct-1", n: int = 1) -> Any:
    return SimpleNamespace(
        topic=tp.topic, partition=tp.partition, offset=offset, value=add(key, offset, n).to_json()
    )


@dataclass
class FakeConsumer:
    """Hands out the prepared fetches in turn and records what was asked and committed."""

    fetches: list[Mapping[TopicPartition, list[Any]]]
    asked: list[tuple[int, int]] = field(default_factory=list)
    commits: list[dict[TopicPartition, int]] = field(default_factory=list)
    refuse_commit: bool = False
    highwaters: dict[TopicPartition, int] = field(default_factory=dict)

    async def getmany(self, *, timeout_ms: int, max_records: int) -> Mapping[TopicPartition, list[Any]]:
        self.asked.append((timeout_ms, max_records))
        return self.fetches.pop(0) if self.fetches else {}

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        if self.refuse_commit:
            raise CommitFailedError("rebalanced")
        self.commits.append(offsets)

    def assignment(self) -> set[TopicPartition]:
        return set(self.highwaters)

    def highwater(self, tp: TopicPartition) -> int:
        return self.highwaters[tp]


class FakeProducer:
    """What :class:`Outbox` needs of aiokafka's producer: real record batches of ``batch_bytes``, each
    acknowledged at once; keeps what was sent, ``(topic, partition, key)`` in order, and each batch's size."""

    def __init__(self, batch_bytes: int = 16384, partitions: int = 3) -> None:
        self.sent: list[tuple[str, int, bytes]] = []
        self.values: list[bytes] = []
        self.batches: list[int] = []
        self.batch_bytes = batch_bytes
        self.partitions = partitions

    async def partitions_for(self, topic: str) -> set[int]:
        return set(range(self.partitions))

    def create_batch(self) -> BatchBuilder:
        return BatchBuilder(self.batch_bytes, 0)

    async def send_batch(self, batch: BatchBuilder, topic: str, *, partition: int) -> asyncio.Future[None]:
        records = list(DefaultRecordBatch(bytes(batch._build())))
        self.sent += [(topic, partition, r.key) for r in records]
        self.values += [bytes(r.value) for r in records]
        self.batches.append(len(records))
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


def _shell(consumer: FakeConsumer) -> Shell:
    shell = Shell(SimpleNamespace(conf=SimpleNamespace(id="g")), SETTINGS, [Toy()], service="toy")  # type: ignore[arg-type]
    shell.consumer = consumer
    shell.producer = FakeProducer()
    return shell


def _landing(shell: Shell, *, landed: bool) -> asyncio.Future[None]:
    """Make ``shell`` look as if its last batch were still landing (or had landed)."""
    landing: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    if landed:
        landing.set_result(None)
    shell._landing = landing
    return landing


async def test_a_short_fetch_is_topped_up_once_within_the_batch_wait_while_the_last_batch_lands() -> None:
    """A first fetch below ``batch_max`` while the last batch's outputs are unacknowledged is followed by
    one fetch for the rest, waiting ``batch_wait_ms``; the records of a partition stay in offset order."""
    consumer = FakeConsumer(
        [{TP0: [_msg(TP0, 0)]}, {TP0: [_msg(TP0, 1)], TP1: [_msg(TP1, 0)]}, {TP1: [_msg(TP1, 1)]}]
    )
    shell = _shell(consumer)
    _landing(shell, landed=False)
    batch = await shell._batch()
    assert {tp: [m.offset for m in msgs] for tp, msgs in batch.items()} == {TP0: [0, 1], TP1: [0]}
    assert consumer.asked == [(1000, 4), (7, 3)]


@pytest.mark.parametrize("landed", [None, True], ids=["nothing shipped", "landed"])
async def test_a_short_fetch_is_not_topped_up_when_nothing_is_in_flight(landed: bool | None) -> None:
    """With no batch landing (none shipped yet, or the last one committed) a short fetch is handled as it
    is: waiting for more would only delay it."""
    consumer = FakeConsumer([{TP0: [_msg(TP0, 0)]}, {TP1: [_msg(TP1, 0)]}])
    shell = _shell(consumer)
    if landed is not None:
        _landing(shell, landed=landed)
    batch = await shell._batch()
    assert {tp: [m.offset for m in msgs] for tp, msgs in batch.items()} == {TP0: [0]}
    assert consumer.asked == [(1000, 4)]


@pytest.mark.parametrize("first", [{}, {TP0: [_msg(TP0, i) for i in range(4)]}], ids=["empty", "full"])
async def test_an_empty_or_full_fetch_is_not_topped_up(first: Mapping[TopicPartition, list[Any]]) -> None:
    """Nothing fetched (idle) or ``batch_max`` fetched: no second fetch, even while a batch lands."""
    consumer = FakeConsumer([first, {TP1: [_msg(TP1, 0)]}])
    shell = _shell(consumer)
    _landing(shell, landed=False)
    batch = await shell._batch()
    assert sum(map(len, batch.values())) == sum(map(len, first.values()))
    assert len(consumer.asked) == 1


async def test_a_batch_is_committed_after_its_outputs_are_sent() -> None:
    """Every input is applied and its outputs sent, then the next offset of each partition committed."""
    consumer = FakeConsumer([])
    shell = _shell(consumer)
    await shell._handle({TP0: [_msg(TP0, 0, n=4), _msg(TP0, 1, n=7)], TP1: [_msg(TP1, 0, key="acct-2")]})
    assert isinstance(shell.producer, FakeProducer)
    sent_topics = {t for t, _, _ in shell.producer.sent}
    assert sent_topics == {SETTINGS.topic(topics.WALLET_EVENTS)}
    assert len(shell.producer.sent) == 4  # Added x3 and the acct-1 Milestone when its total passed 10
    assert len(shell.producer.batches) == len({p for _, p, _ in shell.producer.sent})  # one per partition
    assert consumer.commits == [{TP0: 2, TP1: 1}]
    assert shell.committed == {TP0: 2, TP1: 1}


async def test_each_output_goes_out_as_its_envelopes_canonical_json() -> None:
    """The worker sends the bytes :func:`step_encoded` made as it sealed each output (the dead letter of
    an undecodable record included): each is a whole record that decodes, checks its hash, and is
    exactly its envelope's canonical JSON."""
    bad = SimpleNamespace(topic=TP1.topic, partition=1, offset=0, value=b"\xff not json")
    shell = _shell(FakeConsumer([]))
    await shell._handle({TP0: [_msg(TP0, 0, n=4), _msg(TP0, 1, n=7)], TP1: [bad]})
    assert isinstance(shell.producer, FakeProducer)
    assert len(shell.producer.values) == 4  # Added x2, the Milestone, the dead letter
    for value in shell.producer.values:
        env = intake.decode(value, None)
        assert env.to_json() == value
        assert env.hash == env.expected_hash()
    assert {intake.decode(v, None).type for v in shell.producer.values} >= {"DeadLetter"}


async def test_records_of_several_partitions_in_one_list_are_applied_partition_by_partition() -> None:
    """``on_batch`` given records of two partitions interleaved (as faust's ``take_events`` hands them)
    applies each at its own partition and offset: one ``batch`` summary per partition, no catch-up."""
    configure(level="INFO")
    shell = _shell(FakeConsumer([]))
    mixed = [_msg(TP0, 0), _msg(TP1, 0, key="acct-2"), _msg(TP0, 1), _msg(TP1, 1, key="acct-2")]
    with capture_logs() as logs:
        await shell.on_batch(shell.pipes[0], [(m.topic, m.partition, m.offset, m.value) for m in mixed])
    configure(level="WARNING")
    batches = [e for e in logs if e["event"] == "batch"]
    lines = sorted((e["partition"], e["first"], e["last"], e["records"]) for e in batches)
    assert lines == [(0, 0, 1, 2), (1, 0, 1, 2)]
    assert shell.pipes[0].next_offset == {(topics.WALLET_REQUESTS, 0): 2, (topics.WALLET_REQUESTS, 1): 2}
    assert shell.handled == 4


async def test_a_commit_refused_by_a_rebalance_is_not_a_crash() -> None:
    """A commit refused because the partitions moved leaves the offsets uncommitted and the worker up."""
    consumer = FakeConsumer([], refuse_commit=True)
    shell = _shell(consumer)
    await shell._handle({TP0: [_msg(TP0, 0)]})
    assert shell.committed == {}
    assert shell.handled == 1


def test_readiness_reads_the_shell_consumer_and_the_committed_offsets() -> None:
    """Lag per assigned partition = its high watermark less the larger of the next offset applied and
    the committed offset; no consumer or no assignment yet: not ready."""
    consumer = FakeConsumer([], highwaters={TP0: 5, TP1: 3})
    shell = _shell(consumer)
    assert shell_status(shell).assigned is False
    shell.assigned = True
    shell.committed = {TP1: 3}
    shell.pipes[0].next_offset[(topics.WALLET_REQUESTS, 0)] = 2
    status = shell_status(shell)
    assert dict(status.lag) == {(topics.WALLET_REQUESTS, 0): 3, (topics.WALLET_REQUESTS, 1): 0}
    assert not status.ready(2) and status.ready(3)
    shell.consumer = None
    assert shell_status(shell).assigned is False


def test_with_a_state_store_a_partition_is_not_ready_until_restored(tmp_path: Any) -> None:
    """A worker with a state store: a partition assigned but not restored yet has no lag (not ready,
    whatever the group's committed offset says); once restored, its lag is the high watermark less the
    next offset its state applies (the committed offset does not count: the state is behind it)."""
    from services.runtime.kafka.state import LocalStore  # noqa: PLC0415

    consumer = FakeConsumer([], highwaters={TP0: 5, TP1: 3})
    shell = _shell(consumer)
    shell.store = LocalStore(tmp_path / "store")
    shell.assigned = True
    shell.committed = {TP0: 5, TP1: 3}
    status = shell_status(shell)
    assert dict(status.lag) == {(topics.WALLET_REQUESTS, 0): None, (topics.WALLET_REQUESTS, 1): None}
    assert not status.ready(100)
    shell.restored = {TP0, TP1}
    shell.pipes[0].next_offset.update({(topics.WALLET_REQUESTS, 0): 2, (topics.WALLET_REQUESTS, 1): 3})
    status = shell_status(shell)
    assert dict(status.lag) == {(topics.WALLET_REQUESTS, 0): 3, (topics.WALLET_REQUESTS, 1): 0}
    assert not status.ready(2) and status.ready(3)
    shell.store.close()


async def test_an_error_outside_a_batch_ends_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """A loop that fails (here: its consumer cannot start) exits with EXIT_CRASH instead of leaving a
    live worker that consumes nothing."""
    from services.runtime.kafka import worker  # noqa: PLC0415

    shell = _shell(FakeConsumer([]))

    async def broken() -> None:
        raise OSError("no broker")

    def exit_(code: int) -> None:
        raise SystemExit(code)

    monkeypatch.setattr(shell, "consume", broken)
    monkeypatch.setattr(worker.os, "_exit", exit_)
    with pytest.raises(SystemExit) as ended:
        await shell.run()
    assert ended.value.code == worker.EXIT_CRASH


@pytest.mark.parametrize("partitions", [1, 3, 7])
async def test_the_outbox_puts_each_key_where_aiokafka_send_would(partitions: int) -> None:
    """Each record goes to the partition aiokafka's default partitioner (what ``send`` uses) gives its
    key, whether its hash was remembered or not: writers through ``send`` and through the outbox agree
    on where a table's or an account's records are, so their order per key holds."""
    producer = FakeProducer(partitions=partitions)
    outbox = Outbox(producer)
    keys = [f"player:{n:05d}".encode() for n in range(300)] + [b"T01-punto-banco", b"\xff\x00", b""]
    everyone = list(range(partitions))
    for key in [*keys, *keys]:
        assert await outbox.partition("t", key) == DefaultPartitioner()(key, everyone, everyone)


async def test_the_outbox_keeps_each_partition_in_order_across_full_batches() -> None:
    """Records of one partition that fill several batches go out in the order they were added, every
    batch is handed over by the flush at the latest, and the flush returns every record's ref once."""
    producer = FakeProducer(batch_bytes=600)
    outbox = Outbox(producer)
    added = [(f"acct-{n % 5}".encode(), f"ref-{n}") for n in range(60)]
    for key, ref in added:
        await outbox.add("t", key, b"v" * 100, ref)
    assert producer.sent  # full batches went out before the flush
    shipped = await outbox.flush()
    assert sorted(ref for refs, _ in shipped for ref in refs) == sorted(ref for _, ref in added)
    assert len(producer.batches) == len(shipped) > 3 and max(producer.batches) <= 5
    for partition in range(3):
        keys = [k for _, p, k in producer.sent if p == partition]
        mine = [k for k, _ in added if await outbox.partition("t", k) == partition]
        assert keys == mine
    assert await outbox.flush() == []


async def test_a_batch_logs_one_info_line_per_partition_and_a_warning_per_dead_letter() -> None:
    """At INFO a handled batch writes one ``batch`` line per input partition (its offsets, records,
    outputs, dead letters and types) and no line per record; a dead letter gets a WARNING naming the
    record's offset; at DEBUG every record gets its ``record`` line too."""
    configure(level="INFO")
    bad = SimpleNamespace(topic=TP1.topic, partition=1, offset=0, value=b"\xff not json")
    batch = {TP0: [_msg(TP0, 0, n=4), _msg(TP0, 1, n=7)], TP1: [bad, _msg(TP1, 1, key="acct-2")]}
    with capture_logs() as logs:
        await _shell(FakeConsumer([]))._handle(batch)
    lines = [(e["event"], e["log_level"]) for e in logs]
    assert sorted(lines) == [("batch", "info"), ("batch", "info"), ("dead_letter", "warning")]
    first, second = (e for e in logs if e["event"] == "batch")
    assert {"topic": topics.WALLET_REQUESTS, "partition": 0, "first": 0, "last": 1, "records": 2,
            "outputs": 3, "sent": 3, "dead_letters": 0,
            "types": {"Deposit": 2}}.items() <= first.items()  # fmt: skip
    assert {"partition": 1, "first": 0, "last": 1, "records": 2, "dead_letters": 1,
            "types": {"undecodable": 1, "Deposit": 1}}.items() <= second.items()  # fmt: skip
    (dead,) = (e for e in logs if e["event"] == "dead_letter")
    facts = {"partition": 1, "offset": 0, "reason": "undecodable", "output": "DeadLetter"}
    assert facts.items() <= dead.items()
    configure(level="DEBUG")
    try:
        with capture_logs() as logs:
            await _shell(FakeConsumer([]))._handle(batch)
    finally:
        configure(level="WARNING")
    records = [e for e in logs if e["event"] == "record"]
    assert [(e["partition"], e["offset"], e["log_level"]) for e in records] == [
        (0, 0, "debug"),
        (0, 1, "debug"),
        (1, 0, "debug"),
        (1, 1, "debug"),
    ]


class HeldProducer(FakeProducer):
    """A :class:`FakeProducer` whose acknowledgements wait until the test gives them (``acks``, in order
    of sending); ``fail`` fails one instead."""

    def __init__(self) -> None:
        super().__init__()
        self.acks: list[asyncio.Future[None]] = []

    async def send_batch(self, batch: BatchBuilder, topic: str, *, partition: int) -> asyncio.Future[None]:
        await super().send_batch(batch, topic, partition=partition)
        held: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.acks.append(held)
        return held


async def _spin() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_the_next_batch_is_applied_while_the_last_one_lands_and_commits_go_in_order() -> None:
    """The loop applies batch 2 while batch 1's outputs are unacknowledged; no offset is committed before
    its own outputs and every earlier batch's are acknowledged, and the commits go in batch order."""
    consumer = FakeConsumer([])
    shell = _shell(consumer)
    producer = shell.producer = HeldProducer()
    await shell._pipelined({TP0: [_msg(TP0, 0)]})  # nothing in flight before it: returns at once
    second = asyncio.ensure_future(shell._pipelined({TP1: [_msg(TP1, 0, key="acct-2")]}))
    await _spin()
    assert shell.handled == 2 and len(producer.acks) == 2  # batch 2 applied and shipped
    assert not second.done() and consumer.commits == []  # waits for batch 1 to land
    producer.acks[1].set_result(None)  # batch 2 acknowledged first: still nothing committed
    await _spin()
    assert consumer.commits == []
    producer.acks[0].set_result(None)
    await second
    assert shell._landing is not None
    await shell._landing
    assert consumer.commits == [{TP0: 1}, {TP1: 1}]
    assert shell.committed == {TP0: 1, TP1: 1}


async def test_a_failed_acknowledgement_ends_the_process_before_any_commit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An output the broker refuses ends the worker (EXIT_CRASH) and its batch's offsets are never
    committed, nor the next batch's: a restart re-reads them (see the worker's module docstring)."""
    from services.runtime.kafka import worker  # noqa: PLC0415

    exits: list[int] = []

    class Exited(Exception):
        pass

    def exit_(code: int) -> None:
        exits.append(code)
        raise Exited  # where os._exit ends the process

    monkeypatch.setattr(worker.os, "_exit", exit_)
    consumer = FakeConsumer([])
    shell = _shell(consumer)
    producer = shell.producer = HeldProducer()
    await shell._pipelined({TP0: [_msg(TP0, 0)]})
    second = asyncio.ensure_future(shell._pipelined({TP0: [_msg(TP0, 1)]}))
    await _spin()
    producer.acks[0].set_exception(OSError("broker gone"))
    producer.acks[1].set_result(None)
    await _spin()
    assert exits and set(exits) == {worker.EXIT_CRASH}
    assert consumer.commits == []
    second.cancel()
    for landing in (second, shell._landing):
        with contextlib.suppress(Exited, asyncio.CancelledError):
            await landing  # type: ignore[misc]


@pytest.mark.parametrize(
    ("service", "fetch", "observer", "expected"),
    [
        ("audit", 10, 100, 100),  # an observer with its own wait
        ("monitor", 10, 100, 100),
        ("dealer", 10, 100, 10),  # the chain's services keep theirs
        ("settlement", 10, 100, 10),
        ("audit", 10, None, 10),  # unset: the workers' wait
        ("audit", None, None, 1500),  # neither: the default (Apache Kafka wakes a pending fetch)
        ("dealer", None, 100, 1500),
    ],
)
def test_observers_fetch_with_their_own_wait(
    service: str, fetch: int | None, observer: int | None, expected: int
) -> None:
    settings = Settings(fetch_max_wait_ms=fetch, observer_fetch_max_wait_ms=observer)
    shell = Shell(SimpleNamespace(conf=SimpleNamespace(id="g")), settings, [Toy()], service=service)  # type: ignore[arg-type]
    assert shell.fetch_wait_ms() == expected


def test_the_quick_settings_let_observers_fetch_less_often_than_the_chain() -> None:
    """Demo and tests on Tansu: the observers' fetches cost the broker CPU the chain's hops need."""
    quick = quick_settings(Settings(), env={})
    assert quick.observer_fetch_max_wait_ms is not None and quick.fetch_max_wait_ms is not None
    assert quick.observer_fetch_max_wait_ms > quick.fetch_max_wait_ms
    mine = quick_settings(
        Settings(observer_fetch_max_wait_ms=20), env={"CASINO_OBSERVER_FETCH_MAX_WAIT_MS": "20"}
    )
    assert mine.observer_fetch_max_wait_ms == 20  # an operator's own setting wins


class _TwoInputs(Toy):
    inputs = (topics.WALLET_REQUESTS, topics.TABLE_EVENTS)


def _txn_shell(settings: Settings, service: str, processors: list[Any]) -> Shell:
    return Shell(SimpleNamespace(conf=SimpleNamespace(id="g")), settings, processors, service=service)  # type: ignore[arg-type]


def test_exactly_once_gives_a_transactional_id_stable_per_member_and_fencing_for_a_single_service(
    tmp_path: Any,
) -> None:
    """``CASINO_EXACTLY_ONCE=true``: a transactional producer whose id is the same for a member started
    again on its data directory, differs between two members' directories, and is the service's own
    group for a service run one member at a time (the next lease holder fences the last); off: none."""
    on = {"exactly_once": True}
    a, b = Settings(data_dir=tmp_path / "a", **on), Settings(data_dir=tmp_path / "b", **on)
    ids = [_txn_shell(s, "toy", [Toy()]).transactional()["transactional_id"] for s in (a, a, b)]
    assert ids[0] == ids[1] != ids[2] and ids[0].startswith("g.")
    assert _txn_shell(a, "toy", [Toy()]).transactional()["enable_idempotence"] is True
    single = _txn_shell(a, "audit", [_TwoInputs()])
    assert single.single and single.transactional()["transactional_id"] == "g"
    assert _txn_shell(Settings(data_dir=tmp_path / "a"), "toy", [Toy()]).transactional() == {}
    assert (a.isolation_level, Settings().isolation_level) == ("read_committed", "read_uncommitted")


class FakeTxnProducer(FakeProducer):
    """A :class:`FakeProducer` that records the transaction calls among its sends."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[Any] = []

    async def begin_transaction(self) -> None:
        self.calls.append("begin")

    async def send_batch(self, batch: BatchBuilder, topic: str, *, partition: int) -> asyncio.Future[None]:
        self.calls.append("send")
        return await super().send_batch(batch, topic, partition=partition)

    async def send_offsets_to_transaction(self, offsets: dict[TopicPartition, int], group_id: str) -> None:
        self.calls.append(("offsets", dict(offsets), group_id))

    async def commit_transaction(self) -> None:
        self.calls.append("commit")


async def test_with_exactly_once_a_batch_outputs_and_offsets_commit_in_one_transaction() -> None:
    """``CASINO_EXACTLY_ONCE``: begin, the batch's outputs, its next offsets sent to the transaction
    under the worker's group, commit; the consumer commits nothing itself."""
    consumer = FakeConsumer([])
    settings = Settings(batch_max=4, batch_wait_ms=7, exactly_once=True)
    shell = _txn_shell(settings, "toy", [Toy()])
    shell.consumer, shell.producer = consumer, FakeTxnProducer()  # type: ignore[assignment]
    await shell._transact({TP0: [_msg(TP0, 0, n=4), _msg(TP0, 1, n=7)]})
    calls = shell.producer.calls
    assert calls[0] == "begin" and calls[-2:] == [("offsets", {TP0: 2}, "g"), "commit"]
    assert set(calls[1:-2]) == {"send"}
    assert consumer.commits == [] and shell.committed == {TP0: 2}


@pytest.mark.parametrize(
    ("service", "single"),
    [("dealer", False), ("settlement", False), ("audit", False), ("monitor", False), ("audit-tree", True)],
)
def test_only_the_services_whose_state_spans_partitions_take_a_lease(service: str, single: bool) -> None:
    """Audit's tree stage (the one writer of audit's records, over every partition's heads) runs one
    member at a time; the dealer, settlement (state per input partition), the monitor and audit's
    stages (co-partitioned: docs/adr/0011, 0013) scale out without a lease."""
    processors = list(Composition.demo().service(service))
    assert _txn_shell(SETTINGS, service, processors).single is single


def _dead_letter(reason: str, *, key: str = "T1", producer: str = "dealer") -> tuple[Envelope, bytes]:
    """A sealed dead letter of a ``casino.table.inbox`` record keyed ``key``, and its bytes."""
    draft = Draft("OpenTable", topics.TABLE_INBOX, key, {"table_id": key}, chained=False)
    original = seal(draft, event_id="o-1", occurred_at=AT, producer="operator", cause=None, head=None)
    dead = dead_letter(original, None, reason, "why", topics.TABLE_INBOX)
    return seal_encoded(dead, event_id="d-1", occurred_at=AT, producer=producer, cause=None, head=None)


def test_the_monitor_reads_its_dead_letters_rekeyed_beside_the_table_events() -> None:
    """The monitor's shell (docs/adr/0011): its table pipe reads the table events and the dead letters'
    repartition topic (one state per partition number, the range assignor), a hop reads the dead
    letters and passes each on unchanged, keyed by the alert it raises (the table an internal error
    concerns; the source topic of a refused record); every stage has a snapshot name of its own."""
    shell = _txn_shell(SETTINGS, "monitor", list(Composition.demo().service("monitor")))
    table = shell.pipes[0]
    assert table.inputs == (topics.TABLE_EVENTS, REKEYED) and not table.whole and not shell.single
    [hop] = shell.routes[SETTINGS.topic(topics.DEADLETTER)]
    assert isinstance(hop, Repartition) and shell.routes[SETTINGS.topic(REKEYED)] == [table]
    assert shell.assignment() == {"partition_assignment_strategy": (RangePartitionAssignor,)}
    stages = [p.stage for p in shell.pipes]  # the table, account, cage and casework stages, and the hop
    assert stages == [
        "monitor", "monitor.accounts", "monitor.cage", "monitor.casework", "monitor-repartition"
    ]  # fmt: skip
    for reason, key in (("internal_error", "T1"), ("unauthenticated", topics.TABLE_INBOX)):
        env, raw = _dead_letter(reason)
        [(out, value)] = hop.apply(topics.DEADLETTER, 2, 9, raw)
        assert (out.topic, out.key, out.event_id, value) == (REKEYED, key, env.event_id, raw)
    [(dead, _)] = hop.apply(topics.DEADLETTER, 2, 10, b"{not json")
    assert (dead.type, dead.topic, dead.producer) == ("DeadLetter", topics.DEADLETTER, "monitor")
    assert dead.payload["reason"] == "undecodable"


def test_the_monitor_routes_a_dead_letter_to_the_key_of_the_alert_it_raises() -> None:
    """:meth:`Monitor.route` is the key of the alert the monitor raises for a dead letter (its own key
    when it raises none: the monitor's own dead letters, a reason that raises nothing)."""
    monitor = Composition.demo().monitor()
    for reason, producer, key, raised in (
        ("internal_error", "dealer", "T9", 1),
        ("unauthenticated", "dealer", topics.TABLE_INBOX, 1),
        ("internal_error", "monitor", topics.TABLE_INBOX, 0),
        ("undecodable", "dealer", topics.TABLE_INBOX, 0),
    ):
        env, _ = _dead_letter(reason, key="T9", producer=producer)
        assert monitor.route(env) == key, (reason, producer)
        _, alerts = monitor.handle(monitor.initial(), env)
        assert [a.key for a in alerts] == [key] * raised, (reason, producer)


def test_a_quiet_scope_behind_the_output_positions_is_snapshotted_again_once_an_interval(
    tmp_path: Any,
) -> None:
    """A scope with nothing applied since its snapshot, whose snapshot names output positions behind the
    worker's, is due again (at once when stopping, else once the interval has passed since its last
    one): otherwise every restart would read back every output written since that old snapshot. Not a
    scope whose positions are current, nor one that is due anyway."""
    from services.runtime.kafka import state as state_store  # noqa: PLC0415

    shell = _shell(FakeConsumer([]))
    shell.store = state_store.LocalStore(tmp_path / "store")
    pipe = shell.pipes[0]
    old = state_store.Snapshot(
        pipe.fresh(0), {(topics.WALLET_REQUESTS, 0): 4}, {(topics.WALLET_EVENTS, 0): 3}
    )
    for scope in (0, 1, 2):
        pipe.install(scope, old)
    shell.out_positions = {(topics.WALLET_EVENTS, 0): 90}
    pipe.positions[2] = dict(shell.out_positions)
    pipe.snapped_at = {0: time.monotonic(), 1: time.monotonic(), 2: 0.0}
    assert shell.quiet_behind(stopping=False, besides=set()) == []  # within the interval
    due = shell.quiet_behind(stopping=True, besides={(pipe.stage, 1)})
    assert [(d.scope, d.ids, d.kept) for d in due] == [(0, set(), {})]
    pipe.positions[0] = dict(shell.out_positions)  # what writing it records
    assert [d.scope for d in shell.quiet_behind(stopping=True, besides=set())] == [1]
    pipe.since[1] = 1  # records applied since: the ordinary snapshots' business, not this one's
    assert shell.quiet_behind(stopping=True, besides=set()) == []
    shell.store.close()


async def test_a_stop_leaves_the_group_and_stops_the_clients_even_when_the_last_landing_was_cancelled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The stop's cleanup first lets the last batch land; a landing that was itself cancelled (a second
    cancellation reaching the stop) used to end the cleanup there, the group consumer never stopped: no
    LeaveGroup, and the next member's join waited a whole session timeout. The clients are stopped
    whatever ended the landing."""
    stopped: list[str] = []

    class Client:
        def __init__(self, name: str) -> None:
            self.name = name

        def subscribe(self, topics: Any, listener: Any) -> None:
            pass

        async def start(self) -> None:
            pass

        async def stop(self) -> None:
            stopped.append(self.name)

    shell = _shell(FakeConsumer([]))
    consumer, producer = Client("consumer"), Client("producer")

    def clients() -> None:
        shell.consumer, shell.producer = consumer, producer  # type: ignore[assignment]

    async def nothing(*_: Any, **__: Any) -> None:
        return None

    async def stopped_by_a_signal(*_: Any, **__: Any) -> None:
        cancelled: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        cancelled.cancel()
        shell._landing = cancelled  # the last batch's landing, cancelled too
        raise asyncio.CancelledError

    monkeypatch.setattr(shell, "_clients", clients)
    monkeypatch.setattr(shell, "_start_producers", nothing)
    monkeypatch.setattr(shell, "ensure_copartitioned", nothing)
    monkeypatch.setattr(shell, "_snapshot_idle", nothing)
    monkeypatch.setattr("services.runtime.kafka.loop.consume", stopped_by_a_signal)
    with pytest.raises(asyncio.CancelledError):
        await shell.consume_group()
    assert stopped == ["consumer", "producer"]
