"""A Kafka worker's restart on a long history (issue #31): time to really handle the next record, and RSS.

The history is made of *units*: seeded demo sessions of the seven variants' tables, each about 15,000
records (48 coups a table), played on the in-memory pipeline (every processor, the demo keyring: the
records are authentic to the workers). Unit 0 is the 15k history itself (tables ``T01-…``, accounts
``player:001``…); unit ``k`` is the session of seed ``31 + k`` on tables ``Ukk-T01-…`` and accounts
``player:kk001``…, its clock an hour after unit ``k - 1``'s start, its signed heads left out (they are
chained per writer, which units cannot share). A history of N records is the first units whose
records add up to about N: more tables and accounts, the shape of a longer day. Each unit is played
once and cached under ``var/bench/`` (two processes build them), so a second run reuses them.

One Tansu broker, fresh topics (6 partitions); the history sizes in increasing order, each grown from
the one before on the same topics (its further units produced in order). For each size, each measured
service (``BENCH_RESTART_SERVICES``, default settlement and dealer) runs its worker (``python -m
services.runtime.kafka.worker NAME``, demo keys, the quick group timeouts of the tests; the services at
once, their group consumers' fetch wait :data:`APPLY_FETCH_MS`) on its own data directory, kept from
one size to the next, until its group's committed offsets reach the ends (its state built by the worker
from the history, in its store and changelog), and is stopped (SIGTERM). Measured, each from a new
worker process:

* **local**: the same data directory (its RocksDB state store): the snapshots restored locally;
* **changelog**: an empty data directory (another machine): the snapshots read from the changelog.

The clock runs from the process's start to the moment its output for one new record (sent when the
process starts: a cashier deposit for settlement, an ``OpenShoe`` at a table of unit 0 for the dealer)
is on the service's output topic: the group join, the restore, the records after the last snapshot and
that record. *restore*: the worker's own ``restored`` log line (ms). RSS: the worker's resident memory
once the output is there. Each figure is printed beside the smallest history's as a ratio (issue #31's
goal: 1M records at most 1.5x 15k).

Run: ``.venv/bin/python -m bench restart``. ``BENCH_RESTART_HISTORIES`` (default ``15000,60000,240000``;
add ``1000000`` for the long one); ``BENCH_RESTART_KEEP=DIR`` keeps the workers' logs and data directories in
``DIR``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from aiokafka import AIOKafkaConsumer  # type: ignore[import-untyped]
from aiokafka.admin import AIOKafkaAdminClient  # type: ignore[import-untyped]

from services.core import topics
from services.core.boundary import own_namespace
from services.core.envelope import Envelope, request
from services.core.trust import Principal, authenticate
from services.runtime import intake
from services.runtime.compose import Composition
from services.runtime.kafka.bus import quick_settings, real_ends, service_inputs, worker_env
from services.runtime.kafka.topic_io import RANGE_FETCH_MS, aproduce, aproduce_raw, partitions_of
from services.runtime.kafka.worker import ensure_topics
from services.runtime.keyring import demo_keyring
from services.runtime.memory import MemoryBus
from services.runtime.settings import Settings
from services.simulation.simulator import Session, demo_tables
from tests.helpers.broker import tansu

SERVICES = [s for s in os.environ.get("BENCH_RESTART_SERVICES", "settlement,dealer").split(",") if s]
OUTPUT = {"settlement": topics.WALLET_EVENTS, "dealer": topics.TABLE_EVENTS}
"""The topic each measured service writes its answer to the timed record on."""
TABLES = 7
RECORDS_PER_COUP = 45
"""About how many records a coup of the demo's seven tables adds to the log (to size a unit)."""
UNIT_COUPS = 15_000 // (RECORDS_PER_COUP * TABLES) + 1
SEED = 31
UNIT_SPAN_S = 3600
"""Seconds of session clock between the starts of two units (a unit plays about 47 minutes)."""
CACHE = Path("var/bench")
ACCOUNT = "player:001"
"""An account unit 0 funds: the timed deposit's."""
APPLY_FETCH_MS = RANGE_FETCH_MS
"""The group consumers' fetch wait while the workers apply the history (the fixture, not measured):
Tansu's in-memory store lists a partition's batches from its beginning within a fetch's wait, and on a
1M-record log the quick settings' 10 ms brought batches of 1-3 records a second or so (settlement: 14k
records in 78 s). The timed restarts keep the quick settings."""


