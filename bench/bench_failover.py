"""A settlement member's death on a long history, with and without standby stores (issue #31,
docs/adr/0014-standby-stores.md): how long the wallets on its partitions wait, and what the survivor reads.

The history is :mod:`bench.bench_restart`'s units (cached under ``var/bench/``), on one Tansu broker,
fresh topics of 6 partitions, each size grown from the one before. For each size, settlement's worker
first applies the whole history alone (data directory *A*, untimed). Then, for each way (*cold*: standby
stores off; *standby*: ``CASINO_STANDBY_STORES=true`` on both members):

1. member A starts on its data directory and member B on an empty one (another machine); a deposit on
   every partition is answered (both have restored their shares: B its own from the changelog);
2. *standby*: until B's standby rounds hold every partition A owns at the changelog's last snapshot;
   *cold*: the same wait (three snapshot intervals), so both ways give A the same time to snapshot;
3. A is SIGKILLed and at once a deposit is sent on every partition: **stall** is the time until all six
   are answered (the group noticing A's death after the session timeout, B's restore of A's partitions,
   their records since A's last snapshot, the deposits), *restore* the ``ms`` of B's ``restored`` line
   after the kill, *kept read* the kept entries its ``state_restored`` lines read from the changelog,
   RSS B's resident memory once the deposits are answered.

Each figure is printed beside the same size's *cold* one, and beside the smallest history's, as ratios.

Run: ``.venv/bin/python -m bench failover``; ``BENCH_FAILOVER_HISTORIES`` (default ``15000,240000``; add
``1000000`` for the long one); ``BENCH_FAILOVER_KEEP=DIR`` keeps the workers' logs and data directories.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer  # type: ignore[import-untyped]

from bench.bench_restart import (
    APPLY_FETCH_MS,
    caught_up,
    load,
    rss_mb,
    start,
    stop,
    timed_record,
    unit_records,
    units_for,
)
from services.core import topics
from services.runtime.kafka import state as state_store
from services.runtime.kafka.bus import quick_settings
from services.runtime.kafka.topic_io import aproduce, key_partition, partitions_of
from services.runtime.kafka.worker import ensure_topics
from services.runtime.settings import Settings
from tests.helpers.broker import tansu

SERVICE = "settlement"
STAGE = "settlement.wallet"
PARTITIONS = 6
WAYS = ("cold", "standby")
WAIT_S = 1800.0
_numbers = itertools.count(10_000)


def one_account_per_partition() -> list[str]:
    """Accounts whose deposits land one on each partition of the wallet requests."""
    found: dict[int, str] = {}
    for i in itertools.count():
        account = f"player:fo{i:04d}"
        found.setdefault(key_partition(account.encode(), list(range(PARTITIONS))), account)
        if len(found) == PARTITIONS:
            return [found[p] for p in range(PARTITIONS)]
    raise AssertionError("unreachable")


async def answered(settings: Settings, procs: list[subprocess.Popen[bytes]], *, kill: Any = None) -> float:
    """``kill()`` (when given), then at once a deposit on every partition; seconds until all are answered
    on the wallet events."""
    reader = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap_list, enable_auto_commit=False)
    await reader.start()
    try:
        tps = await partitions_of(reader, [settings.topic(topics.WALLET_EVENTS)])
        ends = await reader.end_offsets(tps)
        reader.assign(tps)
        for tp in tps:
            reader.seek(tp, ends[tp])
        records = [timed_record(SERVICE, a, next(_numbers)) for a in one_account_per_partition()]
        waiting = {r.event_id for r in records}
        started = time.monotonic()
        if kill is not None:
            kill()
        await aproduce(settings, records)
        deadline = started + WAIT_S
        while waiting:
            if any(p.poll() is not None for p in procs):
                raise RuntimeError("a worker exited")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(waiting)} deposits unanswered")
            for msgs in (await reader.getmany(timeout_ms=200)).values():
                for m in msgs:
                    waiting.discard(json.loads(m.value).get("causation_id"))
        return time.monotonic() - started
    finally:
        await reader.stop()


def lines(log: Path, skip: int = 0) -> list[dict[str, Any]]:
    """The JSON lines of a worker's log after its first ``skip`` lines."""
    out = []
    for line in log.read_text(errors="replace").splitlines()[skip:]:
        with contextlib.suppress(ValueError):
            d = json.loads(line)
            if isinstance(d, dict) and "event" in d:
                out.append(d)
    return out


async def last_offsets(settings: Settings) -> dict[int, int]:
    """The offset of the last record of each partition of the wallet stage's changelog."""
    reader = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap_list, enable_auto_commit=False)
    await reader.start()
    try:
        tps = await partitions_of(reader, [settings.topic(state_store.changelog_topic(STAGE))])
        return {tp.partition: end - 1 for tp, end in (await reader.end_offsets(tps)).items()}
    finally:
        await reader.stop()


def warm(settings: Settings, log: Path) -> bool:
    """Whether B's standby rounds since its last restore hold every wallet partition B does not own at
    its changelog's last record (the owner's last snapshot)."""
    found = lines(log)
    restores = [i for i, d in enumerate(found) if d["event"] == "restored"]
    if not restores:
        return False
    before = restores[-2] if len(restores) > 1 else -1
    owned = {d["scope"] for d in found[before + 1 : restores[-1]]
             if d["event"] == "state_restored" and d.get("stage") == STAGE}  # fmt: skip
    taken = {d["scope"]: d["changelog_offset"] for d in found[restores[-1] :]
             if d["event"] == "standby_taken" and d.get("stage") == STAGE}  # fmt: skip
    last = asyncio.run(last_offsets(settings))
    others = set(range(PARTITIONS)) - owned
    return bool(others) and all(taken.get(p) == last[p] for p in others)


