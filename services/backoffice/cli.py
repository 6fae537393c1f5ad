"""The back office's commands: ``serve``, ``apikey new``, ``project``, ``statement``, ``report``.

``statement`` and ``report`` read the read model beside the log (projecting whatever it lacks
first), write JSON or CSV to ``--out`` (``-`` = stdout, the default). Bad input: one line on stderr,
exit 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from services.runtime.textfit import printable

EXIT_BAD_INPUT = 2


def _fail(message: str) -> int:
    print(f"casino-ledger: error: {printable(message)}", file=sys.stderr)  # a log's text may be in it
    return EXIT_BAD_INPUT


def _keyring(args: argparse.Namespace) -> str | None:
    from services.backoffice.apikeys import KEYRING_ENV  # noqa: PLC0415

    value = getattr(args, "keyring", None) or os.environ.get(KEYRING_ENV)
    return str(value) if value else None


def _periods(args: argparse.Namespace) -> Any:
    from services.backoffice.projector import Periods  # noqa: PLC0415

    return Periods(cutoff_hour=args.day_cutoff, shift_hours=args.shift_hours)


def _read_model(args: argparse.Namespace) -> Any:
    """(engine, projector) of the read model beside ``--db``, migrated and caught up with the log."""
    from services.backoffice.migrate import upgrade  # noqa: PLC0415
    from services.backoffice.projector import Projector  # noqa: PLC0415
    from services.backoffice.schema import default_url, make_engine  # noqa: PLC0415
    from services.runtime.embedded.log import EmbeddedLog  # noqa: PLC0415

    engine = make_engine(default_url(args.db))
    upgrade(engine)
    projector = Projector(engine, periods=_periods(args))
    with EmbeddedLog(args.db, readonly=True) as log:
        if getattr(args, "rebuild", False):
            projector.rebuild()
        projector.catch_up(log)
    return engine, projector


def _check_db(path: str) -> str | None:
    if not Path(path).is_file():
        return f"--db: no log at {path}"
    return None


def _unsafe_out(args: argparse.Namespace) -> str | None:
    """Why ``--out`` may not be written (the log, its WAL, a keyring: :func:`check_output`), or ``None``."""
    from services.runtime.outputs import WouldOverwrite, check_output  # noqa: PLC0415

    try:
        check_output(args.out, "--out", db=args.db, extra=[_keyring(args)])
    except WouldOverwrite as exc:
        return str(exc)
    return None


def _write(out: str, text: str) -> None:
    if out == "-":
        sys.stdout.write(text)
    else:
        Path(out).write_text(text, encoding="utf-8")
        print(f"casino-ledger: wrote {out}", file=sys.stderr)


def _shown(url: str) -> str:
    """A database URL to print: its password hidden."""
    from sqlalchemy.engine import make_url  # noqa: PLC0415

    return make_url(url).render_as_string(hide_password=True)


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve the API and the page over the read model beside ``--db`` (or ``CASINO_READ_DB``)."""
    if (err := _check_db(args.db)) is not None:
        return _fail(err)
    import uvicorn  # noqa: PLC0415

    from services.backoffice.api import ServeSettings, create_app  # noqa: PLC0415
    from services.backoffice.apikeys import KeyringError  # noqa: PLC0415
    from services.backoffice.schema import default_url  # noqa: PLC0415

    keyring = _keyring(args)
    try:
        engine, _ = _read_model(args)
        settings = ServeSettings(
            log_path=Path(args.db), read_url=default_url(args.db),
            keyring_path=Path(keyring) if keyring else None, periods=_periods(args),
        )  # fmt: skip
        app = create_app(settings, engine)
    except KeyringError as exc:
        return _fail(str(exc))
    where = f"http://{args.host}:{args.port}"
    print(f"casino-ledger serve: page {where}/ , API {where}/docs (OpenAPI {where}/openapi.json)",
          file=sys.stderr)  # fmt: skip
    if not app.state.bo.keys:
        hint = "create one: casino-ledger apikey new --role admin --keyring FILE"
        print(f"casino-ledger serve: no API keys: every /v1 request but /v1/health gets 401 ({hint})",
              file=sys.stderr)  # fmt: skip
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


def cmd_apikey(args: argparse.Namespace) -> int:
    """Create an API key: print it once, keep only its hash in the keyring (or revoke one)."""
    from services.backoffice.apikeys import KeyringError, new_key  # noqa: PLC0415

    keyring = _keyring(args)
    if keyring is None:
        return _fail(f"apikey {args.apikey_command} needs --keyring FILE (or CASINO_KEYRING)")
    if args.apikey_command == "revoke":
        return _revoke(keyring, args.key_id)
    try:
        key, api_key = new_key(keyring, args.role)
    except (KeyringError, ValueError, OSError) as exc:
        return _fail(str(exc) if not isinstance(exc, OSError) else f"cannot write {keyring}: {exc.strerror}")
    print(key)
    print(f"key id {api_key.key_id}, role {api_key.role}: shown once, only its hash is kept in {keyring}",
          file=sys.stderr)  # fmt: skip
    return 0


