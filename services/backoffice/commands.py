"""Commands from the API, appended to the embedded log as principal ``backoffice`` and run through the
pipeline (the embedded runtime's own runners), then projected, so that the answer reflects them.

The back office is an outside writer like a cashier's desk or a table terminal: it writes requests
(``Deposit``, ``Withdraw``, ``PlaceBet`` on ``casino.wallet.requests``) with ``producer`` =
``backoffice``, ids derived from the API key's id and the ``Idempotency-Key`` (a retry re-derives the
same ids, and the log ignores an identical record), and the wall-clock time of the request (the shell
may read a clock; the core never does).

**Trust.** Every envelope goes through :func:`_as_backoffice` before it is appended: it is
authenticated with the ``backoffice`` principal's key from the keyring that ``serve --keyring`` (or
``CASINO_KEYRING``) names, and the pipeline the gateway runs is built by the composition root from that
same keyring, so it verifies what the API signs. Without a keyring the envelope goes in as an
outsider's would, and the pipeline refuses it (``unauthenticated``).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from services.backoffice.projector import Projector
from services.core import topics
from services.core.envelope import Envelope, name_id, request
from services.core.processor import Processor
from services.core.trust import Principal, authenticate
from services.runtime.compose import Composition
from services.runtime.embedded.log import EmbeddedLog, Runner, default_pipeline, run_until_idle
from services.runtime.keyring import load_keyring
from services.runtime.settings import Settings

T = TypeVar("T")

PRINCIPAL = "backoffice"
"""The principal (and ``producer``) of every record the API writes."""


def _as_backoffice(envelope: Envelope, keyring_path: str | Path | None) -> Envelope:
    """``envelope`` authenticated as principal ``backoffice`` with the keyring at ``keyring_path`` (the
    only place the API signs); without a keyring, as it is."""
    if keyring_path is None:
        return envelope
    return authenticate(envelope, load_keyring(keyring_path).key(Principal.BACKOFFICE))


def _pipeline(keyring_path: str | Path | None) -> list[tuple[str, Processor[Any]]]:
    """The processors the gateway runs: the composition root's, on the keyring the API signs with."""
    if keyring_path is None:
        return default_pipeline()
    settings = Settings().model_copy(update={"keyring": Path(keyring_path)})
    return Composition.from_settings(settings).pipeline()


def now_rfc3339() -> str:
    """The wall-clock time as the log writes times (UTC, milliseconds, ``Z``)."""
    t = datetime.now(UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


class Gateway:
    """Appends API commands to the embedded log at ``log_path``, runs the pipeline until idle and
    projects the result, one command at a time, so that the answer reads its own effects.

    Every use of the log happens on one worker thread of the gateway's own (SQLite connections belong
    to the thread that opened them); callers from any thread wait for their turn.
    """

    def __init__(
        self,
        log_path: str | Path,
        projector: Projector,
        *,
        keyring_path: str | Path | None = None,
        clock: Callable[[], str] = now_rfc3339,
    ) -> None:
        self.log_path = Path(log_path)
        self.projector = projector
        self.keyring_path = keyring_path
        self.clock = clock
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="backoffice-log")
        self._log: EmbeddedLog | None = None
        self._runners: list[Runner[Any]] = []

    def _run(self, fn: Callable[[], T]) -> T:
        return self._worker.submit(fn).result()

    def _open(self) -> EmbeddedLog:
        if self._log is None:
            self._log = EmbeddedLog(self.log_path)
            self._runners = [Runner(self._log, proc, name) for name, proc in _pipeline(self.keyring_path)]
        return self._log

    def close(self) -> None:
        """Close the log and stop the worker thread."""

        def shut() -> None:
            if self._log is not None:
                for runner in self._runners:  # the next start re-applies little (ADR 0001)
                    runner.snapshot_if_behind()
                self._log.close()
                self._log, self._runners = None, []

        self._run(shut)
        self._worker.shutdown()

    def catch_up(self) -> int:
        """Project what the log holds beyond the read model."""

        def run() -> int:
            if self._log is not None:
                return self.projector.catch_up(self._log)
            with EmbeddedLog(self.log_path, readonly=True) as log:
                return self.projector.catch_up(log)

        return self._run(run)

    def submit(self, type_: str, account_id: str, payload: dict[str, Any], *, key_id: str, idem: str) -> str:
        """Write one wallet request for ``account_id`` (ids derived from ``key_id`` and ``idem``), run
        the pipeline and the projector; returns the request's event id."""
        full = {"account_id": account_id, **payload}
        return self.submit_to(topics.WALLET_REQUESTS, type_, account_id, full, key_id=key_id, idem=idem)

    def submit_to(
        self, topic: str, type_: str, key: str, payload: dict[str, Any], *, key_id: str, idem: str
    ) -> str:
        """Write one request of ``type_`` on ``topic`` keyed by ``key`` (ids derived from ``key_id`` and
        ``idem``), run the pipeline and the projector; returns the request's event id."""
        event_id = name_id(PRINCIPAL, key_id, idem)
        env = request(
            type_, topic, key, payload, event_id=event_id, occurred_at=self.clock(), producer=PRINCIPAL
        )

        def run() -> None:
            log = self._open()
            log.append([_as_backoffice(env, self.keyring_path)])
            run_until_idle(self._runners, seal=True)
            self.projector.catch_up(log)

        self._run(run)
        return event_id
