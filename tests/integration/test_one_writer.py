"""One writer per chain (issues #28, #31): every chained stream's ``(topic, key)`` is signed and
hash-chained by one stage, which audit's tree head and the writers' signed heads rely on.

A dead letter of an account's record that raises an ``internal_error`` alert used to write on that
account's alert chain, which the monitor's account stage (``monitor.accounts``) writes too: two writers,
each continuing its own head, so the chain forked (two ``seq`` 0) and the replay of an authentic log
said ``findings`` (``seq_duplicate``). The alert now goes on the source topic's chain (the table stage's
own), naming the account, so the back office finds it by account as before.

The property test draws sessions with outsider noise (malformed records, forged MACs, ids squatted on
the pipeline's outputs, forged chained events) and a stage that fails on some records, and checks that
no chain the pipeline wrote has records from two writers.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.audit.replay.attested import writer_keys
from services.core import topics
from services.core.contract import DeadLetter, Payload
from services.core.envelope import Envelope, name_id, request
from services.core.processor import Event
from services.core.trust import Principal, authenticate
from services.integrations.backoffice import alert_queries as aq
from services.integrations.backoffice.migrate import upgrade
from services.integrations.backoffice.projector import Projector
from services.integrations.backoffice.schema import make_engine
from services.monitor.dead_letters import dead_letter_alert
from services.runtime.compose import Composition
from services.runtime.embedded.bus import EmbeddedBus
from services.runtime.embedded.store import EmbeddedLog, LogConflict
from services.runtime.keyring import Keyring, new_keyring
from services.runtime.replay import read_db, replay
from services.settlement.wallet_stage import WalletStage, WalletState
from services.simulation.simulator import DEFAULT_TABLES, Session

Rec = dict[str, Any]
AT = "2026-11-22T21:00:00.000Z"
ACCOUNT = "player:042"


class BuggyWallet(WalletStage):
    """Settlement's wallet stage with a bug on the requests named: it raises (an ``internal_error``
    dead letter, the record set aside) where the real one would apply them."""

    def __init__(self, fails: Iterable[str]) -> None:
        super().__init__()
        self.fails = frozenset(fails)

    def react(
        self, state: WalletState, record: Envelope, payload: Payload | None
    ) -> tuple[WalletState, list[Event]]:
        """Fail on a named request, else the real stage."""
        if record.event_id in self.fails:
            raise ZeroDivisionError("a bug on this request")
        return super().react(state, record, payload)


def pipeline(ring: Keyring, fails: Iterable[str]) -> list[tuple[str, Any]]:
    """The demo pipeline on ``ring`` with the buggy wallet stage in place of settlement's."""
    buggy = BuggyWallet(fails)
    buggy.guard = ring.guard(Principal.SETTLEMENT)
    return [(n, buggy if n == "settlement.wallet" else p) for n, p in Composition.demo(ring).pipeline()]


def cashier(ring: Keyring, type_: str, account: str, amount: int, event_id: str) -> Envelope:
    """A deposit or withdrawal signed by the cashier."""
    body = {"account_id": account, "amount_minor": amount, "currency": "EUR"}
    env = request(type_, topics.WALLET_REQUESTS, account, body, event_id=event_id, occurred_at=AT,
                  producer="cashier")  # fmt: skip
    return authenticate(env, ring.key(Principal.CASHIER))


def writers_of(records: list[Rec]) -> dict[tuple[str, str], set[str]]:
    """Each chain, by the writers whose signed heads (``casino.attest``, keyed by writer) name it."""
    found: dict[tuple[str, str], set[str]] = {}
    for r in records:
        if r["topic"] == topics.ATTEST:
            for head in r["payload"]["heads"]:
                found.setdefault((head["topic"], head["key"]), set()).add(r["key"])
    return found


def two_writers(records: list[Rec]) -> dict[tuple[str, str], str]:
    """Every chain of an event stream written by more than one writer, with what shows it: two
    producers, two stages' signed heads naming it, or a fork (a ``seq`` or ``prev_hash`` out of line)."""
    chains: dict[tuple[str, str], list[Rec]] = {}
    for r in records:
        if r["topic"] in topics.EVENT_STREAMS:
            chains.setdefault((r["topic"], r["key"]), []).append(r)
    signed = writers_of(records)
    bad: dict[tuple[str, str], str] = {}
    for chain, recs in chains.items():
        producers = {r["producer"] for r in recs}
        links = [(r["seq"], r["prev_hash"]) for r in recs]
        expected = [(n, recs[n - 1]["hash"] if n else None) for n in range(len(recs))]
        if len(producers) > 1:
            bad[chain] = f"producers {sorted(producers)}"
        elif len(signed.get(chain, ())) > 1:
            bad[chain] = f"signed by {sorted(signed[chain])}"
        elif links != expected:
            bad[chain] = f"forked: (seq, prev_hash) {[(s, (p or '')[:8]) for s, p in links]}"
    return bad


def alerts_of(records: list[Rec], detector: str) -> list[Rec]:
    """The alerts of ``detector`` among ``records``."""
    return [r for r in records if r["type"] == "AnomalyDetected" and r["payload"]["detector"] == detector]


