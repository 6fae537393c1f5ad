"""Standby stores on a real broker (Tansu) (issue #31, docs/adr/0014-standby-stores.md).

In one process first: a worker's standby rounds take another member's latest changelog snapshot, and
the kept entries before it, into their own store, in chunks, never a scope the worker owns or is
restoring. Then as operators run it: two settlement workers with ``CASINO_STANDBY_STORES=true``, one
SIGKILLed; the survivor takes its partition from its own warm store (``source: local``, no kept entry
read), where a store on another machine reads every transfer id of the partition (the second test of
:mod:`tests.kafka.test_kafka_kept`), and still refuses a transfer id the dead member applied.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer, TopicPartition  # type: ignore[import-untyped]
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.core import topics
from services.core.boundary import own_namespace
from services.core.envelope import Envelope, request
from services.core.trust import Principal, authenticate
from services.runtime.kafka import state as state_store
from services.runtime.kafka.bus import Workers, quick_settings
from services.runtime.kafka.standby import Standby
from services.runtime.kafka.topic_io import aconsume_raw, aproduce, key_partition
from services.runtime.kafka.worker import Shell, ensure_topics, service_topics
from services.runtime.keyring import demo_keyring
from services.runtime.settings import Settings
from tests.kafka.test_kafka_restore_chain import toy_worker
from tests.kafka.test_kafka_runtime import settings_for
from tests.kafka.toy import Toy

pytestmark = pytest.mark.kafka

WAIT_S = 120.0
"""Upper bound on any wait (a safety net against a hang, not a timing assertion)."""


async def _shell(settings: Settings, path: Path) -> Shell:
    """A toy worker (:func:`toy_worker`) whose topics and changelog exist."""
    await ensure_topics(settings, service_topics([Toy()]))
    shell = await toy_worker(settings, path)
    await shell.ensure_changelogs()
    return shell


async def _write_changelog(
    settings: Settings, stage: str, scope: int, records: list[tuple[bytes, bytes]]
) -> int:
    """Write ``records`` (key, value) to the scope's changelog partition; returns the last one's offset."""
    topic = settings.topic(state_store.changelog_topic(stage))
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap_list, acks="all")
    await producer.start()
    try:
        last = -1
        for key, value in records:
            sent = await producer.send_and_wait(topic, value, key=key, partition=scope)
            last = sent.offset
        return last
    finally:
        await producer.stop()


def _kept(stage: str, scope: int, names: range) -> list[tuple[bytes, bytes]]:
    return [(state_store.kept_key(stage, scope, "transfers", f"t{i}"), f"v{i}".encode()) for i in names]


@pytest.mark.asyncio
async def test_standby_rounds_take_other_members_snapshots_in_chunks_never_an_owned_scope(
    kafka_broker: str, tmp_path: Path
) -> None:
    settings = settings_for(kafka_broker)
    shell = await _shell(settings, tmp_path / "store")
    [pipe] = shell.pipes
    store = shell.store
    assert store is not None
    stage = pipe.stage
    # another member's changelog on partition 1: seven kept entries, then its snapshot; on 0 a snapshot
    first = [*_kept(stage, 1, range(7)), (state_store.scope_key(stage, 1), b"snap-1")]
    snap_at = await _write_changelog(settings, stage, 1, first)
    await _write_changelog(settings, stage, 0, [(state_store.scope_key(stage, 0), b"snap-0")])
    reader = await shell.reader()

    # the restore's path, three offsets at a time: every entry before the snapshot, the snapshot last
    assert await shell.absorb(reader, pipe, 1, since=0, offset=snap_at, blob=b"snap-1", chunk=3) == 7
    assert [store.kept_value(pipe.stored_as, 1, "transfers", f"t{i}") for i in range(7)] == [
        f"v{i}" for i in range(7)
    ]
    assert store.snapshot(pipe.stored_as, 1) == (snap_at, b"snap-1")
    # told to stop before a write: nothing of it is written
    fresh = await _shell(settings, tmp_path / "other")
    assert fresh.store is not None
    assert await fresh.absorb(reader, fresh.pipes[0], 1, since=0, offset=snap_at, blob=b"snap-1",
                              chunk=3, unless=lambda: True) is None  # fmt: skip
    assert fresh.store.snapshot(pipe.stored_as, 1) is None
    assert fresh.store.kept_value(pipe.stored_as, 1, "transfers", "t0") is None

    # a standby round on a worker owning partition 0 of the input: it takes scope 1, not scope 0
    owned = {TopicPartition(settings.topic(topics.WALLET_REQUESTS), 0)}
    fresh.owned, fresh.restored = owned, set(owned)
    standby = Standby(fresh)
    assert await standby.round() == 1
    assert fresh.store.snapshot(pipe.stored_as, 1) == (snap_at, b"snap-1")
    assert fresh.store.kept_value(pipe.stored_as, 1, "transfers", "t6") == "v6"
    assert fresh.store.snapshot(pipe.stored_as, 0) is None
    taken = fresh.metrics.registry.get_sample_value("casino_standby_snapshots_total", {"service": "toy"})
    assert taken == 1
    # nothing new: nothing taken; kept entries whose snapshot is not written yet: not taken ahead of it
    assert await standby.round() == 0
    await _write_changelog(settings, stage, 1, _kept(stage, 1, range(7, 9)))
    assert await standby.round() == 0
    assert fresh.store.kept_value(pipe.stored_as, 1, "transfers", "t7") is None
    # their snapshot: taken, with the entries since the last one
    newer = await _write_changelog(settings, stage, 1, [(state_store.scope_key(stage, 1), b"snap-1b")])
    assert await standby.round() == 1
    assert fresh.store.snapshot(pipe.stored_as, 1) == (newer, b"snap-1b")
    assert [fresh.store.kept_value(pipe.stored_as, 1, "transfers", f"t{i}") for i in (7, 8)] == ["v7", "v8"]
    # while a restore is on (assigned, not restored yet) the standby writes nothing
    fresh.owned, fresh.restored = owned, set()
    await _write_changelog(settings, stage, 1, [(state_store.scope_key(stage, 1), b"snap-1c")])
    assert await standby.round() == 0
    assert fresh.store.snapshot(pipe.stored_as, 1) == (newer, b"snap-1b")
    for s in (shell, fresh):
        assert s.producer is not None
        await s.producer.stop()
        await s.close()
        assert s.store is not None
        s.store.close()
    assert standby.reader is not None
    await standby.reader.stop()


Step = tuple[str, int]
"""One move of the changelog's writers or of the standby: (what, how many kept entries)."""

STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("snapshot"), st.integers(0, 7)),  # the owner: kept entries, then their snapshot
        st.tuples(st.just("death"), st.integers(1, 7)),  # the owner killed after its kept entries
        st.tuples(st.just("round"), st.just(0)),  # the standby's round
        st.tuples(st.just("owned_round"), st.just(0)),  # a round while the scope is the standby's own
        st.tuples(st.just("restoring_round"), st.just(0)),  # a round while the standby restores
    ),
    min_size=1,
    max_size=12,
)


async def _play(
    broker: str, steps: list[Step], base: Path
) -> tuple[state_store.LocalStore, state_store.LocalStore, str, list[str], int]:
    """Play ``steps`` on a fresh changelog (scope 1 of the toy stage) with a standby worker following it,
    then one last round: the standby's store, a store restored cold from the changelog, the stage's
    name in them, the kept keys written, and how many of them the last snapshot covers."""
    settings = settings_for(broker)
    standby_shell = await _shell(settings, base / "standby")
    stage, scope = standby_shell.pipes[0].stage, 1
    inputs = TopicPartition(settings.topic(topics.WALLET_REQUESTS), scope)
    standby = Standby(standby_shell)
    keys: list[str] = []
    covered = 0
    store, stored_as = standby_shell.store, standby_shell.pipes[0].stored_as
    assert store is not None
    for what, n in steps:
        if what in ("snapshot", "death"):
            keys += [f"t{len(keys) + i}" for i in range(n)]
            records = _kept(stage, scope, range(len(keys) - n, len(keys)))
            if what == "snapshot":
                records.append((state_store.scope_key(stage, scope), f"snap-{len(keys)}".encode()))
                covered = len(keys)
            if records:
                await _write_changelog(settings, stage, scope, records)
        else:
            owned = {inputs} if what in ("owned_round", "restoring_round") else set()
            standby_shell.owned = owned
            standby_shell.restored = set() if what == "restoring_round" else set(owned)
            before = store.snapshot(stored_as, scope)
            taken = await standby.round()
            after = store.snapshot(stored_as, scope)
            if what != "round":  # never a scope the worker owns or is restoring
                assert taken == 0 and after == before
    standby_shell.owned, standby_shell.restored = set(), set()
    standby.seen.clear()  # the last round looks at every partition again
    await standby.round()
    cold_shell = await _shell(settings, base / "cold")
    [cold_pipe] = cold_shell.pipes
    reader = await cold_shell.reader()
    tp = TopicPartition(settings.topic(state_store.changelog_topic(stage)), scope)
    latest = await cold_shell.latest_snapshot(tp, state_store.scope_key(stage, scope))
    if latest is not None:
        await cold_shell.absorb(reader, cold_pipe, scope, since=0, offset=latest[0], blob=latest[1])
    for s in (standby_shell, cold_shell):
        assert s.producer is not None
        await s.producer.stop()
        await s.close()
    if standby.reader is not None:
        await standby.reader.stop()
    assert cold_shell.store is not None
    return store, cold_shell.store, stored_as, keys, covered


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_a_standby_store_is_what_a_cold_restore_makes_whatever_the_writers_did(
    kafka_broker: str, steps: list[Step]
) -> None:
    """Whatever the owner wrote (snapshots after their kept entries, deaths between the two) and
    whenever the standby's rounds came (some while it owned or restored the scope: they write nothing),
    the standby's store ends holding what a store restored cold from the changelog holds: the same last
    snapshot at the same offset, the same kept entries: those written before it, none after."""
    with tempfile.TemporaryDirectory() as base:
        warm, cold, stored_as, keys, covered = asyncio.run(_play(kafka_broker, steps, Path(base)))
        try:
            assert warm.snapshot(stored_as, 1) == cold.snapshot(stored_as, 1)
            if covered:
                assert warm.snapshot(stored_as, 1)[1] == f"snap-{covered}".encode()
            expected = [f"v{i}" if i < covered else None for i in range(len(keys))]
            assert [warm.kept_value(stored_as, 1, "transfers", k) for k in keys] == expected
            assert [cold.kept_value(stored_as, 1, "transfers", k) for k in keys] == expected
        finally:
            warm.close()
            cold.close()


