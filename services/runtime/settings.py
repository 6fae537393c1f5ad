"""Runtime settings, read from ``CASINO_*`` environment variables (pydantic-settings).

One :class:`Settings` object configures every shell: the Kafka clients (faust worker, raw aiokafka
consumers and producers, topic creation), the embedded log's path and the log format. Containers are
configured by environment only (``docker-compose.yml``, ``deploy/k8s/configmap.yaml``); every
``CASINO_<FIELD>`` variable there is a field here, which ``tests/unit/test_deploy_files.py`` checks.

This module is the only one that reads the environment (ruff's banned-api keeps ``os.environ`` out of
the others): a command that needs one setting reads it with :func:`setting`, validated as here but
without the fields it does not use; the few variables of wider conventions (``LOG_LEVEL``,
``SOURCE_DATE_EPOCH``, ``CI``, ``COLUMNS``) through :class:`Conventions`.

Defaults suit a developer's laptop: a plaintext broker on ``localhost:9092``, at-least-once processing
(correctness rests on idempotence by event id, never on Kafka transactions: docs/architecture.md) and faust's
own group timeouts. Tests shorten the timeouts (a first group join waits the rebalance timeout).
"""

from __future__ import annotations

import os
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    BeforeValidator,
    Field,
    SecretStr,
    ValidationError,
    create_model,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from services.core.limits import AMOUNT_MAX_MINOR, BALANCE_MAX_MINOR
from services.core.seamless import RetryPolicy
from services.runtime.failures import ConfigError, settings_error

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
Synchronous = Annotated[
    Literal["NORMAL", "FULL"], BeforeValidator(lambda v: v.strip().upper() if isinstance(v, str) else v)
]
"""``PRAGMA synchronous`` of the embedded log, in any case."""


# env_ignore_empty: a variable set to "" means the default (manifests list every setting, some empty)
_CONFIG = SettingsConfigDict(env_prefix="CASINO_", extra="ignore", frozen=True, env_ignore_empty=True)


class _Casino(BaseSettings):
    """``CASINO_*`` settings: the base of :class:`Settings` and of each one-field model of :func:`setting`."""

    model_config = _CONFIG


