"""Topic names and keys of the reference topology (docs/event-contract.md). Names may gain a prefix; keys
not."""

from __future__ import annotations

from typing import Final

WALLET_REQUESTS: Final = "casino.wallet.requests"
"""Keyed by account_id. Deposit, Withdraw, PlaceBet, PayoutIssued, BetRefundDue (many writers)."""

WALLET_EVENTS: Final = "casino.wallet.events"
"""Keyed by account_id. Written by settlement's wallet stage only (chained)."""

TABLE_INBOX: Final = "casino.table.inbox"
"""Keyed by table_id. Operator commands, card reads, decisions, BetPlaced (many writers)."""

TABLE_EVENTS: Final = "casino.table.events"
"""Keyed by table_id. Written by the dealer only (chained)."""

AUDIT_FINDINGS: Final = "casino.audit.findings"
"""Keyed by table_id. Written by audit only (chained)."""

MONITOR_ALERTS: Final = "casino.monitor.alerts"
"""Keyed by table_id (account_id for the per-account stage's alerts; the source topic for a dead letter's
alert about a record not keyed by table). ``AnomalyDetected``; written by the monitor only (chained), each
key by one of its stages."""

CASEWORK: Final = "casino.monitor.casework"
"""Keyed by alert id (the ``AnomalyDetected``'s event id). ``WorkAlert``: an analyst's step on an alert's
case (acknowledge, assign, close with a note), written by the back office only; the monitor's casework
stage turns each into a chained ``AlertCaseChanged`` on ``casino.monitor.alerts`` (issue #29)."""

CAGE: Final = "casino.monitor.cage"
"""Keyed by cage (one key: every deposit in one order). ``CageDeposit``: each deposit the monitor's
account stage reads, handed to its cage stage, which looks across accounts (structuring: many accounts
each depositing just under the reporting threshold). Written by the monitor only (issue #29)."""

DEADLETTER: Final = "casino.deadletter"
"""Keyed by source topic. The raw record and the reason."""

ATTEST: Final = "casino.attest"
"""Keyed by writer (a processing stage: ``dealer``, ``settlement.wallet``, ...). ``HeadsAttested``: the
heads of the chains a writer's batch advanced, signed with the writer's Ed25519 key (docs/trust.md);
written by that writer only (chained)."""

ALL_TOPICS: Final = (
    WALLET_REQUESTS, WALLET_EVENTS, TABLE_INBOX, TABLE_EVENTS, AUDIT_FINDINGS, MONITOR_ALERTS, CASEWORK,
    CAGE, DEADLETTER, ATTEST,
)  # fmt: skip
AUDIT_STAGED: Final = "casino.audit.staged"
"""Kafka only, not in :data:`ALL_TOPICS` (no regulator reads it): one partition, keyed by the key of the
audit record a stage of the partitioned audit staged. ``AuditStaged``: the findings and checkpoints a
per-partition stage derived and the chain heads it verified since its last one, which the tree stage
writes on ``casino.audit.findings`` with the tree head over every partition's heads
(docs/adr/0013-audit-per-partition.md). Written by audit only."""

TABLE_KEYED: Final = frozenset({TABLE_INBOX, TABLE_EVENTS})
"""Topics keyed by table_id."""
ACCOUNT_KEYED: Final = frozenset({WALLET_REQUESTS, WALLET_EVENTS})
"""Topics keyed by account_id."""
SIGNED_UNCHAINED: Final = frozenset({DEADLETTER, CAGE})
"""Unchained records a service writes that its writer's next ``HeadsAttested`` names by hash
(``dead_letters``): its dead letters, and the monitor's hand-offs to its cage stage; a regulator then
tells a deleted or changed one from an outsider's (docs/trust.md)."""

EVENT_STREAMS: Final = frozenset({WALLET_EVENTS, TABLE_EVENTS, AUDIT_FINDINGS, MONITOR_ALERTS, ATTEST})
NOT_IN_TREE_HEADS: Final = frozenset({ATTEST})
"""Chained streams audit's tree heads leave out: the writers' signed heads are signed themselves, and
how many a run writes depends on its batching (a resumed run, a Kafka worker per partition), so a tree
head over them would make audit's own checkpoints differ between runs of the same log."""
"""Topics with exactly one writer per key, whose records carry ``seq`` and ``prev_hash``."""


SERVICES: Final = ("dealer", "settlement", "audit", "monitor", "audit-tree")
"""The services, each one Kafka worker (settlement runs both its stages; audit its two per-partition
stages, and ``audit-tree`` the one that writes audit's records: docs/adr/0013-audit-per-partition.md)."""

OBSERVERS: Final = frozenset({"audit", "monitor", "audit-tree"})
"""The services whose outputs no table event or wallet credit waits for: they follow the log and catch
up on their own (the Kafka bus's ``advance`` does not wait for them, their workers may fetch less often:
``Settings.observer_fetch_max_wait_ms``)."""
