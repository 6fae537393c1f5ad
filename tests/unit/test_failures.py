"""Errors never print secrets (issue #8): settings errors are redacted, keys are named, not quoted."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from services.runtime.failures import ConfigError, one_line, settings_error
from services.runtime.settings import Settings, int_from_env, secret_from_hex

PASSWORD = "correct-horse-battery-staple"


@pytest.mark.parametrize(
    "broken",
    [
        {"CASINO_SECURITY_PROTOCOL": "SASL_SSL"},  # SASL without a user: a model-level error
        {"CASINO_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "CASINO_PARTITIONS": "six"},
        {"CASINO_HEARTBEAT_INTERVAL_S": "90", "CASINO_SESSION_TIMEOUT_S": "30"},
    ],
)
def test_a_settings_error_names_the_variable_and_never_the_password(
    broken: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """pydantic quotes the input (the password among it) in its own message; the line the command line
    prints from it names the variables and the problem only."""
    monkeypatch.setenv("CASINO_SASL_PASSWORD", PASSWORD)
    for name, value in broken.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError) as caught:
        Settings()
    line = settings_error(caught.value)
    assert line == one_line(caught.value)
    assert PASSWORD[-12:] not in line and PASSWORD[:12] not in line and "\n" not in line
    assert line.startswith("invalid settings: ")
    if "CASINO_PARTITIONS" in broken:
        assert "CASINO_PARTITIONS" in line


def test_pydantic_alone_would_have_printed_the_password(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reason for the redaction: pydantic's own message quotes (part of) the SASL password."""
    monkeypatch.setenv("CASINO_SASL_PASSWORD", PASSWORD)
    monkeypatch.setenv("CASINO_SECURITY_PROTOCOL", "SASL_SSL")
    with pytest.raises(ValidationError) as caught:
        Settings()
    tail = PASSWORD[-12:]  # pydantic cuts long inputs in the middle: the end of the password shows
    assert tail in str(caught.value)
    assert tail not in settings_error(caught.value)


def test_settings_hold_the_password_as_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """The password is a ``SecretStr``: the settings' repr and dump hide it; the client gets it."""
    monkeypatch.setenv("CASINO_SASL_PASSWORD", PASSWORD)
    monkeypatch.setenv("CASINO_SASL_USERNAME", "svc")
    monkeypatch.setenv("CASINO_SECURITY_PROTOCOL", "SASL_PLAINTEXT")
    settings = Settings()
    assert PASSWORD not in repr(settings) and PASSWORD not in str(settings.model_dump())
    assert settings.aiokafka_auth()["sasl_plain_password"] == PASSWORD


@pytest.mark.parametrize(
    ("text", "needle"), [("zz" + PASSWORD, "not a hex string"), ("ab" * 15, "too short"), ("", "too short")]
)
def test_a_bad_hex_key_is_named_never_quoted(text: str, needle: str) -> None:
    """A malformed key in the environment is a ``ConfigError`` naming the variable, without its value."""
    with pytest.raises(ConfigError) as caught:
        secret_from_hex("CASINO_SOME_KEY", text)
    assert "CASINO_SOME_KEY" in str(caught.value) and needle in str(caught.value)
    assert PASSWORD not in str(caught.value) and "abab" not in str(caught.value)
    assert secret_from_hex("CASINO_SOME_KEY", "ab" * 16) == bytes([0xAB]) * 16


@pytest.mark.parametrize(("text", "ok"), [("50", True), ("0", False), ("x", False), ("99999999999", False)])
def test_integer_settings_from_the_environment_are_checked(text: str, ok: bool) -> None:
    """An integer variable outside its range or not a number is a ``ConfigError`` naming it."""
    if ok:
        assert int_from_env("CASINO_N", text) == int(text)
        return
    with pytest.raises(ConfigError, match="CASINO_N"):
        int_from_env("CASINO_N", text)


def test_unknown_exceptions_are_not_explained() -> None:
    """Only environment and input failures get a one-line explanation; a bug is left to the last resort."""
    assert one_line(ZeroDivisionError("x")) is None
    assert one_line(KeyError("k")) is None
    full = "cannot write or read: No space left on device (the disk is full)"
    assert one_line(OSError(28, "No space left on device")) == full
