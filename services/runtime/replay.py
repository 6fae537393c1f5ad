"""Export and replay: the log as JSONL, and the regulatory replay over it (docs/cli.md, issue 5).

This module is the replay's shell: it reads the sources (:func:`read_jsonl`, :func:`read_db`), finds the
public keyring and the checkpoint cadence, runs the CLI and renders the text reports. The replay itself
— decode, dedup, hash and chain checks, audit, checkpoints, summaries, the report — is pure and lives in
:mod:`services.audit.replay` (an import contract keeps it free of I/O).

The replay re-runs the audit processor — the very core code production ran — over every record of a
log, in log order, from scratch: it trusts nothing the log says about itself. It re-derives every coup
from the *recorded* cards and decisions, every payout, commission and tie push, every balance; checks
every record's hash, every per-key ``seq``/``prev_hash`` chain (gaps, duplicates, two events swapped)
and every shoe commitment; and checks each ``AuditCheckpoint`` the audit wrote at the time:

* its Ed25519 signature under its key id (``checkpoint_signature_invalid``), against the PUBLIC
  keyring only (``--keys FILE`` or ``CASINO_PUBLIC_KEYRING``, written by ``keys public``;
  :func:`public_keys_from`); an unsigned checkpoint does not verify either; the report says which key
  ids signed how many checkpoints;
* its content against the checkpoint the replay's own audit derives at the same round count of the
  same table (``checkpoint_mismatch``: rounds, table digest, chain head, findings so far). A forger who
  rewrites a whole chain with valid hashes changes the round records, hence the digest, and cannot sign
  the new one; the findings count also shows a log edited *after* audit ran;
* that every checkpoint the cadence calls for is there (``checkpoint_missing``) and none is extra;
* that the monitor's alerts it counted at its table are in the log (a claim checked at the end, so
  deleting every alert — which leaves no gap in any chain — is still found);
* its tree head: every chain head it signs is in the log, and no chain audit had read is missing from
  it (:mod:`services.audit.replay.tree_head`: deleted chains, cut tails, rewritten history, spliced
  chains); ``--expect HEADS`` (written by ``heads``) pins one the log must extend.

**Verdicts.** ``clean`` (exit 0): a complete log replayed and agreed, with keys the regulator supplied
(``--keys`` or ``CASINO_PUBLIC_KEYRING``); with keys only found beside the log, or the demo key, the same
log is ``clean (keys not supplied independently)`` (exit 1). ``findings`` (exit 1). ``incomplete`` (exit
1): nothing disagrees, but the log stops with coups open or accepted bets unpaid (``ends_at`` says where),
or no signed tree head verifies. An empty source, a foreign file (another program's SQLite database or
JSON), a Kafka prefix with no records, an unknown ``--table``: :class:`SourceError`, one line, exit 2.
Dead letters of records refused by authentication are counted by reason (``refused``), not findings.
Findings are grouped by root cause (:func:`group_findings`). ``--db`` is opened read-only
(:func:`open_readonly`): no byte of the file changes and nothing is created beside it.

**Scope.** ``--table`` and ``--since``/``--until`` (ISO 8601, ``since`` inclusive, ``until``
exclusive, on ``occurred_at``) limit the *report*, never the verification: chains, balances and
checkpoints only make sense over the whole stream, so every record is always read and checked. A
finding is in scope when its table is selected and the record that raised it occurred in the range;
integrity findings (hashes, chains, checkpoints, duplicates, undecodable records) are reported whatever
the scope, because a broken log is broken for every table. The digest covers the whole log.

**Memory.** Records are streamed (:func:`read_jsonl`, :func:`read_db` page through the log). The replay
does not use :func:`services.core.processor.step`, whose ``applied`` set grows with every record: it
calls :meth:`Audit.handle_hashed` itself and drops re-deliveries with a bounded window of recent event
ids (:data:`DEDUP_WINDOW`). A re-delivery further back than the window is still caught: on a chained
stream its ``seq`` is behind the head (``seq_duplicate``); a repeated ``PayoutIssued`` is a second
payout for its bet or an orphan left open. Audit drops completed coups and folds round hashes, so the
state grows with tables, shoes in play and accounts — not with the log — except the tree heads' check
and the survey of what is attested, which keep each record's hash (and its chain links) and an index
per chained record (a claimed head is checked whenever the claim and its record meet, in either
order), and the records the one pass holds back until a signed head covers them
(:mod:`services.audit.replay.onepass`: at most :data:`~services.audit.replay.onepass.HOLD_MAX`, else
the log is read twice). Findings are kept up to
:data:`MAX_FINDINGS_LISTED` and counted beyond.

**Reports.** JSON with a fixed top-level key order and every nested object's keys sorted, nothing from
the clock, the path or the environment: the same input gives byte-identical reports. Text by default.
HTML (:mod:`services.runtime.report_html`) adds what the shell knows: the generation time (the clock,
or ``SOURCE_DATE_EPOCH``), the tool version, the source and its SHA-256, the keyring. ``--coup ID``
prints one game round in full instead (text, ``--json``, or ``--html FILE``).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import sqlite3
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from services.audit.replay import (
    CoupCollector,
    Report,
    Scope,
    iso_instant,
)
from services.audit.replay.attested import WriterKey, writer_keys
from services.audit.replay.onepass import replay_one_pass
from services.core import topics
from services.core.envelope import Envelope
from services.core.errors import DomainError
from services.core.signing import DEMO_PUBLIC_KEYS, parse_public_keyring
from services.runtime.failures import BadInput
from services.runtime.outputs import check_output
from services.runtime.progress import progress as how_far
from services.runtime.settings import checkpoint_every as cadence
from services.runtime.settings import conventions, setting
from services.runtime.textfit import printable, printable_data, printable_json

ENV_PUBLIC_KEYRING = "CASINO_PUBLIC_KEYRING"


# --- configuration -------------------------------------------------------------------------------


class SourceError(BadInput):
    """A replay source or option that cannot be used (one line for the CLI, exit 2)."""


def load_public_keyring(path: Path) -> dict[str, str]:
    """Key id → Ed25519 public key hex from a public keyring file (``keys public``); ``SourceError``."""
    try:
        return parse_public_keyring(json.loads(path.read_text(encoding="utf-8")))
    except OSError as exc:
        raise SourceError(f"cannot read the public keyring {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise SourceError(f"{path}: {exc}") from None


PUBLIC_KEYRING_SUFFIX = ".public-keyring.json"
"""A log file's own public keyring, written beside it (``<db>.public-keyring.json``) by ``demo``."""


