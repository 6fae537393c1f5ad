"""Hostile records never stop a processor (issue #8, docs/trust.md).

Each processor — dealer, both settlement stages, audit, monitor — is warmed up by a real session, then
fed a hypothesis corpus of hostile records built from real ones: wrong types, huge and negative
numbers, strings where ints belong, unknown spots, missing and extra fields, deep nesting, huge and
odd unicode strings, ids reused from the log and types outside the contract. Each record must end
without an exception (as outputs, a refusal, a dead letter with a reason, or nothing for a duplicate),
a dead letter must leave the state as it was, and afterwards a valid probe — records for a table or an
account the corpus never names — must give exactly the outputs it gives without the corpus.
"""

from __future__ import annotations

import copy
import json
from collections import defaultdict
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.audit.processor import Audit
from services.core import topics
from services.core.baccarat import VARIANTS
from services.core.contract import TOPIC_TYPES
from services.core.envelope import Envelope, name_id, request
from services.core.errors import Reason
from services.core.processor import Processor, ProcessorState, step
from services.dealer.processor import Dealer
from services.monitor.processor import Monitor
from services.settlement.payout_stage import PayoutStage
from services.settlement.wallet_stage import WalletStage
from services.simulation.simulator import DEFAULT_TABLES, Session
from tests.helpers.membus import MemBus

AT = "2026-11-22T23:00:00.000Z"
REASONS = {r.value for r in Reason}
PROBE = "probe"
"""The probe's tables and accounts carry this; no hostile record does."""


def _procs() -> list[Processor[Any]]:
    return [Dealer(allow_seed_hex=True), PayoutStage(), WalletStage(), Audit(), Monitor()]


@pytest.fixture(scope="module")
def warm() -> tuple[MemBus, dict[str, list[dict[str, Any]]], list[str]]:
    """A session on two tables (house- and player-banked), the payloads seen per type, and the ids."""
    bus = MemBus()
    Session(bus, seed=31).run([DEFAULT_TABLES[0], DEFAULT_TABLES[2]], 3)
    payloads: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for env in bus.log:
        payloads[env.type].append(env.payload)
    return bus, dict(payloads), [e.event_id for e in bus.log]


def _cmd(type_: str, key: str, payload: dict[str, Any], n: int, topic: str = topics.TABLE_INBOX) -> Envelope:
    return request(type_, topic, key, payload, event_id=name_id(PROBE, type_, str(n)), occurred_at=AT,
                   producer="operator")  # fmt: skip


def _probe_inputs() -> dict[str, list[Envelope]]:
    """Valid records for a fresh table and a fresh account: per processor stage, in order."""
    table = f"T-{PROBE}"
    inbox = [
        _cmd("OpenTable", table, {"table_id": table, "variant": "punto_banco", "currency": "EUR"}, 0),
        _cmd("OpenShoe", table, {"table_id": table, "shoe_id": f"{table}-S1", "seed_hex": "cd" * 32}, 1),
        _cmd("OpenBetting", table, {"table_id": table}, 2),
    ]
    bet = {"account_id": f"{PROBE}:1", "table_id": table, "spot": "banker", "stake_minor": 2_000,
           "currency": "EUR"}  # fmt: skip
    inbox.append(_cmd("BetPlaced", table, {**bet, "bet_id": f"{PROBE}-b1"}, 3))
    inbox.append(_cmd("CloseBetting", table, {"table_id": table}, 4))
    inbox.append(_cmd("BetPlaced", table, {**bet, "bet_id": f"{PROBE}-late"}, 5))
    inbox.append(_cmd("DealCoup", table, {"table_id": table}, 6))
    inbox.append(_cmd("CloseShoe", table, {"table_id": table}, 7))  # audit checkpoints at a shoe's close
    dealer = Dealer(allow_seed_hex=True)
    state = ProcessorState(inner=dealer.initial())
    events = [out for env in inbox for out in step(dealer, state, env)]
    account = f"{PROBE}:1"
    wallet = [
        _cmd("Deposit", account, {"account_id": account, "amount_minor": 50_000, "currency": "EUR"}, 10,
             topics.WALLET_REQUESTS),
        _cmd("PlaceBet", account, {**bet, "bet_id": f"{PROBE}-b2"}, 11, topics.WALLET_REQUESTS),
        _cmd("Withdraw", account, {"account_id": account, "amount_minor": 1_000, "currency": "EUR"}, 12,
             topics.WALLET_REQUESTS),
    ]  # fmt: skip
    assert [e.type for e in events].count("CoupResolved") == 1
    payout, pstate = PayoutStage(), ProcessorState(inner=PayoutStage().initial())
    payouts = [out for env in events for out in step(payout, pstate, env)]
    # audit joins a coup's events with its payouts; the shoe's close then writes its checkpoint
    audited = [*events[:-1], *payouts, events[-1]]
    return {"dealer": inbox, "settlement.payout": events, "settlement.wallet": wallet, "audit": audited,
            "monitor": events}  # fmt: skip


