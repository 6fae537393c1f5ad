"""Which records on Kafka the read model may apply: the ledger facts (docs/trust.md, issue 28).

The same question as :mod:`services.integrations.backoffice.facts` asks of the embedded log, answered by the
same
pure decision (:meth:`~services.audit.replay.attested.Attested.standing`), in a per-partition frontier
form: Kafka has no single order, and the read model's positions are per partition.

:meth:`KafkaFacts.refresh` reads ``casino.attest`` and ``casino.deadletter`` on from where it last stopped
(every signed head, kept in one :class:`~services.audit.replay.attested.Survey`), **then** each input
partition from the read model's position to its end (the records not applied yet: for a partition held
back, those after its last covering head) into a survey of their own with the heads copied in, **then**
``casino.attest`` again. Reading the heads before the inputs, every record a signed head names is read
too. Attestations are not taken from the input topics (one read there proves nothing about when it was
written).

**Order.** The decision asks whether a seal came *after* a record (:class:`Standing`): only then may noise
be passed over for good. Kafka cannot tell that across partitions, so the positions given to the
decision are refresh numbers, and only what is certain counts: a record first read in refresh ``k``
existed when that refresh read its partition; an attestation first read in refresh ``j`` was not there
when refresh ``j - 1`` read ``casino.attest`` the second time, after its inputs. So a seal counts as after
a record iff ``j > k``. A genuine record is never left out for a seal that may have preceded it; noise
after the last seal waits (held back, its partition with it) until a seal written after the gate read
it passes it over. A run that stops when idle (``project --kafka`` without ``--follow``) makes one
refresh: what it cannot decide yet it leaves for the next run.

Memory: the signed heads (one hash per attestation) and, per input partition, the records not applied
yet; the requests still read keep what earlier refreshes decided of them (:meth:`KafkaFacts._carried`).
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Mapping
from typing import Any

from aiokafka import TopicPartition  # type: ignore[import-untyped]

from services.audit.replay.attested import FIRST_IDS, Attested, Standing, Survey, WriterKey
from services.core import topics
from services.core.envelope import Envelope
from services.runtime.kafka.topic_io import new_consumer, partitions_of, read_range
from services.runtime.settings import Settings

HEADS_TOPICS = (topics.ATTEST, topics.DEADLETTER)
"""What the gate reads besides the projector's inputs: the signed heads and the refusals."""


def _record_at(k: int) -> int:
    """The decision's position of a record first read in refresh ``k``."""
    return 2 * k + 1


def _seal_at(j: int) -> int:
    """The decision's position of an attestation first read in refresh ``j`` (after a record's iff
    ``j >= k + 1``)."""
    return 2 * j


class PartitionGate:
    """The projector's gate (:class:`services.integrations.backoffice.facts.Gate`) for one input partition."""

    def __init__(self, facts: KafkaFacts, tp: TopicPartition) -> None:
        self.facts, self.tp = facts, tp
        self.read = facts.reached.get(tp, 0)
        """The last projector offset (Kafka offset + 1) of this partition surveyed."""
        self._pending_at: int | None = None

    @property
    def pending_at(self) -> int | None:
        """The projector offset the projector stopped at, waiting for a signed head (``None``: it did
        not); noted in :attr:`KafkaFacts.pending`."""
        return self._pending_at

    @pending_at.setter
    def pending_at(self, offset: int | None) -> None:
        self._pending_at = offset
        if offset is not None:
            self.facts.pending[self.tp] = offset

    def standing(self, env: Envelope, offset: int) -> Standing:
        """Where the record ``env`` at projector offset ``offset`` stands (counted when never a fact)."""
        return self.facts.standing(self.tp, env, offset)