class Settings(_Casino):
    """Everything a shell needs to reach its log; each field is ``CASINO_<NAME>`` in the environment."""

    model_config = _CONFIG

    bootstrap_servers: str = Field(
        default="localhost:9092", description="comma-separated host:port list; a kafka:// prefix is accepted"
    )
    topic_prefix: str = Field(default="", description="prepended to every topic name (keys never change)")
    partitions: int = Field(default=6, ge=1, description="partitions of each topic created by the runtime")
    replication_factor: int = Field(
        default=1, ge=1, description="replicas of each topic created by the runtime"
    )
    security_protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: SaslMechanism = "PLAIN"
    sasl_username: str = ""
    sasl_password: SecretStr = SecretStr("")
    ssl_cafile: Path | None = Field(
        default=None, description="CA bundle for SSL / SASL_SSL; system CAs if unset"
    )
    data_dir: Path = Field(default=Path("var/faust"), description="faust's working data (writable)")
    state_snapshot_records: int = Field(
        default=2000,
        ge=1,
        le=10_000_000,
        description="a Kafka worker snapshots a partition's state after this many records applied",
    )
    state_snapshot_interval_s: float = Field(
        default=5.0,
        gt=0,
        le=86_400,
        description="a Kafka worker snapshots a partition's state at least this often while records come",
    )
    standby_stores: bool = Field(
        default=False,
        description="a Kafka worker keeps warm in its local store the state of the partitions other "
        "members own, following their changelogs (Kafka Streams' standby replicas): taking one over "
        "reads only what changed since",
    )
    db_path: Path = Field(default=Path("var/casino.db"), description="the embedded runtime's SQLite log")
    sqlite_synchronous: Synchronous = Field(
        default="NORMAL",
        description="the embedded log's fsync policy (WAL): NORMAL may lose the last batches on a power "
        "loss, never corrupt or half-apply one; FULL fsyncs every commit",
    )
    log_format: Literal["", "json", "console"] = Field(
        default="", description="empty: JSON unless on a terminal"
    )
    log_level: str = Field(default="", description="empty: $LOG_LEVEL or INFO")
    rebalance_timeout_s: float = Field(default=60.0, gt=0, description="the worker's rebalance timeout")
    session_timeout_s: float = Field(default=60.0, gt=0, description="the worker consumer's session timeout")
    heartbeat_interval_s: float = Field(default=3.0, gt=0, description="the worker consumer's heartbeat")
    fetch_max_wait_ms: int | None = Field(
        default=None, ge=1, le=1500,
        description="the worker consumer's fetch wait; unset: 1500 (fine where fetches wake)",
    )  # fmt: skip
    observer_fetch_max_wait_ms: int | None = Field(
        default=None, ge=1, le=1500,
        description="the audit and monitor workers' fetch wait (nothing on a table or a wallet waits for "
        "them); unset: fetch_max_wait_ms",
    )  # fmt: skip
    amount_max_minor: int = Field(
        default=AMOUNT_MAX_MINOR, ge=1, le=BALANCE_MAX_MINOR,
        description="the largest stake, deposit or withdrawal of one request (beyond: amount_too_large)",
    )  # fmt: skip
    connect_timeout_s: float = Field(
        default=5.0, gt=0, le=300, description="how long a command waits for a broker to accept a connection"
    )
    exactly_once: bool = Field(
        default=False,
        description="Kafka transactions: a batch's outputs and offsets committed together, read_committed "
        "readers (the broker must have them: a worker that is refused stops); off: idempotence alone",
    )
    batch_max: int = Field(default=500, ge=1, description="records a worker handles before awaiting acks")
    batch_wait_ms: int = Field(default=5, ge=1, description="longest wait to fill a batch")
    web_enabled: bool = Field(
        default=False,
        description="serve /metrics, /healthz, /readyz (faust's web server; one per process: distinct ports)",
    )
    web_port: int = Field(default=6066, ge=1, le=65535, description="port of /metrics, /healthz, /readyz")
    web_bind: str = Field(
        default="127.0.0.1",
        description="address the web server listens on; containers set 0.0.0.0 for probes and scrapes",
    )
    ready_max_lag: int = Field(
        default=100, ge=0,
        description="/readyz: records per assigned partition a caught-up worker may still have to handle",
    )  # fmt: skip
    keyring: Path | None = Field(
        default=None,
        description="the keyring file (`casino-ledger keys new`); every command and worker reads its keys "
        "from it",
    )
    demo_mode: bool = Field(
        default=False,
        description="demo/test mode: the public demo keyring and inbox-chosen shoe seeds are allowed",
    )
    public_keyring: str = Field(
        default="",
        description="the public keyring replay and heads verify with (`keys public`); --keys overrides",
    )
    audit_checkpoint_every: int | None = Field(
        default=None, ge=1, le=1 << 31,
        description="coups of a table between two signed audit checkpoints (live audit and replay must "
        "agree); unset: audit's default, 50",
    )  # fmt: skip
    read_db: SecretStr = Field(
        default=SecretStr(""),
        description="the back office's read model (an SQLAlchemy URL); unset: SQLite beside the log",
    )
    debug: str = Field(default="", description="1: a bug's traceback on stderr besides its one line")
    topic_spec: Path = Field(
        default=Path("schemas/topics.yaml"), description="topic list for `casino-ledger topics create`"
    )
    seamless_url: str = Field(
        default="",
        description="the operator's seamless wallet base URL; set: its wallets replace the internal wallet "
        "stage (https, or http on loopback only)",
    )
    seamless_secret: SecretStr = Field(
        default=SecretStr(""), description="the HMAC key that signs every seamless call (16+ characters)"
    )
    seamless_currencies: str = Field(
        default="", description="comma-separated currencies the operator keeps; empty: every currency"
    )
    seamless_timeout_s: float = Field(default=2.0, gt=0, le=60, description="one seamless call's timeout")
    seamless_backoff_base_ms: int = Field(
        default=100, ge=1, le=3_600_000, description="first retry's wait; doubles per retry"
    )
    seamless_backoff_max_ms: int = Field(
        default=5_000, ge=1, le=3_600_000, description="the longest wait between two retries"
    )
    seamless_debit_window_ms: int = Field(
        default=15_000, ge=1, le=3_600_000,
        description="a debit without a definite answer after this long is rolled back (the betting window)",
    )  # fmt: skip
    seamless_concurrency: int = Field(
        default=16, ge=1, le=4096, description="seamless calls in flight at most"
    )
    seamless_tls_verify: bool = Field(default=True, description="verify the operator's TLS certificate")
    seamless_ca_file: Path | None = Field(default=None, description="CA bundle for the operator's TLS")
    seamless_client_cert: Path | None = Field(default=None, description="client certificate (mutual TLS)")
    seamless_client_key: Path | None = Field(default=None, description="client certificate's private key")

    @model_validator(mode="after")
    def _check_security(self) -> Settings:
        if self.security_protocol.startswith("SASL") and not self.sasl_username:
            raise ValueError(f"security_protocol {self.security_protocol} needs CASINO_SASL_USERNAME")
        if self.heartbeat_interval_s >= self.session_timeout_s:
            raise ValueError("heartbeat_interval_s must be below session_timeout_s")
        self._check_seamless()
        return self

    def _check_seamless(self) -> None:
        if not self.seamless_url:
            return
        url = urlsplit(self.seamless_url)
        loopback = url.hostname in ("127.0.0.1", "localhost", "::1")
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError("seamless_url must be an http(s) URL")
        if url.scheme == "http" and not loopback:
            raise ValueError("seamless_url must use https (plain http only on loopback)")
        if len(self.seamless_secret.get_secret_value()) < 16:
            raise ValueError("seamless_url needs CASINO_SEAMLESS_SECRET (16 characters or more)")
        if self.seamless_backoff_base_ms > self.seamless_backoff_max_ms:
            raise ValueError("seamless_backoff_base_ms must not exceed seamless_backoff_max_ms")
        if any(not re.fullmatch(r"[A-Z]{3}", c) for c in self.seamless_currency_set or ()):
            raise ValueError("seamless_currencies is a comma-separated list of 3-letter codes")

    @property
    def seamless_currency_set(self) -> frozenset[str] | None:
        """The seamless currencies (``None``: every currency)."""
        names = [c.strip() for c in self.seamless_currencies.split(",") if c.strip()]
        return frozenset(names) if names else None

    @property
    def isolation_level(self) -> str:
        """What the Kafka readers see: committed records only with :attr:`exactly_once` (an aborted
        transaction's outputs must never count as written), else every record."""
        return "read_committed" if self.exactly_once else "read_uncommitted"

    @property
    def bootstrap_list(self) -> list[str]:
        """The servers as ``host:port`` strings, without a ``kafka://`` scheme."""
        return [s.strip().removeprefix("kafka://") for s in self.bootstrap_servers.split(",") if s.strip()]

    def topic(self, logical: str) -> str:
        """The physical name of a logical topic (``casino.table.inbox``): the prefix prepended."""
        return f"{self.topic_prefix}{logical}"

    def logical(self, physical: str) -> str:
        """The logical name of a physical topic (the prefix removed)."""
        return physical.removeprefix(self.topic_prefix)

    def ssl_context(self) -> ssl.SSLContext | None:
        """A verifying TLS context for SSL and SASL_SSL (``ssl_cafile`` or the system CAs), else None."""
        if self.security_protocol not in ("SSL", "SASL_SSL"):
            return None
        return ssl.create_default_context(cafile=str(self.ssl_cafile) if self.ssl_cafile else None)

    def aiokafka_auth(self) -> dict[str, Any]:
        """Keyword arguments for any aiokafka client: protocol, TLS context, SASL credentials."""
        auth: dict[str, Any] = {"security_protocol": self.security_protocol}
        context = self.ssl_context()
        if context is not None:
            auth["ssl_context"] = context
        if self.security_protocol.startswith("SASL"):
            auth["sasl_mechanism"] = self.sasl_mechanism
            auth["sasl_plain_username"] = self.sasl_username
            auth["sasl_plain_password"] = self.sasl_password.get_secret_value()
        return auth


