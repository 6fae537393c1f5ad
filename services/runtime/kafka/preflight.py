"""What a worker checks before it starts, so that an operator's mistake is one line and exit 2 rather
than faust's traceback (issue #30): its data folder (``CASINO_DATA_DIR``) can be made and written, and
its web port (``CASINO_WEB_PORT``, when ``CASINO_WEB_ENABLED``) is free.

The data folder is made with its parents: the default, ``var/faust``, is relative to where the worker
starts, and a worker started outside the source tree found no ``var/`` and died.
"""

from __future__ import annotations

import errno
import os
import socket

from services.runtime.failures import BadInput
from services.runtime.settings import Settings


def check_data_dir(settings: Settings) -> None:
    """``CASINO_DATA_DIR`` exists (made with its parents) and is writable, else :class:`BadInput`."""
    path = settings.data_dir
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(
            f"CASINO_DATA_DIR {path}: cannot make it: {exc.strerror} (the worker keeps its working data "
            "there: point it at a writable folder)"
        ) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise BadInput(f"CASINO_DATA_DIR {path}: not writable by this user (uid {os.getuid()})")


def check_web_port(settings: Settings) -> None:
    """With the web server on, ``CASINO_WEB_BIND:CASINO_WEB_PORT`` can be listened on, else
    :class:`BadInput` (another worker on this host most often holds it)."""
    if not settings.web_enabled:
        return
    host, port = settings.web_bind, settings.web_port
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise BadInput(f"CASINO_WEB_BIND {host}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            taken = exc.errno == errno.EADDRINUSE
            hint = " (another worker on this host? give each its own CASINO_WEB_PORT)" if taken else ""
            said = f"cannot listen on {host}:{port}: {exc.strerror}{hint}"
            raise BadInput(f"CASINO_WEB_PORT {port}: {said}") from None


def preflight(settings: Settings) -> None:
    """Every check above, in order."""
    check_data_dir(settings)
    check_web_port(settings)
