"""``casino-ledger demo``: the main job on the embedded default, and its summary.

Opens tables of every variant, funds seeded players, plays the coups through the dealer, settlement
and audit processors on a SQLite log, then prints per table: coups, bets, handle, paid, commission,
house result and hold %, the audit verdict (a fresh replay of the whole log) and where the log is.
"""

from __future__ import annotations

import argparse
import io
import json
import shlex
import shutil
import sqlite3
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress
from rich.table import Table

from services.audit.replay import Report
from services.core import figures
from services.core.baccarat import VARIANTS
from services.core.envelope import Envelope, parse_record
from services.core.figures import COUNTERS, NOTHING, Figures
from services.runtime.compose import Composition
from services.runtime.failures import BadInput, NotALog
from services.runtime.keyring import KeyringError, load_keyring, new_keyring, save_keyring
from services.runtime.replay import PUBLIC_KEYRING_SUFFIX, Source, read_db, replay
from services.runtime.settings import Settings, conventions, setting
from services.runtime.textfit import printable, printable_data
from services.simulation.simulator import Session, TableSpec, demo_tables

DEFAULT_COUPS = 60


@dataclass(slots=True)
class TableSummary:
    """One table over a session: its name, variant, currency and figures (:mod:`services.core.figures`,
    the one definition every report shares)."""

    table_id: str
    variant: str = ""
    currency: str = ""
    figures: Figures = NOTHING

    def __getattr__(self, name: str) -> Any:  # the figures' counters and derived figures, by name
        if name in _FIGURE_NAMES:
            return getattr(self.figures, name)
        raise AttributeError(name)

    @property
    def player_banked(self) -> bool:
        """Whether a player holds the bank at this table (its variant is not house-banked)."""
        variant = VARIANTS.get(self.variant)
        return variant is not None and not variant.house_banked

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return {"table_id": self.table_id, "variant": self.variant, "currency": self.currency,
                **self.figures.to_dict(), "house_minor": self.figures.win_minor}  # fmt: skip


_FIGURE_NAMES = frozenset({*COUNTERS, "win_minor", "hold_pct", "hold_bps", "punters_minor"})


def summarise(records: Iterable[bytes | Envelope]) -> dict[str, TableSummary]:
    """Per-table summaries from a log's records (figures by :func:`services.core.figures.of_record`)."""
    tables: dict[str, TableSummary] = {}

    def of(table_id: str) -> TableSummary:
        return tables.setdefault(table_id, TableSummary(table_id))

    for raw in records:
        env = raw if isinstance(raw, Envelope) else parse_record(raw)
        p = env.payload
        if env.type == "TableOpened":
            of(env.key).variant = str(p["variant"])
            of(env.key).currency = str(p.get("currency") or "")
        elif env.type in figures.COUNTED:
            add = figures.of_record(env.topic, env.type, p)
            if add is not None:
                row = of(str(p["table_id"]))
                row.figures += add
    return dict(sorted(tables.items()))


def _money(minor: int) -> str:
    sign = "-" if minor < 0 else ""
    return f"{sign}{abs(minor) // 100:,}.{abs(minor) % 100:02d}"


def plural(n: int, noun: str, many: str | None = None) -> str:
    """``1 table``, ``2 tables`` (``many`` for an irregular plural)."""
    return f"{n:,} {noun if n == 1 else (many or noun + 's')}"