def _revoke(keyring: str, key_id: str) -> int:
    from services.backoffice.apikeys import KeyringError, revoke_key  # noqa: PLC0415

    try:
        revoked = revoke_key(keyring, key_id)
    except (KeyringError, OSError) as exc:
        return _fail(str(exc) if not isinstance(exc, OSError) else f"cannot write {keyring}: {exc.strerror}")
    if revoked is None:
        return _fail(f"no API key {key_id} in {keyring}")
    print(f"revoked API key {revoked.key_id} (role {revoked.role}) in {keyring}: a running serve refuses it "
          "from its next request", file=sys.stderr)  # fmt: skip
    return 0


def _project_kafka(args: argparse.Namespace) -> int:
    """The Kafka consumer loop into the read model at ``CASINO_READ_DB``."""
    import asyncio  # noqa: PLC0415

    from services.backoffice.kafka_follow import follow_kafka  # noqa: PLC0415
    from services.backoffice.migrate import upgrade  # noqa: PLC0415
    from services.backoffice.projector import Projector  # noqa: PLC0415
    from services.backoffice.schema import READ_DB_ENV, make_engine  # noqa: PLC0415
    from services.runtime.settings import Settings  # noqa: PLC0415

    url = os.environ.get(READ_DB_ENV)
    if not url:
        return _fail(f"project --kafka needs the read model's URL in {READ_DB_ENV}")
    engine = make_engine(url)
    upgrade(engine)
    projector = Projector(engine, periods=_periods(args))
    if args.rebuild:
        projector.rebuild()
    settings = Settings(bootstrap_servers=args.kafka)
    applied = asyncio.run(follow_kafka(settings, projector, until_idle=not args.follow))
    print(f"projected {applied} records from Kafka", file=sys.stderr)
    return 0


def cmd_project(args: argparse.Namespace) -> int:
    """Bring the read model up to date with the log (``--rebuild``: from scratch)."""
    if args.kafka:
        return _project_kafka(args)
    if (err := _check_db(args.db)) is not None:
        return _fail(err)
    from services.backoffice.schema import default_url  # noqa: PLC0415

    _engine, projector = _read_model(args)
    print(f"read model {_shown(default_url(args.db))} at offset {projector.position()}", file=sys.stderr)
    return 0


def cmd_statement(args: argparse.Namespace) -> int:
    """An account's statement as JSON or CSV."""
    from services.backoffice import exports, queries  # noqa: PLC0415

    if (err := _check_db(args.db) or _unsafe_out(args)) is not None:
        return _fail(err)
    try:
        since = queries.normalise_time(args.since) if args.since else None
        until = queries.normalise_time(args.until) if args.until else None
    except ValueError:
        return _fail("--since/--until: expected an RFC 3339 time or YYYY-MM-DD")
    engine, _ = _read_model(args)
    with engine.connect() as c:
        if not queries.account_exists(c, args.account):
            return _fail(f"--account: no posting names {args.account}")
        text = exports.statement_export(c, args.account, since=since, until=until, fmt=args.format)
    _write(args.out, text)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """Table results per gaming day (or per shift) as JSON or CSV."""
    from services.backoffice import exports, queries  # noqa: PLC0415

    if (err := _check_db(args.db) or _unsafe_out(args)) is not None:
        return _fail(err)
    if args.day is not None:
        try:
            if len(args.day) != 10:
                raise ValueError
            queries.normalise_time(args.day)
        except ValueError:
            return _fail("--day: expected YYYY-MM-DD")
    engine, _ = _read_model(args)
    with engine.connect() as c:
        day = args.day or queries.latest_day(c) or "1970-01-01"
        tables = args.table or [t["table_id"] for t in queries.tables_overview(c, None)]
        for t in tables:
            if not queries.table_exists(c, t):
                return _fail(f"--table: no table {t}")
        if args.shifts:
            rows = [r for t in tables for r in queries.table_shifts(c, t, day)]
        else:
            rows = [queries.table_report(c, t, day) for t in tables]
    _write(args.out, exports.reports_export(rows, args.format, shifts=args.shifts))
    return 0


def serve_hint(db: str | Path, prog: str = "casino-ledger") -> str:
    """The demo's last line: how to open the page and the API over the log at ``db`` (``prog``: how the
    command is run from the user's shell)."""
    ring = Path(f"{db}.keyring.json")  # the demo's own keyring, beside its log
    return (
        f"back office: {prog} apikey new --role admin --keyring {ring}  then  "
        f"{prog} serve --db {db} --keyring {ring}  ->  page http://127.0.0.1:8000/ (paste the key), "
        "API http://127.0.0.1:8000/docs"
    )
