"""Every CASINO_* variable is read through services.runtime.settings: one field at a time when a command
needs only that one."""

from __future__ import annotations

import pytest

from services.runtime.failures import ConfigError
from services.runtime.settings import Settings, conventions, setting


def test_one_setting_is_read_without_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    """A malformed setting a command never uses does not refuse it (the whole Settings would)."""
    monkeypatch.setenv("CASINO_PARTITIONS", "many")
    monkeypatch.setenv("CASINO_SQLITE_SYNCHRONOUS", " full ")
    assert setting("sqlite_synchronous") == "FULL"
    with pytest.raises(ValueError, match="partitions"):
        Settings()


def test_a_malformed_setting_names_its_variable_never_its_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """The error names CASINO_<FIELD> and the problem, as Settings' own bounds say, and not the value."""
    monkeypatch.setenv("CASINO_AUDIT_CHECKPOINT_EVERY", "0")
    with pytest.raises(ConfigError, match="CASINO_AUDIT_CHECKPOINT_EVERY") as err:
        setting("audit_checkpoint_every")
    monkeypatch.setenv("CASINO_SQLITE_SYNCHRONOUS", "s3cr3t-ish")
    with pytest.raises(ConfigError, match="CASINO_SQLITE_SYNCHRONOUS") as err:
        setting("sqlite_synchronous")
    assert "s3cr3t" not in str(err.value)


def test_an_explicit_environment_is_read_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``env`` given, the process environment is not consulted; empty means the default."""
    monkeypatch.setenv("CASINO_AUDIT_CHECKPOINT_EVERY", "9")
    assert setting("audit_checkpoint_every", {}) is None
    assert setting("audit_checkpoint_every", {"CASINO_AUDIT_CHECKPOINT_EVERY": " "}) is None
    assert setting("audit_checkpoint_every", {"CASINO_AUDIT_CHECKPOINT_EVERY": "7"}) == 7
    assert setting("audit_checkpoint_every") == 9


def test_the_read_model_url_stays_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """CASINO_READ_DB may carry a password: it is a secret value, hidden in a repr."""
    monkeypatch.setenv("CASINO_READ_DB", "postgresql+psycopg://u:pw@db/casino")
    url = setting("read_db")
    assert "pw" not in repr(url) and url.get_secret_value().endswith("@db/casino")


def test_conventional_variables_are_plain_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """LOG_LEVEL, SOURCE_DATE_EPOCH, CI, COLUMNS: read as written, never refused."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "not a number")
    monkeypatch.setenv("CI", "true")
    read = conventions()
    assert read.source_date_epoch == "not a number" and read.ci == "true"
