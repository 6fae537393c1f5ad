"""The whole product on the embedded default: the demo, its log, crashes and bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from services.core import topics
from services.runtime.compose import demo_pipeline
from services.runtime.embedded.bus import EmbeddedBus
from services.runtime.embedded.store import EmbeddedLog
from services.runtime.keyring import demo_keyring
from services.runtime.replay import read_db, replay
from services.simulation.simulator import DEFAULT_TABLES, Session
from tests.helpers.kill import run_with_kills
from tests.helpers.streams import log_streams

CLI = [sys.executable, "-m", "services.cli"]
ENV = {**os.environ, "LOG_LEVEL": "WARNING"}


def _play(db: Path, seed: int, coups: int, tables: int = len(DEFAULT_TABLES)) -> None:
    bus = EmbeddedBus(db, demo_pipeline())
    try:
        Session(bus, seed=seed).run(list(DEFAULT_TABLES[:tables]), coups)
    finally:
        bus.close()


def test_demo_command_runs_every_variant_clean(tmp_path: Path) -> None:
    """`casino-ledger demo` plays every variant, prints the per-table summary and a clean audit verdict."""
    db = tmp_path / "demo.db"
    done = subprocess.run([*CLI, "demo", "--coups", "8", "--db", str(db)], capture_output=True, text=True,
                          env=ENV, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "audit verdict: clean" in done.stdout
    for spec in DEFAULT_TABLES:
        assert spec.table_id in done.stdout
        assert spec.variant in done.stdout
    assert db.exists()


def test_demo_opens_as_many_tables_as_asked_cycling_the_variants(tmp_path: Path) -> None:
    """`--tables 9` opens the seven default tables and two more of the first variants, all played."""
    db = tmp_path / "nine.db"
    done = subprocess.run([*CLI, "demo", "--tables", "9", "--coups", "2", "--db", str(db)],
                          capture_output=True, text=True, env=ENV, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    records = [json.loads(raw) for _, _, _, raw in EmbeddedLog(db, readonly=True).iter_all()]
    opened = [r["payload"]["table_id"] for r in records if r["type"] == "TableOpened"]
    assert opened == [s.table_id for s in DEFAULT_TABLES] + ["T08-punto-banco", "T09-ez-baccarat"]
    assert "T09-ez-baccarat" in done.stdout


@pytest.mark.parametrize("args", [["--tables", "0"], ["--coups", "0"]])
def test_demo_refuses_an_empty_session(args: list[str], tmp_path: Path) -> None:
    """A session with no table or no coup is bad input: one line on stderr, exit status 2."""
    done = subprocess.run([*CLI, "demo", *args, "--db", str(tmp_path / "x.db")], capture_output=True,
                          text=True, env=ENV, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.startswith("casino-ledger: error:") and done.stderr.count("\n") == 1


def test_same_seed_gives_an_identical_export(tmp_path: Path) -> None:
    """Two runs with one seed export byte-identical JSONL; the export holds every record in log order."""
    outs = []
    for n in (1, 2):
        db, out = tmp_path / f"run{n}.db", tmp_path / f"run{n}.jsonl"
        _play(db, seed=11, coups=4)
        done = subprocess.run([*CLI, "export", "--db", str(db), "--out", str(out)], capture_output=True,
                              text=True, env=ENV, timeout=120, check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr
        outs.append(out.read_bytes())
        assert outs[-1].count(b"\n") == EmbeddedLog(db, readonly=True).count()
    assert outs[0] == outs[1]
    other = tmp_path / "other.db"
    _play(other, seed=12, coups=4)
    assert replay(read_db(other)).digest != replay(read_db(tmp_path / "run1.db")).digest


def test_replay_command_reports_clean_and_the_digest(tmp_path: Path) -> None:
    """`casino-ledger replay --db` exits 0 on an untouched log with the keys supplied and prints the same
    digest as in-process; without them, the same log is not plain ``clean`` (exit 1)."""
    db = tmp_path / "r.db"
    _play(db, seed=5, coups=4, tables=2)
    public = (
        tmp_path / "public-keyring.json"
    )  # the pipeline signs with the demo key; the regulator supplies it
    public.write_text(json.dumps(demo_keyring().public_document()), encoding="utf-8")
    done = subprocess.run([*CLI, "replay", "--db", str(db), "--keys", str(public)], capture_output=True,
                          text=True, env=ENV, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    bare = {k: v for k, v in ENV.items() if k != "CASINO_PUBLIC_KEYRING"}
    unsupplied = subprocess.run([*CLI, "replay", "--db", str(db)], capture_output=True, text=True, env=bare,
                                timeout=120, check=False)  # fmt: skip
    assert (
        unsupplied.returncode == 1 and "verdict: clean (keys not supplied independently)" in unsupplied.stdout
    )
    assert replay(read_db(db)).digest in done.stdout


def test_missing_log_is_a_clear_error(tmp_path: Path) -> None:
    """Export and replay of a log that does not exist say so on stderr and exit with status 2."""
    for cmd in (["export", "--db", str(tmp_path / "nope.db"), "--out", str(tmp_path / "x")],
                ["replay", "--db", str(tmp_path / "nope.db")]):  # fmt: skip
        done = subprocess.run([*CLI, *cmd], capture_output=True, text=True, env=ENV, timeout=60, check=False)
        assert done.returncode == 2
        assert "nope.db" in done.stderr


def kill_delay(session_s: float, kills: int = 20) -> float:
    """The longest delay before a kill, from how long the uninterrupted session took on this machine now:
    20 kills at a fixed 0.2 s let a fast machine finish the session after a few of them (the session of
    3 x 12 coups took 0.3 s on 2026-11-24's machine), and kills that never land test nothing. Each life
    then covers at most a share of the session, whatever the machine's speed or load."""
    return min(0.2, max(0.005, 2 * session_s / kills))


def _session_worker(
    db: Path, seed: int, coups: int, *, event_driven: bool
) -> Callable[[Callable[[], None]], None]:
    def work(ready: Callable[[], None]) -> None:
        bus = EmbeddedBus(db, demo_pipeline(), event_driven=event_driven)
        ready()
        try:
            Session(bus, seed=seed).run(list(DEFAULT_TABLES[:3]), coups)
        finally:
            bus.close()

    return work


@pytest.mark.parametrize("event_driven", [False, True], ids=["advancing", "event-driven"])
def test_sigkill_anywhere_loses_nothing_and_pays_nothing_twice(tmp_path: Path, event_driven: bool) -> None:
    """The whole pipeline, SIGKILLed at 20 seeded moments and resumed each time (the simulator restarts
    from scratch; the log ignores the records it re-sends), ends with every stream and the replay digest
    of an uninterrupted run: nothing lost, nothing paid twice. Whether the session advances the bus or
    waits on it (as the demo does)."""
    ref, db = tmp_path / "ref.db", tmp_path / "killed.db"
    started = time.perf_counter()
    _play(ref, seed=21, coups=12, tables=3)
    report = run_with_kills(
        _session_worker(db, 21, 12, event_driven=event_driven),
        kills=20,
        seed=20261122,
        max_delay_s=kill_delay(time.perf_counter() - started),
        timeout_s=120,
    )
    assert report.kills == 20
    # every stream but the signed heads, which a killed run makes at its own moments
    assert log_streams(db, signed_heads=False) == log_streams(ref, signed_heads=False)
    got, want = replay(read_db(db)), replay(read_db(ref))
    assert got.clean, got.to_dict()
    assert got.digest == want.digest


@pytest.mark.parametrize("event_driven", [False, True], ids=["advancing", "event-driven"])
def test_malformed_input_is_dead_lettered_and_play_goes_on(tmp_path: Path, event_driven: bool) -> None:
    """Garbage bytes and a float amount on the input topics become dead letters with a reason code,
    and the session still settles every accepted bet."""
    db = tmp_path / "bad.db"
    bus = EmbeddedBus(db, demo_pipeline(), event_driven=event_driven)
    try:
        bus.log.append_raw(topics.WALLET_REQUESTS, "player:001", b"{not json")
        bus.log.append_raw(topics.TABLE_INBOX, "T01-punto-banco", b'{"type": "OpenTable"}')
        Session(bus, seed=9).run(list(DEFAULT_TABLES[:1]), 5)
    finally:
        bus.close()
    log = EmbeddedLog(db, readonly=True)
    dead = [json.loads(raw) for _, t, _, raw in log.iter_all() if t == topics.DEADLETTER]
    seen = {(d["producer"], d["payload"]["source_topic"], d["payload"]["reason"]) for d in dead}
    assert seen == {  # every processor that reads a topic dead-letters what it cannot read there
        ("dealer", topics.TABLE_INBOX, "undecodable"),
        ("settlement", topics.WALLET_REQUESTS, "undecodable"),
        ("audit", topics.WALLET_REQUESTS, "undecodable"),
    }
    assert any(d["payload"]["original"] == "{not json" for d in dead)
    streams = log_streams(db)
    accepted = sum(
        1
        for (t, _), rows in streams.items()
        if t == topics.TABLE_EVENTS
        for r in rows
        if b'"BetAccepted"' in r
    )
    applied = sum(
        1
        for (t, _), rows in streams.items()
        if t == topics.WALLET_EVENTS
        for r in rows
        if b'"PayoutApplied"' in r
    )
    assert accepted > 0 and accepted == applied


@pytest.mark.parametrize("seed", [1, 2])
def test_money_is_conserved_over_a_whole_demo(tmp_path: Path, seed: int) -> None:
    """Over a whole session of every variant, all postings of every transfer sum to zero per transfer
    and in total, and every table's escrow ends empty."""
    db = tmp_path / "m.db"
    _play(db, seed=seed, coups=5)
    totals: dict[str, int] = {}
    for _o, topic, _k, raw in EmbeddedLog(db, readonly=True).iter_all():
        if topic != topics.WALLET_EVENTS:
            continue
        rows = json.loads(raw)["payload"].get("postings") or []
        assert sum(r["amount_minor"] for r in rows) == 0
        for r in rows:
            totals[r["account"]] = totals.get(r["account"], 0) + r["amount_minor"]
    assert sum(totals.values()) == 0
    assert all(v == 0 for a, v in totals.items() if a.endswith(":escrow")), totals


def _demo_log(db: Path, env: dict[str, str]) -> list[bytes]:
    args = ["demo", "--seed", "5", "--tables", "2", "--coups", "3", "--db", str(db), "--quiet"]
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return [raw for *_, raw in EmbeddedLog(db, readonly=True).iter_all()]


def test_demo_keyrings_make_the_shoes(tmp_path: Path) -> None:
    """The demo writes its own 0600 keyring beside its db; two demos of one seed with different keyrings
    deal different shoes, and a demo on the same keyring (CASINO_KEYRING) writes a byte-identical log."""
    env = {k: v for k, v in ENV.items() if k not in ("CASINO_KEYRING", "CASINO_DEMO_MODE")}
    a = _demo_log(tmp_path / "a.db", env)
    b = _demo_log(tmp_path / "b.db", env)
    ring = tmp_path / "a.db.keyring.json"
    assert ring.exists() and (ring.stat().st_mode & 0o777) == 0o600
    same = _demo_log(tmp_path / "c.db", {**env, "CASINO_KEYRING": str(ring)})
    assert not (tmp_path / "c.db.keyring.json").exists()

    def shoes(log: list[bytes]) -> list[str]:
        return [json.loads(r)["payload"]["commitment"] for r in log if json.loads(r)["type"] == "ShoeOpened"]

    assert shoes(a) and set(shoes(a)).isdisjoint(shoes(b))
    assert same == a