class Played:
    """A log where a deposit of :data:`ACCOUNT` hits a bug in the wallet stage (an ``internal_error``
    dead letter) and the account stage alerts on the same account (cash in and out), beside a table."""

    def __init__(self, tmp: Path) -> None:
        ring = new_keyring()
        boom = name_id("one-writer", "boom")
        self.db = tmp / "log.db"
        bus = EmbeddedBus(self.db, pipeline(ring, [boom]), event_driven=True)
        try:
            Session(bus, seed=5, players=2, keyring=ring).run(list(DEFAULT_TABLES[:1]), 2)
            bus.publish([
                cashier(ring, "Deposit", ACCOUNT, 1_000_000, name_id("one-writer", "in")),
                cashier(ring, "Deposit", ACCOUNT, 5_000, boom),
                cashier(ring, "Withdraw", ACCOUNT, 600_000, name_id("one-writer", "out")),
            ])  # fmt: skip
            bus.drain()
        finally:
            bus.close()
        self.boom = boom
        self.records: list[Rec] = [json.loads(raw) for raw in read_db(self.db)]
        public = ring.public_document()
        self.keys, self.writers = public["ed25519"], writer_keys(public)

    def alerts(self, detector: str) -> list[Rec]:
        return alerts_of(self.records, detector)


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> Played:
    return Played(tmp_path_factory.mktemp("one-writer"))


def test_an_accounts_internal_error_and_the_account_stage_write_on_two_chains(played: Played) -> None:
    """Both alerts are raised; the account stage's is on the account's chain, the internal error's on
    the wallet requests' chain (the table stage's), naming the account; every chain has one writer."""
    [dead] = [r for r in played.records if r["type"] == "DeadLetter"]
    assert dead["payload"]["reason"] == "internal_error"
    assert dead["payload"]["original_event_id"] == played.boom
    [bug] = played.alerts("internal_error")
    [cash] = played.alerts("in_and_out")
    assert cash["key"] == ACCOUNT and bug["key"] == topics.WALLET_REQUESTS
    assert bug["payload"]["account_ids"] == [ACCOUNT] and bug["payload"]["subject"]["account_id"] == ACCOUNT
    assert dead["event_id"] in bug["payload"]["subject"]["event_ids"]
    signed = writers_of(played.records)
    assert signed[(topics.MONITOR_ALERTS, ACCOUNT)] == {"monitor.accounts"}
    assert signed[(topics.MONITOR_ALERTS, topics.WALLET_REQUESTS)] == {"monitor"}
    assert two_writers(played.records) == {}


def test_the_authentic_log_replays_clean(played: Played) -> None:
    """The regulator's replay of the log: ``clean`` (with both stages on one chain it said ``findings``,
    ``seq_duplicate`` on ``casino.monitor.alerts``/the account)."""
    report = replay(read_db(played.db), keys=played.keys, writers=played.writers, ordered=True)
    assert report.verdict == "clean", report.to_dict().get("findings")


def test_the_back_office_finds_the_internal_error_by_its_account(played: Played, tmp_path: Path) -> None:
    """Projected into a read model, the account filter of the alert list finds both alerts."""
    engine = make_engine(f"sqlite:///{tmp_path / 'read.db'}")
    try:
        upgrade(engine)
        with EmbeddedLog(played.db, readonly=True) as log:
            Projector(engine, writers=played.writers).catch_up(log)
        with engine.connect() as conn:
            found = aq.alerts(conn, account_id=ACCOUNT)["alerts"]
    finally:
        engine.dispose()
    assert sorted(a["detector"] for a in found) == ["in_and_out", "internal_error"]
    assert all(a["account_ids"] == [ACCOUNT] for a in found)


@pytest.mark.parametrize("source", sorted(topics.ALL_TOPICS))
def test_an_internal_errors_alert_is_on_a_table_or_its_source_topic(source: str) -> None:
    """Whatever topic the failed record came from, its alert's chain is a table's (a table-keyed topic)
    or the source topic's, both the table stage's: never an account's (the account stage's) nor an
    alert id's (the casework stage's)."""
    original = request("Poke", source, "k-1", {}, event_id="o-1", occurred_at=AT, producer="dealer")
    payload = {"original": original.to_json().decode(), "reason": "internal_error", "detail": "boom",
               "source_topic": source, "original_event_id": "o-1"}  # fmt: skip
    dead = request("DeadLetter", topics.DEADLETTER, source, payload, event_id="d-1", occurred_at=AT,
                   producer="audit")  # fmt: skip
    [found] = dead_letter_alert(dead, DeadLetter.model_validate(payload), "monitor")
    assert found.key == ("k-1" if source in topics.TABLE_KEYED else source)
    assert found.found.account_ids == (("k-1",) if source in topics.ACCOUNT_KEYED else None)


# --- the property: a drawn session with outsider noise --------------------------------------------

NOISE = ("unsigned", "forged_mac", "other_key", "bad_payload", "squatted_id", "junk", "forged_event")


