"""A speed-baccarat table on the embedded runtime: 5,000 bets a coup, as online providers run them.

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

Run: ``.venv/bin/python -m bench speed`` (``BENCH_SPEED_PLAYERS``, ``BENCH_SPEED_COUPS`` size it).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.bench_pipeline import run_raw
from services.app.simulator import CURRENCY, Session, TablePlay, TableSpec
from services.core import topics
from services.runtime.compose import Composition
from services.runtime.embedded.log import EmbeddedBus, Runner
from services.runtime.logging import configure

PLAYERS = int(os.environ.get("BENCH_SPEED_PLAYERS", "5000"))
COUPS = int(os.environ.get("BENCH_SPEED_COUPS", "3"))
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
        """Read what was appended since the last look, stamping each type's first and last time."""
        now = time.perf_counter()
        while rows := self.bus.log.read(list(WATCHED), self.after, 5000):
            for offset, _t, _k, raw in rows:
                for name in ("BetAccepted", "CoupResolved", "PayoutApplied"):
                    if f'"type":"{name}"'.encode() in raw:
                        self.first.setdefault(name, now)
                        self.offsets.setdefault(f"first {name}", offset)
                        self.last[name] = now
                        self.offsets[f"last {name}"] = offset
                        break
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


def play_coup(session: Session, play: TablePlay, bus: EmbeddedBus) -> dict[str, float]:
    """One coup of speed baccarat; returns its two figures in seconds."""
    t = TABLE.table_id
    if play.stop_reached:
        play.close_shoe()
        play.open_shoe()
        play.stop_reached = False
    session.command("OpenBetting", t, {})
    session.drain()
    play.coup_id = session.finish(play._opened_coup())
    for n, account in enumerate(session.accounts()):
        spot = ("player", "banker", "tie")[session.rng.randrange(3) if n % 7 else 2]
        session.wallet("PlaceBet", account, {
            "bet_id": session._id(), "table_id": t, "coup_id": play.coup_id, "spot": spot,
            "stake_minor": 100 * session.rng.choice((1, 2, 5, 10)), "currency": CURRENCY,
        })  # fmt: skip
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


def main() -> dict[str, float]:
    """Print each coup's bets window and resolution-to-last-credit time beside the raw baseline."""
    configure(level="WARNING")
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        bus = EmbeddedBus(Path(tmp) / "speed.db", Composition.demo().pipeline())
        try:
            session = Session(bus, seed=7, players=PLAYERS, deposit_minor=10_000_000)
            started = time.perf_counter()
            for account in session.accounts():
                session.wallet("Deposit", account, {"amount_minor": session.deposit_minor, "currency": CURRENCY})
            play = TablePlay(session, TABLE)
            play.open()
            session.drain()
            print(f"{PLAYERS} players funded, table open: {time.perf_counter() - started:.1f} s")
            for coup in range(COUPS):
                fig = play_coup(session, play, bus)
                print(
                    f"coup {coup + 1}: {PLAYERS} bets accepted in {fig['bets']:.2f} s (first to last); "
                    f"resolution -> last credit {fig['credits']:.2f} s; raw sqlite3 for the same "
                    f"{int(fig['records'])} records: {fig['raw']:.3f} s (synchronous={_synchronous(bus)}); "
                    f"then audit and monitor caught up in {fig['observers']:.2f} s"
                )
                for k in ("bets", "credits"):
                    results[f"{k} max s"] = max(results.get(f"{k} max s", 0.0), fig[k])
        finally:
            bus.close()
    return results


if __name__ == "__main__":
    main()
