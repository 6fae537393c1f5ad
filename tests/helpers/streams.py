"""The streams of an embedded log file: what must not change, whatever the interleaving."""

from __future__ import annotations

from pathlib import Path

from services.runtime.embedded.store import EmbeddedLog

ATTEST = "casino.attest"


def log_streams(db: Path, *, signed_heads: bool = True) -> dict[tuple[str, str], list[bytes]]:
    """Each (topic, key) stream of the log at ``db``: its records' bytes, in log order (without the
    writers' signed heads when not ``signed_heads``: they follow the batches, which a restart or
    another way of running moves, while every other stream stays the same)."""
    out: dict[tuple[str, str], list[bytes]] = {}
    with EmbeddedLog(db, readonly=True) as log:
        for _offset, topic, key, raw in log.iter_all():
            if signed_heads or topic != ATTEST:
                out.setdefault((topic, key), []).append(raw)
    return out


def whole_log(db: Path, *, signed_heads: bool = True) -> list[tuple[str, str, bytes]]:
    """Every record of the log at ``db`` as (topic, key, bytes), in log order: the file, interleaving
    included (without the signed heads when not ``signed_heads``: see :func:`log_streams`)."""
    with EmbeddedLog(db, readonly=True) as log:
        return [(t, k, raw) for _o, t, k, raw in log.iter_all() if signed_heads or t != ATTEST]
