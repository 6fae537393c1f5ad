"""The back office's commands: ``serve``, ``apikey new``, ``project``, ``statement``, ``report``.

``statement`` and ``report`` read the read model beside the log (projecting whatever it lacks
first), write JSON or CSV to ``--out`` (``-`` = stdout, the default). Bad input: one line on stderr,
exit 2.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import shlex
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from services.runtime.textfit import printable

EXIT_BAD_INPUT = 2


def _fail(message: str) -> int:
    print(f"casino-ledger: error: {printable(message)}", file=sys.stderr)  # a log's text may be in it
    return EXIT_BAD_INPUT


def _keyring(args: argparse.Namespace) -> str | None:
    from services.runtime.settings import setting  # noqa: PLC0415

    value = getattr(args, "keyring", None) or setting("keyring")
    return str(value) if value else None


def _periods(args: argparse.Namespace) -> Any:
    from services.integrations.backoffice.projector import Periods  # noqa: PLC0415

    return Periods(cutoff_hour=args.day_cutoff, shift_hours=args.shift_hours)


def open_read_model(url: str) -> Any:
    """An engine on the read model at ``url``, migrated; what an operator can fix (PostgreSQL down or
    misnamed, a malformed URL, a driver missing) is :class:`~services.runtime.failures.BadInput`: one
    line naming the read model (password hidden) and what to check, exit 2."""
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError  # noqa: PLC0415

    from services.integrations.backoffice.migrate import upgrade  # noqa: PLC0415
    from services.integrations.backoffice.schema import READ_DB_ENV, make_engine  # noqa: PLC0415
    from services.runtime.failures import BadInput  # noqa: PLC0415

    try:
        engine = make_engine(url)
    except (ArgumentError, NoSuchModuleError, ValueError) as exc:
        kind = type(exc).__name__
        raise BadInput(f"{READ_DB_ENV}: not a database URL the read model can use ({kind})") from None
    with read_model_errors(url):
        upgrade(engine)
    return engine


class read_model_errors:
    """Turns a database error raised inside it into :class:`~services.runtime.failures.BadInput`: the
    read model cannot be reached, does not exist, or refuses us."""

    def __init__(self, url: str) -> None:
        self.url = url

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _tb: object) -> None:
        from sqlalchemy.exc import InterfaceError, OperationalError  # noqa: PLC0415

        from services.integrations.backoffice.schema import READ_DB_ENV  # noqa: PLC0415
        from services.runtime.failures import BadInput  # noqa: PLC0415

        # the server down or unknown, the database missing, the file locked or the disk full: the
        # operator's to fix; SQL the database rejects (ProgrammingError, IntegrityError, ...) is a bug
        if not isinstance(exc, OperationalError | InterfaceError):
            return
        reason = (str(exc.orig).strip().splitlines() or [type(exc.orig).__name__])[0]
        where = "PostgreSQL" if self.url.startswith("postgres") else "SQLite"
        raise BadInput(
            f"the read model {_shown(self.url)} cannot be used: {reason} (is {where} running, does the "
            f"database exist, may this user create tables? {READ_DB_ENV} names it)"
        ) from None


def _read_model(args: argparse.Namespace) -> Any:
    """(engine, projector) of the read model beside ``--db``, migrated and caught up with the log."""
    from services.integrations.backoffice.facts import writer_keys_for  # noqa: PLC0415
    from services.integrations.backoffice.projector import Projector  # noqa: PLC0415
    from services.integrations.backoffice.schema import default_url  # noqa: PLC0415
    from services.runtime.embedded.store import EmbeddedLog  # noqa: PLC0415

    url = default_url(args.db)
    engine = open_read_model(url)
    projector = Projector(engine, periods=_periods(args), writers=writer_keys_for(args.db))
    command = str(getattr(args, "command", None) or "project")
    with read_model_errors(url), EmbeddedLog(args.db, readonly=True) as log:
        if getattr(args, "rebuild", False):
            with serve_lock(args.db, what="project --rebuild"):
                projector.rebuild()
                _catch_up(projector, log, f"{command} --rebuild")
        _catch_up(projector, log, command)
    return engine, projector


def _catch_up(projector: Any, log: Any, command: str) -> None:
    """``projector.catch_up(log)``, saying how far it is on stderr (:mod:`services.runtime.progress`)."""
    from services.runtime.progress import progress  # noqa: PLC0415

    at, head = projector.position(), log.head()
    with progress(command, head - at, "records projected", every=1000) as done:
        told = _Told(log, done, at)
        projector.catch_up(told)
        done(max(head - told.at, 0))  # the records after the last one projected are not the projector's


class _Told:
    """The log as a projector reads it, telling ``done`` how many offsets each read moved past."""

    def __init__(self, log: Any, done: Callable[[int], None], at: int) -> None:
        self.log, self.done, self.at = log, done, at

    def read(self, topic_names: Sequence[str], after_offset: int, limit: int) -> Any:
        """The log's ``read``, then the progress."""
        rows = self.log.read(topic_names, after_offset, limit)
        if rows:
            last = int(rows[-1][0])
            self.done(last - max(self.at, after_offset))
            self.at = last
        return rows

    def __getattr__(self, name: str) -> Any:
        return getattr(self.log, name)  # the rest of the log as it is