def deposit_into(account: str, n: int, transfer: str, amount: int) -> Envelope:
    """Cashier deposit ``n`` into ``account`` under transfer id ``transfer``."""
    env = request(
        "Deposit", topics.WALLET_REQUESTS, account,
        {"account_id": account, "amount_minor": amount, "currency": "EUR",
         "transfer_id": f"{own_namespace(Principal.CASHIER.value)}{transfer}"},
        event_id=f"sb-{n}", occurred_at=f"2030-01-01T00:{n // 60:02d}:{n % 60:02d}.000Z",
        producer=Principal.CASHIER.value,
    )  # fmt: skip
    return authenticate(env, demo_keyring().key(Principal.CASHIER))


def _partition(settings: Settings, account: str) -> int:
    """The wallet requests' partition of ``account`` (the producer's default partitioner)."""
    return key_partition(account.encode(), list(range(settings.partitions)))


def _lines(text: str, event: str | None = None) -> list[dict[str, Any]]:
    """The JSON log lines of ``text`` (those of ``event`` only, when given), in order."""
    out = []
    for line in text.splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if isinstance(d, dict) and "event" in d and (event is None or d["event"] == event):
            out.append(d)
    return out


async def _answers(settings: Settings, ids: set[str]) -> dict[str, dict[str, Any]]:
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while True:
        raw = await aconsume_raw(settings, [topics.WALLET_EVENTS])
        found = {}
        for r in raw:
            env = json.loads(r.value or b"")
            if env.get("causation_id") in ids:
                found[env["causation_id"]] = env
        if set(found) == ids:
            return found
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"timed out waiting for {len(ids)} answers, have {len(found)}")
        await asyncio.sleep(0.3)


