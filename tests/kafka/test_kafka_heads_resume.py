"""A writer's signed heads resume from its last one on ``casino.attest`` by reading back from the end of
the one partition its key goes to, a window at a time (issue #31: a restart costs about the same on a
year-old topic as on a day-old one). On a real broker (Tansu)."""

from __future__ import annotations

from typing import Any

import pytest

from services.core import attest, topics
from services.core.trust import Principal
from services.runtime.kafka import attesting
from services.runtime.kafka.topic_io import aproduce_raw, key_partition
from services.runtime.kafka.worker import TopicSpec, ensure_topics
from services.runtime.keyring import new_keyring
from tests.kafka.test_kafka_runtime import settings_for
from tests.unit.test_attest import _event

PARTITIONS = 6
NOISE = 3 * attesting.RESUME_WINDOW
"""Records of another key on the same partition: more than one window."""


def _neighbour(writer: str) -> str:
    """A key that goes to the same partition of ``casino.attest`` as ``writer``'s."""
    mine = key_partition(writer.encode(), range(PARTITIONS))
    return next(
        k
        for k in (f"other-{i}" for i in range(10_000))
        if key_partition(k.encode(), range(PARTITIONS)) == mine
    )


async def _resumed(settings: Any, guard: Any) -> tuple[Any, int]:
    return await attesting.last_signed_head(settings, "dealer", guard.own.public_hex)


@pytest.mark.parametrize("ours_last", [True, False])
async def test_the_last_signed_head_is_found_reading_back_from_the_end_of_its_partition(
    kafka_broker: str, ours_last: bool
) -> None:
    """Three signed heads of the dealer and, on the same partition, more than a window of another
    key's records (after them, or before them): the resume finds the third head; when the heads are
    the last records it reads one window, not the partition."""
    settings = settings_for(kafka_broker)
    await ensure_topics(settings, [TopicSpec(topics.ATTEST, PARTITIONS)])
    guard = new_keyring().guard(Principal.DEALER)
    chain = attest.AttestChain("dealer")
    heads = [attest.attest_batch(chain, [_event(topics.TABLE_EVENTS, "T1", i)], guard)[0] for i in range(3)]
    ours = [(topics.ATTEST, b"dealer", raw) for _, raw in heads]
    noise = [(topics.ATTEST, _neighbour("dealer").encode(), b"not a signed head") for _ in range(NOISE)]
    await aproduce_raw(settings, [*noise, *ours] if ours_last else [*ours, *noise])
    last, read = await _resumed(settings, guard)
    assert last is not None and (last.event_id, last.seq) == (heads[-1][0].event_id, 2)
    if ours_last:
        assert read <= attesting.RESUME_WINDOW < NOISE + len(ours)
    else:
        assert read == NOISE + len(ours)  # back to the partition's start, every record once


async def test_a_writer_with_no_signed_head_yet_resumes_from_nothing(kafka_broker: str) -> None:
    """An empty topic, or only other keys' records: no head, the chain starts afresh."""
    settings = settings_for(kafka_broker)
    await ensure_topics(settings, [TopicSpec(topics.ATTEST, PARTITIONS)])
    guard = new_keyring().guard(Principal.DEALER)
    assert (await _resumed(settings, guard))[0] is None
    await aproduce_raw(settings, [(topics.ATTEST, _neighbour("dealer").encode(), b"x")] * 10)
    assert (await _resumed(settings, guard))[0] is None