@dataclass(slots=True)
class UnitSession(Session):
    """A demo session whose players' accounts carry the unit's number (unit 0: the demo's own)."""

    unit: int = 0

    def accounts(self) -> list[str]:
        return [
            f"player:{self.unit:02d}{n:03d}" if self.unit else f"player:{n:03d}"
            for n in range(1, self.players + 1)
        ]


def unit_path(unit: int) -> Path:
    """Where unit ``unit`` is cached: one line per record, ``topic TAB key TAB value``."""
    return CACHE / f"restart-unit{unit}-seed{SEED + unit}-coups{UNIT_COUPS}.tsv"


def play_unit(unit: int) -> tuple[int, int]:
    """Play unit ``unit`` once (cached); returns its records, and those not signed heads."""
    out = unit_path(unit)
    if not out.exists():
        tables = [
            t if not unit else replace(t, table_id=f"U{unit:02d}-{t.table_id}") for t in demo_tables(TABLES)
        ]
        bus = MemoryBus(Composition.demo().processors())
        UnitSession(bus, seed=SEED + unit, clock=unit * UNIT_SPAN_S, unit=unit).run(tables, UNIT_COUPS)
        CACHE.mkdir(parents=True, exist_ok=True)
        part = out.with_suffix(f".part{os.getpid()}")
        with part.open("wb") as f:
            for e in bus.log:
                if not unit or e.topic != topics.ATTEST:
                    f.write(b"\t".join((e.topic.encode(), intake.encode_key(e), intake.encode(e))) + b"\n")
        part.rename(out)
    attest = topics.ATTEST.encode() + b"\t"
    with out.open("rb") as f:
        kinds = [line.startswith(attest) for line in f]
    return len(kinds), kinds.count(False)


def units_for(records: int) -> list[int]:
    """The units whose records add up to about ``records`` (built where missing, two at a time)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    first, plain = play_unit(0)
    count = 1 + max(0, round((records - first) / plain))
    started = time.monotonic()
    with ProcessPoolExecutor(2) as pool:
        for unit, _ in enumerate(pool.map(play_unit, range(1, count)), 1):
            if unit % 10 == 0:
                print(
                    f"  units: {unit + 1} of {count} ready ({time.monotonic() - started:.0f} s)", flush=True
                )
    return list(range(count))


def unit_records(unit: int) -> Iterator[tuple[str, bytes, bytes]]:
    """Unit ``unit``'s cached records: (logical topic, key, value)."""
    with unit_path(unit).open("rb") as f:
        for line in f:
            topic, key, value = line.rstrip(b"\n").split(b"\t", 2)
            yield topic.decode(), key, value


def timed_record(service: str, account: str, n: int) -> Envelope:
    """The new record whose handling a restart of ``service`` is timed to: a cashier deposit into
    ``account`` (settlement), an ``OpenShoe`` at the ``n``-th table (unit 0's seven, then unit 1's, …:
    a table whose shoe the session closed), for the dealer."""
    occurred = "2030-01-01T00:00:00.000Z"
    if service == "dealer":
        spec = demo_tables(TABLES)[n % TABLES]
        table = f"U{n // TABLES:02d}-{spec.table_id}" if n >= TABLES else spec.table_id
        env = request(
            "OpenShoe", topics.TABLE_INBOX, table,
            {"mode": "rng", "shoe_id": f"{table}-bench-restart-{n}", "table_id": table},
            event_id=f"bench-restart-{uuid.uuid4()}", occurred_at=occurred, producer=Principal.OPERATOR.value,
        )  # fmt: skip
        return authenticate(env, demo_keyring().key(Principal.OPERATOR))
    env = request(
        "Deposit", topics.WALLET_REQUESTS, account,
        {"account_id": account, "amount_minor": 100, "currency": "EUR", "transfer_id": f"{own_namespace(Principal.CASHIER.value)}bench-restart-{n}"},
        event_id=f"bench-restart-{uuid.uuid4()}", occurred_at=occurred, producer=Principal.CASHIER.value,
    )  # fmt: skip
    return authenticate(env, demo_keyring().key(Principal.CASHIER))


