"""Poison pills on the embedded log (issue #8): one bad record never stops the pipeline, and the
money of everyone else is what it would have been without it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

from services.core import topics
from services.core.envelope import Envelope, name_id, parse_record, request
from services.core.processor import Processor
from services.core.trust import Principal, authenticate
from services.monitor.processor import Monitor
from services.runtime.compose import demo_pipeline
from services.runtime.embedded.bus import EmbeddedBus
from services.runtime.embedded.runner import Runner, run_until_idle
from services.runtime.embedded.store import EmbeddedLog
from services.runtime.keyring import demo_keyring
from services.runtime.replay import read_db, replay
from services.simulation.simulator import DEFAULT_TABLES, Session

POISON_OPEN_TABLE: list[tuple[str, dict[str, Any]]] = [
    ("russian_classic", {"options": {"punters": "3"}}),  # raised TypeError in the dealer
    ("punto_banco", {"options": {"punters": "3"}}),
    ("punto_banco", {"commission_rounding": "banker"}),
    ("chemin_de_fer", {"commission_rounding": "banker"}),
    ("punto_banco", {"commission_bps": 30000}),
    ("baccarat_banque", {"commission_bps": 30000}),
    ("punto_banco", {"tie_pays": -1}),
    ("punto_banco", {"tie_pays": "8"}),
    ("french_club", {"options": {"tie_pays": -5}}),
    ("punto_banco", {"options": {"tie_pays": "eight"}}),
    ("punto_banco", {"options": {"decks": "8"}}),
    ("punto_banco", {"options": {"commission_bps": 10**30}}),
]
"""``OpenTable`` payloads from issue #8 and their cousins: the variant and what is added to a valid one."""

AT = "2026-11-22T20:00:00.000Z"

OPERATOR = demo_keyring().key(Principal.OPERATOR)
"""The key the poisoned commands are signed with: they are judged on their content, not refused as
forgeries (the pipeline's default keyring is the demo's)."""


def _poison(n: int, variant: str, extra: dict[str, Any]) -> list[Envelope]:
    """A poisoned ``OpenTable`` and the commands an operator would send next to the same table."""
    table = f"P{n:02d}-poison"
    out = [request("OpenTable", topics.TABLE_INBOX, table,
                   {"table_id": table, "variant": variant, "currency": "EUR", **extra},
                   event_id=name_id("poison", str(n)), occurred_at=AT, producer="operator")]  # fmt: skip
    for i, (type_, payload) in enumerate(
        [("OpenShoe", {"shoe_id": f"{table}-S1", "mode": "rng"}), ("OpenBetting", {}), ("CloseBetting", {})]
    ):
        event_id = name_id("poison", str(n), str(i))
        body = {"table_id": table, **payload}
        env = request(type_, topics.TABLE_INBOX, table, body, event_id=event_id, occurred_at=AT, producer="o")
        out.append(env)
    return [authenticate(e, OPERATOR) for e in out]


def _play(db: Path, seed: int, poison: list[Envelope]) -> None:
    bus = EmbeddedBus(db, demo_pipeline())
    try:
        bus.publish(poison)
        bus.drain()
    finally:
        bus.close()
    # a restart after the poison: the issue's pipeline stopped again here
    bus = EmbeddedBus(db, demo_pipeline())
    try:
        bus.drain()
        Session(bus, seed=seed).run(list(DEFAULT_TABLES[:1]), 4)
    finally:
        bus.close()


def _wallet_streams(db: Path) -> dict[str, list[bytes]]:
    out: dict[str, list[bytes]] = {}
    with EmbeddedLog(db) as log:
        for _o, topic, key, raw in log.iter_all():
            played = topic == topics.TABLE_EVENTS and key == DEFAULT_TABLES[0].table_id
            if topic == topics.WALLET_EVENTS or played:
                out.setdefault(f"{topic}/{key}", []).append(raw)
    return out


