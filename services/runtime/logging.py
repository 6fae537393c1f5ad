"""structlog setup for the shells: JSON lines in containers and pipes, a readable console in a terminal.

The format is JSON when ``LOG_FORMAT=json`` or when the output stream is not a TTY, the console
renderer otherwise (``LOG_FORMAT=console`` forces it). The level comes from ``LOG_LEVEL`` (default
``INFO``). Logs go to stderr, so that commands whose stdout is a contract (``deal``, ``odds --json``,
``export``) stay machine-readable while they log.

Libraries that log through the standard ``logging`` module (faust, mode, aiokafka) are routed through
the same renderer by a root handler on the same stream, so in JSON mode every line a process writes
is one JSON object (without it, Python's last-resort handler printed their warnings as plain text).

Context is bound once per unit of work with :func:`bound` (``with bound(processor="dealer"): ...``)
and merged into every line written inside it; the embedded runner writes one summary line per batch.
The core never imports this module (docs/architecture.md, "Functional core, imperative shell").
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

import structlog
from structlog.contextvars import bind_contextvars, merge_contextvars, reset_contextvars
from structlog.typing import Processor

from services.runtime.settings import conventions

__all__ = ["bind_contextvars", "bound", "configure", "get_logger"]


def _renderer(fmt: str, stream: TextIO) -> Processor:
    chosen = fmt or conventions().log_format
    if chosen == "json" or (chosen != "console" and not stream.isatty()):
        return structlog.processors.JSONRenderer(sort_keys=True)
    return structlog.dev.ConsoleRenderer(colors=stream.isatty())


def configure(level: str | int | None = None, fmt: str = "", stream: TextIO | None = None) -> None:
    """Configure structlog for this process (idempotent: a later call replaces the earlier setup).

    ``level``: a name (``"DEBUG"``) or a ``logging`` number, default ``$LOG_LEVEL`` or ``INFO``;
    ``fmt``: ``"json"`` or ``"console"``, default ``$LOG_FORMAT`` or chosen by whether ``stream``
    is a TTY; ``stream``: default stderr.
    """
    out = stream if stream is not None else sys.stderr
    raw_level = level if level is not None else conventions().log_level or "INFO"
    number = raw_level if isinstance(raw_level, int) else logging.getLevelNamesMapping()[raw_level.upper()]
    renderer = _renderer(fmt, out)
    shared: list[Processor] = [
        merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    _route_stdlib_logging(out, number, shared, renderer)
    structlog.configure(
        processors=[
            *shared,
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(number),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )


class _StdlibHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The root handler :func:`configure` installs (recognised, so a later call replaces it)."""


def _route_stdlib_logging(stream: TextIO, level: int, shared: list[Processor], renderer: Processor) -> None:
    """Send the standard library's records (faust, aiokafka...) through ``renderer`` onto ``stream``.

    Their records below WARNING are dropped unless ``level`` is DEBUG: faust and aiokafka narrate
    every rebalance at INFO.
    """
    handler = _StdlibHandler(stream)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name, structlog.stdlib.ExtraAdder()],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                renderer,
            ],
        )
    )
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _StdlibHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level if level <= logging.DEBUG else max(level, logging.WARNING))


def get_logger(name: str) -> Any:
    """A structlog logger named ``name``; configures the defaults first if nobody configured structlog.

    Without that, structlog's own default would print to stdout, into the output of the CLI.
    """
    if not structlog.is_configured():
        configure()
    return structlog.get_logger(name).bind(logger=name)


@contextmanager
def bound(**context: Any) -> Iterator[None]:
    """Bind ``context`` to every log line written inside the block (contextvars: safe across tasks)."""
    tokens = bind_contextvars(**context)
    try:
        yield
    finally:
        reset_contextvars(**tokens)
