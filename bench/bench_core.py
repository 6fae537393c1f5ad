"""The core's per-record cost, stage by stage, against reading the same bytes with ``json.loads``, same run.

Records: the dealer's inputs of a seeded session (:func:`bench.bench_worker.inbox_records`: the
``casino.table.inbox`` records of the house-banked tables, operator commands and settlement's bet
notices in the order written), the very records of ``bench worker``'s (d). Each stage runs over all of
them, in order, a few times; the best round's CPU time per record is printed beside the baseline's
(``json.loads`` of each record's bytes: the least any reader does) as a ratio:

* **decode**: :func:`services.runtime.intake.decode` (the envelope, its topic checked);
* **admit**: :meth:`services.core.trust.Guard.admit` (the hash from the bytes, the MAC, the policy);
* **admit, sealed here**: the same, each record's bytes in a :class:`~services.core.trust.Sealed` memo
  (as the embedded runtime's readers meet a stage's outputs: the bytes compared, the policy checked);
* **payload**: :func:`services.core.contract.payload_of` (the payload validated against the contract);
* **step**: :func:`services.core.processor.step_encoded` on a fresh state, the record decoded
  beforehand: admit, payload, the dealer's decide and fold, and each output sealed, hashed, signed
  and encoded;
* **decode + step**: what the worker's ``Pipe.apply`` does per record (``bench worker``'s (d)).

**Settlement** on the speed-baccarat coup (issue #16's credit path): a table of
:data:`SETTLE_PLAYERS` players, each betting once, recorded with the dealer and settlement's two stages
on an in-memory log (:func:`speed_coup`); then each settlement stage is stepped
(:func:`~services.core.processor.step_encoded`, records decoded beforehand) over its inputs of the coup,
from the state its inputs before the coup left (the funding, the table opening; rebuilt untimed each
round). CPU microseconds per input by type, beside the same baseline over the very bytes of those
inputs: ``BetAccepted`` (the payout stage remembers each bet), ``CoupResolved`` (one record that pays
every bet: per payout written), ``PlaceBet`` and ``PayoutIssued`` (the wallet stage: a stake reserved,
a payout credited). ``CoupResolved`` then ``PayoutIssued`` is the path from the resolution to the last
credit.

Then the wallet stage as the Kafka worker runs it (:class:`~services.runtime.kafka.worker.Pipe`: the
record's bytes decoded, then stepped), over the same inputs: each ``PayoutIssued`` decoded from its bytes,
beside the same taken as the envelope the payout stage sealed in the same worker
(:class:`~services.runtime.kafka.worker.OwnOutputs`), same rounds.

**Seamless**: the adapter's pure state machine (:mod:`services.core.seamless`), a bet's debit queued
(:func:`~services.core.seamless.enqueue`) and its ``ok`` answer folded in
(:func:`~services.core.seamless.fold_answer`), :data:`SEAMLESS_BETS` bets on 5,000 wallets: CPU us a
bet over the first and the last quarter of the bets, the last as a ratio of the first (1.0: a bet
costs the same however long the history).

Run: ``.venv/bin/python -m bench core`` (``BENCH_CORE_COUPS`` sizes the session, 120 coups by default;
``BENCH_CORE_PARTS=settlement``, ``dealer`` or ``seamless`` runs one part; ``BENCH_CORE_SETTLE_PLAYERS`` the coup's
bets, 5,000 by default). The machine may be shared: compare old and new trees in the same run,
alternating, and give ``uptime``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

from bench.bench_worker import SERVICE, _settings, inbox_records
from services.core.contract import payload_of
from services.core.envelope import Envelope
from services.core.processor import Processor, ProcessorState, initial_state, step_encoded
from services.core.trust import Refusal, Sealed, verify
from services.runtime import intake
from services.runtime.compose import Composition
from services.runtime.memory import MemoryBus

COUPS = int(os.environ.get("BENCH_CORE_COUPS", "120"))
ROUNDS = 3
PARTS = os.environ.get("BENCH_CORE_PARTS", "dealer,settlement,seamless").split(",")
SEAMLESS_BETS = 20_000
SETTLE_PLAYERS = int(os.environ.get("BENCH_CORE_SETTLE_PLAYERS", "5000"))
SETTLE_STAGES = ("settlement.payout", "settlement.wallet")
SETTLE_TYPES = {"settlement.payout": ("BetAccepted", "CoupResolved"),
                "settlement.wallet": ("PlaceBet", "PayoutIssued")}  # fmt: skip


def best_us(records: int, run: Callable[[], Any]) -> float:
    """The best of :data:`ROUNDS` rounds of ``run``, CPU microseconds per record."""
    best = float("inf")
    for _ in range(ROUNDS):
        started = time.process_time()
        run()
        best = min(best, time.process_time() - started)
    return best / records * 1e6


def main() -> None:
    """The parts of :data:`PARTS`: the dealer's stages, settlement's on the speed coup."""
    if "dealer" in PARTS:
        dealer()
    if "settlement" in PARTS:
        settlement()
    if "seamless" in PARTS:
        seamless()


def dealer() -> None:
    """Print each stage's CPU microseconds per record and its ratio to ``json.loads``."""
    records = inbox_records(COUPS)
    settings = _settings("127.0.0.1:1")  # no broker is reached: the settings only name the keys
    (processor,) = Composition.from_settings(settings).service(SERVICE)
    guard = processor.guard
    assert guard is not None, "the composition root gives every processor a guard"
    envelopes = [intake.decode(value, logical) for logical, _, value in records]
    raws = [value for _, _, value in records]

    def loads() -> None:
        for raw in raws:
            json.loads(raw)

    def decode() -> None:
        for logical, _, value in records:
            intake.decode(value, logical)

    def admit() -> None:
        for env, raw in zip(envelopes, raws, strict=True):
            guard.admit(env, raw=raw)

    sealed = Sealed(kept=len(records))
    for env, raw in zip(envelopes, raws, strict=True):
        key = verify(env, guard.keys, raw=raw)
        assert not isinstance(key, Refusal), "bench worker's records are authentic"
        sealed.add(env.event_id, raw, key)
        assert guard.admit(env, raw=raw, sealed=sealed) is None, "what is sealed here is admitted"

    def admit_sealed() -> None:
        for env, raw in zip(envelopes, raws, strict=True):
            guard.admit(env, raw=raw, sealed=sealed)

    def payload() -> None:
        for env in envelopes:
            payload_of(env, tolerant=True)

    def step() -> None:
        state = initial_state(processor)
        for env, raw in zip(envelopes, raws, strict=True):
            step_encoded(processor, state, env, raw)

    def decode_step() -> None:
        state = initial_state(processor)
        for logical, _, value in records:
            step_encoded(processor, state, intake.decode(value, logical), value)

    n = len(records)
    base = best_us(n, loads)
    print(f"{n} {SERVICE} inputs ({COUPS} coups), load: {' '.join(f'{x:.2f}' for x in os.getloadavg()[:2])}")
    print(f"{'json.loads (baseline)':24s} {base:7.1f} CPU us/record")
    stages = [("decode", decode), ("admit", admit), ("admit, sealed here", admit_sealed), ("payload", payload), ("step", step),
              ("decode + step", decode_step)]  # fmt: skip
    for name, run in stages:
        us = best_us(n, run)
        print(f"{name:24s} {us:7.1f} CPU us/record; x{us / base:.1f} json.loads")