def failover(settings: Settings, tmp: Path, tag: str, way: str) -> dict[str, float]:
    """One member's death (see the module docstring); the survivor's figures."""
    settings = settings.model_copy(update={"standby_stores": way == "standby"})
    log_a, log_b = tmp / f"A-{tag}-{way}.log", tmp / f"B-{tag}-{way}.log"
    empty = tmp / f"B-{tag}-{way}"
    a = start(SERVICE, settings, tmp / "data-A", log_a)
    b: subprocess.Popen[bytes] | None = None
    try:
        asyncio.run(answered(settings, [a]))
        b = start(SERVICE, settings, empty, log_b)
        asyncio.run(answered(settings, [a, b]))
        interval = settings.state_snapshot_interval_s
        deadline = time.monotonic() + WAIT_S
        time.sleep(3 * interval)
        while way == "standby" and not warm(settings, log_b):
            if time.monotonic() > deadline:
                raise TimeoutError("B's standby never caught up")
            time.sleep(interval)
        seen = len(log_b.read_text(errors="replace").splitlines())
        stall = asyncio.run(answered(settings, [b], kill=lambda: a.send_signal(signal.SIGKILL)))
        rss = rss_mb(b.pid)
    finally:
        if a.poll() is None:
            a.kill()
        a.wait(30)
        if b is not None:
            stop(b)
    after = lines(log_b, seen)
    restored = [d for d in after if d["event"] == "restored"]
    kept = sum(int(d.get("kept_read", 0)) for d in after if d["event"] == "state_restored")
    shutil.rmtree(empty, ignore_errors=True)
    return {"stall_s": stall, "restore_ms": float(restored[-1]["ms"]) if restored else float("nan"),
            "kept_read": float(kept), "rss_mb": rss}  # fmt: skip


def one_size(settings: Settings, records: int, have: int, tmp: Path) -> dict[str, dict[str, float]]:
    """The history grown to about ``records`` (units ``have`` on already); each way's figures."""
    units = units_for(records)
    loaded = load(settings, units[have:])
    held = sum(1 for u in units for _ in unit_records(u))
    applying = settings.model_copy(update={"fetch_max_wait_ms": APPLY_FETCH_MS})
    proc = start(SERVICE, applying, tmp / "data-A", tmp / f"A-{records}-apply.log")
    clock = time.monotonic()
    try:
        asyncio.run(caught_up(SERVICE, settings, proc))
    finally:
        stop(proc)
    print(f"history {held:,} records ({len(units)} units, {len(units) - have} produced in {loaded:.0f} s); "
          f"applied by A in {time.monotonic() - clock:.0f} s", flush=True)  # fmt: skip
    out = {}
    for way in WAYS:
        row = {"records": float(held), "units": float(len(units))}
        out[way] = row = {**row, **failover(settings, tmp, str(records), way)}
        print(f"  {way}: stall {row['stall_s']:.1f} s, restore {row['restore_ms']:.0f} ms, kept read "
              f"{row['kept_read']:.0f}, RSS {row['rss_mb']:.1f} MB", flush=True)  # fmt: skip
    return out


COLUMNS = (("stall_s", "s"), ("restore_ms", "ms"), ("kept_read", ""), ("rss_mb", "MB"))


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


def main() -> None:
    """Every history size, grown in turn on the same topics; each figure beside the same size's cold
    one and beside the smallest history's."""
    sizes = sorted(int(s) for s in os.environ.get("BENCH_FAILOVER_HISTORIES", "15000,240000").split(","))
    rows: list[dict[str, dict[str, float]]] = []
    keep = os.environ.get("BENCH_FAILOVER_KEEP")
    with (
        contextlib.nullcontext(keep) if keep else tempfile.TemporaryDirectory() as tmp_name,
        tansu(Path(tmp_name) / "tansu.log") as broker,
    ):
        settings = quick_settings(
            Settings(bootstrap_servers=broker, topic_prefix=f"f{uuid.uuid4().hex[:8]}.", partitions=PARTITIONS,
                     demo_mode=True),
            env={},
        )  # fmt: skip
        asyncio.run(ensure_topics(settings, list(topics.ALL_TOPICS)))
        for size in sizes:
            have = int(rows[-1]["cold"]["units"]) if rows else 0
            rows.append(one_size(settings, size, have, Path(tmp_name)))
    print("\nhistory | way | " + " | ".join(f"{key} ({unit})" for key, unit in COLUMNS)
          + "  [beside: the same size cold; the smallest history, same way]")  # fmt: skip
    for row in rows:
        for way in WAYS:
            r, cold, first = row[way], row["cold"], rows[0][way]
            cells = [f"{int(r['records']):>9}", f"{way:>7}"]
            cells += [
                f"{r[k]:>8.1f} {u} ({_ratio(r[k], cold[k])}; {_ratio(r[k], first[k])})" for k, u in COLUMNS
            ]
            print(" | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
