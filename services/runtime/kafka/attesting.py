"""A Kafka worker's signed heads (docs/trust.md, :mod:`services.core.attest`).

After each batch the worker calls :func:`attest_pipes`: every pipe whose chains advanced appends one
``HeadsAttested`` (the heads that changed since its last one, signed with its principal's Ed25519 key)
to the batch's outputs, so it is acknowledged before the batch's offsets are committed; when the batch
read its input to the end the fetch saw, that attestation is the writer's ``idle`` seal. A fetch that
comes back empty calls :func:`seal_idle` too (what a batch could not tell).

A pipe's attestation chain (``casino.attest`` under its writer name) is resumed, at its first
attestation after a start, from the last record on that key that verifies under the pipe's own public
key (a forgery under that key, with a higher ``seq``, is skipped). The heads a start rebuilt by
catching up are all attested again in that first attestation: re-attesting a head is harmless, and a
head whose attestation a crash lost is then covered. One writer per key: a single-input pipe attests
per input partition (writer ``<stage>.p<partition>``), so a partition's chain moves with it from one
replica to another and is resumed from the log by its new owner.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiokafka import TopicPartition  # type: ignore[import-untyped]

from services.core import attest, topics
from services.core.envelope import ChainHead, Envelope
from services.core.trust import verify_signature
from services.runtime import intake
from services.runtime.kafka.state import WHOLE
from services.runtime.kafka.topic_io import (
    RANGE_FETCH_MS,
    key_partition,
    new_consumer,
    partitions_of,
    read_range,
    real_ends,
)
from services.runtime.logging import get_logger
from services.runtime.settings import Settings

if TYPE_CHECKING:
    from collections.abc import Sequence

    from services.core.trust import Guard
    from services.runtime.kafka.worker import Pipe, Shell

    Record = tuple[str, int, int, bytes | None]


@dataclass(slots=True)
class PipeHeads:
    """What one pipe has attested: its attestation chain (``None`` until resumed) and the heads named."""

    writer: str
    chain: attest.AttestChain | None = None
    named: dict[tuple[str, str], ChainHead] = field(default_factory=dict)
    dead: list[str] = field(default_factory=list)
    """The hashes of the dead letters the pipe wrote for this scope since its last attestation."""


def note_dead_letters(pipe: Pipe, partition: int, outputs: Sequence[tuple[Envelope, bytes]]) -> None:
    """The dead letters among a record's ``outputs`` (read from ``partition``), to be named by the
    scope's next attestation."""
    dead = attest.dead_letters_of(env for env, _ in outputs)
    if dead:
        _heads_of(pipe, pipe.scope(partition)).dead.extend(dead)


def _heads_of(pipe: Pipe, scope: int) -> PipeHeads:
    """What ``pipe`` attested for ``scope``: one attestation chain per input partition (writer
    ``<stage>.p<partition>``, so that replicas owning other partitions never fork one chain), one for a
    multi-input pipe's whole state (writer ``<stage>``)."""
    found = pipe.signed_heads.get(scope)
    if found is None:
        proc = pipe.processor
        base = proc.writer or proc.stage_name()
        writer = base if scope == WHOLE else f"{base}.p{scope}"
        found = pipe.signed_heads[scope] = PipeHeads(writer)
    return found


async def attest_pipes(shell: Shell, parts: Sequence[tuple[Pipe, Sequence[Record]]]) -> int:
    """Each pipe's attestation, per scope, of the heads it advanced since its last one, sent with the
    batch's outputs; sealed ``idle`` when the batch drained its input (its last record of each
    partition was the partition's last as the fetch saw it), and then a scope that advanced nothing
    seals its last attestation. Returns how many records were sent."""
    if all(pipe.processor.guard is None for pipe in shell.pipes):
        return 0  # nothing signs here (an unauthenticated pipeline: tests of the loop)
    drained = _drained(shell, parts)
    records: list[tuple[Envelope, bytes]] = []
    for pipe in shell.pipes:
        guard = pipe.processor.guard
        if guard is None:
            continue
        for scope, state in list(pipe.states.items()):
            mine = _heads_of(pipe, scope)
            named = mine.named
            changed = {
                k: h for k, h in state.heads.items() if named.get(k) is not h and k[0] != topics.ATTEST
            }
            if not changed and not mine.dead:
                if drained and mine.chain is not None:
                    records += attest.seal(mine.chain, guard)
                continue
            chain = await _chain(shell, mine, guard)
            at = max(pipe.record.occurred_at if pipe.record is not None else "", chain.last_at or "")
            if (
                chain.last_at is not None
                and not chain.sealed
                and attest.gaming_day(chain.last_at) < attest.gaming_day(at)
            ):
                records += attest.attestation(chain, {}, guard, occurred_at=chain.last_at, seal="day_closed")
            records += attest.attestation(
                chain, changed, guard, occurred_at=at, seal="idle" if drained else None,
                dead_letters=mine.dead,
            )  # fmt: skip
            named.update(changed)
            mine.dead = []
    return len(await shell.send(records)) if records else 0