def keys_supplied(path: str | None, env: Mapping[str, str] | None = None) -> bool:
    """Whether the regulator supplied the public keyring (``--keys`` or ``CASINO_PUBLIC_KEYRING``), as
    opposed to one found beside the log or the public demo key, which whoever wrote the log could have
    written too: without it, a replay's ``clean`` is qualified (docs/trust.md)."""
    return bool(path or setting("public_keyring", env).strip())


def chosen_public_keyring(
    path: str | None, env: Mapping[str, str] | None = None, *, log: Path | None = None
) -> str:
    """The public keyring file a replay checks with: ``--keys PATH``, else ``CASINO_PUBLIC_KEYRING``,
    else the one beside the ``log`` file (``<db>`` :data:`PUBLIC_KEYRING_SUFFIX`); ``""`` when none."""
    chosen = path or setting("public_keyring", env).strip()
    if not chosen and log is not None and Path(f"{log}{PUBLIC_KEYRING_SUFFIX}").is_file():
        chosen = f"{log}{PUBLIC_KEYRING_SUFFIX}"
    return chosen


def public_keys_from(
    path: str | None, env: Mapping[str, str] | None = None, *, log: Path | None = None
) -> tuple[dict[str, str], str]:
    """The checkpoint verification keys and where they come from: ``--keys PATH``, else
    ``CASINO_PUBLIC_KEYRING``, else the public keyring beside the ``log`` file (``<db>``
    :data:`PUBLIC_KEYRING_SUFFIX`, which ``demo`` writes), else (demo and tests only) the public demo
    key, said so in the report."""
    chosen = chosen_public_keyring(path, env, log=log)
    if chosen:
        return load_public_keyring(Path(chosen)), str(chosen)
    return dict(DEMO_PUBLIC_KEYS), "public demo key (demo and tests only: proves nothing)"


