"""What audit and the monitor write: findings and checkpoints on ``casino.audit.findings``, alerts on
``casino.monitor.alerts``; and the dead letters every processor writes on ``casino.deadletter``."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import (
    Field,
    StringConstraints,
    model_validator,
)

from services.core.contract.base import (
    BETS_MAX,
    BoundedJson,
    ChainHeadRecord,
    Count,
    Digest,
    Id,
    JsonObject,
    Name,
    OmitsUnset,
    Payload,
    Text,
)
from services.core.reasons import FindingReason, Reason, Severity

__all__ = [
    "AlertsDigest",
    "AnomalyDetected",
    "AuditCheckpoint",
    "AuditFinding",
    "DeadLetter",
    "TreeHead",
]

# --- casino.audit.findings ----------------------------------------------------------------------


class AuditFinding(Payload):
    """A discrepancy, with the ids that prove it (``subject``) and the expected and recorded values.
    ``table_id`` is the finding's key: the table, or the account for a wallet finding."""

    reason: FindingReason
    severity: Severity
    table_id: Id
    subject: JsonObject
    expected: BoundedJson = None
    recorded: BoundedJson = None
    detail: Text = ""


class AnomalyDetected(OmitsUnset):
    """A fraud or anomaly detector of the monitor fired (past-posting, shoe tampering, outliers, bet
    patterns): the stable ``detector`` code and its ``category``, the ids concerned (``subject``), what
    was ``observed`` against the ``threshold``. No floats: probabilities and z values are written as
    exact fractions or decimal strings. Written on ``casino.monitor.alerts`` (the monitor's own chained
    stream: audit is the only writer of ``casino.audit.findings``)."""

    dumped_only_when_given: ClassVar[frozenset[str]] = frozenset({"honest_probability", "account_ids"})

    detector: Name
    category: Name
    severity: Severity
    table_id: Id
    subject: JsonObject
    observed: JsonObject = Field(default_factory=dict)
    threshold: JsonObject = Field(default_factory=dict)
    detail: Text = ""
    honest_probability: Annotated[str, StringConstraints(min_length=1, max_length=64)] | None = None
    """A bound on the chance of what was seen under honest play (a decimal string), where known."""
    account_ids: Annotated[tuple[Id, ...], Field(max_length=64)] | None = None
    """Every account the alert concerns (both of a linked pair, a group's members), so that a filter by
    account finds the alert from any of them; ``subject`` holds the coups and bets behind it."""


class AlertsDigest(Payload):
    """The monitor's alerts at a table as audit saw them: how many, and the last one's hash."""

    count: Count
    head: Digest | None = None


TREE_TOPICS_MAX = 64
"""Topics one tree head lists."""

TREE_CHAINS_MAX = 1_000_000
"""Chains of one topic one tree head lists."""


class TreeHead(Payload):
    """Audit's signed tree head (RFC 6962 Merkle root) over the head of every chained stream it had
    verified, and of its own chains by length (``hash`` null); ``heads`` lists the leaves as
    ``{topic: {key: [seq, hash]}}``, ``size`` counts them, ``n`` numbers audit's tree heads
    (docs/trust.md, services/core/merkle.py)."""

    n: Count
    size: Count
    root: Digest
    heads: Annotated[
        dict[str, Annotated[dict[str, tuple[Count, Digest | None]], Field(max_length=TREE_CHAINS_MAX)]],
        Field(max_length=TREE_TOPICS_MAX),
    ]


class AuditCheckpoint(Payload):
    """A running digest every N rounds: rounds audited, the table's digest over its round records,
    the chain heads seen, findings at the table so far, the count and digest of the monitor's alerts at
    the table, audit's tree head over every chain (:class:`TreeHead`); optionally signed (Ed25519
    ``signature`` under ``key_id``; ``hmac-sha256`` is the legacy scheme, readable but not verifiable
    without the casino's secret)."""

    table_id: Id
    rounds: Count
    table_digest: Digest
    chain_heads: Annotated[dict[str, ChainHeadRecord], Field(max_length=BETS_MAX)]
    findings: Count
    alerts: AlertsDigest | None = None
    tree: TreeHead | None = None
    signature: Annotated[str, StringConstraints(min_length=1, max_length=1024)] | None = None
    key_id: Id | None = None
    algorithm: Literal["ed25519", "hmac-sha256"] | None = None

    @model_validator(mode="after")
    def _signature_has_key(self) -> AuditCheckpoint:
        if (self.signature is None) != (self.key_id is None):
            raise ValueError("a signature comes with its key_id, and a key_id with a signature")
        return self


# --- casino.deadletter --------------------------------------------------------------------------


class DeadLetter(Payload):
    """A record a processor could not apply: the reason code, a sentence, and the original bytes."""

    source_topic: Annotated[str, StringConstraints(min_length=1, max_length=249)]
    reason: Reason
    detail: Text
    original: str | None
    original_event_id: Id | None
