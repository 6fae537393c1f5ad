"""The same seeded session on Kafka and embedded, same run: how many times slower the broker makes it.

Session: :data:`TABLES` of the demo's tables, :data:`COUPS` coups each, seed 2026, the demo keyring.
Embedded (the baseline): a fresh SQLite log, the simulator over :class:`EmbeddedBus`. Kafka: four
worker processes (dealer, settlement, audit, monitor) on a local Tansu broker, the simulator over
:class:`KafkaBus`, the clock started once every group has joined. Kafka is timed twice in the same run:

- **lockstep**: after every step the simulator waits until every service has committed everything
  (``settle()``: the bus without ``advance``, as before this benchmark);
- **advance**: it waits only for the services a table waits for (dealer, settlement); audit and
  monitor catch up on their own, and the session ends with one ``settle()``.

Both Kafka runs must give the same replay digest (printed; the embedded session's differs where the
workers' keyring does: the dealer derives each shoe from its key).

Run: ``.venv/bin/python -m bench session`` (``BENCH_SESSION_TABLES``, ``BENCH_SESSION_COUPS`` size it).
"""

from __future__ import annotations

import os
import tempfile
import time
import uuid
from pathlib import Path

from services.app.simulator import Session, demo_tables
from services.core.envelope import Envelope
from services.runtime.embedded.log import EmbeddedBus
from services.runtime.kafka.bus import KafkaBus, quick_settings, running
from services.runtime.logging import configure
from services.runtime.replay import read_db, replay
from services.runtime.settings import Settings
from tests.helpers.broker import tansu

TABLES = int(os.environ.get("BENCH_SESSION_TABLES", "3"))
COUPS = int(os.environ.get("BENCH_SESSION_COUPS", "10"))
SEED = 2026


class Lockstep:
    """A bus without ``advance()``: the session settles every service between its steps."""

    def __init__(self, bus: KafkaBus) -> None:
        self.bus = bus

    def publish(self, envelopes: list[Envelope]) -> None:
        """The wrapped bus's publish."""
        self.bus.publish(envelopes)

    def settle(self) -> None:
        """Every service until idle."""
        self.bus.settle()

    def read(self, topic: str, key: str) -> list[Envelope]:
        """The wrapped bus's read."""
        return self.bus.read(topic, key)


def embedded(db: Path) -> tuple[float, str]:
    """Seconds for the session on a fresh embedded log, and its replay digest."""
    bus = EmbeddedBus(db)
    started = time.perf_counter()
    try:
        Session(bus, seed=SEED).run(demo_tables(TABLES), COUPS)
    finally:
        bus.close()
    elapsed = time.perf_counter() - started
    return elapsed, replay(read_db(db)).digest


def on_kafka(broker: str, logs: Path, *, lockstep: bool) -> tuple[float, str]:
    """Seconds for the session on fresh topics (after every group joined), and its replay digest."""
    base = Settings(bootstrap_servers=broker, topic_prefix=f"bs{uuid.uuid4().hex[:8]}.", partitions=3, demo_mode=True)
    with running(quick_settings(base, env={}), logs) as bus:
        bus.settle()  # every group has joined (the first join waits the rebalance timeout)
        started = time.perf_counter()
        Session(Lockstep(bus) if lockstep else bus, seed=SEED).run(demo_tables(TABLES), COUPS)
        elapsed = time.perf_counter() - started
        records = bus.consume_all()
    return elapsed, replay(records).digest


def main() -> dict[str, float]:
    """Print the Kafka session's time (lockstep and advance) beside the embedded session's."""
    configure(level="WARNING")
    with tempfile.TemporaryDirectory() as tmp, tansu(Path(tmp) / "tansu.log") as broker:
        base_s, digest = embedded(Path(tmp) / "session.db")
        step_s, step_digest = on_kafka(broker, Path(tmp) / "lockstep", lockstep=True)
        adv_s, adv_digest = on_kafka(broker, Path(tmp) / "advance", lockstep=False)
    same = "same digest" if step_digest == adv_digest else f"DIGESTS DIFFER: {step_digest} {adv_digest}"
    what = f"{TABLES} tables x {COUPS} coups"
    print(f"embedded session ({what}): {base_s:.2f} s (digest {digest})")
    print(f"kafka session, lockstep (settle after every step): {step_s:.1f} s = {step_s / base_s:.0f}x embedded")
    print(f"kafka session, advance (dealer and settlement only): {adv_s:.1f} s = {adv_s / base_s:.0f}x embedded ({same})")
    return {"embedded s": base_s, "lockstep s": step_s, "advance s": adv_s}


if __name__ == "__main__":
    main()