def _drained(shell: Shell, parts: Sequence[tuple[Pipe, Sequence[Record]]]) -> bool:
    """Whether the batch read each of its partitions to the end the fetch saw (the high watermark)."""
    consumer = shell.consumer
    if consumer is None or sum(len(records) for _, records in parts) >= shell.settings.batch_max:
        return False
    for _, records in parts:
        if records:
            physical, partition, offset, _ = records[-1]
            high = consumer.highwater(TopicPartition(physical, partition))
            if high is None or offset + 1 < high:
                return False
    return True


async def seal_idle(shell: Shell) -> int:
    """Each pipe's ``idle`` seal after its last attestation (none where that already is a seal), sent
    and acknowledged; returns how many records were sent."""
    records = []
    for pipe in shell.pipes:
        guard = pipe.processor.guard
        if guard is None:
            continue
        for mine in list(pipe.signed_heads.values()):
            if mine.chain is not None and not mine.chain.sealed:
                records += attest.seal(mine.chain, guard)
    if not records:
        return 0
    sent = len(await shell.send(records))
    await shell.confirm()
    return sent


async def _chain(shell: Shell, mine: PipeHeads, guard: Guard) -> attest.AttestChain:
    if mine.chain is None:
        mine.chain = attest.AttestChain.resume(
            mine.writer, await _last_attestation(shell, mine.writer, guard)
        )
    return mine.chain


RESUME_WINDOW = 256
"""Records of the writer's partition of ``casino.attest`` read at a time, back from its end, to find its
last signed head (the window doubles until one is found or the partition's start is reached)."""


async def _last_attestation(shell: Shell, writer: str, guard: Guard) -> Envelope | None:
    """The last record on ``casino.attest`` under ``writer`` signed with ``guard``'s own key."""
    best, read = await last_signed_head(shell.settings, writer, guard.own.public_hex)
    get_logger("casino_ledger.worker").info(
        "signed_heads_resumed", writer=writer, read=read, seq=None if best is None else best.seq
    )
    return best


async def last_signed_head(
    settings: Settings, writer: str, public: str | None
) -> tuple[Envelope | None, int]:
    """The last record on ``casino.attest`` under ``writer`` signed with ``public``'s key, and how many
    records were read to find it: read back from the end of the one partition its key goes to, a window
    at a time, so a restart reads about as much on a year-old topic as on a day-old one."""
    consumer = new_consumer(settings)  # its own: the worker's reader is assigned elsewhere, and an
    await consumer.start()  # assigned consumer's metadata shows no other topic's partitions
    best: Envelope | None = None
    read_count = 0
    try:
        tps = await partitions_of(consumer, [settings.topic(topics.ATTEST)])
        if not tps:
            return None, 0
        part = key_partition(writer.encode("utf-8"), [tp.partition for tp in tps])
        tp = next(t for t in tps if t.partition == part)
        first = (await consumer.beginning_offsets([tp]))[tp]
        upto, window = (await real_ends(consumer, [tp]))[tp], RESUME_WINDOW
        while best is None:
            start = max(first, upto - window)
            read, _ = await read_range(consumer, {tp: start}, {tp: upto}, ahead_ms=RANGE_FETCH_MS)
            msgs = read.get(tp, [])
            read_count += len(msgs)
            for m in msgs:
                env = _ours(m.value, writer, public)
                if env is not None and (best is None or (env.seq or 0) > (best.seq or 0)):
                    best = env
            if start <= first:
                break
            upto, window = start, window * 2
    finally:
        await consumer.stop()
    return best, read_count


def _ours(raw: Any, writer: str, public: str | None) -> Envelope | None:
    try:
        env = intake.decode(raw)
    except intake.DecodeError:
        return None
    sig = (env.auth or {}).get("sig")
    if env.key != writer or public is None or sig is None or not verify_signature(public, env.hash, sig):
        return None
    return env
