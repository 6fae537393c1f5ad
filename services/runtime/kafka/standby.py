"""Standby stores: a worker keeps warm, in its local store, the state of the scopes it does not own
(docs/adr/0014-standby-stores.md).

Kafka Streams' standby replicas and faust's table standbys do this: a member follows the changelog of
a partition another member owns, so that when it is given that partition (the owner died, a rebalance)
its store already holds the state and the restore reads only what the changelog gained since. Here,
with ``CASINO_STANDBY_STORES=true``, each worker follows every changelog partition of its stages whose
scope it does not own, each ``CASINO_STATE_SNAPSHOT_INTERVAL_S``: for a partition whose end moved, it
takes the latest snapshot and the kept entries written before it (:meth:`Shell.absorb
<services.runtime.kafka.worker.Shell.absorb>`, the restore's own path) into the local store. A restore
then finds its local snapshot at the changelog's latest (``source: local``) or reads only the kept
entries written since the standby's last round, where a store on another machine reads every transfer
id ever applied (docs/adr/0010).

A member waiting for a single service's lease (audit's tree stage: it owns nothing) follows all of its
scopes. The standby reads with a consumer of its own (the plain reader serves restores and catch-ups),
writes only scopes not owned at the moment it writes, and never while a restore is on; a round that
fails is logged and the next one tries again (a standby only makes a restore shorter, never changes
what it restores).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING

from aiokafka import AIOKafkaConsumer, TopicPartition  # type: ignore[import-untyped]

from services.runtime.kafka import state as state_store
from services.runtime.kafka.topic_io import known, new_consumer, partitions_of
from services.runtime.logging import get_logger

if TYPE_CHECKING:
    from services.runtime.kafka.worker import Pipe, Shell


class Standby:
    """The standby rounds of one worker (see the module docstring)."""

    def __init__(self, shell: Shell) -> None:
        self.shell = shell
        self.reader: AIOKafkaConsumer | None = None
        self.seen: dict[TopicPartition, int] = {}
        """Per changelog partition, its end when the standby last took it in."""
        self.partitions: dict[str, list[TopicPartition]] = {}
        """Per changelog topic, its partitions (once known)."""

    async def run(self) -> None:
        """A round every snapshot interval until cancelled."""
        interval = self.shell.settings.state_snapshot_interval_s
        try:
            while True:
                await asyncio.sleep(interval)
                try:
                    await self.round()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # a standby only shortens restores: try again next round
                    get_logger("casino.kafka").warning("standby_round_failed", error=repr(exc))
        finally:
            if self.reader is not None:
                with contextlib.suppress(Exception):
                    await self.reader.stop()

    def owns(self, pipe: Pipe, scope: int) -> bool:
        """Whether the worker owns ``scope`` of ``pipe`` now (or is restoring: then it owns them all)."""
        shell = self.shell
        if shell.owned is not None and shell.restored != shell.owned:
            return True
        for tp in shell.owned or ():
            if pipe in shell.routes.get(tp.topic, ()) and pipe.scope(tp.partition) == scope:
                return True
        return False

    async def round(self) -> int:
        """Take in every changelog partition not owned whose end moved; returns how many snapshots."""
        shell = self.shell
        if shell.store is None:
            return 0
        if self.reader is None:
            self.reader = new_consumer(shell.settings)
            await self.reader.start()
        reader = self.reader
        taken = 0
        for pipe in shell.pipes:
            topic = shell.settings.topic(state_store.changelog_topic(pipe.stage))
            if topic not in self.partitions:
                found = await partitions_of(reader, [topic])
                if not found:  # not created yet (its first owner's restore creates it)
                    continue
                self.partitions[topic] = found
            tps = [tp for tp in self.partitions[topic] if not pipe.whole or tp.partition == 0]
            known(reader, tps)
            ends = await reader.end_offsets(tps)
            for tp in tps:
                scope = state_store.WHOLE if pipe.whole else tp.partition
                if ends[tp] == self.seen.get(tp) or self.owns(pipe, scope):
                    continue
                if await self.take(reader, pipe, scope, tp):
                    taken += 1
                self.seen[tp] = ends[tp]
        return taken

    async def take(self, reader: AIOKafkaConsumer, pipe: Pipe, scope: int, tp: TopicPartition) -> bool:
        """Take the scope's latest changelog snapshot into the local store, if newer than the store's."""
        shell, store = self.shell, self.shell.store
        assert store is not None
        latest = await shell.latest_snapshot(tp, state_store.scope_key(pipe.stage, scope), reader)
        if latest is None:
            return False
        offset, value = latest
        local = store.snapshot(pipe.stored_as, scope)
        if local is not None and local[0] >= offset:
            return False  # a store ahead of the changelog is the restore's to report (StateLost)
        started = time.perf_counter()
        since = local[0] + 1 if local is not None else 0
        kept = await shell.absorb(
            reader, pipe, scope, since=since, offset=offset, blob=value, unless=lambda: self.owns(pipe, scope)
        )
        if kept is None:  # the scope became this worker's meanwhile: its restore takes it
            return False
        shell.metrics.standby_taken()
        get_logger("casino.kafka").info(
            "standby_taken", stage=pipe.stage, scope=scope, changelog_offset=offset, kept_read=kept,
            ms=round((time.perf_counter() - started) * 1000, 1),
        )  # fmt: skip
        return True
