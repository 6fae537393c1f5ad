"""``casino-ledger pipeline --db PATH --keyring KEYS [--follow]``: the embedded log's pipeline in a process
of its own, so that ``serve`` can run on the back office's key alone.

``serve --db X --keyring backoffice.json`` (the back office's key file from ``keys new --split DIR``) holds
no service's secret, so it only appends its commands, signed as ``backoffice``, and waits for their outcome
in the read model (:mod:`services.integrations.backoffice.commands`). This command holds the services' keys
(the whole
keyring the log was written with) and runs the processors until idle; with ``--follow`` it then watches
the log's head (every :data:`POLL_S`) and runs them again whenever a record arrives, until SIGTERM or
Ctrl-C ends it between two runs. One process runs the pipeline on a log: it holds ``<db>.pipeline.lock``
(:func:`~services.cli.backoffice.pipeline_lock`), as a ``serve`` that holds every key does.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from services.cli.backoffice import _check_db, _fail, _keyring, _signing_keyring, pipeline_lock

POLL_S = 0.01
"""How often ``--follow`` looks at the log's head."""


def cmd_pipeline(args: argparse.Namespace) -> int:
    """Run the embedded pipeline on ``--db`` with the keyring's services' keys (see the module)."""
    if (err := _check_db(args.db)) is not None:
        return _fail(err)
    keyring = _keyring(args)
    if keyring is None:
        return _fail("pipeline needs --keyring FILE (or CASINO_KEYRING): the keyring the log is written with")
    fatal, refused, alone = _signing_keyring(keyring, args.db)
    if alone:
        return _fail(f"--keyring {keyring} holds the back office's key alone: the pipeline runs with the "
                     "services' keys (the whole keyring the log was written with)")  # fmt: skip
    if fatal is not None or refused is not None:
        return _fail(f"pipeline: {fatal or refused}")
    stop = threading.Event()

    def stopping(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, stopping)
    try:
        with pipeline_lock(args.db, what="pipeline"):
            applied = _run(Path(args.db), Path(keyring), follow=args.follow, stop=stop)
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(f"casino-ledger pipeline: {applied} records through the pipeline", file=sys.stderr)
    return 0


def _runners(log: Any, keyring: Path) -> list[Any]:
    """The composition root's processors on ``keyring``, each a runner on ``log``."""
    from services.runtime.compose import keyring_pipeline  # noqa: PLC0415
    from services.runtime.embedded.runner import Runner  # noqa: PLC0415

    return [Runner(log, proc, name) for name, proc in keyring_pipeline(keyring)]


def _run(db: Path, keyring: Path, *, follow: bool, stop: threading.Event) -> int:
    """Run the pipeline until idle; with ``follow``, again each time the log's head moves, until
    ``stop``. Returns the records applied."""
    from services.runtime.embedded.runner import run_until_idle  # noqa: PLC0415
    from services.runtime.embedded.store import EmbeddedLog  # noqa: PLC0415

    with EmbeddedLog(db) as log:
        runners = _runners(log, keyring)
        applied = 0
        try:
            if follow:
                print(f"casino-ledger pipeline: following {db} (SIGTERM or Ctrl-C stops it)", file=sys.stderr)
            while not stop.is_set():
                applied += run_until_idle(runners, seal=True)
                if not follow:
                    break
                seen = log.head()
                while not stop.is_set() and log.head() == seen:
                    stop.wait(POLL_S)
        finally:
            for runner in runners:  # the next start re-applies little (ADR 0001)
                runner.snapshot_if_behind()
    return applied
