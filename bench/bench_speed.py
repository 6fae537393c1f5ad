"""A speed-baccarat table on both runtimes, embedded then Kafka: 5,000 bets a coup, as online providers run them.

One punto banco table, :data:`PLAYERS` funded players, each betting once on every coup (player,
banker or tie). Per coup, all the bets are written at once while the window is open, then the operator
closes betting and deals. Two figures per coup, from the wall time at which each record reached the
log (the bench steps the runners itself and looks at what each batch appended):

- **bets**: from the first ``BetAccepted`` to the last one (the window's throughput);
- **credits**: from the ``CoupResolved`` to the last ``PayoutApplied`` of the coup (goal: < 1 s).

While a coup is timed the bench steps only the stages on the credit path (dealer, settlement's two
stages); the observers (audit, monitor and its account stage), which no credit waits for, catch up
after each coup and the time they take is printed beside the figures.

Baseline, same run: raw ``sqlite3`` (same WAL and ``synchronous``) inserting the coup's record bytes
in one transaction per runner batch and reading them back: how long the disk alone takes for the
records that separate the resolution from the last credit.

**Kafka** (:func:`on_kafka`): the same table and players through the Kafka runtime as it runs: the four
service workers (dealer, settlement, audit, monitor; ``python -m services.cli.worker``) on a
local Tansu broker, the simulator over :class:`~services.runtime.kafka.bus.KafkaBus` (event driven,
the test and demo settings of :func:`~services.runtime.kafka.bus.quick_settings`). Per coup the bets
are published at once; the table closes once the dealer has answered every one (a wait on the table's
events); after the deal the bench waits for dealer and settlement to commit everything
(``KafkaBus.advance``), then for audit and monitor (``drain``, printed beside). The two figures come
from the **record timestamps** (``CreateTime``: the moment the producing worker's producer took the
record, milliseconds, one clock: every process runs here), read back from the topics after the coup.
Audit and monitor run all along, as in a deployment: on this 2-core machine they compete with the
credit path for the CPU (the embedded bench steps them after the coup).

Baseline, same run: raw aiokafka (:func:`bench.bench_kafka.produce_consume`: one producer, acks
awaited, one consumer) producing and consuming the very record bytes that the topics gained within
each window (every topic), to a fresh topic with as many partitions on the same broker.

Run: ``.venv/bin/python -m bench speed`` (``BENCH_SPEED_PLAYERS``, ``BENCH_SPEED_COUPS`` size it;
``BENCH_SPEED_RUNTIMES=kafka`` or ``embedded`` runs one runtime only; ``BENCH_SPEED_KAFKA_OBSERVERS=0``
runs the Kafka table without audit and monitor).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from aiokafka import TopicPartition  # type: ignore[import-untyped]

from bench.bench_kafka import bus_cpu, produce_consume
from bench.bench_pipeline import run_raw
from services.core import topics
from services.core.envelope import Envelope
from services.core.topics import SERVICES
from services.runtime.compose import Composition
from services.runtime.embedded.bus import EmbeddedBus
from services.runtime.embedded.runner import Runner
from services.runtime.kafka.bus import KafkaBus, Workers, quick_settings
from services.runtime.kafka.topic_io import new_consumer, partitions_of, read_range
from services.runtime.kafka.worker import ensure_topics
from services.runtime.logging import configure
from services.runtime.settings import Settings
from services.simulation.simulator import CURRENCY, Session, TablePlay, TableSpec
from tests.helpers.broker import tansu

PLAYERS = int(os.environ.get("BENCH_SPEED_PLAYERS", "5000"))
COUPS = int(os.environ.get("BENCH_SPEED_COUPS", "3"))
RUNTIMES = os.environ.get("BENCH_SPEED_RUNTIMES", "embedded,kafka").split(",")
KAFKA_OBSERVERS = os.environ.get("BENCH_SPEED_KAFKA_OBSERVERS", "1") != "0"
"""Whether audit and monitor run beside the credit path on Kafka (``0``: dealer and settlement only,
to see what the observers' share of the 2 cores costs the figures)."""
PARTITIONS = 3
TABLE = TableSpec("S01-speed", "punto_banco", min_minor=100, max_minor=100_000)
OBSERVERS = frozenset({"audit", "monitor", "monitor.accounts"})
"""Consumers no wallet credit waits for."""
WATCHED = (topics.TABLE_EVENTS, topics.WALLET_EVENTS)


class Watch:
    """The wall time at which records of interest first reached the log (incremental reads)."""

    def __init__(self, bus: EmbeddedBus) -> None:
        self.bus, self.after = bus, bus.log.head()
        self.first: dict[str, float] = {}
        self.last: dict[str, float] = {}
        self.offsets: dict[str, int] = {}

    def look(self) -> None:
        """Read what was appended since the last look, stamping each type's first and last time.

        Reads the log's ``type`` column, not the records' bytes: the look runs inside the timed
        window, after every batch (reading and scanning every body cost ~0.06 s of CPU a coup)."""
        now = time.perf_counter()
        query = (
            'SELECT "offset", type FROM records WHERE topic IN (?, ?) AND "offset" > ? '
            'ORDER BY "offset" LIMIT 5000'
        )
        while rows := self.bus.log._conn.execute(query, (*WATCHED, self.after)).fetchall():
            for offset, kind in rows:
                if kind in ("BetAccepted", "CoupResolved", "PayoutApplied"):
                    self.first.setdefault(kind, now)
                    self.offsets.setdefault(f"first {kind}", offset)
                    self.last[kind] = now
                    self.offsets[f"last {kind}"] = offset
            self.after = rows[-1][0]

    def between(self, first: int, last: int) -> list[bytes]:
        """Every record's bytes with ``first <= offset <= last`` (any topic)."""
        cur = self.bus.log._conn.execute(
            'SELECT body FROM records WHERE "offset" BETWEEN ? AND ? ORDER BY "offset"', (first, last)
        )
        return [bytes(r[0]) for r in cur]


def drain(bus: EmbeddedBus, watch: Watch) -> None:
    """Step the stages on the credit path (not :data:`OBSERVERS`) round-robin until idle, looking at
    the log after every batch."""
    runners: list[Runner[Any]] = [r for r in bus.runners if r.name not in OBSERVERS]
    while True:
        moved = 0
        for runner in runners:
            moved += runner.step_batch().records
            watch.look()
        if not moved:
            return


def open_coup(session: Session, play: TablePlay, *, drain: bool) -> None:
    """A new shoe at the stop card, then the betting window of the next coup (``drain``: run the
    pipeline before waiting for it, on a bus that is not event driven)."""
    if play.stop_reached:
        play.close_shoe()
        play.open_shoe()
        play.stop_reached = False
    session.command("OpenBetting", TABLE.table_id, {})
    if drain:
        session.drain()
    play.coup_id = session.finish(play._opened_coup())


def place_bets(session: Session, play: TablePlay) -> list[str]:
    """Write one bet per player for the coup in play (the same draws on both runtimes); their ids."""
    ids = []
    for n, account in enumerate(session.accounts()):
        spot = ("player", "banker", "tie")[session.rng.randrange(3) if n % 7 else 2]
        ids.append(bet_id := session._id())
        session.wallet("PlaceBet", account, {
            "bet_id": bet_id, "table_id": TABLE.table_id, "coup_id": play.coup_id, "spot": spot,
            "stake_minor": 100 * session.rng.choice((1, 2, 5, 10)), "currency": CURRENCY,
        })  # fmt: skip
    return ids


def play_coup(session: Session, play: TablePlay, bus: EmbeddedBus) -> dict[str, float]:
    """One coup of speed baccarat; returns its two figures in seconds."""
    t = TABLE.table_id
    open_coup(session, play, drain=True)
    place_bets(session, play)
    watch = Watch(bus)
    session.flush()
    drain(bus, watch)
    session.command("CloseBetting", t, {})
    session.command("DealCoup", t, {})
    session.flush()
    drain(bus, watch)
    session.finish(play._play_out())
    started = time.perf_counter()
    bus.drain()  # the observers catch up (not part of the figures; printed beside them)
    observers = time.perf_counter() - started
    raws = watch.between(watch.offsets["first CoupResolved"], watch.offsets["last PayoutApplied"])
    return {
        "bets": watch.last["BetAccepted"] - watch.first["BetAccepted"],
        "credits": watch.last["PayoutApplied"] - watch.first["CoupResolved"],
        "records": float(len(raws)),
        "observers": observers,
        "raw": raw_baseline(raws, bus.log.path.parent / "raw.db", _synchronous(bus)),
    }


def raw_baseline(raws: list[bytes], db: Path, sync: str, batch: int = 500) -> float:
    """Seconds for raw sqlite3 to insert ``raws`` (batches of ``batch``, same WAL/synchronous as the
    log) and read them back (:func:`bench.bench_pipeline.run_raw` on a fresh file)."""
    db.unlink(missing_ok=True)
    return run_raw(db, raws, batch, sync)


def _synchronous(bus: EmbeddedBus) -> str:
    """The log's own synchronous setting (what the baseline must match; FULL before it was a setting)."""
    return str(getattr(bus.log, "synchronous", "FULL"))


def open_table(bus: Any) -> tuple[Session, TablePlay, float]:
    """Fund :data:`PLAYERS` players and open the speed table on ``bus``; the seconds it took."""
    session = Session(bus, seed=7, players=PLAYERS, deposit_minor=10_000_000)
    started = time.perf_counter()
    for account in session.accounts():
        session.wallet("Deposit", account, {"amount_minor": session.deposit_minor, "currency": CURRENCY})
    play = TablePlay(session, TABLE)
    play.open()
    session.drain()
    return session, play, time.perf_counter() - started


def embedded() -> dict[str, float]:
    """Print each coup's bets window and resolution-to-last-credit time beside the raw baseline."""
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        bus = EmbeddedBus(Path(tmp) / "speed.db", Composition.demo().pipeline())
        try:
            session, play, took = open_table(bus)
            print(f"embedded: {PLAYERS} players funded, table open: {took:.1f} s")
            for coup in range(COUPS):
                fig = play_coup(session, play, bus)
                print(
                    f"embedded coup {coup + 1}: {PLAYERS} bets accepted in {fig['bets']:.2f} s (first to last); "
                    f"resolution -> last credit {fig['credits']:.2f} s; raw sqlite3 for the same "
                    f"{int(fig['records'])} records: {fig['raw']:.3f} s (synchronous={_synchronous(bus)}); "
                    f"then audit and monitor caught up in {fig['observers']:.2f} s"
                )
                for k in ("bets", "credits"):
                    results[f"{k} max s"] = max(results.get(f"{k} max s", 0.0), fig[k])
        finally:
            bus.close()
    return results


# -- Kafka ----------------------------------------------------------------------------------------


def _answered_all(bet_ids: list[str]) -> Callable[[Envelope], bool]:
    """A wait's match that accepts the table event answering the last of ``bet_ids`` to be answered."""
    left = set(bet_ids)

    def match(env: Envelope) -> bool:
        if env.type in ("BetAccepted", "BetRefused"):
            left.discard(str(env.payload.get("bet_id")))
        return not left

    return match


class Stamps:
    """The topics' records read incrementally with their timestamps (``CreateTime``, ms)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.positions: dict[TopicPartition, int] = {}

    async def read(self) -> list[tuple[float, str, bytes, bytes]]:
        """Every record written since the last read: (timestamp s, logical topic, key, value)."""
        consumer = new_consumer(self.settings)
        await consumer.start()
        try:
            tps = await partitions_of(consumer, [self.settings.topic(t) for t in topics.ALL_TOPICS])
            ends = await consumer.end_offsets(tps)
            read, reached = await read_range(consumer, self.positions, ends, to_end=True)
        finally:
            await consumer.stop()
        self.positions.update(reached)
        out = [
            (m.timestamp / 1000, self.settings.logical(tp.topic), m.key or b"", m.value or b"")
            for tp, msgs in read.items()
            for m in msgs
        ]
        return sorted(out, key=lambda r: r[0])


def _kafka_figures(records: list[tuple[float, str, bytes, bytes]]) -> dict[str, Any]:
    """The coup's two windows (first to last ``BetAccepted``; ``CoupResolved`` to the last
    ``PayoutApplied``) from the record timestamps, and the records each window holds (any topic)."""
    at: dict[str, list[float]] = {"BetAccepted": [], "CoupResolved": [], "PayoutApplied": []}
    for ts, topic, _key, value in records:
        if topic in WATCHED:
            kind = json.loads(value).get("type")
            if kind in at:
                at[kind].append(ts)
    bets = (min(at["BetAccepted"]), max(at["BetAccepted"]))
    credits = (min(at["CoupResolved"]), max(at["PayoutApplied"]))

    def within(window: tuple[float, float]) -> list[tuple[bytes, bytes]]:
        return [(k, v) for ts, _t, k, v in records if window[0] <= ts <= window[1]]

    return {
        "bets": bets[1] - bets[0],
        "credits": credits[1] - credits[0],
        "credited": len(at["PayoutApplied"]),
        "bets records": within(bets),
        "credits records": within(credits),
    }


async def _raw(settings: Settings, records: list[tuple[bytes, bytes]]) -> float:
    """Wall seconds for raw aiokafka to produce ``records`` to a fresh topic and consume them back."""
    name = f"raw-{uuid.uuid4().hex[:8]}"
    await ensure_topics(settings, [name])
    wall, _cpu = await produce_consume(
        settings.bootstrap_list, settings.topic(name), records,
        fetch_max_wait_ms=settings.fetch_max_wait_ms or 50,
    )  # fmt: skip
    return wall


def kafka_coup(session: Session, play: TablePlay, bus: KafkaBus, stamps: Stamps) -> dict[str, Any]:
    """One coup of speed baccarat on Kafka; its figures (seconds) and the windows' records."""
    t = TABLE.table_id
    meter = bus_cpu(bus)
    meter.start()
    open_coup(session, play, drain=False)
    bet_ids = place_bets(session, play)
    session.flush()
    bus.wait(topics.TABLE_EVENTS, t, _answered_all(bet_ids))
    session.command("CloseBetting", t, {})
    session.command("DealCoup", t, {})
    session.finish(play._play_out())
    bus.advance()  # dealer and settlement have committed everything: every credit is on the log
    meter.stop()
    print(f"kafka coup, bets placed to credits committed: {meter.line()}")
    started = time.perf_counter()
    bus.drain()  # audit and monitor catch up (printed beside the figures)
    observers = time.perf_counter() - started
    fig = _kafka_figures(asyncio.run(stamps.read()))
    fig["observers"] = observers
    fig["raw bets"] = asyncio.run(_raw(bus.settings, fig["bets records"]))
    fig["raw credits"] = asyncio.run(_raw(bus.settings, fig["credits records"]))
    return fig