@contextlib.contextmanager
def serve_lock(db: str | Path, *, what: str) -> Iterator[None]:
    """Hold the log's back-office lock (``<db>.serve.lock``, an advisory ``flock``) for ``what``: one
    ``serve`` per log, and no ``project --rebuild`` under a running ``serve`` (its projector would apply
    the same records as the rebuild, in another order: conflicts, on PostgreSQL deadlocks). Held by
    another process: :class:`~services.runtime.failures.BadInput` saying who holds it and what to do."""
    advice = ("stop it first (a rebuild beside a running serve would project every record twice); serve "
              "projects the log by itself as it runs")  # fmt: skip
    with _flock(Path(f"{db}.serve.lock"), what, advice):
        yield


@contextlib.contextmanager
def pipeline_lock(db: str | Path, *, what: str) -> Iterator[None]:
    """Hold the log's pipeline lock (``<db>.pipeline.lock``) for ``what``: one process runs the pipeline
    on a log (``pipeline``, or a ``serve`` that holds every key). Held: BadInput, one line."""
    advice = (
        "one process runs the pipeline on a log: stop it first, or serve with the back office's key alone "
        "(its key file from `keys new --split DIR`), which leaves the pipeline to it"
    )
    with _flock(Path(f"{db}.pipeline.lock"), what, advice):
        yield


@contextlib.contextmanager
def _flock(path: Path, what: str, advice: str) -> Iterator[None]:
    """An advisory ``flock`` on ``path`` for ``what`` (written into the file for the next one to name)."""
    import fcntl  # noqa: PLC0415

    from services.runtime.failures import BadInput  # noqa: PLC0415

    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another process"
            raise BadInput(f"{what}: {holder} holds {path}: {advice}") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{what} (pid {os.getpid()})\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _source(args: argparse.Namespace) -> str | None:
    """Why ``statement``/``report`` have nothing to read: neither or both of ``--db`` and
    ``--read-model``, the log missing, or ``--read-model`` without ``CASINO_READ_DB``."""
    from services.integrations.backoffice.schema import READ_DB_ENV  # noqa: PLC0415

    if not getattr(args, "read_model", False):
        return _check_db(args.db) if args.db else "one of the arguments --db --read-model is required"
    if args.db:
        return "argument --read-model: not allowed with argument --db"
    return None if _read_db() else f"--read-model reads the read model {READ_DB_ENV} names"


def _read_db() -> str:
    """``CASINO_READ_DB`` (the empty string when unset)."""
    from services.runtime.settings import setting  # noqa: PLC0415

    return str(setting("read_db").get_secret_value())


def _reading(args: argparse.Namespace) -> Any:
    """The engine ``statement``/``report`` read: ``CASINO_READ_DB`` as it is with ``--read-model``,
    else the read model beside ``--db`` caught up with the log."""
    if getattr(args, "read_model", False):
        return open_read_model(_read_db())
    return _read_model(args)[0]


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


