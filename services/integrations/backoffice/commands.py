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

**The back office's key alone** (``serve --db X --keyring backoffice.json``, the key file of ``keys new
--split DIR``): the gateway runs no pipeline (``run_pipeline=False``); it appends the signed request and
waits until the read model shows its outcome, which a separate process holding the services' keys makes
(``casino-ledger pipeline --db X --keyring KEYS --follow``: :mod:`services.cli.pipeline`), as
``serve --kafka`` waits for the workers: :class:`OutcomeTimeout` after ``timeout_s`` (504; a retry with the
same Idempotency-Key reads the outcome without appending again).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from services.core import topics
from services.core.envelope import Envelope, name_id, request
from services.core.processor import Processor
from services.core.trust import Principal, authenticate
from services.integrations.backoffice.projector import Projector
from services.runtime.embedded.runner import Runner, run_until_idle
from services.runtime.embedded.store import EmbeddedLog, LogConflict
from services.runtime.keyring import load_keyring

T = TypeVar("T")

PRINCIPAL = "backoffice"
"""The principal (and ``producer``) of every record the API writes."""

POLL_S = 0.01
"""How often a command looks for its outcome when another process makes it (:func:`awaited`): the
pipeline process on the embedded log, the workers and the follower on Kafka."""


class OutcomeTimeout(TimeoutError):
    """The command is on the log, but the read model did not show its outcome in time (Kafka)."""


class PipelineNotRunning(RuntimeError):
    """``serve`` holds the back office's key alone and no ``casino-ledger pipeline`` runs on its log."""


def pipeline_runner(log_path: str | Path) -> int | None:
    """The process id of the live ``pipeline`` that holds the log's pipeline lock (``<db>.pipeline.lock``,
    whose holder writes ``pipeline (pid N)`` into it: :func:`services.cli.backoffice.pipeline_lock`), or
    ``None``. Read, never locked: a probe that took the lock would refuse a ``pipeline`` starting then."""
    try:
        text = Path(f"{log_path}.pipeline.lock").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    found = re.fullmatch(r"pipeline \(pid (\d+)\)", text.strip())
    if found is None:
        return None
    pid = int(found.group(1))
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:  # alive, another user's
        pass
    return pid


class BrokerUnavailable(ConnectionError):
    """The command could not be written: no broker took it, nothing was written (Kafka)."""


def _as_backoffice(envelope: Envelope, keyring_path: str | Path | None) -> Envelope:
    """``envelope`` authenticated as principal ``backoffice`` with the keyring at ``keyring_path`` (the
    only place the API signs); without a keyring, as it is."""
    if keyring_path is None:
        return envelope
    return authenticate(envelope, load_keyring(keyring_path).key(Principal.BACKOFFICE))


def request_body(topic: str, key: str, payload: dict[str, Any]) -> dict[str, Any]:
    """A command's payload as written: a wallet request names its account (``key``), any other request
    (an analyst's step on an alert) is written as given."""
    return {"account_id": key, **payload} if topic == topics.WALLET_REQUESTS else payload


def awaited(
    command: tuple[str, str],
    wanted: tuple[Callable[[], T], Callable[[T], bool]],
    retry: bool,
    *,
    write: Callable[[], None],
    look: Callable[[], object],
    wait_s: float,
    hint: str,
) -> T:
    """A command whose outcome another process makes (``pipeline``, or Kafka's workers and follower):
    ``write`` it (unless ``retry``: it is on the log already, and the same id again with another time
    would be a conflicting copy), then ``look`` (bring the read model up, where this process does) until
    ``final(outcome())``, for at most ``wait_s``. ``command``: its event id and topic. An outcome already
    final before a first write means the id was used by another request (:class:`LogConflict`)."""
    event_id, topic = command
    outcome, final = wanted
    look()
    before = outcome()
    if final(before):
        if retry:
            return before
        raise LogConflict(event_id, topic)
    if not retry:
        write()
    deadline = time.monotonic() + wait_s
    while True:
        look()
        found = outcome()
        if final(found):
            return found
        if time.monotonic() >= deadline:
            raise OutcomeTimeout(
                f"the command {event_id} is on the log but its outcome is not in the read model after "
                f"{wait_s:g} s ({hint}): retry with the same Idempotency-Key"
            )
        time.sleep(POLL_S)