def on_kafka() -> dict[str, float]:
    """Print each coup's two windows on Kafka beside raw aiokafka moving the same records."""
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp, tansu(Path(tmp) / "tansu.log") as broker:
        base = Settings(bootstrap_servers=broker, topic_prefix=f"speed{uuid.uuid4().hex[:8]}.",
                        partitions=PARTITIONS, demo_mode=True)  # fmt: skip
        settings = quick_settings(base, env={})
        services = SERVICES if KAFKA_OBSERVERS else ("dealer", "settlement")
        with _pipeline(settings, Path(tmp) / "workers", services) as bus:
            stamps = Stamps(settings)
            session, play, took = open_table(bus)
            asyncio.run(stamps.read())
            print(f"kafka: {PLAYERS} players funded, table open ({', '.join(services)}; {PARTITIONS} partitions, fetch wait "
                  f"{settings.fetch_max_wait_ms} ms): {took:.1f} s")  # fmt: skip
            for coup in range(COUPS):
                fig = kafka_coup(session, play, bus, stamps)
                nb, nc = len(fig["bets records"]), len(fig["credits records"])
                print(
                    f"kafka coup {coup + 1}: {PLAYERS} bets accepted in {fig['bets']:.2f} s (first to last; "
                    f"raw aiokafka moves those {nb} records in {fig['raw bets']:.2f} s: "
                    f"{fig['bets'] / fig['raw bets']:.1f}x); resolution -> last of {fig['credited']} credits "
                    f"{fig['credits']:.2f} s (raw aiokafka, same {nc} records: {fig['raw credits']:.2f} s: "
                    f"{fig['credits'] / fig['raw credits']:.1f}x)"
                    + (
                        f"; then audit and monitor caught up in {fig['observers']:.2f} s"
                        if KAFKA_OBSERVERS
                        else ""
                    )
                )
                for k in ("bets", "credits"):
                    results[f"kafka {k} max s"] = max(results.get(f"kafka {k} max s", 0.0), fig[k])
    return results


@contextlib.contextmanager
def _pipeline(settings: Settings, logs: Path, services: tuple[str, ...]) -> Iterator[KafkaBus]:
    """:func:`services.runtime.kafka.bus.running` for the named services only."""
    asyncio.run(ensure_topics(settings, list(topics.ALL_TOPICS)))
    workers = Workers(settings, logs, services=services)
    workers.start()
    try:
        with KafkaBus(settings, services, workers=workers) as bus:
            yield bus
    finally:
        workers.stop()


def main() -> dict[str, float]:
    """The speed-baccarat table on each runtime of :data:`RUNTIMES` (embedded, then Kafka)."""
    configure(level="WARNING")
    results: dict[str, float] = {}
    if "embedded" in RUNTIMES:
        results |= embedded()
    if "kafka" in RUNTIMES:
        results |= on_kafka()
    return results


if __name__ == "__main__":
    main()