def _read(log: EmbeddedLog) -> list[Rec]:
    """The log's records that are JSON objects (the outsider's junk left out)."""
    out = []
    for *_, raw in log.iter_all():
        try:
            rec = json.loads(raw)
        except ValueError:
            continue
        if isinstance(rec, dict) and "topic" in rec and "key" in rec:
            out.append(rec)
    return out


def _noise(kind: str, n: int, ring: Keyring, log: EmbeddedLog, account: str) -> tuple[str, str, bytes]:
    """One record an outsider writes (no key of ours): its topic, key and bytes."""
    if kind == "junk":
        return topics.WALLET_REQUESTS, account, [b"not json", b"{}", b'{"type":"Deposit"}', b"[1,2]"][n % 4]
    body: dict[str, Any] = {"account_id": account, "amount_minor": 2_000_000, "currency": "EUR"}
    topic, type_, key, event_id = topics.WALLET_REQUESTS, "Deposit", account, name_id("noise", kind, str(n))
    if kind == "other_key":
        key = "player:999"
    elif kind == "bad_payload":
        body["amount_minor"] = "lots"
    elif kind == "squatted_id":  # the id of an output the pipeline wrote (its own id space)
        outputs = [r["event_id"] for r in _read(log) if r.get("seq") is not None]
        event_id = outputs[n % len(outputs)] if outputs else event_id
    elif kind == "forged_event":  # a chained wallet event, linked after the account's real head
        chain = [r for r in _read(log) if (r["topic"], r["key"]) == (topics.WALLET_EVENTS, account)]
        topic, type_ = topics.WALLET_EVENTS, "FundsDeposited"
        body.update(transfer_id=f"cashier/forged-{n}", balance_after_minor=10**9)
    env = request(type_, topic, key, body, event_id=event_id, occurred_at=AT, producer="cashier")
    if kind == "forged_event":
        head = chain[-1] if chain else None
        seq, prev = (head["seq"] + 1, head["hash"]) if head else (0, None)
        env = env.model_copy(update={"seq": seq, "prev_hash": prev})
    if kind == "forged_mac":
        made_up = {"key_id": ring.key(Principal.CASHIER).key_id, "mac": "00" * 32}
        env = env.model_copy(update={"auth": made_up})
    return topic, key, env.to_json()


@st.composite
def sessions(draw: st.DrawFn) -> dict[str, Any]:
    """A session: seed and coups at one table; the cashier's requests (account, type, amount), which
    of them hit the wallet stage's bug; the outsider's records and where they go (before, after)."""
    accounts = st.sampled_from(["player:001", "player:002", ACCOUNT])
    amounts = st.sampled_from([950_000, 600_000, 5_000])  # in the band, a withdrawal that counts, small
    cash = st.tuples(accounts, st.sampled_from(["Deposit", "Withdraw"]), amounts)
    requests = draw(st.lists(cash, min_size=1, max_size=8))
    return {
        "seed": draw(st.integers(0, 1_000)),
        "coups": draw(st.integers(1, 2)),
        "requests": requests,
        "fails": draw(st.sets(st.integers(0, len(requests) - 1), max_size=3)),
        "noise": draw(st.lists(st.tuples(st.sampled_from(NOISE), accounts, st.booleans()), max_size=6)),
    }


def _play(db: Path, ring: Keyring, s: dict[str, Any]) -> set[bytes]:
    """Play the drawn session into ``db``; the outsider's records' bytes."""
    ids = [name_id("drawn", str(i)) for i in range(len(s["requests"]))]
    bus = EmbeddedBus(db, pipeline(ring, [ids[i] for i in s["fails"]]), event_driven=True)
    injected: set[bytes] = set()

    def outsider(early: bool) -> None:
        for n, (kind, account, first) in enumerate(s["noise"]):
            if first == early:
                topic, key, raw = _noise(kind, n, ring, bus.log, account)
                bus.commit()
                try:
                    bus.log.append_raw(topic, key, raw)
                except LogConflict:  # an id the log holds with other bytes: the log refuses the squat
                    continue
                injected.add(raw)

    try:
        outsider(True)
        Session(bus, seed=s["seed"], players=2, keyring=ring).run(list(DEFAULT_TABLES[:1]), s["coups"])
        made = [cashier(ring, t, a, amount, ids[i]) for i, (a, t, amount) in enumerate(s["requests"])]
        bus.publish(made)
        bus.drain()
        outsider(False)
        bus.drain()
    finally:
        bus.close()
    return injected


@pytest.fixture(scope="module")
def ring() -> Keyring:
    return new_keyring()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(s=sessions())
def test_no_chain_has_two_writers_whatever_the_session_and_the_noise(
    ring: Keyring, s: dict[str, Any]
) -> None:
    """Over drawn sessions with outsider noise and a stage's bugs, every chain of an event stream that
    the pipeline wrote has one producer, one stage's signed heads and one unbroken line of ``seq`` and
    ``prev_hash``."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "log.db"
        injected = _play(db, ring, s)
        raws = list(read_db(db))
    written = [json.loads(r) for r in raws if r not in injected]
    assert two_writers(written) == {}, s
    assert len(alerts_of(written, "internal_error")) == len(s["fails"])  # not vacuous: each bug alerted
