"""``casino-ledger monitor-eval``: the monitor measured against the world (issues #13, #29).

Two tables, both from sessions played through the pipeline's real processors (the simulator's
terminals, cashier, operator and 8-deck shoes; the dealer, settlement's two stages, the monitor's table
and account stages, in log order on the in-memory bus; audit is left out: it raises no alert):

* **honest populations** (:mod:`services.simulation.populations`, which knows nothing of the detectors):
  warning-or-worse alerts per 10 000 honest coups (the goal: at most 1 for every population);
* **adversaries over their parameter range** (:mod:`services.simulation.adversaries`): how many runs were
  caught by one of the adversary's detectors naming it, the median coups (at its table) to the first
  such alert, and beside it the median coups at which a plain cumulative z ≥ 5 test on the same log
  would have fired (:func:`z_test`, written here, not in the monitor; the goal: at most twice it).
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from functools import partial
from typing import Any, TextIO

from services.core.envelope import Envelope
from services.monitor.accounts import REPORTING_THRESHOLD_MINOR
from services.runtime.compose import Composition
from services.runtime.memory import MemoryBus
from services.simulation.adversaries import (
    ADVERSARIES,
    Adversary,
    Dumper,
    InAndOut,
    LastSecond,
    Oracle,
    PresetShoe,
    RangedShoe,
    Signalled,
    Smurfs,
    Sorter,
    Syndicate,
)
from services.simulation.populations import POPULATIONS, Population, population
from services.simulation.simulator import Session, TableSpec

WARNING_OR_WORSE = frozenset({"warning", "critical"})

EXACT_P0 = {"banker": 0.5068, "player": 0.4932}
"""The z-test's honest win rates of a decided coup (8 decks): the exact odds, no margin."""

Z_AT = 5.0


def fast_bus(composition: Composition) -> MemoryBus:
    """The pipeline's pure processors over a list, in log order: audit left out (it raises no alert).
    (The monitor's account and cage stages are the pipeline's: a second account stage, as this bus
    once added, wrote every account alert twice.)"""
    return MemoryBus([p for p in composition.processors() if p.name != "audit"])


class Enough(Exception):
    """Raised between coups to end a session early: what it was played for is known."""


def run(
    seed: int,
    rounds: int,
    adversary: Adversary | None = None,
    tables: list[TableSpec] | None = None,
    *,
    until: Callable[[list[Envelope]], bool] | None = None,
    beside: Adversary | None = None,
) -> MemoryBus:
    """One session of ``rounds`` coups at each table (default: those the adversary needs); ``until``:
    asked every :data:`CHECK_EVERY` coups with the log so far, ends the session when it says so;
    ``beside``: an honest population playing with the adversary (the cage's customers)."""
    bus = fast_bus(Composition.demo())
    playing = [a for a in (beside, adversary) if a is not None]
    session = Session(bus, seed=seed, adversaries=playing)
    if tables is None:
        variants = adversary.variants if adversary else ("punto_banco",)
        tables = [TableSpec(f"A{i + 1:02d}-{v.replace('_', '-')}", v) for i, v in enumerate(variants)]
    played = [0]

    def check() -> None:
        played[0] += 1
        if until is not None and played[0] % CHECK_EVERY == 0:
            session.drain()
            if until(bus.log):
                raise Enough

    try:
        session.run(tables, rounds, check)
    except Enough:
        session.drain()
    return bus


CHECK_EVERY = 100
"""Coups between two looks at an adversary's session: it ends once its detector and the z-test fired."""


def names(alert: Envelope) -> set[str]:
    """The accounts and tables an alert names."""
    p = alert.payload
    subject = p.get("subject") or {}
    found = {str(p.get("table_id")), alert.key}
    found |= {str(subject["account_id"])} if subject.get("account_id") else set()
    found |= {str(a) for a in subject.get("account_ids") or []}
    found |= {str(a) for a in p.get("account_ids") or []}
    return found


def coups_at(log: list[Envelope], table: str | None) -> Iterator[tuple[int, Envelope]]:
    """Every record with the number of coups resolved before it (at ``table``, or anywhere)."""
    n = 0
    for e in log:
        if e.type == "CoupResolved" and (table is None or e.key == table):
            n += 1
        yield n, e