class KafkaFacts:
    """The survey of the Kafka topics as far as read (see the module docstring)."""

    def __init__(self, settings: Settings, keys: Mapping[str, WriterKey]) -> None:
        self.settings = settings
        self.heads = Survey(keys)
        """Every attestation and dead letter read so far."""
        self.refreshes = 0
        self._consumer: Any = None
        self._heads_at: dict[TopicPartition, int] = {}
        self.reached: dict[TopicPartition, int] = {}
        """Input partition → the next Kafka offset the last refresh did not read."""
        self._seen: dict[TopicPartition, list[tuple[int, int]]] = {}
        """Input partition → ``(end read, refresh)`` per refresh that read further."""
        self._attested: Attested | None = None
        self._consumed: set[str] = set()
        """The requests in the window last read that a fact consumed."""
        self._causes: set[str] = set()
        """The facts the requests in the window last read name as their cause."""
        self.unattested = 0
        """Records passed over as never attested (this process)."""
        self.first_ids: list[str] = []
        self.pending: dict[TopicPartition, int] = {}
        """Input partition → the projector offset it was last held at (waiting for a signed head)."""

    def view(self, tp: TopicPartition) -> PartitionGate:
        """The gate of one input partition for the projector's next ``apply`` (which notes in
        :attr:`pending` whether it stops there again)."""
        self.pending.pop(tp, None)
        return PartitionGate(self, tp)

    async def refresh(self, starts: Mapping[TopicPartition, int]) -> None:
        """Read the signed heads on, then the input partitions from ``starts`` (Kafka offsets: the read
        model's positions) to their ends; decide again."""
        if self._consumer is None:
            self._consumer = new_consumer(self.settings)
            await self._consumer.start()
        consumer, k = self._consumer, self.refreshes
        await self._read_heads(k)
        data = self._data_survey()
        inputs = list(starts)
        ends = await consumer.end_offsets(inputs) if inputs else {}
        read, reached = await read_range(consumer, starts, ends, to_end=True)
        for tp in inputs:
            seen = self._seen.setdefault(tp, [])
            end = reached.get(tp, starts[tp])
            if not seen or end > seen[-1][0]:
                seen.append((end, k))
            drop = bisect.bisect_right(seen, (starts[tp], k + 1))  # wholly before the position
            del seen[: max(0, min(drop, len(seen) - 1))]
            self.reached[tp] = end
            for m in read.get(tp, ()):
                data.add(m.value or b"", _record_at(self._first_seen(tp, m.offset)))
        await self._read_heads(k)  # what the next refresh knows was written after these records
        self._attested = self._carried(data)
        self.refreshes = k + 1

    def _carried(self, data: Survey) -> Attested:
        """``data`` finished, with what earlier refreshes decided of the requests still read: a request
        stays consumed, and a fact it names as its cause stays a fact, once the records that made it so
        are applied (below the window this refresh read)."""
        data.signed |= self._causes
        attested = data.finish()
        window = {r[0] for r in data.requests}
        attested.consumed |= self._consumed & window
        self._consumed = attested.consumed & window
        sure = attested.facts - attested.unverified
        self._causes = {r[1] for r in data.requests if r[1] is not None and r[1] in sure}
        return attested

    async def _read_heads(self, k: int) -> None:
        """Read ``casino.attest`` and ``casino.deadletter`` on to their ends, at refresh ``k``."""
        consumer = self._consumer
        tps = await partitions_of(consumer, [self.settings.topic(t) for t in HEADS_TOPICS])
        ends = await consumer.end_offsets(tps) if tps else {}
        read, reached = await read_range(consumer, self._heads_at, ends, to_end=True)
        add = self.heads.add
        for msgs in read.values():
            for m in msgs:
                add(m.value or b"", _seal_at(k))
        self._heads_at.update(reached)

    def _data_survey(self) -> Survey:
        """A survey of the input records on top of a copy of the heads: no keys, so that nothing read
        there counts as an attestation."""
        h = self.heads
        return Survey(
            {}, heads=dict(h.heads), signed=set(h.signed), refused=set(h.refused),
            writers={w: dataclasses.replace(x) for w, x in h.writers.items()}, sealed_at=dict(h.sealed_at),
            idle_at=dict(h.idle_at), chain_writer=dict(h.chain_writer),
        )  # fmt: skip

    def _first_seen(self, tp: TopicPartition, offset: int) -> int:
        """The refresh that first read the record at Kafka ``offset`` of ``tp``."""
        seen = self._seen.get(tp, [])
        i = bisect.bisect_right(seen, (offset, 1 << 62))
        return seen[i][1] if i < len(seen) else self.refreshes

    def standing(self, tp: TopicPartition, env: Envelope, offset: int) -> Standing:
        """Where the record ``env`` at projector ``offset`` (Kafka offset + 1) of ``tp`` stands."""
        attested = self._attested
        if attested is None or offset > self.reached.get(tp, 0):
            return Standing.PENDING
        at = _record_at(self._first_seen(tp, offset - 1))
        found = attested.standing(env.topic, env.key, env.seq, env.hash, env.event_id, at)
        if found is Standing.NEVER:
            self.unattested += 1
            if len(self.first_ids) < FIRST_IDS:
                self.first_ids.append(env.event_id[:80])
        return found

    async def close(self) -> None:
        """Stop the gate's own consumer."""
        if self._consumer is not None:
            await self._consumer.stop()
            self._consumer = None
