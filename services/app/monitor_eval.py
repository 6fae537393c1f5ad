"""``casino-ledger monitor-eval``: how well the monitor catches the adversaries, measured (issue #13).

Honest sessions and sessions with one adversary each (:mod:`services.app.adversaries`), every
one with its own seed, run through the pure processors in memory (dealer, settlement's two stages,
the monitor's table and account stages; audit is left out: it raises no alert). For each adversary
the table gives the share of runs in which a warning-or-worse alert of one of its detectors names
it (its account, or its table for a shoe or a dealer), the median number of coups (all tables) until
the first such alert, and the honest sessions' warning-or-worse alerts per 10 000 coups.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TextIO

from services.app.adversaries import ADVERSARIES, Adversary
from services.app.simulator import Session, TableSpec
from services.core.envelope import Envelope
from services.core.trust import Principal
from services.monitor.accounts import AccountMonitor
from services.runtime.compose import Composition
from services.runtime.memory import MemoryBus

TABLES = (
    TableSpec("E01-punto-banco", "punto_banco"),
    TableSpec("E02-punto-banco", "punto_banco"),
    TableSpec("E03-chemin-de-fer", "chemin_de_fer"),
)
"""Two house-banked tables (a cross-table hedge needs two) and a player-banked one (chip dumping)."""

WARNING_OR_WORSE = frozenset({"warning", "critical"})


def fast_bus(composition: Composition) -> MemoryBus:
    """The pipeline's pure processors over a list, in log order: audit left out (it raises no alert),
    the account stage of the monitor added."""
    accounts = AccountMonitor()
    accounts.guard = composition.keyring.guard(Principal.MONITOR)
    return MemoryBus([*(p for p in composition.processors() if p.name != "audit"), accounts])


def alerts(log: list[Envelope]) -> list[tuple[int, Envelope]]:
    """Every alert of ``log`` with the number of coups resolved before it."""
    coups, out = 0, []
    for e in log:
        if e.type == "CoupResolved":
            coups += 1
        elif e.type == "AnomalyDetected":
            out.append((coups, e))
    return out


def run(seed: int, rounds: int, adversary: Adversary | None = None) -> MemoryBus:
    """One session of ``rounds`` coups at each table: the evaluation tables for honest play, the
    tables the adversary needs (:attr:`Adversary.variants`) otherwise."""
    bus = fast_bus(Composition.demo())
    session = Session(bus, seed=seed, adversaries=[adversary] if adversary else [])
    tables = (
        list(TABLES)
        if adversary is None
        else [TableSpec(f"A{i + 1:02d}-{v.replace('_', '-')}", v) for i, v in enumerate(adversary.variants)]
    )
    session.run(tables, rounds)
    return bus


def names(alert: Envelope) -> set[str]:
    """The accounts and tables an alert names."""
    p = alert.payload
    subject = p.get("subject") or {}
    found = {str(p.get("table_id")), alert.key}
    found |= {str(subject["account_id"])} if subject.get("account_id") else set()
    found |= {str(a) for a in subject.get("account_ids") or []}
    return found


def caught(bus: MemoryBus, adversary: Adversary) -> int | None:
    """Coups played until the first warning-or-worse alert of the adversary's detectors naming it."""
    targets = set(adversary.accounts) or set(adversary.tables)
    for coups, a in alerts(bus.log):
        p = a.payload
        if p["severity"] in WARNING_OR_WORSE and p["detector"] in adversary.detectors and names(a) & targets:
            return coups
    return None


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the table."""

    adversary: str
    detectors: str
    runs: int
    detected: int
    median_coups: float | None


Tick = Callable[[str], None]
"""Told what was just run, after each run of a long evaluation."""


def evaluate(runs: int, rounds: int, honest_rounds: int, honest_runs: int, out: TextIO = sys.stdout, *,
             progress: Tick | None = None) -> tuple[list[Row], float, Counter[str]]:  # fmt: skip
    """Run everything and print the table; return its rows, the honest false-alarm rate per 10 000
    coups and the honest warning-or-worse alerts by detector. ``progress`` is called after each run
    with what was run (the full evaluation takes about 25 minutes)."""
    rows: list[Row] = []
    tick = progress or (lambda _what: None)
    for name, cls in ADVERSARIES.items():
        found: list[int] = []
        for r in range(runs):
            adversary = cls(seed=1000 + r)
            bus = run(1000 + r, rounds, adversary)
            at = caught(bus, adversary)
            if at is not None:
                found.append(at)
            tick(f"{name} run {r + 1} of {runs}")
        median = statistics.median(found) if found else None
        rows.append(Row(name, ", ".join(sorted(cls.detectors)), runs, len(found), median))
    honest_coups = 0
    false: Counter[str] = Counter()
    for r in range(honest_runs):
        bus = run(9000 + r, honest_rounds)
        honest_coups += len(bus.of_type("CoupResolved"))
        false.update(p["detector"] for p in (a.payload for _, a in alerts(bus.log))
                     if p["severity"] in WARNING_OR_WORSE)  # fmt: skip
        tick(f"honest play run {r + 1} of {honest_runs}")
    rate = sum(false.values()) * 10_000 / max(honest_coups, 1)
    print_table(rows, rate, honest_coups, false, out)
    return rows, rate, false


def print_table(rows: list[Row], rate: float, honest_coups: int, false: Counter[str], out: TextIO) -> None:
    """The evaluation table (Markdown, so that it can go in the README as printed)."""
    out.write("| adversary | detectors | runs | detection rate | median coups to detection |\n")
    out.write("|---|---|---:|---:|---:|\n")
    for r in rows:
        median = "-" if r.median_coups is None else f"{r.median_coups:g}"
        rate_pct = f"{100 * r.detected / r.runs:.0f} %"
        out.write(f"| {r.adversary} | {r.detectors} | {r.runs} | {rate_pct} | {median} |\n")
    by = ", ".join(f"{d}: {n}" for d, n in sorted(false.items())) or "none"
    out.write(f"\nhonest play: {honest_coups} coups, {sum(false.values())} warning-or-worse alerts "
              f"= {rate:.2f} false alarms per 10,000 coups ({by})\n")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """``monitor-eval [--quick] [--runs N] [--rounds N] [--honest-coups N]``."""
    import argparse  # noqa: PLC0415

    ap = argparse.ArgumentParser(prog="casino-ledger monitor-eval", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a small run for the tests")
    ap.add_argument("--runs", type=int, default=None, help="runs per adversary (default 20; quick: 1)")
    ap.add_argument("--rounds", type=int, default=None, help="coups per table per run (default 200)")
    ap.add_argument("--honest-coups", type=int, default=None, help="honest coups in total (default 10,500)")
    args = ap.parse_args(argv)

    def pick(given: int | None, quick: int, full: int) -> int:
        return (quick if args.quick else full) if given is None else given

    runs = pick(args.runs, 1, 20)
    rounds = pick(args.rounds, 120, 200)
    honest = pick(args.honest_coups, 300, 10_500)
    for value in (runs, rounds, honest):
        if value < 1:
            sys.stderr.write("casino-ledger: error: monitor-eval counts must be positive\n")
            return 2
    honest_runs = max(1, min(honest // (len(TABLES) * 500), 50) or 1)
    honest_rounds = -(-honest // (len(TABLES) * honest_runs))
    with progress_on_stderr(len(ADVERSARIES) * runs + honest_runs) as tick:
        evaluate(runs, rounds, honest_rounds, honest_runs, progress=tick)
    return 0


@contextmanager
def progress_on_stderr(total: int) -> Iterator[Tick]:
    """Say how far a long run is, on stderr (stdout stays the table): a rich progress bar on a
    terminal; elsewhere (a log, CI) one line at every tenth of the way, with the minutes so far."""
    from rich.console import Console  # noqa: PLC0415
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn  # noqa: PLC0415

    console = Console(stderr=True)
    if console.is_terminal:
        columns = (TextColumn("monitor-eval"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("{task.description}"))  # fmt: skip
        with Progress(*columns, console=console, transient=True) as bar:
            task = bar.add_task("", total=total)
            yield lambda what: bar.update(task, advance=1, description=what)
        return
    start, done = time.monotonic(), 0

    def line(what: str) -> None:
        nonlocal done
        done += 1
        if done == total or done * 10 // total != (done - 1) * 10 // total:
            minutes = (time.monotonic() - start) / 60
            sys.stderr.write(f"monitor-eval: {done} of {total} runs ({what}), {minutes:.1f} min\n")

    yield line