# --- settlement on the speed coup ------------------------------------------------------------------


def speed_coup(players: int) -> tuple[list[Envelope], int]:
    """The log of a speed-baccarat table (:mod:`bench.bench_speed`'s, ``players`` bets on one coup) as
    the dealer and settlement's stages write it on an in-memory log, and the offset where the coup
    begins (before it: the funding and the table's opening)."""
    import bench.bench_speed as speed  # noqa: PLC0415 (its aiokafka and broker imports: this part only)

    speed.PLAYERS = players
    wanted = ("dealer", *SETTLE_STAGES)
    bus = MemoryBus(p for p in Composition.demo().processors() if p.stage_name() in wanted)
    session, play, _took = speed.open_table(bus)
    start = len(bus.log)
    speed.open_coup(session, play, drain=True)
    speed.place_bets(session, play)
    session.drain()
    session.command("CloseBetting", speed.TABLE.table_id, {})
    session.command("DealCoup", speed.TABLE.table_id, {})
    session.drain()
    session.finish(play._play_out())
    return bus.log, start


def settlement() -> None:
    """Print settlement's CPU microseconds per input of the speed coup, by type, beside ``json.loads``."""
    log, start = speed_coup(SETTLE_PLAYERS)
    processors = {p.stage_name(): p for p in Composition.demo().processors()}
    print(f"settlement on a speed coup of {SETTLE_PLAYERS} bets, load: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg()[:2])}")  # fmt: skip
    for stage in SETTLE_STAGES:
        processor = processors[stage]
        before = [(e.topic, e.to_json()) for e in log[:start] if e.topic in processor.inputs]
        coup = [(e.topic, e.to_json()) for e in log[start:] if e.topic in processor.inputs]
        decoded = [(intake.decode(raw, topic), raw) for topic, raw in coup]
        spent: dict[str, float] = {}
        counts: dict[str, int] = {}
        for env, _raw in decoded:
            counts[env.type] = counts.get(env.type, 0) + 1
        for _ in range(ROUNDS):
            state = _stepped(processor, before)
            for kind, took in _step_by_type(processor, state, decoded).items():
                spent[kind] = min(spent.get(kind, float("inf")), took)
        for kind in SETTLE_TYPES[stage]:
            # a CoupResolved is timed per payout it writes, beside reading the payouts it wrote
            per, n = ("a payout", SETTLE_PLAYERS) if kind == "CoupResolved" else ("a record", counts[kind])
            read = "PayoutIssued" if kind == "CoupResolved" else kind
            raws = [e.to_json() for e in log[start:] if e.type == read]
            base = best_us(len(raws), lambda raws=raws: [json.loads(r) for r in raws])  # type: ignore[misc]
            us = spent[kind] / n * 1e6
            print(f"{stage:18s} {kind:13s} x{counts[kind]:<5d} {us:6.1f} CPU us {per}; "
                  f"x{us / base:.1f} json.loads of each {read} ({base:.1f} us)")  # fmt: skip
    wallet = processors["settlement.wallet"]
    before = [(e.topic, e.to_json()) for e in log[:start] if e.topic in wallet.inputs]
    coup_envelopes = [e for e in log[start:] if e.topic in wallet.inputs]
    raws = [e.to_json() for e in coup_envelopes if e.type == "PayoutIssued"]
    base = best_us(len(raws), lambda: [json.loads(r) for r in raws])
    for way, own in (("decoded", False), ("own output", True)):
        took = min(_pipe_payouts(wallet, before, coup_envelopes, own=own) for _ in range(ROUNDS))
        us = took / len(raws) * 1e6
        print(f"kafka Pipe, wallet PayoutIssued, {way:10s} {us:6.1f} CPU us a record; "
              f"x{us / base:.1f} json.loads ({base:.1f} us)")  # fmt: skip