def _signing_keyring(path: str, db: str) -> tuple[str | None, str | None, bool]:
    """Whether the keyring at ``path`` can sign the API's commands into the log at ``db``: ``(fatal,
    refused, alone)``. A whole keyring, the one the log is written with: ``serve`` runs the pipeline
    with it. The back office's own key without the services' (``alone``): commands are appended and
    another process runs the pipeline (``casino-ledger pipeline``). Neither: ``refused`` (reads are
    served, commands answer 503); not a keyring: ``fatal``."""
    from services.runtime.embedded.store import EmbeddedLog  # noqa: PLC0415
    from services.runtime.keyring import KeyringError, load_keyring  # noqa: PLC0415

    ring_hint = f"the keyring the log was written with (the demo's: {shlex.quote(f'{db}.keyring.json')})"
    try:
        keyring = load_keyring(path)
    except KeyringError as exc:
        why = "serve signs commands as principal backoffice and runs the pipeline with"
        return f"--keyring: {exc}: {why} {ring_hint}", None, False
    from services.core.trust import SERVICES, Principal  # noqa: PLC0415

    lacking = sorted(p.value for p in SERVICES if p not in keyring.keys or not keyring.keys[p].can_sign)
    if lacking:
        own = keyring.keys.get(Principal.BACKOFFICE)
        if own is not None and own.can_sign:  # the back office's key file: the pipeline is another's
            return None, None, True
        return None, (f"--keyring {path} lacks the signing keys of {', '.join(lacking)} and of backoffice: "
                      f"commands need {ring_hint}, or the back office's own key file (`keys new --split "
                      "DIR`) beside `casino-ledger pipeline`"), False  # fmt: skip
    ids = {k.key_id for k in keyring.keys.values()}
    with EmbeddedLog(db, readonly=True) as log:
        first = log.read(["casino.table.events"], 0, 1)
    if first:
        from services.core.envelope import parse_record  # noqa: PLC0415

        auth = parse_record(first[0][-1]).auth or {}
        if auth.get("key_id") and auth["key_id"] not in ids:
            return None, (f"--keyring {path} is not the keyring this log was written with (its dealer "
                          f"signed with key {auth['key_id']}, which the keyring lacks): commands need "
                          f"{ring_hint}"), False  # fmt: skip
    return None, None, False


