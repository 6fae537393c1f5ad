"""A Kafka worker reads its own outputs back without decoding or verifying them again
(:class:`OwnOutputs`): settlement's wallet stage takes the ``PayoutIssued`` its payout stage sealed as
that envelope, admitted by the worker's :class:`~services.core.trust.Sealed` memo, with the same outputs
as decoding and verifying the bytes would give; other bytes are decoded and verified in full."""

from __future__ import annotations

from typing import Any

import pytest

from services.core import topics
from services.core.envelope import Envelope
from services.runtime import intake
from services.runtime.compose import Composition
from services.runtime.kafka.worker import OwnOutputs, Pipe
from services.runtime.settings import Settings
from services.simulation.simulator import DEFAULT_TABLES, Session
from tests.helpers.membus import MemBus
from tests.helpers.spies import count_verify
from tests.kafka.toy import add


def _settlement() -> dict[str, Any]:
    return {p.stage_name(): p for p in Composition.demo().processors() if p.name == "settlement"}


def _log() -> list[Envelope]:
    bus = MemBus()
    Session(bus, seed=5).run([DEFAULT_TABLES[0]], 3)
    return bus.log


def _wallet_outputs(log: list[Envelope], own: OwnOutputs | None) -> list[tuple[str, bytes]]:
    """The wallet stage's outputs over the log's wallet requests, after the payout stage's pipe stepped
    the table events and its outputs were kept in ``own`` (as :meth:`Shell.send` does)."""
    stages = _settlement()
    payout = Pipe(stages["settlement.payout"], Settings(), own)
    wallet = Pipe(stages["settlement.wallet"], Settings(), own)
    sealed: dict[str, bytes] = {}
    for n, rec in enumerate(e for e in log if e.topic == topics.TABLE_EVENTS):
        for env, value in payout.apply(topics.TABLE_EVENTS, 0, n, rec.to_json()):
            sealed[env.event_id] = value
            if own is not None:
                own.keep(env, value)
    out = []
    for n, rec in enumerate(e for e in log if e.topic == topics.WALLET_REQUESTS):
        raw = sealed.get(rec.event_id, rec.to_json())  # the payout stage's own bytes where it wrote it
        out.extend((env.type, value) for env, value in wallet.apply(topics.WALLET_REQUESTS, 0, n, raw))
    return out


def test_the_wallet_stage_reads_the_payouts_sealed_beside_it_without_decoding_and_writes_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every ``PayoutIssued`` the payout stage sealed is taken from :class:`OwnOutputs` (no decode of a
    payout), none is left over, and the wallet stage writes byte for byte what it writes decoding."""
    log = _log()
    decoding = _wallet_outputs(log, None)
    decoded: list[str] = []
    real = intake.decode

    def counted(raw: bytes | None, topic: str | None = None) -> Envelope:
        env = real(raw, topic)
        decoded.append(env.type)
        return env

    monkeypatch.setattr(intake, "decode", counted)
    own = OwnOutputs([topics.TABLE_EVENTS, topics.WALLET_REQUESTS])
    taken: list[tuple[Envelope, bytes]] = []
    real_take = own.take

    def take(value: bytes | None, topic: str) -> Envelope | None:
        env = real_take(value, topic)
        if env is not None and value is not None:
            taken.append((env, value))
        return env

    monkeypatch.setattr(own, "take", take)
    verified = count_verify(monkeypatch, lambda env: env.type)
    kept = _wallet_outputs(log, own)
    assert taken and all(real(value, env.topic) == env for env, value in taken)  # what decoding gives
    assert "PayoutIssued" not in verified and "PlaceBet" in verified  # sealed here: admitted, not verified
    assert kept == decoding
    assert any(kind == "PayoutApplied" for kind, _ in kept)
    assert "PayoutIssued" not in decoded and "PlaceBet" in decoded
    assert not own.envelopes


def test_bytes_not_exactly_those_sealed_are_decoded_and_checked() -> None:
    """A record kept is taken only under its very bytes and topic: altered bytes under a sealed id (a
    forged MAC) are neither taken nor admitted by the memo, but decoded, verified in full and refused;
    another topic's reader does not get it; a tombstone is no hit."""
    stages = _settlement()
    own = OwnOutputs([topics.WALLET_REQUESTS])
    log = _log()
    pipe = Pipe(stages["settlement.payout"], Settings(), own)
    outputs = [o for n, e in enumerate(log) if e.topic == topics.TABLE_EVENTS
               for o in pipe.apply(topics.TABLE_EVENTS, 0, n, e.to_json())]  # fmt: skip
    for env, value in outputs:
        own.keep(env, value)
    env, value = next((e, v) for e, v in outputs if e.type == "PayoutIssued")
    assert env.auth is not None
    forged = value.replace(env.auth["mac"].encode(), b"0" * len(env.auth["mac"]))
    assert own.sealed.key_of(env.event_id, value) is not None  # the id is sealed here, these bytes
    assert own.sealed.key_of(env.event_id, forged) is None  # not those
    assert own.take(forged, topics.WALLET_REQUESTS) is None
    assert own.take(None, topics.WALLET_REQUESTS) is None
    assert own.take(value, topics.TABLE_EVENTS) is None  # and it is let go
    wallet = Pipe(stages["settlement.wallet"], Settings(), own)
    ((letter, _),) = wallet.apply(topics.WALLET_REQUESTS, 0, 0, forged)
    assert letter.type == "DeadLetter" and letter.payload["reason"] == "unauthenticated"


def test_a_processor_that_judges_its_inputs_bytes_decodes_every_record() -> None:
    """Audit (``validates_inputs`` off: it checks hashes itself) gets no :class:`OwnOutputs`."""
    (audit,) = [p for p in Composition.demo().processors() if p.stage_name() == "audit"]
    assert not audit.validates_inputs
    own = OwnOutputs(audit.inputs)
    assert Pipe(audit, Settings(), own).own is None
    assert Pipe(_settlement()["settlement.wallet"], Settings(), own).own is own


def test_only_what_the_pipes_read_is_kept_and_the_oldest_go_first() -> None:
    """Outputs to a topic no pipe of the worker reads are not kept; past ``kept`` the oldest go."""
    own = OwnOutputs([topics.WALLET_REQUESTS], kept=2)
    records = [add(f"acct-{n}", 0, n + 1) for n in range(3)]
    for env in records:
        own.keep(env, env.to_json())
    assert list(own.envelopes.values()) == records[1:]
    own.keep(records[0].model_copy(update={"topic": topics.TABLE_EVENTS}), b"elsewhere")
    assert b"elsewhere" not in own.envelopes
    assert own.take(records[2].to_json(), topics.WALLET_REQUESTS) is records[2]
    assert own.take(records[2].to_json(), topics.WALLET_REQUESTS) is None