COLUMNS: tuple[tuple[str, str], ...] = (
    ("coups", "game rounds resolved"),
    ("bets", "bets accepted (a player-banker's cover reserve is not a bet)"),
    ("refused", "bets refused (over a limit, unfunded, ...)"),
    ("handle", "the stakes of the accepted bets"),
    (
        "paid back",
        "all credited on bets: winnings less commission plus the stakes returned on winning and pushed "
        "bets (at a player-banked table the player-banker's payout too, not his cover's return)",
    ),
    (
        "commission",
        "taken by the house from winnings: its 5 % on banker wins, its levy on a player-banker's win "
        "(the french club's 10 % on banker bets goes to the player-banker: in his share)",
    ),
    (
        "win",
        "what the house kept, commission included: all staked less all credited back; at a "
        "player-banked table the house is no party to the bets, so its win is its levy",
    ),
    (
        "bank",
        "the player-banker's share: what the players holding the bank won (or lost, −) at a "
        "player-banked table, the commission paid to the bank included; the punters' result is "
        "−(win + bank)",
    ),
    ("hold %", "win ÷ handle × 100"),
)
"""The table's columns after ``table``/``variant``, each with what it is in a casino manager's words
(the definitions: :mod:`services.core.figures`); ``bank`` only when a table is player-banked."""

_LABEL_MIN = 9
"""The narrowest a label column (table, variant) wraps to."""


def render(  # noqa: PLR0917 (the callers name what they pass by position since the first version)
    console: Console,
    summaries: dict[str, TableSummary],
    report: Report,
    where: str,
    db: Path | None = None,
    replay_cmd: str | None = None,
) -> None:
    """Print the summary table, its legend, the audit verdict and where the log is (``db``: the SQLite
    log, named in the hint that explains the alerts; ``replay_cmd``: the command that replays it).

    Every command the user may copy is printed on a line of its own, never wrapped by the console
    (``soft_wrap``): however long the clone's path, the line copied is the command, whole.

    Money is never cut: on a narrow terminal the labels wrap, then the counts go to a table of their
    own, then each table's figures are printed one per line."""
    render_tables(console, summaries)
    d = printable_data(report.to_dict())  # the log's text: neither terminal controls nor rich markup
    colour = "green" if report.clean else "red"
    counts = (f"{plural(report.records, 'record')}, {plural(report.coups, 'coup')}, "
              f"{plural(len(d['findings']), 'finding')}")  # fmt: skip
    opened = plural(len(d["open_items"]), "open item")
    console.print(f"audit verdict: [{colour}]{d['verdict']}[/{colour}] — {counts}, {opened}")
    for f in d["findings"][:20]:
        console.print(f"  finding {escape(str(f.get('reason')))}: "
                      f"{escape(json.dumps(f.get('subject'), sort_keys=True))}")  # fmt: skip
    by = Counter(str(a.get("severity")) for a in d.get("alerts", []))  # monitor alerts (issue #13)
    shown = ", ".join(f"{by.get(s, 0)} {s}" for s in ("critical", "warning", "info"))
    if db is None:
        console.print(f"monitor alerts: {shown}")
    else:  # the command on a line of its own (``alerts`` reads a SQLite log)
        console.print(f"monitor alerts: {shown}; each explained by:")
        command_line(console, f"{invoked_as()} alerts --db {shlex.quote(str(db))}")
    console.print(f"digest: {report.digest}")
    if replay_cmd is None:
        console.print(f"log: {where}")
    else:
        console.print(f"log: {where}; replayed by:")
        command_line(console, replay_cmd)


def command_line(console: Console, command: str) -> None:
    """One command to copy, indented two spaces, on a line of its own that the console never wraps."""
    console.print(f"  {command}", soft_wrap=True, markup=False, highlight=False)