def caught(log: list[Envelope], adversary: Adversary) -> int | None:
    """Coups played at the adversary's table until the first warning-or-worse alert of one of its
    detectors naming it (its accounts, or its table for a shoe)."""
    targets = set(adversary.accounts) or set(adversary.tables)
    table = adversary.tables[0] if adversary.tables else None
    for n, e in coups_at(log, table):
        if e.type != "AnomalyDetected":
            continue
        p = e.payload
        if p["severity"] in WARNING_OR_WORSE and p["detector"] in adversary.detectors and names(e) & targets:
            return max(n, 1)
    return None


def z_test(log: list[Envelope], adversary: Adversary) -> int | None:
    """The coups (at the adversary's table) after which a plain cumulative z ≥ 5 test fires on the log:
    for a shoe, the favoured side's share of the decided coups; for accounts, their decided even-money
    bets, one observation per coup and side (five accounts on one bet are one bet's evidence); for a
    linked pair, how often it stood on opposite sides against one in two; for deposits, their share just
    under the reporting threshold against the cage's honest bound. ``None``: it never fired."""
    table = adversary.tables[0] if adversary.tables else None
    if isinstance(adversary, Smurfs):
        return _z_deposits(log, table)
    if isinstance(adversary, Sorter):
        return _z_first_cards(log, table, adversary.accounts[0])
    accounts = set(adversary.accounts)
    sides: dict[str, tuple[str, str]] = {}
    coup_sides: dict[str, set[str]] = {}
    wins = expected = var = 0.0
    for n, e in coups_at(log, table):
        if e.key != table:
            continue
        p = e.payload
        if e.type == "BetAccepted" and p["account_id"] in accounts and p["spot"] in EXACT_P0:
            coup_sides.setdefault(p["coup_id"], set()).add(p["spot"])
            sides[p["bet_id"]] = (p["account_id"], p["spot"])
        if e.type != "CoupResolved" or p["outcome"] not in EXACT_P0:
            continue
        winner = p["outcome"]
        if isinstance(adversary, InAndOut):
            return None  # a cage rule: no statistic to compare with
        if isinstance(adversary, PresetShoe):  # the issue #13 shoes arrange banker wins
            side = adversary.side if isinstance(adversary, RangedShoe) else "banker"
            wins, expected, var = wins + (winner == side), expected + EXACT_P0[side], var + 0.25
        elif isinstance(adversary, Dumper):
            by_account: dict[str, str] = {}
            for bet in p["bet_ids"]:
                if bet in sides:
                    by_account[sides[bet][0]] = sides[bet][1]
            a, b = adversary.accounts[0], adversary.accounts[1]
            if a in by_account and b in by_account:
                wins, expected, var = wins + (by_account[a] != by_account[b]), expected + 0.5, var + 0.25
        else:
            for side in coup_sides.get(p["coup_id"], ()):
                p0 = EXACT_P0[side]
                wins, expected, var = wins + (winner == side), expected + p0, var + p0 * (1 - p0)
        if var and (wins - expected) / math.sqrt(var) >= Z_AT:
            return n
    return None


def _z_deposits(log: list[Envelope], table: str | None) -> int | None:
    """The coups after which every deposit so far, in band or not, makes the share just under the
    reporting threshold (90-100 % of it) z ≥ 5 above the cage's stated honest bound (1 in 10)."""
    hits = n = 0
    for coups, e in coups_at(log, table):
        if e.type != "FundsDeposited":
            continue
        amount = int(e.payload["amount_minor"])
        n, hits = n + 1, hits + (BAND_FLOOR_MINOR <= amount < REPORTING_THRESHOLD_MINOR)
        if (hits - n * CAGE_P0) / math.sqrt(n * CAGE_P0 * (1 - CAGE_P0)) >= Z_AT:
            return max(coups, 1)
    return None


