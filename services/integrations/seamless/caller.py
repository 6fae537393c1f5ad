"""The seamless adapter's HTTP shell over the embedded log, and a bus that runs it with the pipeline.

:class:`EmbeddedCaller` reads the ``SeamlessCallRequested`` records after its committed offset, makes
those calls concurrently (one per wallet at a time by construction: the adapter asks for the next
call of a wallet only once the previous answer is folded in), and appends each answer with the new
offset in one SQLite transaction: a crash before it repeats the calls (the operator de-duplicates by
transaction id), never records an answer twice. :class:`SeamlessBus` is the simulator's bus with the
caller in the loop: ``drain`` runs the processors and the calls until no call is outstanding.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from services.core import topics
from services.core.envelope import Envelope, parse_record
from services.core.processor import Processor
from services.core.trust import Guard
from services.integrations.seamless.client import OperatorClient, answer_envelope
from services.runtime.embedded.bus import EmbeddedBus
from services.runtime.embedded.runner import run_until_idle, seal_idle
from services.runtime.embedded.store import EmbeddedLog
from services.runtime.settings import SeamlessConfig

CALLER_NAME = "settlement.seamless"
"""The caller's consumer name in the log (its committed offset)."""


class EmbeddedCaller:
    """Makes the calls the adapter asked for on the embedded log and records their answers."""

    def __init__(
        self, log: EmbeddedLog, client: OperatorClient, guard: Guard | None, *, batch: int = 500
    ) -> None:
        self.log = log
        self.client = client
        self.guard = guard
        self.batch = batch
        self.position = log.committed(CALLER_NAME)
        self._gate = asyncio.Semaphore(client.config.concurrency)

    def pending(self) -> list[tuple[int, Envelope]]:
        """The call requests after the committed offset, with their offsets."""
        out: list[tuple[int, Envelope]] = []
        after = self.position
        while rows := self.log.read((topics.WALLET_EVENTS,), after, self.batch):
            for offset, _topic, _key, raw in rows:
                if (
                    b'"SeamlessCallRequested"' in raw
                    and json.loads(raw).get("type") == "SeamlessCallRequested"
                ):
                    out.append((offset, parse_record(raw)))
            after = rows[-1][0]
        self._seen_to = after
        return out

    async def _one(self, request: Envelope) -> Envelope:
        async with self._gate:
            answer = await self.client.call(request.payload)
        return answer_envelope(request, answer, self.guard)

    async def round(self) -> int:
        """Make every pending call and record the answers; returns how many calls were made."""
        todo = self.pending()
        answers = await asyncio.gather(*(self._one(env) for _, env in todo)) if todo else []
        with self.log.transaction():
            self.log.append(answers, internal=True)
            self.log.commit_offset(CALLER_NAME, self._seen_to)
        self.position = self._seen_to
        return len(todo)


class SeamlessBus(EmbeddedBus):
    """The embedded bus with the seamless caller: ``drain`` runs until every call has its answer."""

    def __init__(
        self,
        path: str | Path,
        runners: Sequence[tuple[str, Processor[Any]]],
        config: SeamlessConfig,
        guard: Guard | None,
    ) -> None:
        super().__init__(path, runners)
        self.loop = asyncio.new_event_loop()
        self.client = OperatorClient(config)
        self.caller = self.loop.run_until_complete(self._make_caller(guard))
        self.calls = 0

    async def _make_caller(self, guard: Guard | None) -> EmbeddedCaller:
        return EmbeddedCaller(self.log, self.client, guard)

    def advance(self, envelopes: Sequence[Envelope] = ()) -> None:
        """Publish, then :meth:`drain`: the calls the stages ask for are what a table waits for."""
        if envelopes:
            self.publish(list(envelopes))
        self.drain(seal=False)

    def drain(self, *, seal: bool = True) -> None:
        """Run the processors, make the calls they asked for, and again, until nothing moves; then
        (``seal``) each writer's ``idle`` seal."""
        while True:
            run_until_idle(self.runners)
            made = self.loop.run_until_complete(self.caller.round())
            self.calls += made
            if not made:
                if seal:
                    seal_idle(self.runners)
                return

    def close(self) -> None:
        """Close the HTTP client, the loop and the log."""
        self.loop.run_until_complete(self.client.aclose())
        self.loop.close()
        super().close()