def secret_from_hex(name: str, text: str, *, min_bytes: int = 16) -> bytes:
    """The key that environment variable ``name`` holds as hex; :class:`ConfigError` naming the variable,
    never quoting its value, when it is not hex or shorter than ``min_bytes``."""
    try:
        secret = bytes.fromhex(text.strip())
    except ValueError:
        raise ConfigError(f"{name} is not a hex string (expected {2 * min_bytes}+ hex digits)") from None
    if len(secret) < min_bytes:
        raise ConfigError(f"{name} is too short: a key has at least {min_bytes} bytes")
    return secret


def int_from_env(name: str, text: str, *, low: int = 1, high: int = 1 << 31) -> int:
    """The integer that environment variable ``name`` holds; :class:`ConfigError` when it is not one or
    lies outside ``[low, high]``."""
    try:
        value = int(text.strip())
    except ValueError:
        raise ConfigError(f"{name} must be an integer, not {text.strip()[:20]!r}") from None
    if not low <= value <= high:
        raise ConfigError(f"{name} must be between {low} and {high}, not {value}")
    return value


class Conventions(BaseSettings):
    """Variables of wider conventions some commands honour (no ``CASINO_`` prefix), read here too so that
    one module reads the environment. Plain text, never refused: each reader keeps its own default."""

    model_config = SettingsConfigDict(extra="ignore", frozen=True)

    log_level: str = Field(default="", description="the log level when CASINO_LOG_LEVEL is unset")
    log_format: str = Field(default="", description="json or console when CASINO_LOG_FORMAT is unset")
    source_date_epoch: str = Field(default="", description="reproducible builds: the report's time")
    ci: str = Field(default="", description="set on CI: no progress bar")
    columns: str = Field(default="", description="the terminal's width a user chose")