def _z_first_cards(log: list[Envelope], table: str | None, account: str) -> int | None:
    """The coups after which the account's player bets, one each, make the share of them dealt a 7, 8
    or 9 as the coup's first card z ≥ 5 above a full 8-deck shoe's 96/416, whatever their stakes."""
    player: set[str] = set()
    first: set[str] = set()
    hits = n = 0
    for coups, e in coups_at(log, table):
        if e.key != table:
            continue
        p = e.payload
        if e.type == "BetAccepted" and p["account_id"] == account and p["spot"] == "player":
            player.add(str(p["coup_id"]))
        elif e.type == "CardDealt" and p["coup_id"] not in first:
            first.add(str(p["coup_id"]))
            if p["coup_id"] in player:
                n, hits = n + 1, hits + (str(p["card"])[:1] in "789")
                if (hits - n * FIRST_P) / math.sqrt(n * FIRST_P * (1 - FIRST_P)) >= Z_AT:
                    return max(coups, 1)
    return None


FIRST_P = 96 / 416
"""A full 8-deck shoe's share of 7s, 8s and 9s: the z-test's honest chance of a first card."""

BAND_FLOOR_MINOR = REPORTING_THRESHOLD_MINOR * 9 // 10
CAGE_P0 = 0.1
"""The z-test's honest share of deposits just under the threshold: the cage's stated bound."""


@dataclass(frozen=True, slots=True)
class Case:
    """One adversary at one point of its parameter range (``beside``: the honest population that plays
    with it, by name)."""

    label: str
    params: str
    make: Callable[[int], Adversary]
    rounds: int
    beside: str | None = None


def cases(quick: bool, rounds: int | None) -> list[Case]:
    """The adversaries over their ranges (quick: the strong end of each, short runs)."""

    def r(full: int, short: int) -> int:
        return rounds or (short if quick else full)

    out = [
        Case("shoe bias", f"banker {s:.0%}", partial(RangedShoe, share=s), r(n, 300))
        for s, n in (((0.75, 300),) if quick else ((0.55, 6000), (0.57, 4000), (0.60, 2000), (0.65, 1000)))
    ]
    out += [Case("shoe bias", "player 60%", partial(RangedShoe, share=0.6, side="player"), r(3000, 0))]
    out += [
        Case("winning player", f"wins {e:.0%}", partial(Oracle, edge=e), r(3000, 300))
        for e in ((0.75,) if quick else (0.57, 0.60, 0.65))
    ]
    out += [
        Case("syndicate", f"{n} accounts at {e:.0%}, each in half the coups",
             partial(Syndicate, accounts=tuple(f"adv:syn-{i}" for i in range(n)), edge=e),
             r(2500, 300))
        for n, e in (((5, 0.75),) if quick else ((3, 0.60), (5, 0.63), (6, 0.60), (6, 0.63)))
    ]  # fmt: skip
    out += [
        Case(
            "past posting",
            f"bets in the last {lag:g} s, wins 84%",
            partial(LastSecond, lead=lag),
            r(300, 60),
        )
        for lag in ((0.5,) if quick else (0.5, 0.75, 1.0))
    ]
    out += [
        Case("chip dumping", f"stakes {g:.0%} apart" + (", split over two accounts" if split else ""),
             partial(Dumper, gap=g, split=split), r(400, 150))
        for g, split in (((0.06, False),) if quick else ((0.06, False), (0.12, False), (0.12, True)))
    ]  # fmt: skip
    out += [Case("in and out", "59,000 deposited, 40 played", InAndOut, r(20, 20))]
    out += [
        Case("edge sorting", f"player on a 7-9 at 5-{top} minimums, {d:.0%} of the rest a 1-minimum decoy",
             partial(Sorter, decoys=d, top=top), r(600, 200))
        for d, top in (((0.5, 25),) if quick else ((0.0, 10), (0.5, 25), (1.0, 25), (1.0, 10)))
    ]  # fmt: skip
    out += [
        Case("dealer's signal", f"{s:.0%} of coups signalled, {big} minimums on them, else 1 on either side",
             partial(Signalled, signal=s, big=big), r(3000, 0))
        for s, big in (() if quick else ((0.1, 25), (0.2, 25), (0.2, 10), (0.4, 10)))
    ]  # fmt: skip
    out += [
        Case("structuring across accounts",
             f"{n} accounts x {t} deposits of 9,000-9,900, one every {k} coups, 1 honest a coup",
             partial(Smurfs, members=n, times=t, every=k), r(300, 100), "cage")
        for n, t, k in (((8, 2, 1),) if quick else ((8, 2, 1), (4, 2, 1), (8, 2, 2), (12, 2, 2), (8, 2, 4)))
    ]  # fmt: skip
    if not quick:
        out += [Case(name, "as in issue #13", cls, r(200, 0)) for name, cls in ADVERSARIES.items()]
    return [c for c in out if c.rounds > 0]