def start(service: str, settings: Settings, data: Path, log: Path) -> subprocess.Popen[bytes]:
    """``service``'s worker process on ``data`` as its data directory, logging to ``log``."""
    env = {**os.environ, **worker_env(settings), "CASINO_DATA_DIR": str(data), "CASINO_LOG_LEVEL": "INFO"}
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "services.cli.worker", service],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip


def rss_mb(pid: int) -> float:
    """Resident memory of a process, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def caught_up(
    service: str, settings: Settings, proc: subprocess.Popen[bytes], timeout_s: float = 7200
) -> None:
    """Wait until ``service``'s group has committed every input partition's end."""
    probe = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap_list, enable_auto_commit=False)
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap_list)
    await probe.start()
    await admin.start()
    group = f"{settings.topic_prefix}casino-{service}"
    try:
        tps = await partitions_of(probe, [settings.topic(t) for t in service_inputs([service])[service]])
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
        raise TimeoutError(f"{service} did not catch up")
    finally:
        await probe.stop()
        await admin.close()


async def next_handled(
    settings: Settings, proc: subprocess.Popen[bytes], record: Envelope, output: str
) -> float:
    """Send ``record`` now and wait for the output on ``output`` caused by it; seconds from now."""
    reader = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap_list, enable_auto_commit=False)
    await reader.start()
    try:
        tps = await partitions_of(reader, [settings.topic(output)])
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


def restore_lines(log: Path) -> tuple[float, float]:
    """From a worker's log: the ``ms`` of its last ``restored`` line, and the bytes of the snapshots its
    ``state_restored`` lines name (NaN, 0 if none)."""
    ms, size = float("nan"), 0.0
    for line in log.read_text(errors="replace").splitlines():
        with contextlib.suppress(ValueError, AttributeError):
            fields = json.loads(line)
            if fields.get("event") == "restored":
                ms = float(fields["ms"])
            elif fields.get("event") == "state_restored":
                size += float(fields["bytes"])
    return ms, size


def load(settings: Settings, units: list[int]) -> float:
    """Produce the units onto the topics, in order; seconds."""
    clock = time.monotonic()
    for unit in units:
        asyncio.run(aproduce_raw(settings, unit_records(unit)))
    return time.monotonic() - clock


def apply_all(settings: Settings, tmp: Path, tag: str) -> dict[str, float]:
    """Every measured service's worker over the log (on its own data directory, kept from one history
    to the next), all at once, until each has committed its inputs' ends; then stopped. Seconds each."""
    applying = settings.model_copy(update={"fetch_max_wait_ms": APPLY_FETCH_MS})
    procs = {s: start(s, applying, tmp / f"data-{s}", tmp / f"{s}-{tag}-apply.log") for s in SERVICES}
    clock = time.monotonic()

    async def each(service: str) -> tuple[str, float]:
        await caught_up(service, settings, procs[service])
        return service, time.monotonic() - clock

    async def every() -> list[tuple[str, float]]:
        return list(await asyncio.gather(*(each(s) for s in SERVICES)))

    try:
        return dict(asyncio.run(every()))
    finally:
        for proc in procs.values():
            stop(proc)


