"""A Kafka worker's restart on a long history (issue #31): time to really handle the next record, and RSS.

For each history size, on a fresh Tansu broker and fresh topics: a seeded session of every variant's
table is played on the in-memory pipeline until its log holds about that many records, and the log is
copied onto the topics (as the issue measured: the histories of a demo copied onto Kafka). Then
settlement's worker (``python -m services.runtime.kafka.worker settlement``, demo keys, the quick group
timeouts of the tests) runs over the whole history until its group's committed offsets reach the ends
(its first start on that log), and is stopped (SIGTERM). Measured, each from a new worker process:

* **local**: the same data directory (its RocksDB state store): the snapshots restored locally;
* **changelog**: an empty data directory (another machine): the snapshots read from the changelog.

The clock runs from the process's start to the moment its output for one new deposit (sent when the
process starts) is on ``casino.wallet.events``: the group join, the restore, the records after the last
snapshot and that deposit. RSS: the worker's resident memory once the output is there. Each figure is
printed beside the smallest history's as a ratio (issue #31's goal: 1M records at most 1.5x 15k).

Run: ``.venv/bin/python -m bench restart``. ``BENCH_RESTART_HISTORIES`` (default ``15000,60000,240000``;
add ``1000000`` for the long one: about 9 minutes to play and half an hour to copy and apply here).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from aiokafka import AIOKafkaConsumer  # type: ignore[import-untyped]
from aiokafka.admin import AIOKafkaAdminClient  # type: ignore[import-untyped]

from services.app.simulator import Session, demo_tables
from services.core import topics
from services.core.boundary import own_namespace
from services.core.envelope import Envelope, request
from services.core.trust import Principal, authenticate
from services.runtime.compose import Composition
from services.runtime.kafka.bus import quick_settings, real_ends, worker_env
from services.runtime.kafka.topic_io import aproduce, partitions_of
from services.runtime.kafka.worker import ensure_topics
from services.runtime.keyring import demo_keyring
from services.runtime.memory import MemoryBus
from services.runtime.settings import Settings
from tests.helpers.broker import tansu

SERVICE = "settlement"
INPUTS = (topics.WALLET_REQUESTS, topics.TABLE_EVENTS)
TABLES = 7
RECORDS_PER_COUP = 45
"""About how many records a coup of the demo's seven tables adds to the log (to size the session)."""


def history(records: int) -> tuple[list[Envelope], str]:
    """A seeded session's log of at least ``records`` records, and an account it funded."""
    bus = MemoryBus(Composition.demo().processors())
    Session(bus, seed=31).run(demo_tables(TABLES), records // (RECORDS_PER_COUP * TABLES) + 1)
    account = next(str(e.payload["account_id"]) for e in bus.log if e.type == "FundsDeposited")
    return list(bus.log), account


def deposit(account: str, n: int) -> Envelope:
    """A new cashier deposit into ``account`` (the record whose handling the restart is timed to)."""
    env = request(
        "Deposit", topics.WALLET_REQUESTS, account,
        {"account_id": account, "amount_minor": 100, "currency": "EUR", "transfer_id": f"{own_namespace(Principal.CASHIER.value)}bench-restart-{n}"},
        event_id=f"bench-restart-{uuid.uuid4()}", occurred_at="2030-01-01T00:00:00.000Z",
        producer=Principal.CASHIER.value,
    )  # fmt: skip
    return authenticate(env, demo_keyring().key(Principal.CASHIER))


def start(settings: Settings, data: Path, log: Path) -> subprocess.Popen[bytes]:
    """Settlement's worker process on ``data`` as its data directory, logging to ``log``."""
    env = {**os.environ, **worker_env(settings), "CASINO_DATA_DIR": str(data), "CASINO_LOG_LEVEL": "INFO"}
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "services.runtime.kafka.worker", SERVICE],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip


def rss_mb(pid: int) -> float:
    """Resident memory of a process, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def caught_up(settings: Settings, proc: subprocess.Popen[bytes], timeout_s: float = 3600) -> None:
    """Wait until settlement's group has committed every input partition's end."""
    probe = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap_list, enable_auto_commit=False)
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap_list)
    await probe.start()
    await admin.start()
    group = f"{settings.topic_prefix}casino-{SERVICE}"
    try:
        tps = await partitions_of(probe, [settings.topic(t) for t in INPUTS])
        ends = await real_ends(probe, tps)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"the worker exited with {proc.returncode}")
            found = await admin.list_consumer_group_offsets(group, partitions=tps)
            done = {tp: max(0, found[tp].offset) if tp in found else 0 for tp in tps}
            if all(done[tp] >= ends[tp] for tp in tps):
                return
            await asyncio.sleep(0.5)
        raise TimeoutError("settlement did not catch up")
    finally:
        await probe.stop()
        await admin.close()


async def next_handled(settings: Settings, proc: subprocess.Popen[bytes], record: Envelope) -> float:
    """Send ``record`` now and wait for settlement's output caused by it; seconds from now."""
    reader = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap_list, enable_auto_commit=False)
    await reader.start()
    try:
        tps = await partitions_of(reader, [settings.topic(topics.WALLET_EVENTS)])
        ends = await reader.end_offsets(tps)
        reader.assign(tps)
        for tp in tps:
            reader.seek(tp, ends[tp])
        started = time.monotonic()
        await aproduce(settings, [record])
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the worker exited with {proc.returncode}")
            for msgs in (await reader.getmany(timeout_ms=200)).values():
                for m in msgs:
                    if json.loads(m.value).get("causation_id") == record.event_id:
                        return time.monotonic() - started
    finally:
        await reader.stop()


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, and wait (SIGKILL after 60 s)."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(30)


def one_size(broker: str, records: int, tmp: Path) -> dict[str, float]:
    """The history of ``records`` records; its restart figures."""
    clock = time.monotonic()
    log, account = history(records)
    played = time.monotonic() - clock
    settings = quick_settings(
        Settings(
            bootstrap_servers=broker, topic_prefix=f"r{uuid.uuid4().hex[:8]}.", partitions=6, demo_mode=True
        ),
        env={},
    )
    asyncio.run(ensure_topics(settings, list(topics.ALL_TOPICS)))
    asyncio.run(aproduce(settings, log))
    data, logs = tmp / f"data-{records}", tmp / f"worker-{records}.log"
    first = start(settings, data, logs)
    clock = time.monotonic()
    asyncio.run(caught_up(settings, first))
    applied = time.monotonic() - clock
    stop(first)
    out = {"records": float(len(log)), "play_s": played, "first_start_s": applied}
    for way, where in (("local", data), ("changelog", tmp / f"empty-{records}")):
        proc = start(settings, where, logs)
        try:
            out[f"{way}_s"] = asyncio.run(next_handled(settings, proc, deposit(account, len(out))))
            out[f"{way}_rss_mb"] = rss_mb(proc.pid)
        finally:
            stop(proc)
    shutil.rmtree(data, ignore_errors=True)
    return out


def main() -> None:
    """Every history size; each figure beside the smallest history's."""
    sizes = [int(s) for s in os.environ.get("BENCH_RESTART_HISTORIES", "15000,60000,240000").split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp_name, tansu(Path(tmp_name) / "tansu.log") as broker:
        for size in sizes:
            rows.append(one_size(broker, size, Path(tmp_name)))
            row = rows[-1]
            print(
                f"history {int(row['records']):>8} records (played {row['play_s']:.0f} s, first start applied "
                f"it in {row['first_start_s']:.0f} s): next record {row['local_s']:.1f} s local, "
                f"{row['changelog_s']:.1f} s changelog; RSS {row['local_rss_mb']:.1f} / "
                f"{row['changelog_rss_mb']:.1f} MB",
                flush=True,
            )
    base = rows[0]
    print(f"\n{'history':>9} | {'next record, local':>20} | {'RSS local':>16} | {'next, changelog':>18} | "
          f"{'RSS changelog':>17}")  # fmt: skip
    for row in rows:
        cells = [f"{int(row['records']):>9}"]
        for key, unit in (("local_s", "s"), ("local_rss_mb", "MB"), ("changelog_s", "s"),
                          ("changelog_rss_mb", "MB")):  # fmt: skip
            cells.append(f"{row[key]:>7.1f} {unit} ({row[key] / base[key]:.2f}x)")
        print(" | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