def _wait(check: Any, what: str) -> Any:
    deadline = time.monotonic() + WAIT_S
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.3)


async def _last_snapshot(settings: Settings, stage: str, scope: int) -> int:
    """The offset of the last snapshot of ``scope`` on its changelog partition (-1: none)."""
    raw = await aconsume_raw(settings, [state_store.changelog_topic(stage)])
    key = state_store.scope_key(stage, scope)
    return max((r.offset for r in raw if r.partition == scope and r.key == key), default=-1)


def test_a_killed_members_partition_is_taken_from_the_survivors_warm_store(
    kafka_broker: str, tmp_path: Path
) -> None:
    settings = quick_settings(
        Settings(bootstrap_servers=kafka_broker, topic_prefix=f"s{uuid.uuid4().hex[:10]}.", partitions=2,
                 demo_mode=True, log_level="INFO", standby_stores=True, state_snapshot_interval_s=0.5),
        env={},
    )  # fmt: skip
    asyncio.run(ensure_topics(settings, list(topics.ALL_TOPICS)))
    first = Workers(settings, tmp_path / "first", services=("settlement",))
    second = Workers(settings, tmp_path / "second", services=("settlement",))
    accounts = [f"player:{i:03d}" for i in range(1, 9)]  # on both partitions
    before = [deposit_into(a, n, f"t{n}", 100) for n, a in enumerate(accounts * 5)]
    first.start()
    second.start()
    try:
        asyncio.run(aproduce(settings, before))
        asyncio.run(_answers(settings, {e.event_id for e in before}))
        # the survivor-to-be stands by for the scope its peer owns, up to the peer's last snapshot
        stage = "settlement.wallet"

        def warm() -> tuple[int, int] | None:
            """The scope and offset of the second member's last standby round after its last restore
            (a scope it stands by for is its peer's), when that offset is the scope's last snapshot."""
            lines = _lines(second.log("settlement"))
            restores = [i for i, d in enumerate(lines) if d["event"] == "restored"]
            since = lines[restores[-1] :] if restores else []
            for d in reversed(since):
                if d["event"] == "standby_taken" and d["stage"] == stage:
                    last = asyncio.run(_last_snapshot(settings, stage, d["scope"]))
                    return (d["scope"], last) if d["changelog_offset"] == last else None
            return None

        scope, _ = _wait(warm, "a standby round at the peer's last snapshot")
        time.sleep(2 * settings.state_snapshot_interval_s)  # the peer writes no later snapshot meanwhile
        scope, last = _wait(warm, "the standby still at the peer's last snapshot")
        assert any(_partition(settings, a) == scope for a in accounts)  # transfer ids to keep there
        first.kill("settlement")

        reused = next(a for a in accounts if _partition(settings, a) == scope)
        after = [deposit_into(reused, 100, f"t{accounts.index(reused)}", 5),  # the dead member applied it
                 deposit_into(reused, 101, "t-new", 7)]  # fmt: skip
        asyncio.run(aproduce(settings, after))
        found = asyncio.run(_answers(settings, {e.event_id for e in after}))
    finally:
        first.stop()
        assert second.stop() == {"settlement": 0}, second.log("settlement")[-3000:]

    assert [found[e.event_id]["type"] for e in after] == ["TransferRefused", "FundsDeposited"]
    assert found[after[0].event_id]["payload"]["reason"] == "transfer_id_conflict"
    taken_over = [d for d in _lines(second.log("settlement"), "state_restored")
                  if d["stage"] == stage and d["scope"] == scope]  # fmt: skip
    assert taken_over, second.log("settlement")[-3000:]
    assert (taken_over[-1]["source"], taken_over[-1]["kept_read"], taken_over[-1]["changelog_offset"]) == (
        "local", 0, last,
    )  # fmt: skip
