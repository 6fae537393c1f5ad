"""The pure parts of the Kafka runtime: the codec, the settings, the topic spec parser, the pipe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from services.core import topics
from services.core.envelope import request
from services.core.errors import Reason
from services.runtime import intake
from services.runtime.kafka.worker import RETENTION_FOREVER_MS, Pipe, TopicSpec, load_topic_specs
from services.runtime.settings import Settings
from tests.kafka.toy import Toy, add

DEPOSIT = add("acct-1", 0, 5)


def test_encode_then_decode_gives_the_same_envelope_and_key() -> None:
    """A record's value is the canonical JSON of its envelope and decodes back to an equal envelope."""
    assert intake.decode(intake.encode(DEPOSIT), topics.WALLET_REQUESTS) == DEPOSIT
    assert intake.encode(DEPOSIT) == DEPOSIT.to_json()
    assert intake.encode_key(DEPOSIT) == b"acct-1"


@pytest.mark.parametrize(
    ("raw", "topic", "reason"),
    [
        (None, None, Reason.UNDECODABLE),
        (b"\xff\xfe", None, Reason.UNDECODABLE),
        (b"not json", None, Reason.UNDECODABLE),
        (b"[1, 2]", None, Reason.UNDECODABLE),
        (b'{"event_id": "x"}', None, Reason.UNDECODABLE),
        (DEPOSIT.to_json(), topics.TABLE_INBOX, Reason.INVALID_PAYLOAD),
    ],
)
def test_decode_errors_carry_a_reason_and_the_raw_bytes(
    raw: bytes | None, topic: str | None, reason: Reason
) -> None:
    """Anything that is not an envelope for its topic raises DecodeError with a reason code and the bytes."""
    with pytest.raises(intake.DecodeError) as info:
        intake.decode(raw, topic)
    assert info.value.reason is reason
    assert info.value.raw == raw
    assert info.value.detail


@given(st.binary(max_size=200))
def test_decode_never_raises_anything_but_decode_error(raw: bytes) -> None:
    """Arbitrary bytes either decode or raise DecodeError: nothing else escapes to crash a worker."""
    try:
        intake.decode(raw)
    except intake.DecodeError as exc:
        assert exc.reason in (Reason.UNDECODABLE, Reason.INVALID_PAYLOAD)


def test_occurred_at_and_identity_of_broken_records() -> None:
    """A broken record's claimed time and id are read when present, never invented from the clock."""
    assert intake.occurred_at_of(b"junk") == intake.EPOCH_OCCURRED_AT
    assert intake.occurred_at_of(b'{"occurred_at": "2026-01-01T00:00:00.000Z"}') == "2026-01-01T00:00:00.000Z"
    assert intake.identity_of(DEPOSIT.to_json()) == (DEPOSIT.event_id, "test")
    assert intake.identity_of(b"[]") == (None, None)


def test_settings_read_casino_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """CASINO_* variables configure Settings; the prefix and kafka:// scheme are handled."""
    monkeypatch.setenv("CASINO_BOOTSTRAP_SERVERS", "kafka://a:9092, b:9093")
    monkeypatch.setenv("CASINO_TOPIC_PREFIX", "prod.")
    monkeypatch.setenv("CASINO_PARTITIONS", "12")
    s = Settings()
    assert s.bootstrap_list == ["a:9092", "b:9093"]
    assert s.partitions == 12
    assert s.topic(topics.TABLE_INBOX) == "prod.casino.table.inbox"
    assert s.logical("prod.casino.table.inbox") == topics.TABLE_INBOX
    assert s.aiokafka_auth() == {"security_protocol": "PLAINTEXT"}