def restarts(service: str, settings: Settings, tmp: Path, tag: str, n: int) -> dict[str, float]:
    """``service``'s two restarts on the history as it stands (local, changelog); ``n`` numbers the
    timed records."""
    out = {}
    for way, where in (("local", tmp / f"data-{service}"), ("changelog", tmp / f"empty-{service}-{tag}")):
        log = tmp / f"{service}-{tag}-{way}.log"
        proc = start(service, settings, where, log)
        try:
            record = timed_record(service, ACCOUNT, n)
            out[f"{way}_s"] = asyncio.run(next_handled(settings, proc, record, OUTPUT[service]))
            out[f"{way}_rss_mb"] = rss_mb(proc.pid)
        finally:
            stop(proc)
        out[f"{way}_restore_ms"], out[f"{way}_snapshot_kb"] = restore_lines(log)
        out[f"{way}_snapshot_kb"] /= 1024
        n += 1
    shutil.rmtree(tmp / f"empty-{service}-{tag}", ignore_errors=True)
    return out


def one_size(settings: Settings, records: int, have: int, tmp: Path, n: int) -> dict[str, dict[str, float]]:
    """The history grown to about ``records`` records (units ``have`` on already on the topics); each
    service's restart figures."""
    clock = time.monotonic()
    units = units_for(records)
    built = time.monotonic() - clock
    loaded = load(settings, units[have:])
    held = sum(1 for u in units for _ in unit_records(u))
    print(f"history {held:,} records ({len(units)} units, built or read in {built:.0f} s, "
          f"{len(units) - have} produced in {loaded:.0f} s)", flush=True)  # fmt: skip
    applied = apply_all(settings, tmp, str(records))
    out = {}
    for i, service in enumerate(SERVICES):
        row = {"records": float(held), "units": float(len(units)), "apply_s": applied[service]}
        out[service] = row = {**row, **restarts(service, settings, tmp, str(records), n + 2 * i)}
        print(f"  {service}: applied the new records in {row['apply_s']:.0f} s; next record "
              f"{row['local_s']:.1f} s local (restore {row['local_restore_ms']:.0f} ms), {row['changelog_s']:.1f} s "
              f"changelog (restore {row['changelog_restore_ms']:.0f} ms); snapshots {row['local_snapshot_kb']:.0f} KiB; RSS {row['local_rss_mb']:.1f} / "
              f"{row['changelog_rss_mb']:.1f} MB", flush=True)  # fmt: skip
    return out


COLUMNS = (("local_s", "s"), ("local_restore_ms", "ms"), ("local_rss_mb", "MB"), ("changelog_s", "s"),
           ("changelog_restore_ms", "ms"), ("changelog_rss_mb", "MB"), ("local_snapshot_kb", "KiB"))  # fmt: skip


def main() -> None:
    """Every history size, grown in turn on the same topics; each figure beside the smallest history's."""
    sizes = sorted(int(s) for s in os.environ.get("BENCH_RESTART_HISTORIES", "15000,60000,240000").split(","))
    rows: list[dict[str, dict[str, float]]] = []
    keep = os.environ.get("BENCH_RESTART_KEEP")  # a folder for the workers' logs and data, kept
    with (
        contextlib.nullcontext(keep) if keep else tempfile.TemporaryDirectory() as tmp_name,
        tansu(Path(tmp_name) / "tansu.log") as broker,
    ):
        settings = quick_settings(
            Settings(bootstrap_servers=broker, topic_prefix=f"r{uuid.uuid4().hex[:8]}.", partitions=6,
                     demo_mode=True),
            env={},
        )  # fmt: skip
        asyncio.run(ensure_topics(settings, list(topics.ALL_TOPICS)))
        for i, size in enumerate(sizes):
            have = int(rows[-1][SERVICES[0]]["units"]) if rows else 0
            rows.append(one_size(settings, size, have, Path(tmp_name), 2 * len(SERVICES) * i))
    for service in SERVICES:
        base = rows[0][service]
        print(f"\n{service}: history | " + " | ".join(f"{key} ({unit})" for key, unit in COLUMNS))
        for row in (r[service] for r in rows):
            cells = [f"{int(row['records']):>9}"]
            cells += [f"{row[key]:>7.1f} {unit} ({row[key] / base[key]:.2f}x)" for key, unit in COLUMNS]
            print(" | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