def render_tables(console: Console, summaries: dict[str, TableSummary]) -> None:
    """The per-table figures at the console's width, every money cell whole, then the legend.

    The widest layout that shows every figure whole wins: one table; else the counts and the money in
    two tables (labels wrap); else each table's figures one per line."""
    rows = list(summaries.values())
    currencies = sorted({s.currency for s in rows if s.currency})
    one = _shown(currencies[0]) if len(currencies) == 1 else None  # one currency: said once, in the title
    counts = [("coups", [str(s.coups) for s in rows]), ("bets", [str(s.bets) for s in rows]),
              ("refused", [str(s.refused) for s in rows])]  # fmt: skip
    banked = any(s.player_banked for s in rows)
    money = [
        ("handle", [_money(s.handle_minor) for s in rows]),
        ("paid back", [_money(s.paid_minor) for s in rows]),
        ("commission", [_money(s.commission_minor) for s in rows]),
        ("win", [_money(s.win_minor) for s in rows]),
        *([("bank", [_money(s.bank_minor) if s.player_banked else "-" for s in rows])] if banked else []),
        ("hold %", [f"{s.hold_pct:.2f}" for s in rows]),
    ]
    if one is None:
        money.insert(0, ("currency", [_shown(s.currency or "?") for s in rows]))
    ids, variants = [_shown(s.table_id) for s in rows], [_shown(s.variant) for s in rows]
    amounts = f" (amounts in {one})" if one else ""
    both = [f"{t}\n[dim]{v}[/dim]" for t, v in zip(ids, variants, strict=True)]
    layouts = [
        [_table(f"casino-ledger demo: tables{amounts}", [("table", ids), ("variant", variants)],
                counts + money)],
        [_table("casino-ledger demo: play", [("table", ids), ("variant", variants)], counts),
         _table(f"casino-ledger demo: money{amounts}", [("table", ids)], money)],
        [_table("casino-ledger demo: play", [("table", both)], counts),
         _table(f"casino-ledger demo: money{amounts}", [("table", ids)], money)],
    ]  # fmt: skip
    for tables in layouts:
        if all(_whole(console, t) for t in tables):
            for t in tables:
                console.print(t)
            break
    else:  # narrower than the money itself: one figure per line, never cut
        for i in range(len(rows)):
            console.print(f"[bold]{ids[i]}[/bold] ({variants[i]}){amounts}")
            for h, c in counts + money:
                console.print(f"  {h}: {c[i]}")  # a line too long breaks before the figure, never in it
    shown = {h for h, _ in counts + money}
    console.print("\n".join(f"[dim]{h}[/dim]: {what}" for h, what in COLUMNS if h in shown), highlight=False)


def _shown(text: str) -> str:
    """Text from the log as a rich cell: made printable, its markup escaped (a table id ``[red]…`` or
    an ANSI sequence prints as written, never as what it would do)."""
    return escape(printable(text))


def _whole(console: Console, table: Table) -> bool:
    """Whether ``table`` printed at the console's width shows every figure of every row whole (each
    row's figures are the last words of one of its lines)."""
    probe = Console(width=console.width, file=io.StringIO(), color_system=None, legacy_windows=False)
    probe.print(table)
    lines = [line.split() for line in probe.file.getvalue().splitlines()]  # type: ignore[attr-defined]
    figures = [c for c in table.columns if c.no_wrap]
    rows = zip(*(list(c.cells) for c in figures), strict=True)
    return all(any(line[-len(figures) :] == list(row) for line in lines) for row in rows)


def _table(title: str, labels: list[tuple[str, list[str]]], figures: list[tuple[str, list[str]]]) -> Table:
    t = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for header, _ in labels:
        t.add_column(header, justify="left", overflow="fold", min_width=_LABEL_MIN)
    for header, col in figures:
        w = max(len(header), *map(len, col))
        t.add_column(header, justify="right", no_wrap=True, min_width=w, max_width=w)
    for i in range(len(labels[0][1])):
        t.add_row(*(c[i] for _, c in labels), *(c[i] for _, c in figures))
    return t


DEFAULT_SEED = 2026

DEMO_COUPS_MAX = 100_000
"""The most coups per table a demo plays (a bound, not a target: 60 take seconds)."""

DEMO_TABLES_MAX = 1_000
"""The most tables a demo opens."""

META_KEY = "demo"
"""Where the demo records its session options in the log file (``--resume`` reads them back)."""


