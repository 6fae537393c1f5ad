"""An alert as the monitor's detectors raise it: the ``AnomalyDetected`` that :func:`alert` builds, the key
of the chain it goes to (:class:`Alert`), the event it fires on (:class:`Seen`), and the
``unreadable_event`` alert of a record the monitor cannot read (:data:`UNREADABLE`, :func:`unreadable`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from services.core.contract import AnomalyDetected
from services.core.envelope import Envelope
from services.core.errors import DomainError
from services.core.processor import Event
from services.core.reasons import CATEGORY, Detector, Severity
from services.core.values import immutable

DETAIL_MAX_CHARS: Final = 300
"""Longest ``detail`` sentence written (an unreadable record's error text is cut to this)."""


def alert(
    detector: Detector,
    severity: Severity,
    table_id: str,
    *,
    subject: Mapping[str, Any],
    observed: Mapping[str, Any],
    threshold: Mapping[str, Any],
    detail: str,
    honest_probability: str | None = None,
    key: str | None = None,
    accounts: list[str] | None = None,
) -> Alert:
    """An ``AnomalyDetected`` for the table's alert stream (``table_id`` is its key, unless ``key``
    names another: the account stage keys its alerts by account). ``honest_probability``: how
    likely what was seen is under honest play (a bound, as a decimal string), where one is known."""
    given: dict[str, Any] = {} if honest_probability is None else {"honest_probability": honest_probability}
    if accounts is None:  # every account the subject names (both of a pair), so a filter finds it from either
        named = subject.get("account_ids") or [subject.get("account_id")]
        accounts = [str(a) for a in named if a]
    if accounts:
        given["account_ids"] = list(dict.fromkeys(accounts))
    found = AnomalyDetected(
        detector=detector.value, category=CATEGORY[detector].value, severity=severity, table_id=table_id,
        subject=dict(subject), observed=dict(observed), threshold=dict(threshold),
        detail=detail[:DETAIL_MAX_CHARS], **given,
    )  # fmt: skip
    return Alert(key or table_id, found)


class Alert(NamedTuple):
    """An alert a detector raised: the key of the stream it goes to and the ``AnomalyDetected``."""

    key: str
    found: AnomalyDetected

    def event(self, occurred_at: str) -> Event:
        """The monitor's output event of this alert (sealed at its input's time)."""
        return Event(self.key, occurred_at, self.found)


@immutable
class Seen:
    """The event a detector fires on, as its alert names it: its id, its key (the table: the alert's
    key), and the coup and shoe it belongs to where it names them."""

    event_id: str
    key: str
    occurred_at: str
    coup_id: str | None = None
    shoe_id: str | None = None


Alerts = list[Alert]


UNREADABLE: Final = (LookupError, TypeError, ValueError, AttributeError, ArithmeticError, DomainError)
"""What reading a malformed payload can raise; it becomes an ``unreadable_event`` alert instead."""


def unreadable(record: Envelope, exc: Exception) -> Alert:
    """The ``unreadable_event`` alert of a table event the monitor could not use."""
    detail = f"{record.type} could not be read: {type(exc).__name__}: {exc}"
    return alert(
        Detector.UNREADABLE_EVENT, Severity.WARNING, record.key,
        subject={"event_ids": [record.event_id]}, observed={"type": record.type}, threshold={}, detail=detail,
    )  # fmt: skip
