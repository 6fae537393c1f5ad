"""The shared consume loop's order of steps and the lease's decisions (who keeps it, when a member
waits, pauses or is fenced), without a broker: the broker-backed behaviour is in
tests/kafka/test_kafka_single_members.py and tests/kafka/test_seamless_lease.py."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import pytest
from aiokafka import TopicPartition  # type: ignore[import-untyped]
from aiokafka.coordinator.protocol import ConsumerProtocolMemberMetadata  # type: ignore[import-untyped]

from services.runtime.kafka import loop
from services.runtime.kafka.lease import Lease, LeaseLost, _keep
from services.runtime.settings import Settings

TP = TopicPartition("casino.leases", 0)


class _Cluster:
    def partitions_for_topic(self, topic: str) -> set[int]:
        return {0}


def _meta(held: bool) -> ConsumerProtocolMemberMetadata:
    return ConsumerProtocolMemberMetadata(0, ["casino.leases"], b"held" if held else b"")


def _holders(members: dict[str, ConsumerProtocolMemberMetadata]) -> list[str]:
    lease = Lease(Settings(demo_mode=True), "audit")
    out = _keep(lease).assign(_Cluster(), members)
    return [m for m, a in out.items() if a.assignment]


@pytest.mark.parametrize(
    ("members", "holder"),
    [
        ({"b": _meta(False), "a": _meta(False)}, "a"),  # nobody held it: the least member id
        ({"a": _meta(False), "z": _meta(True)}, "z"),  # the holder keeps it from a member that sorts first
        ({"m": _meta(True), "c": _meta(True), "a": _meta(False)}, "c"),  # two claim it: one only
    ],
)
def test_exactly_one_member_gets_the_lease_and_the_holder_keeps_it(
    members: dict[str, ConsumerProtocolMemberMetadata], holder: str
) -> None:
    """One member, and only one, is assigned the lease partition; a member that held it keeps it."""
    assert _holders(members) == [holder]


def _assign(lease: Lease, tps: Iterable[TopicPartition]) -> None:
    lease.revoked()
    lease.assigned(tps)


def test_a_member_waits_then_holds_and_is_fenced_when_the_lease_moves() -> None:
    """Empty assignment: a standby (not held); given the partition: held; a rebalance pauses it; an
    assignment without it afterwards: fenced (``hold`` raises), never a standby again."""

    async def scenario() -> None:
        lease = Lease(Settings(demo_mode=True), "seamless")
        _assign(lease, [])
        assert lease.standby and not lease.held
        _assign(lease, [TP])
        assert lease.held and not lease.standby
        await lease.hold()
        lease.revoked()
        assert not lease.held
        pausing = asyncio.ensure_future(lease.hold())
        await asyncio.sleep(0.01)
        assert not pausing.done()  # paused through the rebalance
        lease.assigned([])
        with pytest.raises(LeaseLost):
            await pausing
        assert not lease.held and not lease.standby

    asyncio.run(scenario())


def test_the_loop_fetches_until_stopped_handles_batches_and_idles_on_empty_fetches() -> None:
    """Batches go to ``handle`` in order, empty fetches to ``idle``; ``done`` ends the loop before the
    next fetch."""
    fetched = [{TP: [1]}, {}, {TP: [2, 3]}, {}]
    handled: list[object] = []
    idled: list[int] = []

    async def fetch() -> loop.Batch:
        return fetched.pop(0)

    async def handle(batch: loop.Batch) -> None:
        handled.append(batch[TP])

    async def idle() -> None:
        idled.append(len(handled))

    asyncio.run(loop.consume(fetch, handle, idle=idle, done=lambda: not fetched))
    assert handled == [[1], [2, 3]]
    assert idled == [1, 2]


def test_a_stop_set_before_the_loop_fetches_nothing() -> None:
    """A stop already set: no fetch at all."""
    stop = asyncio.Event()
    stop.set()

    async def fetch() -> loop.Batch:
        raise AssertionError("fetched after the stop")

    async def handle(batch: loop.Batch) -> None:
        raise AssertionError("handled after the stop")

    asyncio.run(loop.consume(fetch, handle, stop=stop))
