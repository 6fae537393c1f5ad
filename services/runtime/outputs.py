"""Files a command writes never overwrite what it must not (docs/trust.md, docs/cli.md): the log, its
WAL or shared-memory file, or a keyring.

A mistyped ``replay --html demo.db`` or ``statement --out demo.db-wal`` used to replace the very log
being read (or corrupt it: SQLite treats a ``-wal`` beside a database as part of it), and an ``--out``
naming a keyring replaced the secrets it held. :func:`check_output` refuses such a target before
anything is written, by what it is and by what it holds: the command's own log and its ``-wal``,
``-shm`` and ``-journal`` files, the keyrings in play (``CASINO_KEYRING``, ``CASINO_PUBLIC_KEYRING``,
the ones beside the log, the ``--keys``/``--keyring`` given), any SQLite database or WAL file, the
companion of any SQLite database, and any file that is a casino-ledger keyring or key file. The
command then says so in one line and exits 2 (:class:`~services.runtime.failures.BadInput`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from services.runtime.failures import BadInput
from services.runtime.settings import setting

COMPANIONS = ("-wal", "-shm", "-journal")
"""The files SQLite keeps beside a database, named after it."""

SQLITE_MAGIC = b"SQLite format 3\x00"
WAL_MAGIC = (b"\x37\x7f\x06\x82", b"\x37\x7f\x06\x83")
"""The first bytes of a SQLite database file and of a SQLite WAL file."""

KEYRING_SUFFIXES = (".keyring.json", ".public-keyring.json")
"""The keyrings ``demo`` writes beside a log (``<db>.keyring.json``, ``<db>.public-keyring.json``)."""

SNIFF_BYTES = 1 << 20
"""How much of an existing JSON file is read to tell whether it is a keyring (a keyring is small)."""


class WouldOverwrite(BadInput):
    """The output named is the log, one of its companions, or a keyring: nothing is written."""


def _same(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def protected(
    db: str | Path | None = None, extra: Iterable[str | Path | None] = (), *, environment: bool = True
) -> list[Path]:
    """The files a command with log ``db`` must never write over: the log and its companions, the
    keyrings beside it, those the environment names (with ``environment``) and ``extra`` (``--keys``,
    ``--keyring``…)."""
    paths: list[Path] = []
    if db is not None:
        paths.append(Path(db))
        paths += [Path(f"{db}{s}") for s in (*COMPANIONS, *KEYRING_SUFFIXES)]
    if environment:
        paths += [Path(v) for n in ("keyring", "public_keyring") if (v := str(setting(n) or "").strip())]
    paths += [Path(p) for p in extra if p]
    return paths


DATABASE, WAL, KEYRING, PUBLIC_KEYRING = (
    "a SQLite database",
    "a SQLite WAL file",
    "a keyring",
    "a public keyring",
)
"""What :func:`held` tells a protected file by."""


def held(path: Path) -> str | None:
    """What an existing file holds that no output may replace (:data:`DATABASE`, :data:`WAL`,
    :data:`KEYRING`, :data:`PUBLIC_KEYRING`), or ``None``."""
    try:
        with path.open("rb") as fh:
            head = fh.read(SNIFF_BYTES)
    except OSError:
        return None
    if head.startswith(SQLITE_MAGIC):
        return DATABASE
    if head[:4] in WAL_MAGIC:
        return WAL
    if head.lstrip()[:1] != b"{":
        return None
    try:
        doc = json.loads(head)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    fmt = doc.get("format")
    fmt = fmt if isinstance(fmt, str) else ""
    if fmt.startswith("casino-ledger/public"):  # it lists every principal's public key since #28
        return PUBLIC_KEYRING
    if "principals" in doc or "secret" in doc or "api_keys" in doc:
        return KEYRING
    if "ed25519" in doc or (fmt.startswith("casino-ledger/") and "public" in fmt):
        return PUBLIC_KEYRING
    if fmt.startswith("casino-ledger/") and "key" in fmt:
        return KEYRING
    return None


def _companion_of_a_database(path: Path) -> bool:
    return any(
        path.name.endswith(suffix)
        and len(path.name) > len(suffix)
        and held(path.with_name(path.name[: -len(suffix)])) == DATABASE
        for suffix in COMPANIONS
    )


def check_output(
    out: str | Path,
    option: str,
    *,
    db: str | Path | None = None,
    extra: Iterable[str | Path | None] = (),
    allow: frozenset[str] = frozenset(),
    environment: bool = True,
) -> None:
    """Raise :class:`WouldOverwrite` when writing ``out`` (given as ``option``, e.g. ``--html``) would
    replace the log ``db``, one of its companions, a keyring in play (:func:`protected`) or any file
    that is a database, a WAL or a keyring (:func:`held`), or would put a file where a database's
    companion goes; ``-`` (stdout) is always fine. ``allow``: what ``out`` may hold (``keys public``
    merges into a public keyring: ``{PUBLIC_KEYRING}``, without the environment's keyrings)."""
    if str(out) == "-":
        return
    target = Path(out)
    for p in protected(db, extra, environment=environment):
        if _same(target, p):
            named = "the log itself" if db is not None and _same(p, Path(db)) else str(p)
            raise WouldOverwrite(f"{option} {out} is {named}, which is never written over: nothing written")
    if _companion_of_a_database(target):
        why = "would be taken for a file (WAL, shared memory, journal) of the SQLite database beside it"
        raise WouldOverwrite(f"{option} {out} {why}: nothing written")
    what = held(target) if target.is_file() else None
    if what is not None and what not in allow:
        raise WouldOverwrite(f"{option} {out} is {what}, never written over: nothing written")