def _options(args: argparse.Namespace, stored: dict[str, int] | None) -> dict[str, int]:
    """The session's seed, tables and coups: as given, else as stored (``--resume``), else defaults.
    Raises :class:`BadInput` for a bound crossed or for an option that contradicts the stored one."""
    given = {"seed": args.seed, "tables": args.tables, "coups": args.coups}
    if stored is not None:
        clash = {k: v for k, v in given.items() if v is not None and v != stored.get(k)}
        if clash:
            was = " ".join(f"--{k} {stored.get(k)}" for k in clash)
            raise BadInput(f"--resume: that log's session was played with {was}; resume it with the same")
        return dict(stored)
    options = {"seed": DEFAULT_SEED if args.seed is None else args.seed,
               "tables": len(demo_tables()) if args.tables is None else args.tables,
               "coups": DEFAULT_COUPS if args.coups is None else args.coups}  # fmt: skip
    coups, tables = options["coups"], options["tables"]
    if not 1 <= coups <= DEMO_COUPS_MAX:
        raise BadInput(f"--coups: a session plays 1 to {DEMO_COUPS_MAX:,} coups per table, not {coups}")
    if not 1 <= tables <= DEMO_TABLES_MAX:
        raise BadInput(f"--tables: a session opens 1 to {DEMO_TABLES_MAX:,} tables, not {tables}")
    return options


