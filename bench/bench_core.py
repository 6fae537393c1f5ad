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

Run: ``.venv/bin/python -m bench core`` (``BENCH_CORE_COUPS`` sizes the session, 120 coups by default).
The machine may be shared: compare old and new trees in the same run, alternating, and give ``uptime``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

from bench.bench_worker import SERVICE, _settings, inbox_records
from services.core.contract import payload_of
from services.core.processor import initial_state, step_encoded
from services.core.trust import Refusal, Sealed, verify
from services.runtime import intake
from services.runtime.compose import Composition

COUPS = int(os.environ.get("BENCH_CORE_COUPS", "120"))
ROUNDS = 3


def best_us(records: int, run: Callable[[], Any]) -> float:
    """The best of :data:`ROUNDS` rounds of ``run``, CPU microseconds per record."""
    best = float("inf")
    for _ in range(ROUNDS):
        started = time.process_time()
        run()
        best = min(best, time.process_time() - started)
    return best / records * 1e6


def main() -> None:
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
