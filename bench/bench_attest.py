"""What signed heads cost (issue 28): the embedded pipeline with and without them, and the replay with
and without its first pass (which records are facts), same run.

Pipeline: a seeded demo session (every variant, ``COUPS`` coups, event driven as the demo) on a fresh
SQLite log, twice with the writers' attestations and twice without (the runners' ``Attestor.note``
made a no-op: nothing is attested or sealed), alternated; CPU seconds of this process per event, the
events being the records both logs hold (every record but the signed heads). Goal: at most 1.10.

Replay: the log with signed heads replayed as the regulator does (first pass, then the replay), against
the replay alone over the same records (``replay_records`` without the first pass: what the replay did
before); best of ``ROUNDS`` each, alternated. Goal: at most 1.10.

Run: ``.venv/bin/python -m bench attest``.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from services.app.simulator import DEFAULT_TABLES, Session
from services.audit.replay import replay_records
from services.runtime.compose import Composition
from services.runtime.embedded import attesting
from services.runtime.embedded.log import EmbeddedBus
from services.runtime.logging import configure
from services.runtime.replay import Source, read_db, replay

COUPS = int(os.environ.get("BENCH_ATTEST_COUPS", "25"))
ROUNDS = 3


@contextmanager
def unattested() -> Iterator[None]:
    """The embedded runners as before signed heads: nothing noted, so nothing attested or sealed."""
    note = attesting.Attestor.note
    attesting.Attestor.note = lambda self, outputs: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        attesting.Attestor.note = note  # type: ignore[method-assign]


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


def best(run: Callable[[], object]) -> float:
    """The least CPU seconds of ``ROUNDS`` runs."""
    times = []
    for _ in range(ROUNDS):
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
        composition = Composition.demo()
        keys, writers = composition.checkpoint_public_keys(), composition.writer_public_keys()
        raws = list(read_db(db))
        full = best(lambda: replay(Source(lambda: iter(raws)), keys=keys, writers=writers))
        alone = best(lambda: replay_records(raws, keys=keys, checkpoint_every=50))
        print(f"replay: {len(raws)} records, {full:.3f} s with the first pass, {alone:.3f} s without: "
              f"ratio {full / alone:.3f}")  # fmt: skip
