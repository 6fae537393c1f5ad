"""Issue #8's attacks on the embedded log: each forgery is refused with its reason and an alert, the
money and every table, wallet and audit stream stay exactly as without it, and play goes on."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from services.core import topics
from services.core.baccarat import get_variant
from services.core.cards import shoe_cards
from services.core.envelope import Envelope, parse_record, request
from services.core.shoe import commitment, shuffle
from services.runtime.compose import Composition
from services.runtime.embedded.bus import EmbeddedBus
from services.runtime.embedded.store import EmbeddedLog, LogConflict
from services.runtime.keyring import Keyring, new_keyring
from tests.helpers import attacks
from tests.helpers.attacks import CHOSEN_SEED, T

STREAMS = (topics.TABLE_EVENTS, topics.WALLET_EVENTS)


def _run(db: Path, ring: Keyring, forgeries: list[Envelope], *, demo_mode: bool = False) -> list[Envelope]:
    bus = EmbeddedBus(db, Composition(ring, demo_mode=demo_mode).pipeline())
    try:
        attacks.play(bus, ring, forgeries)
        return [parse_record(raw) for *_, raw in bus.log.iter_all()]
    finally:
        bus.close()


@pytest.fixture(scope="module")
def ring() -> Keyring:
    """A private keyring (not the demo's): production mode."""
    return new_keyring()


@pytest.fixture(scope="module")
def reference(ring: Keyring, tmp_path_factory: pytest.TempPathFactory) -> list[Envelope]:
    """The scenario without forgeries."""
    return _run(tmp_path_factory.mktemp("ref") / "log.db", ring, [])


@pytest.fixture(scope="module")
def attacked(
    ring: Keyring, reference: list[Envelope], tmp_path_factory: pytest.TempPathFactory
) -> tuple[list[attacks.Attack], list[Envelope]]:
    """The scenario with every forgery written during the attack coup's betting window."""
    made = attacks.attacks(ring, reference)
    return made, _run(tmp_path_factory.mktemp("att") / "log.db", ring, [a.record for a in made])


def test_every_forgery_is_refused_with_its_reason_and_raises_one_alert(
    attacked: tuple[list[attacks.Attack], list[Envelope]],
) -> None:
    """Outsider BetPlaced, outsider and terminal payouts and refunds (one robbing another wallet), a payout
    squatting the id the pipeline derives next and a mismatched Deposit: each is dead-lettered with its
    reason by its consumer and the monitor raises one ``refused_record`` alert for it."""
    made, records = attacked
    expected = {a.record.event_id: a.reason for a in made}
    assert len(expected) == len(made)
    assert attacks.refusals(records) == expected
    assert attacks.alerts(records) == expected


def test_money_and_every_stream_are_exactly_as_without_the_forgeries(
    attacked: tuple[list[attacks.Attack], list[Envelope]], reference: list[Envelope]
) -> None:
    """Every table, wallet and audit stream is byte-identical to the run without forgeries: no balance
    moved by a minor unit, the squatted payout was paid to its real owner, and the coups after go on."""
    _, records = attacked
    assert attacks.by_key(records, STREAMS) == attacks.by_key(reference, STREAMS)
    assert attacks.audit_view(records) == attacks.audit_view(reference)
    assert attacks.balances(records) == attacks.balances(reference)
    assert sum(1 for e in records if e.type == "CoupResolved") == 4
    squat = next(a for a in attacks.attacks(new_keyring(), reference) if "squatting" in a.name)
    real = next(e for e in reference if e.event_id == squat.record.event_id and e.producer == "settlement")
    applied = [
        e
        for e in records
        if e.type == "PayoutApplied" and e.payload["payout_id"] == real.payload["payout_id"]
    ]
    assert [e.key for e in applied] == [real.key]


def test_an_inbox_chosen_seed_is_refused_outside_demo_mode(reference: list[Envelope]) -> None:
    """Outside demo mode an ``OpenShoe`` naming its own ``seed_hex`` is refused (``seed_not_allowed``)
    and no shoe opens; the operator's next ordinary ``OpenShoe`` opens one."""
    refused = [e for e in reference if e.type == "CommandRefused" and e.payload["command"] == "OpenShoe"]
    assert [e.payload["reason"] for e in refused] == ["seed_not_allowed"]
    shoes = [e.payload["shoe_id"] for e in reference if e.type == "ShoeOpened"]
    assert f"{T}-chosen" not in shoes and len(shoes) == 2


def test_in_demo_mode_the_chosen_seed_deals_the_shoe(ring: Keyring, tmp_path: Path) -> None:
    """In demo mode the same command is honoured: the shoe's commitment is that of the chosen seed."""
    records = _run(tmp_path / "log.db", ring, [], demo_mode=True)
    opened = next(e for e in records if e.type == "ShoeOpened" and e.payload["shoe_id"] == f"{T}-chosen")
    seed = bytes.fromhex(CHOSEN_SEED)
    cards = shoe_cards(get_variant("punto_banco").config().decks)
    assert opened.payload["commitment"] == commitment(seed, shuffle(seed, cards))


def test_shoes_depend_on_the_dealer_secret(ring: Keyring, reference: list[Envelope], tmp_path: Path) -> None:
    """Another keyring deals other shoes from the same session seed; the same keyring the same ones."""
    other = _run(tmp_path / "other.db", new_keyring(), [])
    again = _run(tmp_path / "again.db", ring, [])

    def commitments(records: list[Envelope]) -> list[str]:
        return [str(e.payload["commitment"]) for e in records if e.type == "ShoeOpened"]

    assert commitments(other) and set(commitments(other)).isdisjoint(commitments(reference))
    assert [e.to_json() for e in again] == [e.to_json() for e in reference]


def test_outside_records_and_outputs_have_their_own_id_spaces(tmp_path: Path) -> None:
    """An outside record under an id a processor writes later does not block that output; each space
    stays idempotent (same bytes: no-op) and strict (other bytes: LogConflict)."""

    def rec(amount: int) -> Envelope:
        payload = {"account_id": "a", "amount_minor": amount, "currency": "EUR"}
        return request("Deposit", topics.WALLET_REQUESTS, "a", payload, event_id="x", occurred_at=attacks.T0,
                       producer="p")  # fmt: skip

    with EmbeddedLog(tmp_path / "log.db") as log:
        assert log.append([rec(1)]) == 1
        assert log.append([rec(2)], internal=True) == 1
        assert log.append([rec(1)]) == 0 and log.append([rec(2)], internal=True) == 0
        with pytest.raises(LogConflict):
            log.append([rec(3)], internal=True)
        assert log.holds("x") and log.holds("x", internal=True) and log.count() == 2


def test_a_log_written_before_id_spaces_opens_and_keeps_its_records(tmp_path: Path) -> None:
    """A log file with the old single id index is migrated on open: its records stay, in order."""
    db = tmp_path / "old.db"
    con = sqlite3.connect(db)
    con.executescript(
        'CREATE TABLE records ("offset" INTEGER PRIMARY KEY AUTOINCREMENT, topic TEXT NOT NULL, '
        "key TEXT NOT NULL, event_id TEXT, type TEXT, body BLOB NOT NULL);"
        "CREATE UNIQUE INDEX records_event_id ON records(event_id) WHERE event_id IS NOT NULL;"
        "INSERT INTO records (topic, key, event_id, type, body) VALUES ('t', 'k', 'x', 'T', x'7b7d');"
    )
    con.commit()
    con.close()
    with EmbeddedLog(db) as log:
        assert [row[1:] for row in log.iter_all()] == [("t", "k", b"{}")]
        assert log.holds("x")