PROBES = _probe_inputs()

OPTION_NAMES = ["punters", "decks", "tie_pays", "commission_bps", "commission_rounding", "dragon_bonus", "x"]
VARIANT_NAMES = sorted(VARIANTS)

HUGE = st.sampled_from([10**30, -(10**30), 2**63, 2**63 - 1, -(2**63), 2**53 + 1, -1, 0])
ODD_TEXT = st.sampled_from(
    ["", " ", "3", "-1", "1e9", "null", "x" * 100_000, "🂡🂱", "\x00", "\u202e", "T01", "banker"]
)


def _deep(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"d": [value]}
    return value


HOSTILE_VALUES = st.one_of(
    st.none(), st.booleans(), HUGE, st.integers(), ODD_TEXT,
    st.text(max_size=30).filter(lambda s: PROBE not in s.lower()),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(st.integers(), max_size=5), st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
    st.sampled_from([_deep(40), _deep(300), list(range(5_000)), {"punters": "3"}, {"tie_pays": -5}]),
)  # fmt: skip


@st.composite
def hostile_open_table(draw: st.DrawFn) -> dict[str, Any]:
    """An ``OpenTable`` whose configuration and variant options are drawn from hostile values."""
    table = draw(st.sampled_from(["T01-punto-banco", "T-new", "T-other", "T-third"]))
    variant = draw(st.sampled_from(VARIANT_NAMES))
    payload: dict[str, Any] = {"table_id": table, "variant": variant, "currency": "EUR"}
    for name in ("decks", "tie_pays", "commission_bps", "punters"):
        if draw(st.integers(0, 3)) == 0:
            payload[name] = draw(HUGE | st.integers(0, 12))
    option = st.sampled_from(["3", "", "banker", "8", "floor"]) | HUGE | st.integers(-3, 12) | HOSTILE_VALUES
    payload["options"] = draw(st.dictionaries(st.sampled_from(OPTION_NAMES), option, max_size=3))
    return payload


@st.composite
def hostile_record(
    draw: st.DrawFn, payloads: dict[str, list[dict[str, Any]]], ids: list[str], topic: str
) -> Envelope:
    """One hostile record on ``topic``: a real payload of a real type, mutated, under a real or odd key."""
    types = [*sorted(t.__name__ for t in TOPIC_TYPES[topic] if t.__name__ in payloads), "Bogus", "deposit"]
    type_ = draw(st.sampled_from(types))
    base = dict(draw(st.sampled_from(payloads.get(type_) or [{}])))
    if topic == topics.TABLE_INBOX and draw(st.booleans()):  # free-form options: the widest door in
        type_, base = "OpenTable", draw(hostile_open_table())
    if "variant" in base:
        base["variant"] = draw(st.sampled_from(VARIANT_NAMES))
    for _ in range(draw(st.integers(0, 4))):
        fields = sorted(base) or ["table_id"]
        action = draw(st.sampled_from(["set", "drop", "add", "set", "option", "variant"]))
        name = draw(st.sampled_from(fields))
        if action == "option":  # a variant option, where the engine reads types it did not check
            options = base.get("options") if isinstance(base.get("options"), dict) else {}
            value = draw(ODD_TEXT | HUGE | HOSTILE_VALUES)
            base["options"] = {**options, draw(st.sampled_from(OPTION_NAMES)): value}
        elif action == "variant":
            base["variant"] = draw(st.sampled_from(VARIANT_NAMES))
        elif action == "drop":
            base.pop(name, None)
        elif action == "add":
            base[draw(st.text(min_size=1, max_size=8))] = draw(HOSTILE_VALUES)
        else:
            base[name] = draw(HOSTILE_VALUES)
    every = [p for group in payloads.values() for p in group]
    keys = [str(p.get(f)) for p in every for f in ("table_id", "account_id") if p.get(f)]
    key = draw(st.sampled_from(sorted(set(keys))) | ODD_TEXT)
    event_id = draw(st.sampled_from(ids) | st.uuids().map(str) | ODD_TEXT.filter(bool))
    producer = draw(ODD_TEXT | st.just("dealer"))
    env = request(type_, topic, key, base, event_id=event_id, occurred_at=AT, producer=producer)
    if draw(st.booleans()):  # a forged chain position on an event stream
        data = json.loads(env.to_json())
        data.update(seq=draw(HUGE | st.none()), prev_hash=draw(st.sampled_from(["0" * 64, None, "zz"])))
        env = Envelope.model_validate(data)
    return env


