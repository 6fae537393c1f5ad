"""``casino-ledger demo``: the main job on the embedded default, and its summary.

Opens tables of every variant, funds seeded players, plays the coups through the dealer, settlement
and audit processors on a SQLite log, then prints per table: coups, bets, handle, paid, commission,
house result and hold %, the audit verdict (a fresh replay of the whole log) and where the log is.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from services.core import topics
from services.core.envelope import Envelope, parse_record
from services.runtime.replay import Report, pipeline_public_keys, read_db, replay
from services.runtime.simulator import Session, TableSpec, demo_tables

DEFAULT_COUPS = 60


@dataclass(slots=True)
class TableSummary:
    """Money and counts of one table over a session."""

    table_id: str
    variant: str = ""
    coups: int = 0
    bets: int = 0
    refused: int = 0
    handle_minor: int = 0
    paid_minor: int = 0
    commission_minor: int = 0

    @property
    def house_minor(self) -> int:
        """What the house and the banks kept: handle less everything credited back."""
        return self.handle_minor - self.paid_minor

    @property
    def hold_pct(self) -> float:
        """House result over handle, in percent (display only; money stays integer)."""
        return 100.0 * self.house_minor / self.handle_minor if self.handle_minor else 0.0

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return {
            "table_id": self.table_id, "variant": self.variant, "coups": self.coups, "bets": self.bets,
            "refused": self.refused, "handle_minor": self.handle_minor, "paid_minor": self.paid_minor,
            "commission_minor": self.commission_minor, "house_minor": self.house_minor,
            "hold_pct": round(self.hold_pct, 4),
        }  # fmt: skip


def summarise(records: Iterable[bytes | Envelope]) -> dict[str, TableSummary]:
    """Per-table summaries from a log's records."""
    tables: dict[str, TableSummary] = {}

    def of(table_id: str) -> TableSummary:
        return tables.setdefault(table_id, TableSummary(table_id))

    for raw in records:
        env = raw if isinstance(raw, Envelope) else parse_record(raw)
        p = env.payload
        if env.type == "TableOpened":
            of(env.key).variant = str(p["variant"])
        elif env.type == "BetAccepted":
            s = of(env.key)
            s.bets += 1
            s.handle_minor += int(p["stake_minor"])
        elif env.type == "BetRefused":
            of(env.key).refused += 1
        elif env.type == "CoupResolved":
            of(env.key).coups += 1
        elif env.type == "PayoutIssued" and env.topic == topics.WALLET_REQUESTS:
            s = of(str(p["table_id"]))
            s.paid_minor += int(p["credit_minor"])
            s.commission_minor += int(p["commission_minor"])
    return dict(sorted(tables.items()))


def _money(minor: int) -> str:
    sign = "-" if minor < 0 else ""
    return f"{sign}{abs(minor) // 100:,}.{abs(minor) % 100:02d}"


def render(console: Console, summaries: dict[str, TableSummary], report: Report, where: str) -> None:
    """Print the summary table, the audit verdict and where the log is."""
    t = Table(title="casino-ledger demo: tables")
    for col in (
        "table",
        "variant",
        "coups",
        "bets",
        "refused",
        "handle",
        "paid",
        "commission",
        "house",
        "hold %",
    ):
        t.add_column(col, justify="left" if col in ("table", "variant") else "right")
    for s in summaries.values():
        money = (s.handle_minor, s.paid_minor, s.commission_minor, s.house_minor)
        counts = (s.coups, s.bets, s.refused)
        t.add_row(s.table_id, s.variant, *map(str, counts), *map(_money, money), f"{s.hold_pct:.2f}")
    console.print(t)
    d = report.to_dict()
    colour = "green" if report.clean else "red"
    counts = f"{report.records} records, {report.coups} coups, {len(d['findings'])} findings"
    opened = f"{len(d['open_items'])} open items"
    console.print(f"audit verdict: [{colour}]{d['verdict']}[/{colour}] — {counts}, {opened}")
    for f in d["findings"][:20]:
        console.print(f"  finding {f.get('reason')}: {json.dumps(f.get('subject'), sort_keys=True)}")
    console.print(f"digest: {report.digest}")
    console.print(f"log: {where}")


def main(args: argparse.Namespace) -> int:
    """Run the demo session (on the embedded log, or through Kafka with ``--kafka``) and print it."""
    from services.runtime.logging import configure  # noqa: PLC0415

    coups = args.coups if args.coups is not None else DEFAULT_COUPS
    try:
        tables = demo_tables(args.tables)
    except ValueError as exc:
        print(f"casino-ledger: error: --tables: {exc}", file=sys.stderr)
        return 2
    if coups < 1:
        print("casino-ledger: error: --coups: a session plays at least one coup", file=sys.stderr)
        return 2
    configure(level=os.environ.get("LOG_LEVEL", "WARNING"))  # one line per batch is for operators
    console = Console(quiet=bool(getattr(args, "quiet", False)), width=None if sys.stdout.isatty() else 132)
    if getattr(args, "kafka", None):
        return _main_kafka(args, console, tables, coups)
    from services.runtime.embedded import EmbeddedBus  # noqa: PLC0415

    db = Path(args.db) if args.db else Path("var") / f"demo-seed{args.seed}.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    bus = EmbeddedBus(db)
    try:
        _play(console, Session(bus, seed=args.seed), tables, coups)
    finally:
        bus.close()
    report = replay(read_db(db), keys=pipeline_public_keys())
    render(console, summarise(read_db(db)), report, f"{db}  (try: casino-ledger replay --db {db})")
    return 0 if report.clean else 1


def _play(console: Console, session: Session, tables: list[TableSpec], coups: int) -> None:
    variants = len({t.variant for t in tables})
    console.print(
        f"seed {session.seed}: {len(tables)} tables ({variants} variants), {coups} coups each, "
        f"{session.players} players; dealer, settlement, audit and monitor processing every event"
    )
    with Progress(console=console, transient=True, disable=console.quiet) as progress:
        task = progress.add_task("playing coups", total=coups * len(tables))
        session.run(tables, coups, progress=lambda: progress.advance(task))


def _main_kafka(args: argparse.Namespace, console: Console, tables: list[TableSpec], coups: int) -> int:
    """The same seeded session through Kafka: each service a separate worker process (DESIGN §5).

    Topics get a prefix of their own (``CASINO_TOPIC_PREFIX``, else ``demo-<seed>-<time>.``) so that a
    second run never mixes with the first; the workers log under ``var/kafka/<prefix>``.
    """
    from services.runtime.kafka_bus import quick_settings, running  # noqa: PLC0415
    from services.runtime.settings import Settings  # noqa: PLC0415

    base = Settings(bootstrap_servers=args.kafka)
    if not os.environ.get("CASINO_TOPIC_PREFIX"):
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        base = base.model_copy(update={"topic_prefix": f"demo-{args.seed}-{stamp}."})
    settings = quick_settings(base)
    log_dir = Path("var") / "kafka" / settings.topic_prefix.rstrip(".")
    console.print(f"topics {settings.topic_prefix}*, worker logs in {log_dir}")
    with running(settings, log_dir) as bus:
        _play(console, Session(bus, seed=args.seed), tables, coups)
        records = bus.consume_all()
    report = replay(records, keys=pipeline_public_keys())
    prefix = settings.topic_prefix
    replay_cmd = f"CASINO_TOPIC_PREFIX={prefix} casino-ledger replay --kafka {args.kafka}"
    where = f"Kafka {args.kafka}, topics {prefix}*  (try: {replay_cmd})"
    render(console, summarise(records), report, where)
    return 0 if report.clean else 1
