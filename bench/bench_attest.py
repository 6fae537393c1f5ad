"""What signed heads cost (issue 28): the embedded pipeline with and without them, and the replay with
and without deciding which records are facts, same run.

Pipeline: a seeded demo session (every variant, ``COUPS`` coups, event driven as the demo) on a fresh
SQLite log, twice with the writers' attestations and twice without (the runners' ``Attestor.note``
made a no-op: nothing is attested or sealed), alternated; CPU seconds of this process per event, the
events being the records both logs hold (every record but the signed heads). Goal: at most 1.10.

Replay: the log with signed heads replayed as the regulator does (in one pass, deciding which records are
facts as the signed heads come: :mod:`services.audit.replay.onepass`), against the replay alone over the
same records (``replay_records`` judging every record a fact), and against the replay without that nor
the tree-head check (what the replay did before issue 28); best of ``ROUNDS`` each, alternated. Goal:
at most 1.10.

Back office: the read model made from the same log, facts only (the survey of the whole log, then each
record's standing) against every record applied (what the projector did before); best of ``ROUNDS``.

Run: ``.venv/bin/python -m bench attest``.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from services.audit.replay import replay_records
from services.audit.replay.tree_head import TreeHeads
from services.integrations.backoffice.migrate import upgrade
from services.integrations.backoffice.projector import INPUTS, Projector
from services.integrations.backoffice.schema import make_engine
from services.runtime.compose import Composition
from services.runtime.embedded import attesting
from services.runtime.embedded.bus import EmbeddedBus
from services.runtime.embedded.store import EmbeddedLog
from services.runtime.logging import configure
from services.runtime.replay import Source, read_db, replay
from services.simulation.simulator import DEFAULT_TABLES, Session

COUPS = int(os.environ.get("BENCH_ATTEST_COUPS", "25"))
ROUNDS = int(os.environ.get("BENCH_ATTEST_ROUNDS", "3"))


@contextmanager
def patched(cls: type, **methods: Callable[..., object]) -> Iterator[None]:
    """``cls`` with ``methods`` replaced for the duration."""
    saved = {name: getattr(cls, name) for name in methods}
    for name, fn in methods.items():
        setattr(cls, name, fn)
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(cls, name, fn)


def unattested() -> AbstractContextManager[None]:
    """The embedded runners as before signed heads: nothing noted, flushed or sealed (a runner whose
    chain is new attests its state's heads when it seals: that too is left out)."""
    nothing = lambda self, *args, **kwargs: None  # noqa: E731
    return patched(attesting.Attestor, note=nothing, flush=nothing, seal=nothing)


def no_tree_heads() -> AbstractContextManager[None]:
    """The replay as before audit's tree heads: none read, none checked."""
    nothing = lambda self, *args, **kwargs: None  # noqa: E731
    return patched(TreeHeads, on_record=nothing, on_tree=nothing, finish=lambda self, **kwargs: [])


def session(db: Path) -> tuple[float, int, int]:
    """CPU seconds of one seeded session, the records its log holds but signed heads, and those."""
    composition = Composition.demo()
    bus = EmbeddedBus(db, composition.pipeline(), event_driven=True)
    cpu = time.process_time()
    try:
        Session(bus, seed=1, keyring=composition.keyring).run(list(DEFAULT_TABLES), COUPS)
    finally:
        bus.close()
    cpu = time.process_time() - cpu
    raws = list(read_db(db))
    heads = sum(1 for r in raws if b'"topic":"casino.attest"' in r)
    return cpu, len(raws) - heads, heads


def best(run: Callable[[], object], rounds: int = ROUNDS) -> float:
    """The least CPU seconds of ``rounds`` runs."""
    times = []
    for _ in range(rounds):
        cpu = time.process_time()
        run()
        times.append(time.process_time() - cpu)
    return min(times)


def main() -> None:
    """Print the pipeline's and the replay's cost of signed heads beside their same-run baselines."""
    configure(level="WARNING")
    with tempfile.TemporaryDirectory() as tmp:
        runs: dict[str, list[tuple[float, int, int]]] = {"with": [], "without": []}
        for n in range(2):
            runs["with"].append(session(Path(tmp) / f"with-{n}.db"))
            with unattested():
                runs["without"].append(session(Path(tmp) / f"without-{n}.db"))
        (cpu_w, events, heads), (cpu_o, events_o, heads_o) = (
            min(runs["with"]), min(runs["without"])
        )  # fmt: skip
        assert events == events_o and heads_o == 0, (events, events_o, heads_o)
        per_w, per_o = cpu_w / events * 1e6, cpu_o / events * 1e6
        print(
            f"pipeline: {events} events, {heads} signed heads ({COUPS} coups x {len(DEFAULT_TABLES)} tables)"
        )
        print(
            f"  CPU per event: {per_w:.1f} us with signed heads, {per_o:.1f} us without: ratio {per_w / per_o:.3f}"
        )
        db = Path(tmp) / "with-0.db"
        replays(db)
        read_model(db, Path(tmp))


def replays(db: Path) -> None:
    """The replay's cost of the first pass and of the tree-head check, beside the same-run baselines."""
    composition = Composition.demo()
    keys, writers = composition.checkpoint_public_keys(), composition.writer_public_keys()
    raws = list(read_db(db))
    full, alone, before = [], [], []
    for _ in range(ROUNDS):
        full.append(best(lambda: replay(Source(lambda: iter(raws)), keys=keys, writers=writers), 1))
        alone.append(best(lambda: replay_records(raws, keys=keys, checkpoint_every=50), 1))
        with no_tree_heads():
            before.append(best(lambda: replay_records(raws, keys=keys, checkpoint_every=50), 1))
    f, a, b = min(full), min(alone), min(before)
    print(
        f"replay: {len(raws)} records, {f:.3f} s facts only (one pass), {a:.3f} s every record: ratio {f / a:.3f}"
    )
    print(f"  every record and no tree-head check (before issue 28): {b:.3f} s: ratio {f / b:.3f}")


def read_model(db: Path, tmp: Path) -> None:
    """The back office's read model of ``db``, facts only against every record, best of ``ROUNDS``."""
    writers = Composition.demo().writer_public_keys()
    times: dict[bool, list[float]] = {True: [], False: []}
    for n in range(ROUNDS):
        for gated in (True, False):
            engine = make_engine(f"sqlite:///{tmp / f'read-{n}-{gated}.db'}")
            upgrade(engine)
            projector = Projector(engine, writers=writers)
            with EmbeddedLog(db, readonly=True) as log:
                cpu = time.process_time()
                if gated:
                    projector.catch_up(log)
                else:
                    while rows := log.read(INPUTS, projector.position(), 1000):
                        projector.apply(rows)
                times[gated].append(time.process_time() - cpu)
            engine.dispose()
    g, u = min(times[True]), min(times[False])
    print(f"back office: read model of facts {g:.3f} s, of every record {u:.3f} s: ratio {g / u:.3f}")
