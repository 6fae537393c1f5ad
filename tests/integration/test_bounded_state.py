"""The embedded runtime's state is bounded by live state (issue #31, docs/adr/0002-embedded-bounded-state.md):
ids kept forever live in the ``kept`` table, not in snapshots, and a start reads none of history."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.core import topics
from services.core.contract import RefusalReason
from services.core.envelope import Draft, Envelope, name_id, parse_record, request
from services.core.kept import Kept
from services.core.processor import Processor
from services.core.trust import Principal, authenticate
from services.runtime.compose import Composition, demo_pipeline
from services.runtime.embedded import snapshot
from services.runtime.embedded.bus import EmbeddedBus
from services.runtime.embedded.runner import SNAPSHOT_READ, Runner, run_until_idle
from services.runtime.embedded.store import EmbeddedLog
from services.simulation.simulator import DEFAULT_TABLES, Session

COMPOSITION = Composition.demo()
CASHIER = COMPOSITION.keyring.key(Principal.CASHIER)


def deposit(n: int, amount: int, transfer_id: str | None = None, account: str = "player:001") -> Envelope:
    """The cashier's n-th deposit (``transfer_id``: the id a retry reuses)."""
    payload: dict[str, Any] = {"account_id": account, "amount_minor": amount, "currency": "EUR"}
    if transfer_id is not None:
        payload["transfer_id"] = transfer_id
    env = request("Deposit", topics.WALLET_REQUESTS, account, payload, event_id=name_id("test", str(n)),
                  occurred_at="2026-11-28T12:00:00.000Z", producer="cashier")  # fmt: skip
    return authenticate(env, CASHIER)


def wallet_runner(log: EmbeddedLog) -> Runner[Any]:
    """The wallet stage over ``log``, snapshotting often."""
    return Runner(log, COMPOSITION.wallet_stage(), "settlement.wallet", snapshot_every=50)


def wallet_events(log: EmbeddedLog) -> list[Envelope]:
    """Every record of the wallet stage's event stream, in log order."""
    return [parse_record(raw) for _o, t, _k, raw in log.iter_all() if t == topics.WALLET_EVENTS]


def test_a_transfer_id_used_far_back_is_still_refused_after_a_restart(tmp_path: Path) -> None:
    """A deposit's transfer id, followed by hundreds of other transfers and snapshots, is not in any
    snapshot, and after a restart a retry under it is a no-op and other content under it a conflict."""
    db = tmp_path / "log.db"
    with EmbeddedLog(db) as log:
        log.append([deposit(0, 700, transfer_id="cashier/desk-0001")])
        log.append([deposit(n, 10 + n, account=f"player:{n % 7:03d}") for n in range(1, 400)])
        runner = wallet_runner(log)
        run_until_idle([runner])
        runner.snapshot()
        blob = log.load_snapshot("settlement.wallet")
        assert blob is not None and b"cashier/desk-0001" not in blob[2]
        assert json.loads(blob[2])["inner"]["transfers"] == {}
    with EmbeddedLog(db) as log:
        again = wallet_runner(log)
        assert again.restored_from == again.position > 0
        before = len(wallet_events(log))
        log.append([deposit(1000, 700, transfer_id="cashier/desk-0001")])  # a retry: same content
        log.append([deposit(1001, 900, transfer_id="cashier/desk-0001")])  # another amount under the id
        run_until_idle([again])
        new = wallet_events(log)[before:]
        assert [e.type for e in new] == ["TransferRefused"]
        assert new[0].payload["reason"] == RefusalReason.TRANSFER_ID_CONFLICT.value
        assert new[0].payload["transfer_id"] == "cashier/desk-0001"


def test_an_older_snapshot_with_its_transfers_is_moved_to_the_table_once(tmp_path: Path) -> None:
    """A format-3 snapshot (the transfer ids in it) still restores: its ids go to the ``kept`` table, a
    format-4 snapshot without them replaces it, and a retry of one of those ids is still refused."""
    db = tmp_path / "log.db"
    with EmbeddedLog(db) as log:
        log.append([deposit(n, 100 + n, transfer_id=f"cashier/desk-{n}") for n in range(30)])
        runner = wallet_runner(log)
        run_until_idle([runner])
        runner.snapshot()
        offset, kind, blob = log.load_snapshot("settlement.wallet") or (0, "", b"")
        rows = log._conn.execute(
            "SELECT key, value FROM kept WHERE consumer = 'settlement.wallet'"
        ).fetchall()
        assert len(rows) == 30
        old = json.loads(blob)
        old["format"], old["processor"] = SNAPSHOT_READ[3], "3:" + kind.partition(":")[2]
        old["inner"]["transfers"] = dict(rows)
        with log.transaction():
            log._conn.execute("DELETE FROM kept")
            log.save_snapshot("settlement.wallet", offset, old["processor"], snapshot.to_bytes(old))
    with EmbeddedLog(db) as log:
        again = wallet_runner(log)
        assert again.restored_from == offset
        moved = log._conn.execute("SELECT count(*) FROM kept").fetchone()[0]
        assert moved == 30
        now = log.load_snapshot("settlement.wallet")
        assert now is not None and now[1] == again._kind and json.loads(now[2])["inner"]["transfers"] == {}
        before = len(wallet_events(log))
        log.append([deposit(99, 5, transfer_id="cashier/desk-3")])
        run_until_idle([again])
        assert [e.payload["reason"] for e in wallet_events(log)[before:]] == ["transfer_id_conflict"]


