"""Snapshots are data (issue #8): typed JSON that round-trips every processor's state exactly, and a
crafted snapshot — a pickle that would run code, JSON of the wrong shape — is ignored, never run."""

from __future__ import annotations

import json
import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.core.processor import Processor
from services.runtime.compose import demo_pipeline
from services.runtime.embedded import snapshot
from services.runtime.embedded.runner import SNAPSHOT_FORMAT, Runner, run_until_idle
from services.runtime.embedded.store import EmbeddedLog
from services.simulation.simulator import DEFAULT_TABLES, Session
from tests.helpers.membus import MemBus


@pytest.fixture(scope="module")
def played() -> MemBus:
    """Every variant played for a few coups in memory: states with tables, shoes, coups and wallets."""
    bus = MemBus()
    Session(bus, seed=5).run(list(DEFAULT_TABLES), 3)
    return bus


def test_every_processor_state_round_trips_exactly(played: MemBus) -> None:
    """Each processor's state, written as a snapshot and read back by its type, equals the original,
    and writing it again gives the same bytes."""
    for proc, state in played.procs:
        tp = snapshot.state_type(proc)
        blob = snapshot.dumps(state.inner, tp)
        back = snapshot.loads(blob, tp)
        assert back == state.inner, proc.name
        assert snapshot.dumps(back, tp) == blob, proc.name
        assert json.loads(blob)  # plain JSON, nothing else


def test_a_restart_from_json_snapshots_writes_the_uninterrupted_log(tmp_path: Path) -> None:
    """The real pipeline snapshotting often and restarted from its snapshots (every runner resumes
    from one) writes every stream exactly as an uninterrupted run does."""

    def play(db: Path, restart: bool) -> dict[tuple[str, str], list[bytes]]:
        with EmbeddedLog(db) as log:

            def fresh() -> list[Runner[Any]]:
                return [Runner(log, p, n, snapshot_every=40, batch_limit=25) for n, p in demo_pipeline()]

            runners = fresh()
            cursors: dict[tuple[str, str], int] = {}

            class Bus:
                def publish(self, envelopes: list[Any]) -> None:
                    log.append(envelopes)

                def drain(self) -> None:
                    nonlocal runners
                    if restart:  # every drain starts from the snapshots, as after a crash
                        runners = fresh()
                        # every runner that has a snapshot resumes from it (the offsets a runner reaches
                        # before its first depend on the records between its inputs, attestations too)
                        assert all(r.restored_from for r in runners if log.load_snapshot(r.name))
                    run_until_idle(runners, seal=True)  # the session drains: the pipeline goes idle

                def read(self, topic: str, key: str) -> list[Any]:
                    from services.core.envelope import parse_record  # noqa: PLC0415

                    rows = log.read_key(topic, key, cursors.get((topic, key), 0), 1 << 30)
                    if rows:
                        cursors[(topic, key)] = rows[-1][0]
                    return [parse_record(raw) for *_, raw in rows]

            bus: Any = Bus()
            session = Session(bus, seed=9)
            session.run(list(DEFAULT_TABLES[:3]), 3)
            # every runner that had a snapshot's worth of input snapshotted (the casework stage gets none
            # in a session, the cage stage only the session's few deposits)
            fed = [r for r in runners if len(log.read(tuple(r.processor.inputs), 0, 40)) >= 40]
            assert len(fed) >= len(runners) - 2
            assert all(log.load_snapshot(r.name) is not None for r in fed)
            streams: dict[tuple[str, str], list[bytes]] = {}
            for _o, topic, key, raw in log.iter_all():
                streams.setdefault((topic, key), []).append(raw)
            return streams

    restarted, straight = play(tmp_path / "restarted.db", True), play(tmp_path / "straight.db", False)
    for streams in (restarted, straight):  # signed heads follow the batches, which a restart moves:
        heads = {}  # in either log, every chain's last record is attested
        for (topic, _key), raws in sorted(streams.items()):
            if topic == "casino.attest":
                for raw in raws:
                    for h in json.loads(raw)["payload"]["heads"]:
                        heads[(h["topic"], h["key"])] = (h["seq"], h["hash"])
        chained = {
            tk: (json.loads(raws[-1])["seq"], json.loads(raws[-1])["hash"])
            for tk, raws in streams.items()
            if json.loads(raws[-1])["seq"] is not None and tk[0] != "casino.attest"
        }
        assert chained and heads == chained
    assert {k: v for k, v in restarted.items() if k[0] != "casino.attest"} == {
        k: v for k, v in straight.items() if k[0] != "casino.attest"
    }


