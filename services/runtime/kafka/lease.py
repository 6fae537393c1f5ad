"""A fenced lease held through Kafka's own group membership (docs/adr/0007-kafka-lease.md).

A service that must run as one member at a time (the seamless caller: two would call the operator's
wallet for the same request; audit and monitor: their state spans every input partition) starts any
number of replicas; each first asks for the lease. The lease is the one partition of
:data:`LEASE_TOPIC`, assigned by the group coordinator inside the service's lease group
(``{prefix}casino-{service}.lease``): the broker gives it to exactly one live member of a generation.
Nothing is ever written to the topic; membership is the lease.

* **Who holds it.** The group's leader assigns with :class:`_Keep`: the member that says (in its join
  metadata) it held the lease keeps it, else the least member id takes it. So a replica that joins
  later never takes the lease from a live holder (aiokafka's round-robin or range assignors would hand
  it to whichever member id sorts first).
* **Waiting.** A member without the lease writes one ``lease_wait`` line, keeps its membership alive
  (it polls the empty topic) and takes the lease when the coordinator reassigns it: after the holder
  leaves (a clean stop leaves the group at once) or its session times out (a SIGKILL, a hang).
* **Fencing.** A rebalance pauses the holder (:meth:`Lease.hold` blocks from the revocation to the
  next assignment); an assignment without the partition means the coordinator gave it to another
  member, and :meth:`Lease.hold` raises :class:`LeaseLost` (the process stops: it may be a zombie
  whose session expired). A second holder is assigned the lease only in a generation the first has
  either rejoined (and so is paused until it learns it lost it) or been expelled from.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition  # type: ignore[import-untyped]
from aiokafka.abc import ConsumerRebalanceListener  # type: ignore[import-untyped]
from aiokafka.coordinator.assignors.abstract import (  # type: ignore[import-untyped]
    AbstractPartitionAssignor,
)
from aiokafka.coordinator.protocol import (  # type: ignore[import-untyped]
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)

from services.runtime.logging import get_logger
from services.runtime.settings import Settings

LEASE_TOPIC = "casino.leases"
"""The lease topic (logical): one partition, never written; each single-member service's lease group
subscribes to it."""

EXIT_LEASE = 75
"""Exit status of a member that lost its lease (EX_TEMPFAIL: its supervisor starts it again, and it
waits as a standby)."""

POLL_MS = 500
"""How long each poll of the (empty) lease topic waits: polling keeps the membership alive."""

_HELD = b"held"


class LeaseLost(RuntimeError):
    """The coordinator gave the lease to another member: this one must stop writing at once."""


def lease_group(settings: Settings, service: str) -> str:
    """The lease's consumer group for ``service``."""
    return f"{settings.topic_prefix}casino-{service}.lease"


