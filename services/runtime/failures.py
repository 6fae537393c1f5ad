"""What the command line says when something outside the code goes wrong (docs/cli.md, issue #8).

Bad input and a hostile environment — a missing, foreign or damaged log file, a directory where a
file belongs, a full disk, an unreachable broker, a malformed setting — are not bugs: the operator
gets one line on stderr and exit status 2, never a traceback. Shells raise :class:`BadInput` (or a
subclass) where they can name the cause; :func:`one_line` turns the library exceptions they cannot
wrap everywhere (``OSError``, ``sqlite3.Error``, Kafka connection errors, a settings
``ValidationError``) into that one line. Neither ever quotes a setting's value: a password or a key
may be one.
"""

from __future__ import annotations

import errno
import sqlite3
import sys
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

ENV_PREFIX = "CASINO_"


class BadInput(Exception):
    """Something the operator can fix (an argument, a file, a setting, the network): one line, exit 2."""


class NotALog(BadInput):
    """The file is not a casino-ledger log (another SQLite database, another format, damaged)."""


class BrokerUnreachable(BadInput):
    """No Kafka broker answered at the bootstrap servers."""


class ConfigError(BadInput):
    """A setting (environment variable or keyring) is malformed; the message names it, never its value."""


def settings_error(exc: ValidationError) -> str:
    """A pydantic(-settings) validation error as one line naming each variable and the problem, without
    the input values (pydantic quotes them, and a SASL password or a key may be among them)."""
    problems = []
    for err in exc.errors(include_url=False, include_context=False, include_input=False):
        where = ".".join(str(p) for p in err["loc"])
        message = str(err["msg"]).removeprefix("Value error, ")
        problems.append(f"{ENV_PREFIX}{where.upper()}: {message}" if where else message)
    return "invalid settings: " + "; ".join(problems)


def one_line(exc: BaseException, where: str | None = None) -> str | None:
    """The one line to print for ``exc`` when it is an environment or input failure, else ``None`` (a
    bug: the caller prints its last-resort line and exits 70). ``where`` names the file in play."""
    at = f"{where}: " if where else ""
    if isinstance(exc, BadInput):
        return str(exc)
    if isinstance(exc, ValidationError) and exc.title.endswith("Settings"):
        return settings_error(exc)
    if type(exc).__name__ == "SettingsError" and type(exc).__module__.startswith("pydantic_settings"):
        return f"invalid settings: {exc}"  # names the field and the source, not the value
    if isinstance(exc, BrokenPipeError):
        return "the output was closed before everything was written (broken pipe)"
    if isinstance(exc, OSError):  # a write error names no file: say what failed, not which file
        name = f"{exc.filename}: " if getattr(exc, "filename", None) else "cannot write or read: "
        hint = " (the disk is full)" if exc.errno == errno.ENOSPC else ""
        return f"{name}{exc.strerror or exc}{hint}"
    if isinstance(exc, sqlite3.OperationalError):
        return f"{at}the log cannot be read or written: {exc} (is the disk full, or the file locked?)"
    if isinstance(exc, sqlite3.DatabaseError):
        return f"{at}not a casino-ledger log, or a damaged one: {exc}"
    if _is_kafka_connection_error(exc):
        return f"cannot reach the Kafka broker: {_kafka_reason(exc)}"
    return None


def _is_kafka_connection_error(exc: BaseException) -> bool:
    names = {cls.__name__ for cls in type(exc).__mro__}
    module = type(exc).__module__
    return module.startswith(("aiokafka", "kafka", "faust", "mode")) and bool(
        names & {"KafkaConnectionError", "NodeNotReadyError", "KafkaTimeoutError", "RequestTimedOutError"}
    )


def _kafka_reason(exc: Any) -> str:
    text = " ".join(str(exc).split())
    return text[:200] or type(exc).__name__


def exit_status(command: Any, argv: Sequence[str] | None) -> int:
    """Run a module's own click ``command`` on ``argv`` (default: the process's) and give its exit
    status: its return value, click's for a bad invocation (2, the reason on stderr), 130 interrupted."""
    import click  # noqa: PLC0415 (only the modules' own entry points need it)

    try:
        result = command.main(args=list(argv if argv is not None else sys.argv[1:]), standalone_mode=False)
    except click.ClickException as exc:
        exc.show()
        return int(exc.exit_code)
    except click.Abort:  # click's word for an interrupt
        return 130
    return int(result or 0)
