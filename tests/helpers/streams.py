"""The streams of an embedded log file: what must not change, whatever the interleaving."""

from __future__ import annotations

from pathlib import Path

from services.runtime.embedded.log import EmbeddedLog


def log_streams(db: Path) -> dict[tuple[str, str], list[bytes]]:
    """Each (topic, key) stream of the log at ``db``: its records' bytes, in log order."""
    out: dict[tuple[str, str], list[bytes]] = {}
    with EmbeddedLog(db, readonly=True) as log:
        for _offset, topic, key, raw in log.iter_all():
            out.setdefault((topic, key), []).append(raw)
    return out