def test_poisoned_open_tables_never_stop_the_pipeline_nor_touch_the_money(tmp_path: Path) -> None:
    """Each poisoned ``OpenTable`` of issue #8 ends as a refusal, a dead letter or a table; the pipeline
    (restarted after them) plays on, every runner reaches the head, and every wallet and the played
    table hold byte for byte what a log without the poison holds."""
    poison = [e for n, (variant, extra) in enumerate(POISON_OPEN_TABLE) for e in _poison(n, variant, extra)]
    _play(tmp_path / "poisoned.db", 11, poison)
    _play(tmp_path / "clean.db", 11, [])
    assert _wallet_streams(tmp_path / "poisoned.db") == _wallet_streams(tmp_path / "clean.db")
    with EmbeddedLog(tmp_path / "poisoned.db") as log:
        rows = list(log.iter_all())
        for name, processor in demo_pipeline():
            last_input = max((o for o, topic, *_ in rows if topic in processor.inputs), default=0)
            assert log.committed(name) >= last_input, name  # 0: no input (no analyst worked a case)
    records = [parse_record(raw) for *_, raw in rows]
    answered = {r.payload.get("original_event_id") for r in records if r.type == "DeadLetter"}
    answered |= {r.payload.get("command_id") for r in records if r.type == "CommandRefused"}
    answered |= {r.causation_id for r in records if r.type == "TableOpened"}
    opening = [e.event_id for e in poison if e.type == "OpenTable"]
    assert set(opening) <= answered
    assert not [r for r in records if r.payload.get("reason") in ("unauthenticated", "not_permitted")]
    for r in records:
        if r.type == "DeadLetter":
            assert r.payload["reason"] and r.payload["detail"]
    report = replay(read_db(tmp_path / "poisoned.db"))
    assert report.coups == 4


@pytest.mark.parametrize("variant,extra", POISON_OPEN_TABLE[:1], ids=["punters-as-string"])
def test_the_issue_poison_pill_becomes_a_dead_letter_or_a_refusal(
    tmp_path: Path, variant: str, extra: dict[str, Any]
) -> None:
    """The issue's pill (``"punters": "3"`` at a russian_classic table) is answered with a reason and
    the table is never opened; a valid ``OpenTable`` right after it opens its table."""
    bus = EmbeddedBus(tmp_path / "log.db", demo_pipeline())
    try:
        bus.publish(_poison(0, variant, extra)[:1])
        good = request("OpenTable", topics.TABLE_INBOX, "T-good",
                       {"table_id": "T-good", "variant": variant, "currency": "EUR"},
                       event_id=name_id("good"), occurred_at=AT, producer="operator")  # fmt: skip
        bus.publish([authenticate(good, OPERATOR)])
        bus.drain()
        events = bus.read(topics.TABLE_EVENTS, "P00-poison")
        letters = bus.read(topics.DEADLETTER, topics.TABLE_INBOX)
        dead = [json.loads(d.payload["original"])["event_id"] for d in letters]
        opened = bus.read(topics.TABLE_EVENTS, "T-good")
    finally:
        bus.close()
    assert not [e for e in events if e.type == "TableOpened"]
    refused = [e for e in events if e.type == "CommandRefused"]
    assert refused or name_id("poison", "0") in dead
    assert [e.type for e in opened] == ["TableOpened"]


class Boom(Processor[int]):
    """A processor with a bug: it fails on every record whose payload asks it to."""

    name = "boom"
    inputs: ClassVar[tuple[str, ...]] = (topics.TABLE_INBOX,)

    def initial(self) -> int:
        """Nothing handled."""
        return 0

    def handle(self, state: int, record: Envelope) -> tuple[int, list[Any]]:
        """Divide by zero when told to; count otherwise."""
        if record.payload.get("boom"):
            return state + 1 // 0, []
        return state + 1, []


def test_an_internal_error_is_a_dead_letter_and_a_critical_alert(tmp_path: Path) -> None:
    """A processor's bug on one record gives a dead letter (``internal_error``, the record quoted, the
    state unchanged) and the real monitor raises a critical alert keyed by the record's table; the
    records after it are handled, and the monitor's own dead letters raise nothing."""
    with EmbeddedLog(tmp_path / "log.db") as log:
        for n, boom in enumerate([False, True, False]):
            log.append([request("Poke", topics.TABLE_INBOX, "T-bug", {"table_id": "T-bug", "boom": boom},
                                event_id=name_id("boom", str(n)), occurred_at=AT, producer="o")])  # fmt: skip
        boom_runner = Runner(log, Boom())
        run_until_idle([boom_runner, Runner(log, Monitor())])
        assert boom_runner.state.inner == 2
        records = [parse_record(raw) for *_, raw in log.iter_all()]
    dead = [r for r in records if r.type == "DeadLetter"]
    assert [(d.payload["reason"], d.payload["original_event_id"]) for d in dead] == [
        ("internal_error", name_id("boom", "1"))
    ]
    assert "ZeroDivisionError" in dead[0].payload["detail"] and "boom" in dead[0].payload["detail"]
    alerts = [r for r in records if r.type == "AnomalyDetected"]
    assert [(a.key, a.payload["detector"], a.payload["severity"]) for a in alerts] == [
        ("T-bug", "internal_error", "critical")
    ]
    assert dead[0].event_id in alerts[0].payload["subject"]["event_ids"]
    own = request("DeadLetter", topics.DEADLETTER, topics.TABLE_EVENTS, {**dead[0].payload}, event_id="own-1",
                  occurred_at=AT, producer="monitor")  # fmt: skip
    assert Monitor().handle(Monitor().initial(), own)[1] == []
