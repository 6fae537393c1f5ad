"""Commands from the API on Kafka (``serve --kafka``): signed as principal ``backoffice``, produced to
the wallet's request topic, answered once the read model shows their outcome.

The back office is an outside writer there as on the embedded log
(:mod:`services.integrations.backoffice.commands`):
the same envelopes (``Deposit``, ``Withdraw``, ``PlaceBet`` on ``casino.wallet.requests``, ids derived from
the API key's id and the ``Idempotency-Key``), authenticated with the ``backoffice`` principal's key
alone. The workers (settlement, dealer) run them; ``casino-ledger project --kafka --follow`` projects
their outcome into the read model that ``serve`` reads. **Write your reads**: :meth:`KafkaGateway.command`
returns only once the read model holds the command's outcome
(:func:`services.integrations.backoffice.commands.awaited`),
or raises :class:`OutcomeTimeout` after ``timeout_s`` (the API answers 504: the command is on the log,
retry with the same Idempotency-Key to read its answer).

A command whose outcome the read model holds already before it is produced (its ids are derived from the
Idempotency-Key, so the same key was used before and its stored answer is gone) is a
:class:`~services.runtime.embedded.store.LogConflict`, as a second request under one id is on the embedded
log: 409, nothing is produced twice; but for a ``retry``: the API stored the command as pending when its
outcome came too late (:class:`OutcomeTimeout`, on any server of the read model), and the same request
under the same key then answers the outcome the read model holds now, without producing it again.

The producer lives on an event loop of the gateway's own (a daemon thread); API threads hand it their
records and wait. :meth:`KafkaGateway.catch_up` is the readiness check: the broker answers a TCP
connection (:func:`~services.runtime.kafka.topic_io.probe`), the read model answers a query.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from aiokafka import AIOKafkaProducer  # type: ignore[import-untyped]
from sqlalchemy import func, select

from services.core import topics
from services.core.envelope import Envelope, name_id, request
from services.core.trust import Principal, authenticate
from services.integrations.backoffice import schema as s
from services.integrations.backoffice.commands import (
    PRINCIPAL,
    BrokerUnavailable,
    awaited,
    now_rfc3339,
    request_body,
)
from services.integrations.backoffice.projector import Projector
from services.runtime import intake
from services.runtime.kafka.topic_io import probe
from services.runtime.keyring import load_keyring
from services.runtime.settings import Settings

T = TypeVar("T")

PRODUCE_TIMEOUT_S = 30.0
"""How long a command waits for the broker to acknowledge it."""

DEFAULT_TIMEOUT_S = 15.0
"""How long a command waits for its outcome in the read model (``serve --wait``)."""


class KafkaGateway:
    """The API's commands onto Kafka and their outcome out of the read model (see the module)."""

    def __init__(
        self,
        settings: Settings,
        projector: Projector,
        *,
        keyring_path: str | Path | None = None,
        clock: Callable[[], str] = now_rfc3339,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.settings = settings
        self.projector = projector
        self.clock = clock
        self.timeout_s = timeout_s
        # the back office's own key, read once: serve needs no other principal's secret on Kafka
        self._key = load_keyring(keyring_path).key(Principal.BACKOFFICE) if keyring_path else None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="backoffice-kafka", daemon=True)
        self._thread.start()
        self._producer: AIOKafkaProducer | None = None

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def close(self) -> None:
        """Stop the producer and the gateway's loop."""

        async def stop() -> None:
            if self._producer is not None:
                await self._producer.stop()
                self._producer = None

        if self._thread.is_alive():
            try:
                self._run(stop(), self.timeout_s)
            finally:
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._thread.join(self.timeout_s)

    def position(self) -> int:
        """How many records ``project --kafka`` applied: the sum of its partitions' positions (each one
        the next offset to read)."""
        p = s.positions.c
        query = select(func.coalesce(func.sum(p.offset), 0)).where(
            p.consumer == self.projector.name, p.source.like("kafka:%")
        )
        with self.projector.engine.connect() as c:
            return int(c.execute(query).scalar_one())

    def catch_up(self) -> int:
        """Readiness: raises when the broker or the read model cannot be reached (the projection itself is
        ``project --kafka --follow``'s). Returns 0: nothing is projected here."""
        probe(self.settings)
        self.position()
        return 0

    async def _send(self, envelope: Envelope) -> None:
        if self._producer is None:
            producer = AIOKafkaProducer(
                bootstrap_servers=self.settings.bootstrap_list, acks="all", **self.settings.aiokafka_auth()
            )
            try:
                await producer.start()
            except Exception:
                await producer.stop()
                raise
            self._producer = producer
        topic = self.settings.topic(envelope.topic)
        await self._producer.send_and_wait(topic, intake.encode(envelope), key=intake.encode_key(envelope))

    def _produce(self, envelope: Envelope) -> None:
        try:
            probe(self.settings)  # one line at once, not aiokafka's retries until its request timeout
        except Exception as exc:
            raise BrokerUnavailable(f"the command was not written: {exc}") from None
        try:
            self._run(self._send(envelope), PRODUCE_TIMEOUT_S)
        except Exception as exc:  # sent, maybe: a retry writes the same ids, which the wallet applies once
            raise BrokerUnavailable(f"the broker did not acknowledge the command: {type(exc).__name__}: "
                                    f"{(str(exc).splitlines() or [''])[0][:200]}") from None  # fmt: skip

    def command(
        self,
        type_: str,
        account_id: str,
        payload: dict[str, Any],
        *,
        key_id: str,
        idem: str,
        outcome: Callable[[], T],
        final: Callable[[T], bool],
        retry: bool = False,
        topic: str = topics.WALLET_REQUESTS,
    ) -> tuple[str, T]:
        """Produce one wallet request for ``account_id`` (ids derived from ``key_id`` and ``idem``) and
        wait until ``final(outcome())``; returns the request's event id and that outcome. ``retry``: the
        request was produced before and its outcome came too late: it is not produced again, its outcome
        is awaited. ``topic``: another request topic, keyed by ``account_id`` (:func:`request_body`)."""
        event_id = name_id(PRINCIPAL, key_id, idem)

        def write() -> None:
            env = request(
                type_, topic, account_id, request_body(topic, account_id, payload),
                event_id=event_id, occurred_at=self.clock(), producer=PRINCIPAL,
            )  # fmt: skip
            self._produce(authenticate(env, self._key) if self._key is not None else env)

        hint = "is `casino-ledger project --kafka --follow` running, and the workers?"
        found = awaited((event_id, topic), (outcome, final), retry, write=write, look=lambda: None,
                        wait_s=self.timeout_s, hint=hint)  # fmt: skip
        return event_id, found
