"""The alerts a dead letter raises: a record refused at the input by its topic's primary consumer
(:func:`refused_record`, docs/trust.md) or a processor's internal error (:func:`dead_letter_alert`),
keyed by the table or the topic they concern (the key :meth:`Monitor.route
<services.monitor.processor.Monitor.route>` re-keys a dead letter by)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from services.core import topics
from services.core.contract import DeadLetter
from services.core.envelope import Envelope
from services.core.errors import Reason
from services.core.reasons import Detector, Severity
from services.core.trust import PRIMARY_CONSUMER, REFUSALS
from services.monitor.alerts import Alerts, alert

DEAD_LETTER_ALERTS: Final[Mapping[Reason, tuple[Detector, Severity]]] = {
    Reason.INTERNAL_ERROR: (Detector.INTERNAL_ERROR, Severity.CRITICAL),
}
"""Dead-letter reasons that raise an alert: a processor failed on a record (a bug or a hole in
validation that a record found) — the record is set aside and play goes on, so someone must look."""


def dead_letter_alert(rec: Envelope, dead: DeadLetter, own_name: str) -> Alerts:
    """The alert a dead letter raises, if its reason is one of :data:`DEAD_LETTER_ALERTS`. Keyed by the
    original record's table when it came from a table-keyed topic (:data:`~services.core.topics.TABLE_KEYED`:
    the table's own alert chain, which this stage writes), else by the source topic: never by an account
    or an alert id, whose chains the account and casework stages write (one writer per chain). An
    account's record names its account in ``account_ids``, so the back office still finds it by account.
    The monitor's own dead letters raise nothing: a failure on a dead letter must not feed itself."""
    found = DEAD_LETTER_ALERTS.get(dead.reason)
    if found is None or rec.producer == own_name:
        return []
    source = dead.source_topic
    named = None
    try:
        original = json.loads(dead.original or "")
        if isinstance(original, dict) and isinstance(original.get("key"), str):
            named = "".join(original["key"].split())[:256] or None
    except (ValueError, RecursionError):
        pass
    key = (named if source in topics.TABLE_KEYED else None) or "".join(source.split())[:256] or rec.key
    detector, severity = found
    original_id = dead.original_event_id
    subject: dict[str, Any] = {"event_ids": [rec.event_id, *([original_id] if original_id else [])]}
    if named and source in topics.ACCOUNT_KEYED:
        subject["account_id"] = named
    observed = {"reason": dead.reason.value, "producer": rec.producer, "source_topic": source}
    return [
        alert(detector, severity, key, subject=subject, observed=observed, threshold={}, detail=dead.detail)
    ]


REFUSED_SEVERITY: Final[Mapping[Reason, Severity]] = {
    Reason.UNAUTHENTICATED: Severity.WARNING,
    Reason.NOT_PERMITTED: Severity.CRITICAL,
    Reason.KEY_MISMATCH: Severity.CRITICAL,
    Reason.TRANSFER_ID_NOT_OWN: Severity.CRITICAL,
    Reason.NOT_A_PLAYER_ACCOUNT: Severity.CRITICAL,
}
"""An unauthenticated record is a writer without our key (a stranger, a misconfigured system); a
known principal writing beyond its rights is a compromised or rogue insider: critical."""


def refused_record(rec: Envelope, dead: DeadLetter) -> Alerts:
    """One ``refused_record`` alert for a record refused at the input by its topic's primary consumer
    (see the module docstring); nothing for any other dead letter."""
    reason, source = dead.reason, dead.source_topic
    primary = PRIMARY_CONSUMER.get(source)
    if reason not in REFUSALS or primary is None or rec.producer != primary.value:
        return []
    subject: dict[str, Any] = {
        "event_ids": [str(dead.original_event_id)],
        "dead_letter_id": rec.event_id,
    }
    try:
        original = json.loads(dead.original or "")
    except (ValueError, RecursionError):
        original = None
    if isinstance(original, dict):
        subject.update(
            {k: original[k] for k in ("type", "key", "producer") if isinstance(original.get(k), str)}
        )
    return [alert(
        Detector.REFUSED_RECORD, REFUSED_SEVERITY[reason], source,
        subject=subject, observed={"reason": reason.value}, threshold={},
        detail=f"refused at the input of {source}: {dead.detail}",
    )]  # fmt: skip
