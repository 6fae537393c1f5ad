"""``casino-ledger serve --kafka HOST:PORT``: the back office of a Kafka deployment.

Reads come from the PostgreSQL (or SQLite) read model named by ``CASINO_READ_DB``, which
``casino-ledger project --kafka --follow`` keeps current; commands are produced to the topics signed as
principal ``backoffice`` (:mod:`services.integrations.backoffice.kafka_commands`) and answered once their
outcome is
projected. The keyring (``--keyring`` or ``CASINO_KEYRING``) needs the ``backoffice`` principal's key
and the API keys, nothing else: the back office's own key file (``keys new --split DIR``) will do.
Topic prefix, security and timeouts come from the ``CASINO_*`` variables as for the workers.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from services.cli.backoffice import _fail, _keyring, _listen, _periods, _read_db, _shown, open_read_model


def backoffice_key(path: str | None) -> tuple[str | None, str | None]:
    """Whether the keyring at ``path`` can sign the API's commands: ``(fatal, refused)``. No keyring:
    reads only (``refused``); a keyring without the ``backoffice`` principal's key: ``fatal``."""
    from services.core.trust import Principal  # noqa: PLC0415
    from services.runtime.keyring import KeyringError, load_keyring  # noqa: PLC0415

    if path is None:
        return None, "no --keyring: serve signs commands with the backoffice principal's key"
    try:
        load_keyring(path).signing_key(Principal.BACKOFFICE)  # its own key, not a service's verify-only copy
    except KeyringError as exc:
        return (f"--keyring: {exc}: serve --kafka signs commands as principal backoffice (its key file "
                "from `keys new --split DIR`, or the whole keyring)"), None  # fmt: skip
    return None, None


def serve_kafka(args: argparse.Namespace) -> int:
    """Serve the API and the page over ``CASINO_READ_DB``, commands onto the broker at ``--kafka``."""
    import uvicorn  # noqa: PLC0415

    from services.integrations.backoffice.api import ServeSettings, create_app  # noqa: PLC0415
    from services.integrations.backoffice.schema import READ_DB_ENV  # noqa: PLC0415
    from services.runtime.settings import Settings  # noqa: PLC0415

    url = _read_db()
    if not url:
        return _fail(f"serve --kafka needs the read model's URL in {READ_DB_ENV} (the one `project --kafka "
                     "--follow` keeps)")  # fmt: skip
    timeout = float(getattr(args, "wait", 15.0))
    if not 0 < timeout <= 3600:  # an hour: no client waits longer for an answer
        return _fail(f"--wait: {timeout:g} seconds is not in (0, 3600]")
    keyring = _keyring(args)
    fatal, refused = backoffice_key(keyring)
    if fatal is not None:
        return _fail(fatal)
    sock = _listen(args.host, args.port)
    try:
        engine = open_read_model(url)
    except BaseException:
        sock.close()
        raise
    settings = ServeSettings(
        log_path=Path(os.devnull), read_url=url, keyring_path=Path(keyring) if keyring else None,
        periods=_periods(args), commands_refused=refused, kafka=Settings(bootstrap_servers=args.kafka),
        command_timeout_s=timeout,
    )  # fmt: skip
    app = create_app(settings, engine)
    where = f"http://{args.host}:{args.port}"
    print(f"casino-ledger serve: page {where}/ , API {where}/docs (OpenAPI {where}/openapi.json); read model "
          f"{_shown(url)}, commands to Kafka at {args.kafka}", file=sys.stderr)  # fmt: skip
    if not app.state.bo.keys:
        print("casino-ledger serve: no API keys: every /v1 request but /v1/health gets 401 (create one: "
              "casino-ledger apikey new --role admin --keyring FILE)", file=sys.stderr)  # fmt: skip
    if refused is not None:
        print(f"casino-ledger serve: reads only, every command answers 503: {refused}", file=sys.stderr)
    server = uvicorn.Server(uvicorn.Config(app, host=args.host, port=args.port, log_level="warning"))
    server.run(sockets=[sock])
    return 0