def _pipe_payouts(
    wallet: Processor[Any], before: list[tuple[str, bytes]], records: list[Envelope], *, own: bool
) -> float:
    """CPU seconds of a Kafka :class:`Pipe` of the wallet stage (its state after ``before``) applying
    the ``PayoutIssued`` of ``records`` (the others applied untimed, in order): decoding and verifying
    each, or (``own``) taking each as the envelope the payout stage sealed beside it and admitting it
    by its bytes (:class:`OwnOutputs`, filled as the payout stage's step and the worker's sends fill
    it; the payout stage signs with the key of settlement, the wallet stage's own)."""
    from services.runtime.kafka.worker import OwnOutputs, Pipe  # noqa: PLC0415 (faust: this part only)
    from services.runtime.settings import Settings  # noqa: PLC0415

    outputs = OwnOutputs(wallet.inputs) if own else None
    pipe = Pipe(wallet, Settings(), outputs)
    pipe.state = _stepped(wallet, before)
    encoded = [(env, env.to_json()) for env in records]
    if outputs is not None:
        guard = wallet.guard
        assert guard is not None, "the composition root gives every processor a guard"
        for env, value in encoded:
            if env.type == "PayoutIssued":  # as the payout stage's step and the worker's send keep them
                outputs.keep(env, value)
                outputs.sealed.add(env.event_id, value, guard.own, env.topic)
    clock, spent = time.process_time, 0.0
    for n, (env, value) in enumerate(encoded):
        started = clock()
        pipe.apply(env.topic, 0, n, value)
        if env.type == "PayoutIssued":
            spent += clock() - started
    return spent


def _stepped(processor: Processor[Any], records: list[tuple[str, bytes]]) -> ProcessorState[Any]:
    """A fresh state of ``processor`` stepped through ``records`` (untimed)."""
    state = initial_state(processor)
    for topic, raw in records:
        step_encoded(processor, state, intake.decode(raw, topic), raw)
    return state


def _step_by_type(
    processor: Processor[Any], state: ProcessorState[Any], records: list[tuple[Envelope, bytes]]
) -> dict[str, float]:
    """CPU seconds of stepping ``records`` in order, summed by input type (one clock read a record)."""
    clock = time.process_time
    spent: dict[str, float] = {}
    last = clock()
    for env, raw in records:
        step_encoded(processor, state, env, raw)
        now = clock()
        spent[env.type] = spent.get(env.type, 0.0) + now - last
        last = now
    return spent


# --- the seamless adapter's state machine -------------------------------------------------------------


def seamless() -> None:
    """Print the CPU us a bet of the seamless state machine over the first and last quarter of
    :data:`SEAMLESS_BETS` bets, and their ratio."""
    from services.core.seamless import (  # noqa: PLC0415 (this part only)
        RetryPolicy,
        SeamlessState,
        call_for,
        enqueue,
        fingerprint,
        fold_answer,
    )

    policy, state = RetryPolicy(), SeamlessState()
    quarter = SEAMLESS_BETS // 4
    spent: list[float] = []
    clock = time.process_time
    started = clock()
    for n in range(SEAMLESS_BETS):
        p = {"bet_id": f"b{n}", "table_id": "T1", "coup_id": "T1/S1/1", "spot": "banker",
             "stake_minor": 100, "currency": "EUR"}  # fmt: skip
        account = f"p{n % 5000}"
        call = call_for("PlaceBet", p, account)
        state, _ = enqueue(state, call, fingerprint("PlaceBet", p), policy)
        answer = {"transaction_id": call.transaction_id, "account_id": account, "attempt": 0,
                  "status": "ok", "balance_minor": 1_000_000, "elapsed_ms": 1}  # fmt: skip
        state, _ = fold_answer(state, answer, policy)
        if (n + 1) % quarter == 0:
            now = clock()
            spent.append((now - started) / quarter * 1e6)
            started = now
    print(f"seamless state machine, {SEAMLESS_BETS} bets on 5,000 wallets: {spent[0]:.1f} CPU us a bet "
          f"(first quarter), {spent[-1]:.1f} (last quarter): x{spent[-1] / spent[0]:.2f}")  # fmt: skip