def conventions() -> Conventions:
    """The conventional variables, read now."""
    return Conventions()


def environment() -> dict[str, str]:
    """The whole environment, for a child process to inherit (the bus's worker processes)."""
    return dict(os.environ)


@cache
def _one(name: str, environ: bool) -> type[BaseModel]:
    """A model of :class:`Settings`'s field ``name`` alone (its type, bounds and default), read from the
    environment (``environ``) or validated from a mapping only."""
    field = Settings.model_fields[name]
    model: type[BaseModel] = create_model(  # type: ignore[call-overload]
        f"{name.title().replace('_', '')}Settings",
        __base__=_Casino if environ else BaseModel,
        **{name: (field.annotation, field)},
    )
    return model


def setting(name: str, env: Mapping[str, str] | None = None) -> Any:
    """Field ``name`` of :class:`Settings` as the environment (or ``env`` alone) sets ``CASINO_<NAME>``,
    validated as :class:`Settings` validates it, without reading the other fields: a command is not
    refused for a malformed setting it never uses. :class:`ConfigError` naming the variable (never its
    value) when it is malformed."""
    try:
        if env is None:
            return getattr(_one(name, environ=True)(), name)
        text = env.get(f"CASINO_{name.upper()}", "")
        return getattr(_one(name, environ=False).model_validate({name: text} if text.strip() else {}), name)
    except ValidationError as exc:
        raise ConfigError(settings_error(exc)) from None


def checkpoint_every(env: Mapping[str, str] | None = None) -> int:
    """The checkpoint cadence, live audit's and the replay's (they must agree):
    ``CASINO_AUDIT_CHECKPOINT_EVERY``, else audit's default (50)."""
    from services.audit.processor import CHECKPOINT_EVERY  # noqa: PLC0415 (audit's default, not its code)

    every: int | None = setting("audit_checkpoint_every", env)
    return every or CHECKPOINT_EVERY


@dataclass(frozen=True, slots=True)
class SeamlessConfig:
    """Where the operator's wallet is and how to reach it (``CASINO_SEAMLESS_*``)."""

    url: str
    secret: SecretStr
    currencies: frozenset[str] | None = None
    timeout_s: float = 2.0
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    concurrency: int = 16
    verify: bool = True
    ca_file: Path | None = None
    client_cert: Path | None = None
    client_key: Path | None = None

    def __repr__(self) -> str:
        return f"SeamlessConfig(url={self.url!r}, currencies={self.currencies!r}, secret=<hidden>)"

    def tls(self) -> ssl.SSLContext | bool:
        """httpx's ``verify``: a context with the CA bundle and client certificate, or a bool."""
        if not self.verify:
            return False
        if self.ca_file is None and self.client_cert is None:
            return True
        context = ssl.create_default_context(cafile=str(self.ca_file) if self.ca_file else None)
        if self.client_cert is not None:
            key = str(self.client_key) if self.client_key else None
            context.load_cert_chain(str(self.client_cert), key)
        return context