def _entries(data: Any) -> int:
    """How many scalar values a JSON document holds (what a snapshot's size grows with)."""
    if isinstance(data, dict):
        return sum(_entries(v) for v in data.values())
    if isinstance(data, list):
        return sum(_entries(v) for v in data)
    return 1


def _snapshot_entries(db: Path, coups: int) -> dict[str, int]:
    """Play ``coups`` coups at two tables, then each runner's snapshot, counted in entries."""
    bus = EmbeddedBus(db, demo_pipeline(), event_driven=True)
    try:
        Session(bus, seed=3).run(list(DEFAULT_TABLES[:2]), coups)
        for runner in bus.runners:
            runner.snapshot()
    finally:
        bus.close()
    with EmbeddedLog(db) as log:
        found = {name: log.load_snapshot(name) for name, _ in demo_pipeline()}
    return {name: _entries(json.loads(snap[2])["inner"]) for name, snap in found.items() if snap is not None}


def test_the_snapshots_do_not_grow_with_the_coups_settled(tmp_path: Path) -> None:
    """The same tables and players after 4 and after 16 coups: the wallet, payout, dealer and audit
    snapshots hold as many entries (transfer ids and settled bets are in the ``kept`` table)."""
    short = _snapshot_entries(tmp_path / "short.db", 4)
    long = _snapshot_entries(tmp_path / "long.db", 16)
    for name in ("settlement.wallet", "settlement.payout", "dealer", "audit"):
        assert long[name] == short[name], (name, short[name], long[name])
    with EmbeddedLog(tmp_path / "long.db") as log:
        kept = dict(log._conn.execute("SELECT consumer, count(*) FROM kept GROUP BY consumer").fetchall())
    assert kept["settlement.wallet"] > 16 and kept["audit"] > 16  # what the snapshots do not hold


def test_a_start_reads_no_applied_id(tmp_path: Path) -> None:
    """Restoring a runner queries nothing of the ``applied`` table but a range delete past its snapshot;
    the applied ids are looked up batch by batch, as records come."""
    db = tmp_path / "log.db"
    with EmbeddedLog(db) as log:
        log.append([deposit(n, 10 + n) for n in range(60)])
        runner = wallet_runner(log)
        run_until_idle([runner])
        runner.snapshot()
    with EmbeddedLog(db) as log:
        statements: list[str] = []
        log._conn.set_trace_callback(statements.append)
        again = wallet_runner(log)
        log._conn.set_trace_callback(None)
        reads = [s for s in statements if "applied" in s and not s.startswith("DELETE")]
        assert reads == [] and again.restored_from == again.position
        assert deposit(5, 15).event_id in again.state.applied
        assert deposit(500, 1).event_id not in again.state.applied


@dataclass(slots=True)
class Names:
    """A toy state: one kept map."""

    names: Kept = field(default_factory=Kept)


class Renamer(Processor[Names]):
    """Keeps each inbox record's ``value`` under its key and says what the key held before."""

    name = "renamer"
    inputs = (topics.TABLE_INBOX,)

    def initial(self) -> Names:
        """Nothing kept."""
        return Names()

    def handle(self, state: Names, record: Envelope) -> tuple[Names, list[Draft]]:
        """Keep the value; one output naming the value it replaces."""
        before = state.names.get(record.key)
        state.names[record.key] = str(record.payload["value"])
        return state, [Draft("Renamed", topics.TABLE_EVENTS, record.key, {"before": before})]


def rename(n: int, key: str, value: str) -> Envelope:
    """The n-th toy input: ``key`` now holds ``value``."""
    return request("Rename", topics.TABLE_INBOX, key, {"value": value}, event_id=name_id("rename", str(n)),
                   occurred_at="2026-11-28T12:00:00.000Z", producer="operator")  # fmt: skip


def test_a_key_kept_again_after_a_snapshot_reads_as_the_snapshot_saw_it_after_a_restart(
    tmp_path: Path,
) -> None:
    """A kept key written before a snapshot and again after it, in a batch the snapshot does not cover:
    a restart from that snapshot reads the earlier value again, so re-applying the later records
    re-derives the very outputs already in the log (a different one would be a LogConflict)."""
    db = tmp_path / "log.db"
    with EmbeddedLog(db) as log:
        log.append([rename(0, "k", "a"), rename(1, "k", "b"), rename(2, "k", "c")])
        runner = Runner(log, Renamer(), batch_limit=1, snapshot_every=1000)
        runner.step_batch()
        runner.snapshot()  # at the first record: "k" holds "a"
        with log.transaction():  # the next two in one transaction, "k" written twice in it
            runner.step_batch()
            runner.step_batch()
        first = [
            parse_record(raw).payload["before"]
            for _o, t, _k, raw in log.iter_all()
            if t == topics.TABLE_EVENTS
        ]
        assert first == [None, "a", "b"]
        again = Runner(log, Renamer(), batch_limit=1, snapshot_every=1000)
        assert again.restored_from == 1 and again.state.inner.names.get("k") == "a"
        run_until_idle([again])  # re-applies the two records after the snapshot
        outputs = [
            parse_record(raw).payload["before"]
            for _o, t, _k, raw in log.iter_all()
            if t == topics.TABLE_EVENTS
        ]
        assert outputs == first and again.state.inner.names.get("k") == "c"