def writer_keys_from(
    path: str | None, env: Mapping[str, str] | None = None, *, log: Path | None = None
) -> dict[str, WriterKey]:
    """The principals' public keys (what their signed heads verify with), from the public keyring
    :func:`public_keys_from` chooses; the public demo keyring's when it falls back to the demo key. A
    public keyring without ``principals`` (written before writers signed their heads) gives none: then
    no head verifies and the replay says so (never ``clean``)."""
    chosen = chosen_public_keyring(path, env, log=log)
    if chosen:
        try:
            return writer_keys(json.loads(Path(chosen).read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            raise SourceError(f"cannot read the public keyring {chosen}: {exc}") from None
    from services.runtime.keyring import demo_keyring  # noqa: PLC0415

    return writer_keys(demo_keyring().public_document())


class Source:
    """A log that can be read again: ``make`` gives the records of the replay, read once
    (:mod:`services.audit.replay.onepass`) unless it must be replayed in two passes; ``again`` (default
    ``make``) gives them for the first of those two (the survey of what is attested)."""

    def __init__(
        self,
        make: Callable[[], Iterable[bytes | str | Envelope]],
        again: Callable[[], Iterable[bytes | str | Envelope]] | None = None,
    ) -> None:
        self.make, self.again = make, again or make

    def __iter__(self) -> Iterator[bytes | str | Envelope]:
        return iter(self.make())


def replay(
    raw_records: Iterable[bytes | str | Envelope],
    *,
    scope: Scope | None = None,
    keys: Mapping[str, str] | None = None,
    checkpoint_every: int | None = None,
    collector: CoupCollector | None = None,
    ordered: bool | Literal["strict"] = False,
    expect: Mapping[str, Any] | None = None,
    writers: Mapping[str, WriterKey] | None = None,
) -> Report:
    """Re-run audit over ``raw_records`` (in log order, streamed) and report.

    ``keys``: the public checkpoint keyring (default :func:`public_keys_from`); ``checkpoint_every``: the
    cadence audit ran with (default ``CASINO_AUDIT_CHECKPOINT_EVERY`` or 50); ``ordered``: the records come
    in the order they were written (``True`` for a SQLite log and its JSONL export; not Kafka, read topic
    by topic); ``expect``: a pinned tree head (:func:`services.runtime.heads.read_heads`) the log must
    extend; ``writers``: the principals' public keys (default :func:`writer_keys_from`). The records are
    read once (:func:`~services.audit.replay.onepass.replay_one_pass`), or twice where the log calls for
    it: a :class:`Source`, a list or a tuple is read again, any other iterable is held in memory first.
    """
    every = checkpoint_every or cadence()
    default = public_keys_from(None)[0] if keys is None else keys
    if not isinstance(raw_records, Source):
        held = raw_records if isinstance(raw_records, list | tuple) else list(raw_records)
        raw_records = Source(lambda: held)
    report = replay_one_pass(raw_records.make, writer_keys_from(None) if writers is None else writers,
                             again=raw_records.again, keys=default,
                             checkpoint_every=every, scope=scope, collector=collector, ordered=ordered,
                             expect=expect)  # fmt: skip
    report.keys_supplied = keys is not None or keys_supplied(None)
    report.keys["supplied"] = report.keys_supplied
    return report


# --- reading logs --------------------------------------------------------------------------------


def read_jsonl(path: Path, progress: Callable[[int], None] | None = None) -> Iterator[bytes]:
    """The records of a JSONL export, one per non-empty line, streamed (``progress`` gets bytes read)."""
    with path.open("rb") as fh:
        for line in fh:
            if progress is not None:
                progress(len(line))
            record = line.rstrip(b"\r\n")
            if record and not record.isspace():  # a blank line is no record
                yield record


_LOG_COLUMNS = frozenset({"offset", "topic", "key", "body"})


def open_readonly(path: Path) -> sqlite3.Connection:
    """A read-only connection to an embedded log (``SourceError`` when it is not one).

    Never writes to the file: ``mode=ro`` (no table creation, no WAL switch); a WAL-mode file with no
    ``-wal`` beside it (a log whose writer has closed) is opened ``immutable=1`` so that not even the
    ``-shm`` index is created next to it."""
    try:
        with path.open("rb") as fh:
            header = fh.read(100)
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc.strerror}") from None
    if not header.startswith(b"SQLite format 3\x00"):
        raise SourceError(f"{path} is not a SQLite file")
    quiet = len(header) > 18 and header[18] == 2 and not Path(f"{path}-wal").exists()
    uri = path.resolve().as_uri() + ("?immutable=1" if quiet else "?mode=ro")
    try:
        conn = sqlite3.connect(uri, uri=True)
        columns = {str(r[1]) for r in conn.execute("PRAGMA table_info(records)")}
    except sqlite3.DatabaseError as exc:
        raise SourceError(f"{path} cannot be read as SQLite: {exc}") from None
    if not columns >= _LOG_COLUMNS:
        names = sorted(str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
        conn.close()
        shown = f"an SQLite database of something else (tables: {', '.join(names[:5])})" if names else "empty"
        raise SourceError(f"{path} is not a casino-ledger log: {shown}")
    return conn


def read_db(path: Path, progress: Callable[[int], None] | None = None, page: int = 1000) -> Iterator[bytes]:
    """The records of an embedded SQLite log, in log order, streamed (``progress`` gets 1 per record).
    Read-only (:func:`open_readonly`): the file's bytes are unchanged."""
    conn = open_readonly(path)
    try:
        after = 0
        while True:
            rows = conn.execute(
                'SELECT "offset", body FROM records WHERE "offset" > ? ORDER BY "offset" LIMIT ?',
                (after, page),
            ).fetchall()
            for _offset, body in rows:
                if progress is not None:
                    progress(1)
                yield bytes(body)
            if len(rows) < page:
                return
            after = int(rows[-1][0])
    finally:
        conn.close()


def db_count(path: Path) -> int:
    """How many records the embedded log at ``path`` holds (read-only)."""
    return _db_count(path)


def _db_count(path: Path) -> int:
    conn = open_readonly(path)
    try:
        return int(conn.execute("SELECT count(*) FROM records").fetchone()[0])
    finally:
        conn.close()


def export_main(args: argparse.Namespace) -> int:
    """``casino-ledger export --db PATH --out FILE``."""
    db = Path(args.db)
    if not db.exists():
        print(f"casino-ledger: error: no log at {db}", file=sys.stderr)
        return 2
    n = 0
    with Path(args.out).open("wb") as fh, how_far("export", _db_count(db), "records", every=1000) as done:
        for raw in read_db(db, done):
            fh.write(raw + b"\n")
            n += 1
    print(json.dumps({"exported": n, "out": str(args.out)}))
    return 0


def _scope_of(args: argparse.Namespace) -> Scope:
    tables = frozenset(args.table) if getattr(args, "table", None) else None
    since = iso_instant(args.since) if getattr(args, "since", None) else None
    until = iso_instant(args.until) if getattr(args, "until", None) else None
    return Scope(tables, since, until)


def replay_main(args: argparse.Namespace, now: Callable[[], datetime] | None = None) -> int:
    """``casino-ledger replay --db PATH | --jsonl FILE | --kafka HOST:PORT [options]``.

    Exit 0 clean, 1 findings or incomplete, 2 for a source or option that cannot be used (one line)."""
    try:
        return _replay_main(args, now or _clock)
    except SourceError as exc:
        print(f"casino-ledger: error: {printable(str(exc))}", file=sys.stderr)  # it may quote the log
        return 2


def _clock() -> datetime:
    """Now, or ``SOURCE_DATE_EPOCH`` (seconds) when set: a reproducible report for a reproducible input."""
    epoch = conventions().source_date_epoch.strip()
    if epoch.isdigit():
        return datetime.fromtimestamp(int(epoch), UTC)
    return datetime.now(UTC)


def _replay_main(args: argparse.Namespace, now: Callable[[], datetime]) -> int:
    try:
        scope = _scope_of(args)
    except ValueError as exc:
        raise SourceError(f"--since/--until must be ISO 8601: {exc}") from None
    if getattr(args, "html", None):  # before anything is read: never the log, its WAL or a keyring
        check_output(args.html, "--html", db=args.db, extra=[getattr(args, "keys", None), args.jsonl])
    keys, key_source = public_keys_from(getattr(args, "keys", None), log=Path(args.db) if args.db else None)
    writers = writer_keys_from(getattr(args, "keys", None), log=Path(args.db) if args.db else None)
    source = Path(args.db or args.jsonl) if (args.db or args.jsonl) else None
    if source is not None and not source.exists():
        raise SourceError(f"no {'log' if args.db else 'file'} at {source}")
    if args.db:
        open_readonly(Path(args.db)).close()  # a foreign file is an error before anything is read
    collector = CoupCollector(args.coup) if getattr(args, "coup", None) else None
    expect = None
    if getattr(args, "expect", None):
        from services.runtime.heads import read_heads  # noqa: PLC0415

        expect = read_heads(Path(args.expect), keys)
    with _progress(args, source) as advance:
        records = _source(args, advance)
        written_order: bool | Literal["strict"] = "strict" if args.db else bool(args.jsonl)
        report = replay(records, scope=scope, keys=keys, collector=collector, ordered=written_order,
                        expect=expect, writers=writers)  # fmt: skip
    what = str(source) if source is not None else f"the topics at {args.kafka}"
    report.keys_supplied = keys_supplied(getattr(args, "keys", None))
    report.keys["supplied"] = report.keys_supplied
    if report.records == 0:
        hint = "" if source is not None else " (check the topic prefix)"
        raise SourceError(f"{what} holds no records: nothing to replay{hint}")
    if not report.types:
        raise SourceError(f"{what} holds no casino-ledger event: not a log of this system")
    unknown = sorted((scope.tables or frozenset()) - set(report.tables_in_log))
    if unknown:
        raise SourceError(
            f"no table {', '.join(unknown)} in the log (tables: {', '.join(report.tables_in_log)})"
        )
    if collector is not None:
        return _coup_main(args, collector)
    if getattr(args, "html", None):
        from services.runtime.report_html import render_html  # noqa: PLC0415

        meta = report_meta(args, source, key_source, now())
        data = report.to_dict()
        Path(args.html).write_text(render_html(data, meta, table_odds(data)), encoding="utf-8")
        print(f"casino-ledger: report written to {args.html}", file=sys.stderr)
    if args.json:
        sys.stdout.write(printable_json(report.to_json()))  # the same JSON, nothing a terminal acts on
    else:
        print(render_text(report))
    return 0 if report.verdict == "clean" else 1


def _source(args: argparse.Namespace, advance: Callable[[int], None] | None) -> Source:
    """The log ``args`` names, readable twice (the progress shown for the replay's pass only)."""
    if args.db:
        db = Path(args.db)
        return Source(lambda: read_db(db, advance), lambda: read_db(db))
    if args.jsonl:
        jsonl = Path(args.jsonl)
        return Source(lambda: read_jsonl(jsonl, advance), lambda: read_jsonl(jsonl))
    from services.runtime.kafka import topic_io as kafka_io  # noqa: PLC0415

    return Source(lambda: (r.value or b"" for r in kafka_io.iter_raw(args.kafka, list(topics.ALL_TOPICS))))


def _coup_main(args: argparse.Namespace, collector: CoupCollector) -> int:
    if not collector.found:
        raise SourceError(f"no coup {args.coup} in the log")
    view = collector.to_dict()
    if getattr(args, "html", None):
        from services.runtime.report_html import render_coup_html  # noqa: PLC0415

        Path(args.html).write_text(render_coup_html(view), encoding="utf-8")
        print(f"coup view written to {args.html}")
    elif args.json:
        print(printable_json(json.dumps(view, indent=2, ensure_ascii=False)))
    else:
        from services.runtime.textfit import fit  # noqa: PLC0415

        print(fit(render_coup_text(view)))  # at the terminal's width: a money figure is never cut
    return 1 if collector.findings else 0


@functools.lru_cache(maxsize=32)
def exact_outcomes(variant: str, decks: int) -> dict[str, float] | None:
    """Exact outcome probabilities of a variant's default table by full enumeration (``None`` where the
    variant has too many hands to enumerate); cached: a report computes each variant once."""
    from services.core.baccarat import odds  # noqa: PLC0415

    try:
        report = odds.odds_report(variant, decks)
    except DomainError:
        return None
    return {str(k): float(v["probability"]) for k, v in report["outcomes"].items()}


def table_odds(report: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Exact outcome probabilities per table of a JSON report, for its charts."""
    out = {}
    for t in report.get("tables") or []:
        if t.get("variant") and isinstance(t.get("decks"), int) and t.get("coups"):
            got = exact_outcomes(str(t["variant"]), int(t["decks"]))
            if got is not None:
                out[str(t["table_id"])] = got
    return out


def file_digest(path: Path) -> str:
    """SHA-256 (hex) of a file's bytes, read in chunks."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def tool_version() -> str:
    """This program's installed version."""
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    try:
        return version("casino-ledger")
    except PackageNotFoundError:
        return "unknown"


def report_meta(
    args: argparse.Namespace, source: Path | None, key_source: str, at: datetime
) -> dict[str, Any]:
    """What the human report says about itself: when (``at``, read by the caller), which tool, which
    source and its SHA-256, which keyring verified the checkpoints."""
    src: dict[str, str | None]
    if source is not None:
        kind = "SQLite log" if args.db else "JSONL export"
        src = {"kind": kind, "path": str(source), "sha256": file_digest(source)}
    else:
        src = {"kind": "Kafka topics", "path": str(args.kafka), "sha256": None}
    when = at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return {"generated_at": when, "tool_version": tool_version(), "source": src, "keyring": key_source}


@contextmanager
def _progress(args: argparse.Namespace, source: Path | None) -> Iterator[Callable[[int], None] | None]:
    """How far the replay's pass over a file is, on stderr (:mod:`services.runtime.progress`)."""
    if source is None:  # Kafka: no total to count against
        yield None
        return
    if args.jsonl:
        with how_far("replay", source.stat().st_size, "bytes", every=1 << 16) as advance:
            yield advance
    else:
        with how_far("replay", _db_count(source), "records", every=1000) as advance:
            yield advance


def render_text(report: Report) -> str:
    """The human summary of a replay: verdict, root findings with their consequences, open items. Every
    value taken from the log is made printable (:func:`printable_data`): no log drives the terminal
    or prints a line of its own, such as a fake verdict."""
    d = printable_data(report.to_dict())
    cp = d["checkpoints"]
    prints = d["keys"].get("fingerprints") or {}
    signed = ", ".join(f"{k} {prints.get(k) or '(no such key)'} ({n})"
                       for k, n in sorted(cp.get("signed_by", {}).items())) or "none"  # fmt: skip
    lines = [
        f"replayed {report.records} records, {report.coups} coups",
        f"checkpoints verified: {cp.get('verified', 0)}; signed by: {signed}",
        *([] if report.keys_supplied else [KEYS_NOT_SUPPLIED_LINE]),
        *tree_lines(cp.get("tree_heads") or {}),
        f"findings: {d['root_findings']} root cause(s), {d['findings_total']} finding(s) in all; "
        f"open items: {len(d['open_items'])}",
    ]
    for g in d["groups"][:50]:
        root = g["root"]
        lines.append(f"  * {root.get('reason')} at {root.get('table_id')}: {root.get('explanation')}")
        lines.append(f"      events: {', '.join(g['event_ids'][:6])}")
        if root.get("expected") is not None or root.get("recorded") is not None:
            lines.append(f"      expected {json.dumps(root.get('expected'), sort_keys=True)}"
                         f" / recorded {json.dumps(root.get('recorded'), sort_keys=True)}")  # fmt: skip
        if root.get("detail"):
            lines.append(f"      {root['detail']}")
        for c in g["consequences"][:10]:
            lines.append(
                f"      - consequence: {c.get('reason')} {json.dumps(c.get('subject'), sort_keys=True)}"
            )
        if len(g["consequences"]) > 10:
            lines.append(f"      - and {len(g['consequences']) - 10} more consequences")
    for i in d["open_items"][:50]:
        lines.append(f"  - open: {json.dumps(i, sort_keys=True)}")
    for reason, entry in sorted(d["refused"].items()):
        lines.append(f"refused records ({reason}): {entry['count']} — attempts turned away, not a breach")
    lines += _attestation_lines(d.get("attestation") or {})
    if d["verdict"] == "incomplete" and d["ends_at"]:
        e = d["ends_at"]
        lines.append(
            f"the log stops at record {e['record']}: {e['type']} {e['event_id']} ({e['occurred_at']})"
        )
    lines.append(f"verdict: {d['verdict']}")
    lines.append(f"digest: {report.digest}")
    return "\n".join(lines)


KEYS_NOT_SUPPLIED_LINE = (
    "keys: NOT SUPPLIED INDEPENDENTLY — the keyring came from beside the log (or is the public demo key); "
    "whoever could write the log could have written it: replay with --keys PUBLIC (or CASINO_PUBLIC_KEYRING)"
)


def tree_lines(trees: Mapping[str, Any]) -> list[str]:
    """What the text report says of audit's signed tree heads (:mod:`services.audit.replay.tree_head`)."""
    latest = trees.get("latest")
    if not latest:
        return ["tree heads: none verifies: nothing in this log is proven"] if trees.get("unproven") else []
    return [f"tree heads verified: {trees.get('signed', 0)}; latest #{latest['n']} root {latest['root']} "
            f"over {trees.get('chains_covered', 0)} chains"]  # fmt: skip


def _attestation_lines(a: Mapping[str, Any]) -> list[str]:
    """What the signed heads cover, in a few lines (the report's ``attestation``)."""
    if not a:
        return []
    writers = ", ".join(
        f"{name} #{w['last_seq']}{' sealed' if w['sealed'] else ''} ({(w.get('fingerprint') or '?')[:16]})"
        for name, w in sorted(a.get("writers", {}).items())
    )
    un, bad = a.get("unattested", {}), a.get("invalid_signatures", {})
    lines = [f"signed heads: {a.get('signed_heads', 0)} verified; writers: {writers or 'none'}"]
    if bad.get("count"):
        lines.append(f"signatures that do not verify: {bad['count']} (first: {', '.join(bad['ids'][:3])})")
    if un.get("count"):
        first = ", ".join(un["first_ids"][:3])
        lines.append(f"unattested records: {un['count']} — not ledger facts, not applied (first: {first})")
    lines += [f"incomplete: {why}" for why in a.get("incomplete", [])]
    return lines


def _money(minor: Any) -> str:
    return f"{int(minor) / 100:,.2f}" if isinstance(minor, int) else "-"


def render_coup_text(view: Mapping[str, Any]) -> str:
    """One game round, readable: bets, cards, decisions, result (recorded and recomputed), payouts
    (every value from the log made printable, as in :func:`render_text`)."""
    view = printable_data(view)
    lines = [
        f"coup {view.get('coup_id')} — table {view.get('table_id')}, shoe {view.get('shoe_id')}, "
        f"coup #{view.get('coup_number')}",
        f"variant {view.get('variant')} (rules {view.get('rules_version')}), "
        f"{view.get('started_at')} → {view.get('ended_at')}",
        "bets:",
    ]
    for b in view.get("bets") or []:
        lines.append(
            f"  {b.get('bet_id')}  {b.get('account_id')}  {b.get('spot')}  {_money(b.get('stake_minor'))}"
        )
    lines.append("cards:")
    for c in view.get("cards") or []:
        lines.append(
            f"  {c.get('n')}. {c.get('hand')}: {c.get('card')} (shoe position {c.get('shoe_position')})"
        )
    for dec in view.get("decisions") or []:
        lines.append(f"  decision: {dec.get('hand')} {dec.get('choice')} (by {dec.get('decided_by')})")
    hands = view.get("hands") or {}
    shown = ", ".join(
        f"{h} {' '.join(v.get('cards', []))} = {v.get('total')}" for h, v in sorted(hands.items())
    )
    lines.append(f"result: {view.get('outcome')}{' (natural)' if view.get('natural') else ''} — {shown}")
    again = view.get("recomputed") or {}
    agree = again.get("outcome") == view.get("outcome") and again.get("hands") == view.get("hands")
    lines.append(
        f"recomputed from the recorded cards: {again.get('outcome')} ({'agrees' if agree else 'DIFFERS'})"
    )
    lines.append("payouts:")
    for po in view.get("payouts") or []:
        lines.append(f"  {po.get('bet_id')}  {po.get('result')}  stake {_money(po.get('stake_minor'))}  "
                     f"win {_money(po.get('win_minor'))}  commission {_money(po.get('commission_minor'))}  "
                     f"credit {_money(po.get('credit_minor'))}")  # fmt: skip
    t = view.get("totals") or {}
    lines.append(
        f"totals: staked {_money(t.get('stake_minor'))}, paid back {_money(t.get('credit_minor'))}, "
        f"commission {_money(t.get('commission_minor'))}, house {_money(t.get('house_result_minor'))}"
    )
    for f in view.get("findings") or []:
        lines.append(f"finding: {f.get('reason')} {f.get('detail') or ''}")
    lines.append(f"verdict: {view.get('verdict')}")
    return "\n".join(lines)
