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


def whole_log(db: Path) -> list[tuple[str, str, bytes]]:
    """Every record of the log at ``db`` as (topic, key, bytes), in log order: the file, interleaving
    included."""
    with EmbeddedLog(db, readonly=True) as log:
        return [(topic, key, raw) for _o, topic, key, raw in log.iter_all()]