def now_rfc3339() -> str:
    """The wall-clock time as the log writes times (UTC, milliseconds, ``Z``)."""
    t = datetime.now(UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


Pipeline = Callable[[str | Path | None], list[tuple[str, Processor[Any]]]]
"""The processors a gateway runs, given the keyring its API signs with: the composition root's
(:func:`services.runtime.compose.keyring_pipeline`), handed in by the ``serve`` command."""


class Gateway:
    """Appends API commands to the embedded log at ``log_path``, runs the pipeline until idle and
    projects the result, one command at a time, so that the answer reads its own effects; with
    ``run_pipeline=False``, appends them and waits up to ``timeout_s`` for another process's pipeline
    (see the module).

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
        run_pipeline: bool = True,
        timeout_s: float = 15.0,
        pipeline: Pipeline | None = None,
    ) -> None:
        self.log_path = Path(log_path)
        self.projector = projector
        self.keyring_path = keyring_path
        self.clock = clock
        self.run_pipeline = run_pipeline
        if run_pipeline and pipeline is None:
            raise ValueError("a gateway that runs the pipeline needs its processors (pipeline=)")
        self.pipeline = pipeline
        self.timeout_s = timeout_s
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="backoffice-log")
        self._log: EmbeddedLog | None = None
        self._runners: list[Runner[Any]] = []

    def _run(self, fn: Callable[[], T]) -> T:
        return self._worker.submit(fn).result()

    def _open(self) -> EmbeddedLog:
        if self._log is None:
            self._log = EmbeddedLog(self.log_path)
            if self.pipeline is not None and self.run_pipeline:  # else another process runs the pipeline
                made = self.pipeline(self.keyring_path)
                self._runners = [Runner(self._log, proc, name) for name, proc in made]
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

    def position(self) -> int:
        """The log's offset the read model is projected to."""
        return self.projector.position()

    def check(self) -> None:
        """Readiness beyond the projection: with ``run_pipeline=False``, a ``pipeline`` process runs on the
        log (:func:`pipeline_runner`), else :class:`PipelineNotRunning`."""
        if not self.run_pipeline and pipeline_runner(self.log_path) is None:
            raise PipelineNotRunning(
                f"no `casino-ledger pipeline --db {self.log_path} --follow` runs on this log: commands are "
                "appended and answer 504 until one does"
            )

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
        """:meth:`submit`, then the command's ``outcome`` as the read model holds it (the runtimes'
        common call: :class:`services.integrations.backoffice.kafka_commands.KafkaGateway` waits for
        ``final``; so does
        this one with ``run_pipeline=False``: :meth:`_handed_over`; else ``retry`` does not matter: the
        pipeline runs to idle here, so an outcome is never late). ``topic``: a wallet request by default
        (``account_id`` its account), else a request keyed by ``account_id`` with ``payload`` as is."""
        body = request_body(topic, account_id, payload)
        if not self.run_pipeline:
            return self._handed_over(type_, (topic, account_id), body, key_id, idem, (outcome, final), retry)
        event_id = self.submit_to(topic, type_, account_id, body, key_id=key_id, idem=idem)
        return event_id, outcome()

    def _handed_over(  # noqa: PLR0917 (command()'s arguments, handed on)
        self,
        type_: str,
        where: tuple[str, str],
        body: dict[str, Any],
        key_id: str,
        idem: str,
        wanted: tuple[Callable[[], T], Callable[[T], bool]],
        retry: bool,
    ) -> tuple[str, T]:
        """Append the request (unless ``retry``: it is on the log already) and wait for its outcome,
        which the process running the pipeline makes (``casino-ledger pipeline``)."""
        topic, key = where
        event_id = name_id(PRINCIPAL, key_id, idem)

        def write() -> None:
            env = request(
                type_, topic, key, body, event_id=event_id, occurred_at=self.clock(), producer=PRINCIPAL
            )
            self._run(lambda: self._open().append([_as_backoffice(env, self.keyring_path)]))

        hint = f"is `casino-ledger pipeline --db {self.log_path} --keyring KEYS --follow` running?"
        found = awaited((event_id, topic), wanted, retry, write=write, look=self.catch_up,
                        wait_s=self.timeout_s, hint=hint)  # fmt: skip
        return event_id, found