def _run(proc: Processor[Any], state: ProcessorState[Any], records: list[Envelope]) -> list[Any]:
    return [_comparable(out) for env in records for out in step(proc, state, env)]


def _comparable(out: Envelope) -> Any:
    """The output as the probe must reproduce it: byte for byte, except that an audit checkpoint
    counts every finding so far (the corpus's included) and its tree head covers every chain audit read
    (the findings chains the corpus's findings grew, a chain a hostile record started), which its hash
    and signature then cover."""
    if out.type != "AuditCheckpoint":
        return out.to_json()
    data = json.loads(out.to_json())
    for name in ("findings", "signature", "tree"):
        data["payload"].pop(name)
    data.pop("hash")
    return data


def _warm_state(bus: MemBus, index: int) -> ProcessorState[Any]:
    proc, state = bus.procs[index]
    assert type(proc) is type(_procs()[index])
    inner = copy.deepcopy(state.inner)
    heads, applied = dict(state.heads), set(state.applied)
    return ProcessorState(inner=inner, applied=applied, heads=heads, records=state.records)


@pytest.mark.parametrize("index", range(5), ids=[p.stage_name() for p in _procs()])
def test_hostile_records_never_stop_a_processor(index: int, warm: Any) -> None:
    """Every hostile record is answered without an exception (a dead letter leaving the state as it was),
    and a valid probe afterwards gives exactly the outputs it gives on the untouched state."""
    bus, payloads, ids = warm
    proc = _procs()[index]
    probe = PROBES[proc.stage_name()]
    reference = _run(proc, _warm_state(bus, index), probe)
    assert reference, "the probe makes the processor write something"

    slow = [HealthCheck.too_slow, HealthCheck.data_too_large]

    @settings(max_examples=60, deadline=None, suppress_health_check=slow)
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        state = _warm_state(bus, index)
        n = data.draw(st.integers(1, 6))
        for _ in range(n):
            topic = data.draw(st.sampled_from(proc.inputs))
            record = data.draw(hostile_record(payloads, ids, topic))
            before = copy.deepcopy(state.inner)
            outs = step(proc, state, record)
            for out in outs:
                if out.type == "DeadLetter":
                    assert out.payload["reason"] in REASONS and out.payload["detail"]
                    assert state.inner == before, "a dead-lettered record changed the state"
        assert _run(proc, state, probe) == reference

    check()


@pytest.mark.parametrize(
    "options", [{"punters": "3"}, {"punters": 10**30}, {"decks": "8"}, {"tie_pays": [8]}]
)
def test_the_issue_poison_options_end_with_a_reason_at_every_variant(options: dict[str, Any]) -> None:
    """``OpenTable`` with poisoned options at each variant: a table, a refusal or a dead letter with a
    reason — never an exception out of ``step`` (the dealer raised ``TypeError`` on ``"punters": "3"``)."""
    dealer = Dealer(allow_seed_hex=True)
    for n, variant in enumerate(VARIANTS):
        state = ProcessorState(inner=dealer.initial())
        env = _cmd("OpenTable", f"T{n}", {"table_id": f"T{n}", "variant": variant, "currency": "EUR",
                                          "options": options}, 100 + n)  # fmt: skip
        outs = step(dealer, state, env)
        assert [o.type for o in outs] in (["TableOpened"], ["CommandRefused"], ["DeadLetter"]), variant
        if outs[0].type == "DeadLetter":
            assert outs[0].payload["reason"] in REASONS
            assert state.inner == dealer.initial()