def test_sasl_ssl_settings_give_aiokafka_credentials_and_a_verifying_context() -> None:
    """SASL_SSL yields the mechanism, the credentials and a TLS context that verifies the broker."""
    s = Settings(
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="u",
        sasl_password="s3cret-pw",
    )
    auth = s.aiokafka_auth()
    assert auth["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (auth["sasl_plain_username"], auth["sasl_plain_password"]) == ("u", "s3cret-pw")
    assert auth["ssl_context"].check_hostname is True
    assert "s3cret-pw" not in repr(s)


@pytest.mark.parametrize(
    "fields",
    [
        {"security_protocol": "SASL_SSL"},
        {"partitions": 0},
        {"heartbeat_interval_s": 10.0, "session_timeout_s": 6.0},
    ],
)
def test_settings_refuse_inconsistent_values(fields: dict[str, object]) -> None:
    """SASL without a user, no partitions, a heartbeat slower than the session: fail."""
    with pytest.raises(ValidationError):
        Settings(**fields)  # type: ignore[arg-type]


def test_topic_specs_parse_defensively(tmp_path: Path) -> None:
    """The topic list is read at top level or under ``topics:``; odd entries skipped, retention parsed."""
    text = """
topics:
- topic: a
  key: table_id
  partitions: 3
  retention: 'forever (retention.ms=-1)'
- topic: b
  retention: 604800000
- {key: no_name}
- just a string
- name: c
  partitions: zero
"""
    (tmp_path / "t.yaml").write_text(text)
    (tmp_path / "l.yaml").write_text("- topic: a\n")
    assert load_topic_specs(tmp_path / "t.yaml") == [
        TopicSpec("a", 3, RETENTION_FOREVER_MS),
        TopicSpec("b", None, 604800000),
        TopicSpec("c", None, RETENTION_FOREVER_MS),
    ]
    assert load_topic_specs(tmp_path / "l.yaml") == [TopicSpec("a")]


def test_pipe_dead_letters_undecodable_bytes_with_a_stable_id() -> None:
    """Undecodable bytes become one dead letter keyed by the source topic, the same on every re-delivery."""
    pipe = Pipe(Toy(), Settings())
    first = pipe.apply(topics.WALLET_REQUESTS, 2, 17, b"\x00garbage")
    again = Pipe(Toy(), Settings()).apply(topics.WALLET_REQUESTS, 2, 17, b"\x00garbage")
    assert first == again
    ((letter, value),) = first
    assert value == letter.to_json()  # the bytes the worker sends
    assert (letter.topic, letter.key, letter.payload["reason"]) == (
        topics.DEADLETTER,
        topics.WALLET_REQUESTS,
        "undecodable",
    )
    assert letter.payload["original"] == "\x00garbage"
    assert pipe.apply(topics.WALLET_REQUESTS, 2, 18, b"\x00garbage")[0][0].event_id != letter.event_id


def test_pipe_applies_a_record_once() -> None:
    """A record applied twice (a re-delivery) yields its outputs the first time only."""
    pipe = Pipe(Toy(), Settings())
    raw = DEPOSIT.to_json()
    outputs = pipe.apply(topics.WALLET_REQUESTS, 0, 0, raw)
    assert [json.loads(value)["payload"] for _, value in outputs] == [{"n": 5, "total": 5}]
    assert [value for _, value in outputs] == [o.to_json() for o, _ in outputs]
    assert pipe.apply(topics.WALLET_REQUESTS, 0, 1, raw) == []


def test_request_on_a_wrong_topic_is_not_applied() -> None:
    """An envelope naming another topic is dead-lettered as invalid_payload and leaves the state alone."""
    pipe = Pipe(Toy(), Settings())
    payload = {"account_id": "acct-1", "amount_minor": 5, "currency": "EUR"}
    stray = request(
        "Deposit", topics.TABLE_INBOX, "acct-1", payload,
        event_id="stray", occurred_at="2026-01-01T00:00:00.000Z", producer="test",
    )  # fmt: skip
    ((letter, _),) = pipe.apply(topics.WALLET_REQUESTS, 0, 0, stray.to_json())
    assert letter.payload["reason"] == "invalid_payload"
    assert pipe.state.applied == set()
