"""``casino-ledger ingest`` (docs/integration.md): outside writers' records into the embedded log, then the
pipeline.

One JSON object per line, either a full envelope or ``{"type", "key", "payload"[, "event_id",
"occurred_at"]}`` (the tool fills the rest: the topic from the type, ``event_id`` derived from the
input's digest and the line number, so ingesting the same file twice appends nothing new;
``occurred_at`` the time of the first ingestion). With ``--as PRINCIPAL`` (repeatable) each record is
authenticated with that principal's key from the keyring (``CASINO_KEYRING``); a line's own ``"as"``
picks one of those given, the first by default. Without ``--as`` lines go in exactly as given, as an
outsider's would: the consumers then refuse what they must (docs/trust.md).

Every line is read and checked before anything is written; then all are appended in one transaction
(nothing half-written), the pipeline runs until idle, and a JSON summary is printed: lines read,
records appended, records refused at the input and dead letters by reason. Exit 0 when every line was
readable, 2 otherwise (one line on stderr; nothing written).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from services.core import topics
from services.core.contract import TOPIC_OF_TYPE
from services.core.envelope import Envelope, name_id, parse_record, request
from services.core.trust import PRIMARY_CONSUMER, REFUSALS, Principal, authenticate
from services.runtime.compose import Composition
from services.runtime.keyring import Keyring, KeyringError
from services.runtime.progress import counting, progress
from services.runtime.settings import Settings

EXIT_BAD_INPUT = 2
SHORT_FIELDS = frozenset({"type", "key", "payload", "event_id", "occurred_at", "as"})


class BadLine(ValueError):
    """A line that cannot be ingested: its number and why."""

    def __init__(self, lineno: int, why: str) -> None:
        super().__init__(f"line {lineno}: {why}")
        self.lineno = lineno


@dataclass(frozen=True, slots=True)
class Line:
    """One readable line: the record to append (``derived``: its id and time were filled in here)."""

    lineno: int
    record: Envelope
    derived: bool = False


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def read_lines(
    text: str,
    principals: list[Principal],
    keyring: Keyring | None,
    now: str,
    checked: Callable[[int], None] | None = None,
) -> tuple[list[Line], list[BadLine]]:
    """Every line's record (blank lines skipped) and every unreadable line, in input order
    (``checked`` is told of each line read)."""
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    good: list[Line] = []
    bad: list[BadLine] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        if checked is not None:
            checked(1)
        if not raw.strip():
            continue
        try:
            record = _record(lineno, raw, digest, principals, keyring, now)
            derived = record.event_id == name_id("ingest", digest, str(lineno))
            good.append(Line(lineno, record, derived))
        except BadLine as exc:
            bad.append(exc)
    return good, bad


def _record(  # noqa: PLR0917 (one line's whole context)
    lineno: int, raw: str, digest: str, principals: list[Principal], keyring: Keyring | None, now: str
) -> Envelope:
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        raise BadLine(lineno, "not JSON") from None
    if not isinstance(data, dict):
        raise BadLine(lineno, "not a JSON object")
    who = _principal(lineno, data.pop("as", None), principals)
    if "hash" in data:
        try:
            env = parse_record(data)
        except (ValueError, ValidationError) as exc:
            raise BadLine(lineno, f"not an envelope ({_first_error(exc)})") from None
    else:
        env = _short(lineno, data, digest, who, now)
    if who is not None and keyring is not None:
        env = authenticate(env, keyring.key(who))
    return env


def _principal(lineno: int, named: object, principals: list[Principal]) -> Principal | None:
    if named is None:
        return principals[0] if principals else None
    if not principals:
        raise BadLine(lineno, '"as" needs --as to name the principals the keyring may sign as')
    if not isinstance(named, str) or named not in {p.value for p in principals}:
        given = ", ".join(p.value for p in principals)
        raise BadLine(lineno, f'"as" must be one of the --as principals ({given})')
    return Principal(named)


def _short(lineno: int, data: dict[str, Any], digest: str, who: Principal | None, now: str) -> Envelope:
    unknown = sorted(set(data) - SHORT_FIELDS)
    if unknown:
        raise BadLine(lineno, f"unknown field(s) {', '.join(unknown)[:120]} (a full envelope has a hash)")
    type_, key, payload = data.get("type"), data.get("key"), data.get("payload")
    if not isinstance(type_, str) or type_ not in TOPIC_OF_TYPE:
        raise BadLine(lineno, f"unknown type {str(type_)[:64]!r}")
    if not isinstance(key, str) or not key.strip():
        raise BadLine(lineno, "key must be a non-empty string")
    if not isinstance(payload, dict):
        raise BadLine(lineno, "payload must be a JSON object")
    event_id = data.get("event_id", name_id("ingest", digest, str(lineno)))
    occurred_at = data.get("occurred_at", now)
    if not isinstance(event_id, str) or not event_id.strip() or not isinstance(occurred_at, str):
        raise BadLine(lineno, "event_id and occurred_at must be strings")
    producer = who.value if who is not None else "ingest"
    try:
        return request(type_, TOPIC_OF_TYPE[type_], key, payload,
                       event_id=event_id, occurred_at=occurred_at, producer=producer)  # fmt: skip
    except (ValueError, TypeError) as exc:
        raise BadLine(lineno, f"cannot be made an envelope ({type(exc).__name__})") from None


def _first_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors(include_url=False)[0]
        return f"{'.'.join(map(str, err['loc'])) or '<root>'}: {err['msg']}"
    return "not JSON"


def summarise(log: Any, after: int, ids: set[str]) -> tuple[int, dict[str, int], list[str]]:
    """(records refused at the input, dead letters by reason, refused ids) for the ingested ``ids``:
    one reason per record, the one its topic's primary consumer gave (several processors read some
    topics and each dead-letters what it cannot apply)."""
    reasons: dict[str, str] = {}
    while rows := log.read([topics.DEADLETTER], after, 1000):
        for _offset, _topic, _key, raw in rows:
            dead = parse_record(raw)
            original = dead.payload.get("original_event_id")
            if original not in ids:
                continue
            primary = PRIMARY_CONSUMER.get(str(dead.payload.get("source_topic")))
            if original not in reasons or (primary is not None and dead.producer == primary.value):
                reasons[str(original)] = str(dead.payload.get("reason"))
        after = rows[-1][0]
    refused = sorted(i for i, r in reasons.items() if r in REFUSALS)
    return len(refused), dict(sorted(Counter(reasons.values()).items())), refused


def main(args: argparse.Namespace) -> int:
    """Run ``ingest`` (see the module docstring)."""
    from services.runtime.embedded.runner import Runner, run_until_idle  # noqa: PLC0415
    from services.runtime.embedded.store import EmbeddedLog, LogConflict  # noqa: PLC0415

    def fail(message: str) -> int:
        print(f"casino-ledger: error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT

    try:
        principals = [Principal(p) for p in (args.as_ or [])]
    except ValueError:
        return fail(f"--as: a principal is one of {', '.join(p.value for p in Principal)}")
    try:
        composition = Composition.from_settings(Settings())
    except KeyringError as exc:
        return fail(str(exc))
    except ValidationError as exc:  # the field names only: a value may be a secret
        names = sorted({str(e["loc"][0]) for e in exc.errors() if e["loc"]})
        return fail(f"invalid CASINO_* settings: {', '.join(names) or 'see the documentation'}")
    db = Path(args.db)
    if db.is_dir():
        return fail(f"--db {db}: is a directory")
    source = args.file or "-"
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return fail(f"{source}: cannot be read ({type(exc).__name__})")
    total = text.count("\n") + (0 if text.endswith("\n") else 1)
    with progress("ingest", total, "lines checked", every=100) as checked:
        good, bad = read_lines(text, principals, composition.keyring, _now(), checked)
    lines = len(good) + len(bad)
    if bad:
        print(json.dumps({"lines": lines, "unreadable": [str(b) for b in bad], "appended": 0}))
        return fail(f"{len(bad)} of {lines} lines unreadable, nothing written; first: {bad[0]}")
    try:
        log = EmbeddedLog(db)
    except Exception as exc:  # sqlite3 errors of a foreign file: one line, no traceback
        return fail(f"--db {db}: cannot be opened as a log ({type(exc).__name__})")
    try:
        head = log.head()
        # a derived id names this input's line: held already means this file was ingested before (its
        # filled-in time differs, the record does not)
        fresh = [ln.record for ln in good if not (ln.derived and log.holds(ln.record.event_id))]
        try:
            appended = log.append(fresh)
        except LogConflict as conflict:
            where = next((ln.lineno for ln in good if ln.record.event_id == conflict.event_id), 0)
            return fail(f"line {where}: event_id {conflict.event_id} is already in the log with another body")
        runners = [Runner(log, proc, name) for name, proc in composition.pipeline()]
        with counting("ingest", "records through the pipeline") as applied:
            run_until_idle(runners, seal=True, progress=applied)
        for runner in runners:  # the next ingest starts from here, not from the last periodic snapshot
            runner.snapshot_if_behind()
        refused, dead, refused_ids = summarise(log, head, {ln.record.event_id for ln in good})
    finally:
        log.close()
    summary = {
        "lines": lines, "appended": appended, "refused": refused, "dead_lettered": dead,
        "refused_ids": refused_ids,
    }  # fmt: skip
    print(json.dumps(summary, sort_keys=True))
    return 0