class Evil:
    """Unpickling this writes a file: the proof that a pickle snapshot would run code."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.path}",))


@dataclass(frozen=True, slots=True)
class Box:
    """A toy processor state."""

    total: int = 0
    names: tuple[str, ...] = ()


class Counter(Processor[Box]):
    """Counts inbox records and remembers their keys (a dataclass state, so snapshots are typed)."""

    name = "counter"
    inputs = ("casino.table.inbox",)

    def initial(self) -> Box:
        """Nothing counted."""
        return Box()

    def handle(self, state: Box, record: Any) -> tuple[Box, list[Any]]:
        """One more."""
        return Box(state.total + 1, (*state.names, record.key)), []


def _filled(db: Path) -> EmbeddedLog:
    from tests.integration.test_embedded_log import write_inputs  # noqa: PLC0415

    log = EmbeddedLog(db)
    write_inputs(log, 30)
    run_until_idle([Runner(log, Counter(), snapshot_every=10)])
    return log


CRAFTED_JSON: list[Any] = [
    {"format": "casino-ledger/snapshot-3", "inner": {"total": "7", "names": []}, "heads": [], "records": 1},
    {"format": "casino-ledger/snapshot-3", "processor": "x", "inner": {"total": 7, "names": []},
     "heads": [], "records": 1},
    {"total": 7},
    [1, 2, 3],
    {"format": "casino-ledger/snapshot-3", "processor": None, "inner": {"total": 7, "names": [],
     "__class__": "os.system"}, "heads": [], "records": 1},
    {"format": "casino-ledger/snapshot-3", "processor": None, "inner": {"total": True, "names": []},
     "heads": [], "records": 1},
    {"format": "casino-ledger/snapshot-3", "processor": None, "inner": {"total": 7, "names": [[["x"]]]},
     "heads": [], "records": 1},
]  # fmt: skip
"""Valid JSON of the wrong shape (``processor: None`` is replaced by the runner's own kind)."""


@pytest.mark.parametrize("case", range(len(CRAFTED_JSON) + 3))
def test_a_crafted_snapshot_is_ignored_and_the_state_rebuilt(tmp_path: Path, case: int) -> None:
    """A pickle that would write a file (under the old format's kind or the current one), bytes that are
    not JSON, or JSON of the wrong shape: the file is never written, the snapshot is ignored, the state
    is rebuilt from the log and equals the honest one."""
    marker = tmp_path / "pwned"
    with _filled(tmp_path / "log.db") as log:
        honest = Runner(log, Counter())
        assert honest.restored_from == 30
        kind = f"{SNAPSHOT_FORMAT}:{Counter.__module__}.{Counter.__qualname__}"
        if case < len(CRAFTED_JSON):
            data = CRAFTED_JSON[case]
            if isinstance(data, dict) and data.get("processor", "") is None:
                data = {**data, "processor": kind}
            blob, kinds = json.dumps(data).encode(), [kind]
        elif case == len(CRAFTED_JSON):
            blob, kinds = b"\x80\x04 not json {", [kind]
        else:
            blob = pickle.dumps(Evil(str(marker)))
            old_kind = f"2:{Counter.__module__}.{Counter.__qualname__}"  # a pickle era snapshot
            kinds = [kind if case == len(CRAFTED_JSON) + 1 else old_kind]
        log.save_snapshot("counter", 30, kinds[0], blob)
        resumed = Runner(log, Counter())
        assert not marker.exists()
        assert resumed.restored_from is None
        run_until_idle([resumed])
        assert resumed.state.inner == honest.state.inner
        assert resumed.state.inner.total == 30


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
        max_leaves=30,
    )
)
def test_any_json_decodes_or_is_refused_with_a_snapshot_error(data: Any) -> None:
    """Whatever JSON a snapshot holds, decoding it as a real processor state either gives that type or
    raises ``SnapshotError``: never another exception."""
    for _name, proc in demo_pipeline():
        tp = snapshot.state_type(proc)
        try:
            value = snapshot.loads(json.dumps(data).encode(), tp)
        except snapshot.SnapshotError:
            continue
        assert isinstance(value, type(proc.initial()))


def test_deeply_nested_json_is_refused_not_crashed() -> None:
    """A snapshot nested deeper than the interpreter's recursion limit is a ``SnapshotError``."""
    blob = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(snapshot.SnapshotError):
        snapshot.loads(blob, snapshot.state_type(demo_pipeline()[0][1]))


def test_audit_state_with_a_coup_in_play_round_trips() -> None:
    """Audit's trail of an open coup (the core coup record's bets, cards and decisions, a payout kept
    as the Payout it settles, a shoe in play) is data the snapshot codec writes and reads back exactly:
    its inherited fields' types resolve too."""
    from services.audit.processor import Audit, CoupTrail, ShoeTrail  # noqa: PLC0415
    from services.core.ledger import Payout  # noqa: PLC0415

    audit = Audit(signing=None)
    state = audit.initial()
    trail = state.coups["T1/S1/1"] = CoupTrail("T1", "T1/S1/1", shoe_id="S1", number=1)
    trail.bet("b1", "player:1", "player", 500)
    trail.card("player", "9S", 4)
    trail.decision("player", "stand", "dealer")
    rows = (("table:T1:escrow", -500), ("player:1", 1000), ("table:T1:house", -500))
    trail.recorded["b1"] = Payout("b1", "player:1", "player", 500, "win", 500, 0, 1000, rows)
    trail.paid_by["b1"] = "e-9"
    trail.hands = {"player": {"cards": ["9S"], "total": 9}}
    state.shoes["S1"] = ShoeTrail("ab" * 32, [(4, "9S", "e-1", "T1/S1/1")])
    tp = snapshot.state_type(audit)
    back = snapshot.loads(snapshot.dumps(state, tp), tp)
    assert back == state and back.coups["T1/S1/1"].recorded["b1"].postings[1] == ("player:1", 1000)