def _keep(lease: Lease) -> type[AbstractPartitionAssignor]:
    """An assignor class of ``lease``'s own (aiokafka's assignors are classes with class methods, so
    two leases in one process need two classes): the holder keeps the partition."""

    class _Keep(AbstractPartitionAssignor):  # type: ignore[misc]
        name = "casino-lease"
        version = 0

        @classmethod
        def metadata(cls, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
            return ConsumerProtocolMemberMetadata(cls.version, sorted(topics), _HELD if lease.claims else b"")

        @classmethod
        def on_assignment(cls, assignment: ConsumerProtocolMemberAssignment) -> None:
            return None

        @classmethod
        def assign(
            cls, cluster: Any, members: Mapping[str, ConsumerProtocolMemberMetadata]
        ) -> dict[str, ConsumerProtocolMemberAssignment]:
            claimants = sorted(m for m, meta in members.items() if meta.user_data == _HELD)
            holder = claimants[0] if claimants else min(members)
            topics = sorted({t for meta in members.values() for t in meta.subscription})
            given = [(t, sorted(cluster.partitions_for_topic(t) or ())) for t in topics]
            return {
                m: ConsumerProtocolMemberAssignment(cls.version, given if m == holder else [], b"")
                for m in members
            }

    return _Keep


class Lease:
    """One member's lease on ``service`` (see the module docstring)."""

    def __init__(self, settings: Settings, service: str) -> None:
        self.settings = settings
        self.service = service
        self.group = lease_group(settings, service)
        self.claims = False
        """Whether this member held the lease at its last assignment (what its join metadata says)."""
        self.lost = False
        self._held = asyncio.Event()
        self._consumer: AIOKafkaConsumer | None = None
        self._poller: asyncio.Task[None] | None = None
        self._waited = False
        self._log = get_logger("casino_ledger.lease")

    @property
    def held(self) -> bool:
        """Whether this member holds the lease now (not during a rebalance)."""
        return self._held.is_set() and not self.lost

    @property
    def standby(self) -> bool:
        """Whether this member waits while another holds the lease (told so by an assignment)."""
        return self._waited and not self.claims and not self.lost

    async def acquire(self) -> None:
        """Join the lease group and return once this member holds the lease (one ``lease_wait`` line
        while another holds it)."""
        from services.runtime.kafka.worker import TopicSpec, ensure_topics  # noqa: PLC0415 (a cycle)

        await ensure_topics(self.settings, [TopicSpec(LEASE_TOPIC, 1)])
        s = self.settings
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=s.bootstrap_list, group_id=self.group, enable_auto_commit=False,
            fetch_max_wait_ms=POLL_MS, partition_assignment_strategy=(_keep(self),),
            session_timeout_ms=int(s.session_timeout_s * 1000),
            heartbeat_interval_ms=int(s.heartbeat_interval_s * 1000),
            rebalance_timeout_ms=int(s.rebalance_timeout_s * 1000), **s.aiokafka_auth(),
        )  # fmt: skip
        self._consumer.subscribe([s.topic(LEASE_TOPIC)], listener=_Listener(self))
        await self._consumer.start()
        self._poller = asyncio.ensure_future(self._poll())
        await self.hold()

    async def _poll(self) -> None:
        assert self._consumer is not None
        while True:
            await self._consumer.getmany(timeout_ms=POLL_MS)

    async def hold(self) -> None:
        """Return while this member holds the lease; wait through a rebalance; :class:`LeaseLost` once
        the coordinator gave it to another member."""
        while not self._held.is_set():
            if self.lost:
                raise LeaseLost(f"the lease of {self.service} went to another member ({self.group})")
            if self._poller is not None and self._poller.done():
                self._poller.result()  # the poller's error, if it died
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._held.wait(), POLL_MS / 1000)
        if self.lost:
            raise LeaseLost(f"the lease of {self.service} went to another member ({self.group})")

    async def release(self) -> None:
        """Leave the lease group (a standby takes the lease at once, not after a session timeout)."""
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(BaseException):
                await self._poller
        if self._consumer is not None:
            await self._consumer.stop()
        self._consumer = self._poller = None
        self._held.clear()
        self.claims = False

    def revoked(self) -> None:
        """A rebalance began: the holder pauses until the next assignment."""
        self._held.clear()

    def assigned(self, tps: Iterable[TopicPartition]) -> None:
        """The new generation's assignment: the lease held, kept, lost, or waited for."""
        mine = bool(list(tps))
        if mine:
            if not self.claims:
                self._log.info("lease_held", service=self.service, group=self.group, waited=self._waited)
            self.claims = True
            self._held.set()
            return
        if self.claims:
            self.claims, self.lost = False, True
            self._log.critical("lease_lost", service=self.service, group=self.group)
            self._held.set()  # wake hold(), which raises
            return
        if not self._waited:
            self._waited = True
            self._log.warning(
                "lease_wait", service=self.service, group=self.group,
                why="another member holds the lease: this one waits and takes over when it goes",
            )  # fmt: skip


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, lease: Lease) -> None:
        self.lease = lease

    async def on_partitions_revoked(self, revoked: Any) -> None:
        self.lease.revoked()

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self.lease.assigned(assigned)