def _listen(host: str, port: int) -> Any:
    """A listening socket on ``host``:``port`` for uvicorn; taken or not allowed: BadInput, one line."""
    import socket  # noqa: PLC0415

    from services.runtime.failures import BadInput  # noqa: PLC0415

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise BadInput(f"--host {host}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        taken = " (another serve? pick a free one with --port)" if exc.errno == errno.EADDRINUSE else ""
        raise BadInput(f"--port {port}: cannot listen on {host}:{port}: {exc.strerror}{taken}") from None
    sock.set_inheritable(True)
    return sock


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve the API and the page over the read model beside ``--db`` (or ``CASINO_READ_DB``)."""
    if getattr(args, "kafka", None):
        from services.cli.serve_kafka import serve_kafka  # noqa: PLC0415

        return serve_kafka(args)
    if (err := _check_db(args.db)) is not None:
        return _fail(err)
    import uvicorn  # noqa: PLC0415

    from services.integrations.backoffice.api import ServeSettings, create_app  # noqa: PLC0415
    from services.integrations.backoffice.apikeys import KeyringError  # noqa: PLC0415
    from services.integrations.backoffice.schema import default_url  # noqa: PLC0415
    from services.runtime.compose import keyring_pipeline  # noqa: PLC0415

    keyring = _keyring(args)
    fatal, refused, alone = _signing_keyring(keyring, args.db) if keyring is not None else (None, None, False)
    if fatal is not None:
        return _fail(fatal)
    timeout = float(getattr(args, "wait", 15.0))
    if not 0 < timeout <= 3600:  # an hour: no client waits longer for an answer
        return _fail(f"--wait: {timeout:g} seconds is not in (0, 3600]")
    runs_pipeline = refused is None and not alone  # no keyring: the demo keys' pipeline refuses commands
    with serve_lock(args.db, what="serve"), _pipeline_held(args.db, runs_pipeline):
        sock = _listen(args.host, args.port)
        try:
            engine, _ = _read_model(args)
            settings = ServeSettings(
                log_path=Path(args.db), read_url=default_url(args.db),
                keyring_path=Path(keyring) if keyring else None, periods=_periods(args),
                commands_refused=refused, pipeline_elsewhere=alone, command_timeout_s=timeout,
                pipeline=keyring_pipeline,
            )  # fmt: skip
            app = create_app(settings, engine)
        except KeyringError as exc:
            sock.close()
            return _fail(str(exc))
        _serving_notes(args, app, keyring, refused, alone)
        server = uvicorn.Server(uvicorn.Config(app, host=args.host, port=args.port, log_level="warning"))
        server.run(sockets=[sock])
    return 0


def _pipeline_held(db: str, runs: bool) -> contextlib.AbstractContextManager[None]:
    """The log's pipeline lock when ``serve`` runs the pipeline itself (one runner per log)."""
    return pipeline_lock(db, what="serve") if runs else contextlib.nullcontext()


def _serving_notes(args: argparse.Namespace, app: Any, keyring: str | None, refused: str | None,
                   alone: bool) -> None:  # fmt: skip
    """What ``serve`` says on stderr as it starts: where, and what it cannot do."""
    where = f"http://{args.host}:{args.port}"
    print(f"casino-ledger serve: page {where}/ , API {where}/docs (OpenAPI {where}/openapi.json)",
          file=sys.stderr)  # fmt: skip
    if not app.state.bo.keys:
        hint = "create one: casino-ledger apikey new --role admin --keyring FILE"
        print(f"casino-ledger serve: no API keys: every /v1 request but /v1/health gets 401 ({hint})",
              file=sys.stderr)  # fmt: skip
    if keyring is None:
        print("casino-ledger serve: no --keyring: reads only; every deposit, withdrawal and bet is "
              "refused (unauthenticated)", file=sys.stderr)  # fmt: skip
    elif refused is not None:
        print(f"casino-ledger serve: reads only, every command answers 503: {refused}", file=sys.stderr)
    elif alone:
        print(f"casino-ledger serve: the back office's key alone: commands are appended to the log; "
              f"`casino-ledger pipeline --db {shlex.quote(args.db)} --keyring KEYS --follow` runs them "
              f"(a command waits {args.wait:g} s for its outcome, then answers 504)",
              file=sys.stderr)  # fmt: skip
    writers = {str(k.principal) for k in app.state.bo.projector.facts.survey.keys.values()}
    if writers <= {"backoffice"}:
        print("casino-ledger serve: no public key of the services that write this log: the read model "
              "applies nothing until CASINO_PUBLIC_KEYRING names their public keyring (keys public)",
              file=sys.stderr)  # fmt: skip


def cmd_apikey(args: argparse.Namespace) -> int:
    """Create an API key: print it once, keep only its hash in the keyring (or revoke one)."""
    from services.integrations.backoffice.apikeys import KeyringError, new_key  # noqa: PLC0415

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
    from services.integrations.backoffice.apikeys import KeyringError, revoke_key  # noqa: PLC0415

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

    from services.integrations.backoffice.facts import kafka_writer_keys  # noqa: PLC0415
    from services.integrations.backoffice.kafka_facts import KafkaFacts  # noqa: PLC0415
    from services.integrations.backoffice.kafka_follow import follow_kafka  # noqa: PLC0415
    from services.integrations.backoffice.projector import Projector  # noqa: PLC0415
    from services.integrations.backoffice.schema import READ_DB_ENV  # noqa: PLC0415
    from services.runtime.settings import Settings, setting  # noqa: PLC0415

    url = setting("read_db").get_secret_value()
    if not url:
        return _fail(f"project --kafka needs the read model's URL in {READ_DB_ENV}")
    engine = open_read_model(url)
    from services.runtime.replay import SourceError  # noqa: PLC0415

    try:
        keys = kafka_writer_keys()
    except SourceError as exc:
        return _fail(str(exc))
    projector = Projector(engine, periods=_periods(args), writers=keys)
    settings = Settings(bootstrap_servers=args.kafka)
    gate = KafkaFacts(settings, keys)
    with read_model_errors(url):
        if args.rebuild:
            projector.rebuild()
        applied = asyncio.run(follow_kafka(settings, projector, until_idle=not args.follow, gate=gate))
    print(f"projected {applied} records from Kafka", file=sys.stderr)
    if gate.unattested:
        from services.runtime.textfit import printable  # noqa: PLC0415

        first = ", ".join(printable(i) for i in gate.first_ids[:5])
        print(f"left out {gate.unattested} unattested record(s) (no signed head of their writer covers "
              f"them), first: {first}", file=sys.stderr)  # fmt: skip
    for tp, offset in sorted(gate.pending.items()):
        print(f"waiting at {tp.topic}:{tp.partition} offset {offset - 1} for a signed head to cover it",
              file=sys.stderr)  # fmt: skip
    if not keys:
        print("no public keys to check signed heads with: set CASINO_PUBLIC_KEYRING (keys public) or "
              "CASINO_KEYRING; nothing is applied without them", file=sys.stderr)  # fmt: skip
    return 0


def cmd_project(args: argparse.Namespace) -> int:
    """Bring the read model up to date with the log (``--rebuild``: from scratch)."""
    if args.kafka:
        return _project_kafka(args)
    if (err := _check_db(args.db)) is not None:
        return _fail(err)
    from services.integrations.backoffice.schema import default_url  # noqa: PLC0415

    _engine, projector = _read_model(args)
    print(f"read model {_shown(default_url(args.db))} at offset {projector.position()}", file=sys.stderr)
    facts = projector.facts
    if facts.unattested:
        from services.runtime.textfit import printable  # noqa: PLC0415

        first = ", ".join(printable(i) for i in facts.first_ids[:5])
        print(f"left out {facts.unattested} unattested record(s) (no signed head of their writer covers "
              f"them), first: {first}", file=sys.stderr)  # fmt: skip
    if facts.pending_at is not None:
        print(f"waiting at offset {facts.pending_at} for a signed head to cover it", file=sys.stderr)
        if not facts.survey.signed and facts.survey.bad_count:
            print("no signed head of this log verifies under the public keys found: set "
                  "CASINO_PUBLIC_KEYRING (keys public) or CASINO_KEYRING", file=sys.stderr)  # fmt: skip
    return 0


def cmd_statement(args: argparse.Namespace) -> int:
    """An account's statement as JSON or CSV."""
    from services.integrations.backoffice import exports, queries  # noqa: PLC0415

    if (err := _source(args) or _unsafe_out(args)) is not None:
        return _fail(err)
    try:
        since = queries.normalise_time(args.since) if args.since else None
        until = queries.normalise_time(args.until) if args.until else None
    except ValueError:
        return _fail("--since/--until: expected an RFC 3339 time or YYYY-MM-DD")
    engine = _reading(args)
    with engine.connect() as c:
        if not queries.account_exists(c, args.account):
            return _fail(f"--account: no posting names {args.account}")
        text = exports.statement_export(c, args.account, since=since, until=until, fmt=args.format)
    _write(args.out, text)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """Table results per gaming day (or per shift) as JSON or CSV."""
    from services.integrations.backoffice import exports, queries  # noqa: PLC0415

    if (err := _source(args) or _unsafe_out(args)) is not None:
        return _fail(err)
    if args.day is not None:
        try:
            if len(args.day) != 10:
                raise ValueError
            queries.normalise_time(args.day)
        except ValueError:
            return _fail("--day: expected YYYY-MM-DD")
    engine = _reading(args)
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


def serve_hint(db: str | Path, prog: str = "casino-ledger") -> tuple[str, list[str], str]:
    """The demo's last lines: how to open the page and the API over the log at ``db`` (``prog``: how the
    command is run from the user's shell): a title, the commands (each to print on a line of its own)
    and where to look once ``serve`` runs."""
    ring = shlex.quote(f"{db}.keyring.json")  # the demo's own keyring, beside its log
    commands = [f"{prog} apikey new --role admin --keyring {ring}",
                f"{prog} serve --db {shlex.quote(str(db))} --keyring {ring}"]  # fmt: skip
    after = "  then the page: http://127.0.0.1:8000/ (paste the key); the API: http://127.0.0.1:8000/docs"
    return "back office (make a key, then serve the log):", commands, after