@dataclass(frozen=True, slots=True)
class HonestRow:
    name: str
    description: str
    coups: int
    bets: int
    alarms: Counter[str]

    @property
    def rate(self) -> float:
        return sum(self.alarms.values()) * 10_000 / max(self.coups, 1)


@dataclass(frozen=True, slots=True)
class AdversaryRow:
    label: str
    params: str
    detectors: str
    runs: int
    found: list[int]
    z: list[int]
    rounds: int

    @property
    def median(self) -> float | None:
        return statistics.median(self.found) if self.found else None

    @property
    def z_median(self) -> float | None:
        return statistics.median(self.z) if self.z else None


def honest(pop: Population, coups: int, seed: int) -> HonestRow:
    """One population for ``coups`` coups in all (spread over its tables)."""
    specs = pop.specs()
    bus = run(seed, max(1, -(-coups // len(specs))), pop.crowd(seed), specs)
    alarms = Counter(
        str(e.payload["detector"])
        for e in bus.log
        if e.type == "AnomalyDetected" and e.payload["severity"] in WARNING_OR_WORSE
    )
    return HonestRow(pop.name, pop.description, len(bus.of_type("CoupResolved")),
                     len(bus.of_type("BetAccepted")), alarms)  # fmt: skip


def _both_fired(adversary: Adversary, log: list[Envelope]) -> bool:
    """Whether both the monitor and the z-test have caught ``adversary`` in ``log``."""
    return caught(log, adversary) is not None and z_test(log, adversary) is not None


def adversary_run(case: Case, i: int) -> tuple[int | None, int | None, frozenset[str]]:
    """Run ``i`` of ``case``: coups to the monitor's detection and to the z-test's (``None``: never),
    and the adversary's detectors."""
    adversary = case.make(2000 + i)
    beside = population(case.beside).crowd(2000 + i) if case.beside else None
    bus = run(2000 + i, case.rounds, adversary, until=partial(_both_fired, adversary), beside=beside)
    return caught(bus.log, adversary), z_test(bus.log, adversary), adversary.detectors


def adversary_row(case: Case, results: list[tuple[int | None, int | None, frozenset[str]]]) -> AdversaryRow:
    """One case's row from its runs' results (:func:`adversary_run`)."""
    found = [at for at, _, _ in results if at is not None]
    z = [zt for _, zt, _ in results if zt is not None]
    detectors = results[0][2] if results else frozenset()
    return AdversaryRow(case.label, case.params, ", ".join(sorted(detectors)), len(results), found, z,
                        case.rounds)  # fmt: skip


def honest_coups(pop: Population, total: int, crowded: int | None = None) -> int:
    """Coups for a population: ``total`` for the light ones; for the crowded, ``crowded`` coups of a
    60-player table and as many bets at a larger one (default: as many bets as ``total`` light coups)."""
    if pop.weight <= 2:
        return total
    return max(3, (crowded * 20 if crowded is not None else total * 2) // pop.weight)


@dataclass(frozen=True, slots=True)
class Plan:
    """What one evaluation plays: every piece is one session, played by :func:`_play` in a worker."""

    quick: bool
    rounds: int | None
    coups: int
    crowded: int | None
    only: frozenset[str]

    def populations(self) -> list[Population]:
        return [p for p in POPULATIONS if not self.only or "honest" in self.only or p.name in self.only]

    def cases(self) -> list[Case]:
        only = self.only
        return [c for c in cases(self.quick, self.rounds)
                if not only or c.label in only or f"{c.label}: {c.params}" in only]  # fmt: skip

    def pieces(self, runs: int) -> list[tuple[str, int, int]]:
        """``("honest", population, 0)`` and ``("run", case, run)``, by index (costliest first, so
        that the workers end together)."""
        honest = [("honest", i, 0) for i in range(len(self.populations()))]
        honest.sort(key=lambda piece: -self._honest_cost(self.populations()[piece[1]]))
        return honest + [("run", c, i) for c in range(len(self.cases())) for i in range(runs)]

    def _honest_cost(self, pop: Population) -> int:
        return honest_coups(pop, self.coups, self.crowded) * pop.weight

    def play(self, piece: tuple[str, int, int]) -> Any:
        kind, index, i = piece
        if kind == "honest":
            pop = self.populations()[index]
            return honest(pop, honest_coups(pop, self.coups, self.crowded), 9000 + POPULATIONS.index(pop))
        return adversary_run(self.cases()[index], i)


def _play(plan: Plan, piece: tuple[str, int, int]) -> Any:
    return plan.play(piece)


def _pieces_played(
    plan: Plan, runs: int, jobs: int, done: Callable[[str], None], report: bool
) -> dict[Any, Any]:
    """Every piece's result, by piece: in this process (``jobs`` 1) or in ``jobs`` worker processes
    (each piece a seeded session, so the results are the same either way); ``report``: each case's row
    on stderr once its runs are done (a long run's rows as they come, in case it is cut short)."""
    pieces = plan.pieces(runs)
    pops, todo = plan.populations(), plan.cases()
    results: dict[Any, Any] = {}

    def finish(piece: tuple[str, int, int], result: Any) -> None:
        results[piece] = result
        done(what(piece))
        kind, index, _ = piece
        if kind == "run" and report and all(("run", index, i) in results for i in range(runs)):
            print_tables([], [adversary_row(todo[index], [results["run", index, i] for i in range(runs)])],
                         sys.stderr)  # fmt: skip

    def what(piece: tuple[str, int, int]) -> str:
        if piece[0] == "honest":
            return f"honest: {pops[piece[1]].name}"
        return f"adversary: {todo[piece[1]].label} ({todo[piece[1]].params})"

    if jobs <= 1:
        for piece in pieces:
            finish(piece, plan.play(piece))
        return results
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(_play, plan, piece): piece for piece in pieces}
        for future in as_completed(futures):
            finish(futures[future], future.result())
    return results


def evaluate(
    quick: bool,
    runs: int,
    rounds: int | None,
    coups: int,
    *,
    out: TextIO | None = None,
    progress: bool = True,
    only: frozenset[str] = frozenset(),
    jobs: int = 1,
    crowded: int | None = None,
) -> tuple[list[HonestRow], list[AdversaryRow]]:
    """Run everything (printing progress to stderr) and print the two tables; ``only``: the parts to
    run (``honest`` or population names, and adversary labels such as ``shoe bias``; empty: all);
    ``jobs``: worker processes; ``crowded``: coups of the 60-player table (:func:`honest_coups`)."""
    from rich.progress import Progress  # noqa: PLC0415

    plan = Plan(quick, rounds, coups, crowded, only)
    pops, todo = plan.populations(), plan.cases()
    lines = _TenthLines(len(pops) + len(todo) * runs, progress and not sys.stderr.isatty())
    with Progress(disable=not progress, transient=True) as bar:
        task = bar.add_task("monitor-eval", total=len(pops) + len(todo) * runs)

        def done(what: str) -> None:
            bar.update(task, description=what)
            bar.advance(task)
            lines.tick(what)

        results = _pieces_played(plan, runs, jobs, done, not progress)
    honest_rows = [results["honest", i, 0] for i in range(len(pops))]
    rows = [adversary_row(c, [results["run", k, i] for i in range(runs)]) for k, c in enumerate(todo)]
    print_tables(honest_rows, rows, sys.stdout if out is None else out)
    return honest_rows, rows


class _TenthLines:
    """Where no progress bar can show (stderr is a pipe, a log, CI): one line on stderr at every tenth
    of the way, ``monitor-eval: N of TOTAL runs (what), M.m min``."""

    def __init__(self, total: int, on: bool) -> None:
        self.total, self.on, self.done = max(total, 1), on, 0
        self.start = time.monotonic()

    def tick(self, what: str) -> None:
        self.done += 1
        tenth = self.done * 10 // self.total != (self.done - 1) * 10 // self.total
        if self.on and (self.done == self.total or tenth):
            minutes = (time.monotonic() - self.start) / 60
            sys.stderr.write(f"monitor-eval: {self.done} of {self.total} runs ({what}), {minutes:.1f} min\n")
            sys.stderr.flush()


RULES = frozenset(
    {"in and out", "hedger", "structurer", "colluding_dealer", "chip_dumper", "bot", "past_poster"}
)
"""Adversaries caught by a rule or a pattern, not a win rate: the z-test has nothing to say of them."""


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:g}"


def print_tables(honest_rows: list[HonestRow], rows: list[AdversaryRow], out: TextIO) -> None:
    """The two tables (Markdown, so that they can go in the docs as printed)."""
    out.write("| honest population | coups | bets | false alarms | per 10,000 coups | by detector |\n")
    out.write("|---|---:|---:|---:|---:|---|\n")
    for h in honest_rows:
        by = ", ".join(f"{d}: {n}" for d, n in sorted(h.alarms.items())) or "-"
        out.write(f"| {h.name}: {h.description} | {h.coups} | {h.bets} | {sum(h.alarms.values())} "
                  f"| {h.rate:.2f} | {by} |\n")  # fmt: skip
    out.write("\n| adversary | parameters | detectors | runs | detected | median coups to detection "
              "| z ≥ 5 median coups (fired) | ratio |\n")  # fmt: skip
    out.write("|---|---|---|---:|---:|---:|---:|---:|\n")
    for r in rows:
        ratio = "-"
        if r.median is not None and r.z_median:
            ratio = f"{r.median / r.z_median:.2f}"
        elif r.median is not None and r.label in RULES and not r.z:
            ratio = "rule"  # a rule or a pattern, no win-rate statistic to compare with
        elif r.median is not None and len(r.z) < r.runs:
            ratio = f"< {r.median / r.rounds:.2f}"
        out.write(f"| {r.label} | {r.params} | {r.detectors} | {r.runs} | {len(r.found)} | {_num(r.median)} "
                  f"| {_num(r.z_median)} ({len(r.z)}/{r.runs}) | {ratio} |\n")  # fmt: skip


def main(args: Any) -> int:
    """``casino-ledger monitor-eval [--quick | --full] [--runs N] [--rounds N] [--honest-coups N]
    [--crowded-coups N] [--jobs N] [--no-progress] [--only PART]...``, its options as the command line
    parsed them (services.cli.app)."""

    def pick(given: int | None, quick: int, default: int, full: int) -> int:
        if given is not None:
            return int(given)
        return quick if args.quick else full if args.full else default

    runs = pick(args.runs, 1, 3, FULL_RUNS)
    coups = pick(args.honest_coups, 150, 2_000, FULL_HONEST_COUPS)
    crowded = args.crowded_coups
    if crowded is None and args.full:
        crowded = FULL_CROWDED_COUPS
    jobs = args.jobs if args.jobs is not None else os.cpu_count() or 1
    given = [v for v in (args.rounds, args.crowded_coups, args.jobs) if v is not None]
    for value in (runs, coups, *given):
        if value < 1:
            sys.stderr.write("casino-ledger: error: monitor-eval counts must be positive\n")
            return 2
    evaluate(
        bool(args.quick),
        runs,
        args.rounds,
        coups,
        progress=not args.no_progress,
        only=frozenset(args.only or ()),
        jobs=jobs,
        crowded=crowded,
    )
    return 0


FULL_RUNS = 3
"""``--full``'s runs per adversary case (each to the detection of both the monitor and the z-test)."""

FULL_HONEST_COUPS = 10_000
"""``--full``'s coups per light honest population."""

FULL_CROWDED_COUPS = 6_000
"""``--full``'s coups of the 60-player table (the 300-player table plays a fifth: as many bets)."""


__all__ = ["evaluate", "main", "z_test"]
