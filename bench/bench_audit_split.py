"""Audit whole against audit per partition (docs/adr/0013-audit-per-partition.md), the same log, no Kafka.

The log of a seeded session (7 tables, ``BENCH_AUDIT_SPLIT_COUPS`` coups each, 20 by default) is made in
memory; each record's bytes are then handed, in log order, (a) to the whole audit (decode + ``step``),
and (b) to audit's Kafka stages as six partitions would split it: the account stage over the wallet
topics, the hop (decode again, ``route``: the join records' authentication) and the table stage over the
table events, the alerts and the re-keyed payouts and stakes; then (c) the tree stage over everything
the stages staged. CPU per input record (``time.process_time``), three rounds. (b) is the work the
audit replicas share; (c) is the one member's.

Run: ``.venv/bin/python -m bench audit_split``.
"""

from __future__ import annotations

import os
import time
import zlib
from typing import Any

from services.core import topics
from services.core.processor import initial_state, step_encoded
from services.runtime import intake
from services.runtime.compose import Composition
from services.runtime.memory import MemoryBus
from services.simulation.simulator import Session, demo_tables

PARTITIONS = 6


def _part(key: str) -> int:
    return zlib.crc32(key.encode()) % PARTITIONS


def _log(coups: int) -> list[bytes]:
    memory = MemoryBus(Composition.demo().processors())
    Session(memory, seed=2026).run(demo_tables(7), coups)
    return [e.to_json() for e in memory.log]


def whole(raws: list[bytes]) -> tuple[float, int]:
    """CPU seconds of the whole audit over ``raws``, and the records it read."""
    audit = Composition.demo().audit()
    state, n = initial_state(audit), 0
    started = time.process_time()
    for raw in raws:
        env = intake.decode(raw)
        if env.topic in audit.inputs:
            step_encoded(audit, state, env, raw)
            n += 1
    return time.process_time() - started, n


def split(raws: list[bytes]) -> tuple[float, float, int, int]:
    """CPU seconds of the stages (with the hop) and of the tree stage; records read, records staged."""
    composition = Composition.demo()
    accounts, tables = composition.audit_stages()
    tree = composition.audit_tree()
    a = [initial_state(accounts) for _ in range(PARTITIONS)]
    t = [initial_state(tables) for _ in range(PARTITIONS)]
    staged: list[Any] = []
    n = 0
    started = time.process_time()
    for raw in raws:
        env = intake.decode(raw)
        if env.topic in topics.ACCOUNT_KEYED:
            staged += step_encoded(accounts, a[_part(env.key)], env, raw)
            table = tables.route(intake.decode(raw))  # type: ignore[attr-defined]
            if table is not None:
                staged += step_encoded(tables, t[_part(table)], intake.decode(raw), raw)
            n += 1
        elif env.topic in (topics.TABLE_EVENTS, topics.MONITOR_ALERTS):
            staged += step_encoded(tables, t[_part(env.key)], env, raw)
            n += 1
    stages = time.process_time() - started
    state = initial_state(tree)
    started = time.process_time()
    for _, raw in staged:
        step_encoded(tree, state, intake.decode(raw), raw)
    return stages, time.process_time() - started, n, len(staged)


def main() -> None:
    """Print three rounds of (a), (b) and (c)."""
    raws = _log(int(os.environ.get("BENCH_AUDIT_SPLIT_COUPS", "20")))
    for _ in range(3):
        w, n = whole(raws)
        s, tr, n2, k = split(raws)
        print(f"{n} records: whole audit {w * 1e6 / n:.1f} us/record; stages {s * 1e6 / n2:.1f} us/record "
              f"(over {PARTITIONS} partitions); tree stage {tr * 1e6 / n2:.2f} us/record ({k} staged)", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