def main(args: argparse.Namespace) -> int:
    """Run the demo session (on the embedded log, or through Kafka with ``--kafka``) and print it."""
    from services.runtime.logging import configure  # noqa: PLC0415

    try:
        if getattr(args, "seamless", None) is not None and getattr(args, "kafka", None):
            raise BadInput("--seamless runs on the embedded log, not with --kafka")
        if getattr(args, "kafka", None) and (args.resume or args.force):
            raise BadInput("--resume and --force are for the embedded log (--db), not --kafka")
        if args.resume and args.force:
            raise BadInput("--resume continues a log and --force replaces it: choose one")
        db = Path(args.db) if args.db else None
        stored = _prepare(db, args) if not getattr(args, "kafka", None) else None
        options = _options(args, stored)
    except BadInput as exc:
        print(f"casino-ledger: error: {printable(str(exc))}", file=sys.stderr)
        return 2
    tables = demo_tables(options["tables"])
    seed, coups = options["seed"], options["coups"]
    configure(level=conventions().log_level or "WARNING")  # one line per batch is for operators
    wide = None if sys.stdout.isatty() or conventions().columns else 132  # a pipe: room for the table
    console = Console(quiet=bool(getattr(args, "quiet", False)), width=wide)
    if getattr(args, "kafka", None):
        return _main_kafka(args, console, tables, coups, seed)
    if getattr(args, "seamless", None) is not None:
        from services.cli.seamless_demo import main_seamless  # noqa: PLC0415

        return main_seamless(args, console, tables, coups, seed, db or _default_db(seed), options)
    from services.runtime.embedded.bus import EmbeddedBus  # noqa: PLC0415

    path = db or _default_db(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    composition = open_composition(Path(f"{path}.keyring.json"))
    if composition is None:
        return 2
    _write_public_keyring(Path(f"{path}{PUBLIC_KEYRING_SUFFIX}"), composition)
    bus = EmbeddedBus(path, composition.pipeline(), event_driven=True)
    try:
        bus.log.set_meta(META_KEY, json.dumps(options, sort_keys=True))
        _play(console, Session(bus, seed=seed, keyring=composition.keyring), tables, coups)
    finally:
        bus.close()
    report = replay(
        Source(lambda: read_db(path)),
        keys=composition.checkpoint_public_keys(),
        writers=composition.writer_public_keys(),
    )
    replay_cmd = (
        f"{invoked_as()} replay --db {shlex.quote(str(path))}"
        f" --keys {shlex.quote(str(path) + PUBLIC_KEYRING_SUFFIX)}"
    )
    render(console, summarise(read_db(path)), report, str(path), path, replay_cmd)
    say_written(console, path)
    from services.cli.backoffice import serve_hint  # noqa: PLC0415

    title, commands, after = serve_hint(path, invoked_as())
    console.print(title)
    for command in commands:
        command_line(console, command)
    console.print(after, soft_wrap=True)
    return 0 if report.clean else 1


def invoked_as() -> str:
    """How to run this command again from the same shell: ``casino-ledger`` when that name on the PATH
    is this program, else the path it was started by (``.venv/bin/casino-ledger`` in a fresh shell
    without the venv activated), else ``python -m services.cli``."""
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else ""
    if Path(argv0).name == "casino-ledger":
        on_path = shutil.which("casino-ledger")
        if on_path and Path(on_path).resolve() == Path(argv0).resolve():
            return "casino-ledger"
        return shlex.quote(str(Path(argv0).absolute()))
    return f"{shlex.quote(sys.executable)} -m services.cli"


def say_written(console: Console, path: Path, more: Iterable[tuple[Path, str]] = ()) -> None:
    """Name every file the demo wrote beside its log (and ``more``: (path, what it is))."""
    files = [(path, "the log"), (Path(f"{path}.keyring.json"), "its keyring: secrets, mode 0600"),
             (Path(f"{path}{PUBLIC_KEYRING_SUFFIX}"), "the public keys a replay checks with"),
             *more]  # fmt: skip
    if setting("keyring"):
        files.pop(1)
    console.print("wrote: " + "; ".join(f"{p} ({what})" for p, what in files if p.exists()), soft_wrap=True)


def _default_db(seed: int) -> Path:
    return Path("var") / f"demo-seed{seed}.db"


def _prepare(db: Path | None, args: argparse.Namespace) -> dict[str, int] | None:
    """Make room for the session's log; the options stored in it when resuming.

    An existing ``--db`` file is never deleted or written to unless told: ``--resume`` continues the
    session it holds (the simulator re-sends its records and the log ignores those it has, so the
    result is that of an uninterrupted run), ``--force`` replaces it. The default path under ``var/``
    is the demo's own scratch file: a previous demo's log there is replaced, anything else refused.
    """
    path = db or _default_db(DEFAULT_SEED if args.seed is None else args.seed)
    if path.is_dir():
        raise BadInput(f"--db {path}: is a directory")
    present = [p for p in (path, Path(f"{path}-wal")) if p.exists()]
    if not present:  # nothing to resume: `--resume` starts the session (a script can always say it)
        return None
    stored = _stored_options(path)
    if args.resume:
        if stored is None and _empty_log(path):  # killed after the log was made, before its options
            return None
        if stored is None:
            raise BadInput(f"--resume: {path} holds no demo session to resume")
        return stored
    if args.force or (db is None and stored is not None):
        # --force starts afresh, keys included; the default scratch file keeps its keyring, so that
        # `make demo` twice plays the same shoes
        keys = (".keyring.json",) if args.force else ()
        for suffix in ("", "-wal", "-shm", PUBLIC_KEYRING_SUFFIX, *keys):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        return None
    raise BadInput(f"{path} exists: --resume continues its session, --force replaces it")


def _empty_log(path: Path) -> bool:
    """Whether ``path`` is an embedded log without a record, or an SQLite file without a table yet (a
    demo stopped between creating it and storing its options in it, or between opening the file and
    creating its tables: nothing of the session is there, so ``--resume`` starts it)."""
    from services.runtime.embedded.store import EmbeddedLog  # noqa: PLC0415

    try:
        with EmbeddedLog(path, readonly=True) as log:
            return log.count() == 0
    except NotALog:
        return _no_table(path)
    except sqlite3.Error:
        return False


def _no_table(path: Path) -> bool:
    """Whether ``path`` is an SQLite file (an empty file is one) that holds no table at all."""
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return False
    try:
        return int(conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]) == 0
    except sqlite3.Error:
        return False
    finally:
        conn.close()


def _stored_options(path: Path) -> dict[str, int] | None:
    from services.runtime.embedded.store import EmbeddedLog  # noqa: PLC0415

    try:
        with EmbeddedLog(path, readonly=True) as log:
            text = log.meta(META_KEY)
    except NotALog:
        return None
    try:
        data = json.loads(text) if text else None
    except ValueError:
        return None
    if not isinstance(data, dict) or set(data) != {"seed", "tables", "coups"}:
        return None
    return {k: int(v) for k, v in data.items()} if all(type(v) is int for v in data.values()) else None


