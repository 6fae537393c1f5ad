"""The embedded runtime's memo of sealed records (:attr:`EmbeddedLog.sealed`): the same log byte for
byte with it and without it, most reads of a stage's outputs admitted from it, and a forgery under the id
of a sealed output refused all the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from services.core import topics
from services.core.envelope import Envelope, parse_record, request
from services.core.trust import Principal, Sealed, authenticate
from services.runtime.compose import Composition, demo_pipeline
from services.runtime.embedded.bus import EmbeddedBus
from services.runtime.embedded.runner import Runner, run_until_idle
from services.runtime.embedded.store import EmbeddedLog
from services.runtime.keyring import demo_keyring
from services.simulation.simulator import Session, demo_tables
from tests.helpers.spies import count_verify
from tests.helpers.streams import whole_log

SEED = 5
T = "2026-11-22T20:00:00.000Z"


def _play(db: Path, *, memo: bool) -> int:
    """A seeded session; the records the runners applied."""
    bus = EmbeddedBus(db, demo_pipeline(), event_driven=True)
    if not memo:
        bus.log.sealed = Sealed(kept=0)  # remembers nothing: every record verified in full
    try:
        Session(bus, seed=SEED).run(demo_tables(2), 4)
    finally:
        bus.close()
    return sum(r.state.records for r in bus.runners)


def test_the_log_is_the_same_with_the_memo_and_most_outputs_are_not_verified_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With or without the memo the session writes the same log, byte for byte; with it, the records
    verified are fewer than the reads by about the outputs the dealer, settlement and the monitor read
    back (audit still verifies each of its reads)."""
    seen = count_verify(monkeypatch)
    applied = _play(tmp_path / "full.db", memo=False)
    verified_full = len(seen)
    seen.clear()
    assert _play(tmp_path / "memo.db", memo=True) == applied
    assert whole_log(tmp_path / "memo.db") == whole_log(tmp_path / "full.db")
    assert verified_full == applied
    audited = sum(1 for _o, topic, _k, _r in _rows(tmp_path / "memo.db") if topic in _AUDIT_INPUTS)
    assert audited <= len(seen) < verified_full * 0.6


_AUDIT_INPUTS = frozenset(Composition.demo().audit().inputs)


def _rows(db: Path) -> list[tuple[int, str, str, bytes]]:
    with EmbeddedLog(db, readonly=True) as log:
        return list(log.iter_all())


def _open_table() -> Envelope:
    payload = {"table_id": "T1", "variant": "punto_banco", "currency": "EUR"}
    env = request("OpenTable", topics.TABLE_INBOX, "T1", payload, event_id="open-1", occurred_at=T,
                  producer="operator")  # fmt: skip
    return authenticate(env, demo_keyring().key(Principal.OPERATOR))


def _runners(log: EmbeddedLog, names: set[str]) -> list[Runner[Any]]:
    return [Runner(log, p, name) for name, p in Composition.demo().pipeline() if name in names]


def test_a_forgery_under_the_id_of_a_sealed_output_is_refused(tmp_path: Path) -> None:
    """An outsider writes, ahead of the dealer's ``TableOpened``, a copy with one byte changed under its
    id (ids derive from public data). Once the dealer sealed the real one, the memo holds that id: the
    forgery, read first, is verified in full and refused by settlement and the monitor; the real
    record after it is applied."""
    with EmbeddedLog(tmp_path / "ref.db") as ref:
        ref.append([_open_table()])
        run_until_idle(_runners(ref, {"dealer"}))
        (real,) = [raw for _o, topic, _k, raw in ref.iter_all() if topic == topics.TABLE_EVENTS]
    at = real.index(b'"currency":"EUR"') + len(b'"currency":"EU')
    forged = real[:at] + b"X" + real[at + 1 :]
    with EmbeddedLog(tmp_path / "log.db") as log:
        log.append([_open_table()])
        log.append_raw(topics.TABLE_EVENTS, "T1", forged)
        dealer = _runners(log, {"dealer"})
        run_until_idle(dealer)
        assert len(log.sealed) == 1
        readers = _runners(log, {"settlement.payout", "monitor"})
        run_until_idle(readers)
        dead = [
            parse_record(raw).payload for _o, topic, _k, raw in log.iter_all() if topic == topics.DEADLETTER
        ]
        assert sorted(d["reason"] for d in dead) == ["unauthenticated", "unauthenticated"]
        assert all(d["original"].encode() == forged for d in dead)
        real_id = parse_record(real).event_id
        assert all(real_id in r.state.applied for r in readers)