def _write_public_keyring(path: Path, composition: Composition) -> None:
    """The public half of the demo's keys beside its log, for ``replay --keys`` (a keyring the replay
    only finds there is not supplied independently: docs/trust.md)."""
    doc = composition.keyring.public_document()
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def demo_composition(beside: Path) -> Composition:
    """The demo's processors: on ``CASINO_KEYRING`` when set, else on the keyring file ``beside`` (the
    db's ``<db>.keyring.json``: loaded when it exists, so a rerun replays the same shoes; else made
    fresh, mode 0600). Demo mode: the simulator may choose seeds; the public demo keys are allowed."""
    if setting("keyring"):
        return Composition.from_settings(Settings(demo_mode=True))
    ring = load_keyring(beside) if beside.exists() else new_keyring()
    if not beside.exists():
        save_keyring(ring, beside)
    return Composition.demo(ring)


def open_composition(beside: Path) -> Composition | None:
    """:func:`demo_composition`, or ``None`` once the reason a keyring cannot be used is said in one line
    on stderr (the caller exits 2)."""
    try:
        return demo_composition(beside)
    except KeyringError as exc:
        print(f"casino-ledger: error: {printable(str(exc))}", file=sys.stderr)
        return None


def _play(console: Console, session: Session, tables: list[TableSpec], coups: int) -> None:
    variants = len({t.variant for t in tables})
    console.print(
        f"seed {session.seed}: {plural(len(tables), 'table')} ({plural(variants, 'variant')}), "
        f"{plural(coups, 'coup')} each, {plural(session.players, 'player')}; "
        "dealer, settlement, audit and monitor processing every event"
    )
    with Progress(console=console, transient=True, disable=console.quiet) as progress:
        task = progress.add_task("playing coups", total=coups * len(tables))
        session.run(tables, coups, progress=lambda: progress.advance(task))


def _main_kafka(
    args: argparse.Namespace, console: Console, tables: list[TableSpec], coups: int, seed: int
) -> int:
    """The same seeded session through Kafka: each service a separate worker process
    (docs/architecture.md#runtimes).

    Topics get a prefix of their own (``CASINO_TOPIC_PREFIX``, else ``demo-<seed>-<time>.``) so that a
    second run never mixes with the first; the workers log under ``var/kafka/<prefix>``.
    """
    from services.runtime.kafka.bus import quick_settings, running  # noqa: PLC0415

    base = Settings(bootstrap_servers=args.kafka)
    if not setting("topic_prefix"):
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        base = base.model_copy(update={"topic_prefix": f"demo-{seed}-{stamp}."})
    settings = quick_settings(base)
    log_dir = Path("var") / "kafka" / settings.topic_prefix.rstrip(".")
    log_dir.mkdir(parents=True, exist_ok=True)
    composition = open_composition(log_dir / "keyring.json")
    if composition is None:
        return 2
    ring_path = settings.keyring or log_dir / "keyring.json"
    settings = settings.model_copy(update={"keyring": ring_path, "demo_mode": True})
    console.print(f"topics {settings.topic_prefix}*, worker logs and keyring in {log_dir}")
    with running(settings, log_dir) as bus:
        _play(console, Session(bus, seed=seed, keyring=composition.keyring), tables, coups)
        records = bus.consume_all()
    report = replay(
        records, keys=composition.checkpoint_public_keys(), writers=composition.writer_public_keys()
    )
    prefix = settings.topic_prefix
    public = log_dir / "public-keyring.json"
    _write_public_keyring(public, composition)
    replay_cmd = (
        f"CASINO_TOPIC_PREFIX={prefix} {invoked_as()} replay --kafka {args.kafka}"
        f" --keys {shlex.quote(str(public))}"
    )
    render(console, summarise(records), report, f"Kafka {args.kafka}, topics {prefix}*", None, replay_cmd)
    return 0 if report.clean else 1
