"""An alert's case (issue #29): what an analyst does with a monitor alert, and the fact that records it.

``WorkAlert`` is a request on ``casino.monitor.casework`` (keyed by the alert's id), written by the back
office only (:data:`services.core.trust.POLICY`), as a deposit is. It becomes a fact through its
consumer, the monitor's casework stage, which writes one chained ``AlertCaseChanged`` on
``casino.monitor.alerts`` keyed by the same alert id, naming the request's hash (``causation_hash``):
the step taken, or why it was refused (:data:`CASE_STEPS`).

The lifecycle: ``open`` (every alert, from the moment it is written) → ``acknowledged`` → ``assigned``
(to an analyst; reassigning is allowed) → ``closed`` with a note. ``closed`` is final.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, ClassVar, Final, Literal, Self

from pydantic import StringConstraints, model_validator

from services.core.contract.base import Currency, Id, Minor, OmitsUnset, Payload

__all__ = [
    "CASE_STEPS", "AlertCaseChanged", "CageDeposit", "CaseAction", "CaseStatus", "WorkAlert", "case_step",
]  # fmt: skip

CaseAction = Literal["acknowledge", "assign", "close"]
"""What an analyst may do with an alert."""

CaseStatus = Literal["open", "acknowledged", "assigned", "closed"]
"""Where an alert's case stands."""

Note = Annotated[str, StringConstraints(min_length=1, max_length=2000, pattern=r"\S")]
"""A closing note: at least one character that is not white space."""

CASE_STEPS: Final[Mapping[CaseAction, tuple[frozenset[str], CaseStatus]]] = {
    "acknowledge": (frozenset({"open"}), "acknowledged"),
    "assign": (frozenset({"open", "acknowledged", "assigned"}), "assigned"),
    "close": (frozenset({"open", "acknowledged", "assigned"}), "closed"),
}
"""Per action: the statuses it may be taken from, and the status it leads to. An alert may be assigned
(or closed) without an acknowledgement first; nothing follows ``closed``."""


def case_step(status: str, action: CaseAction) -> CaseStatus | None:
    """The status ``action`` leads to from ``status``, or ``None`` when it may not be taken from it."""
    allowed, after = CASE_STEPS[action]
    return after if status in allowed else None


class WorkAlert(OmitsUnset):
    """Back office: take one step on alert ``alert_id``'s case. ``by`` is the analyst acting (the API
    key's id), ``assignee`` whom an ``assign`` gives the case to, ``note`` why a ``close`` closes it
    (both required there, refused elsewhere)."""

    dumped_only_when_given: ClassVar[frozenset[str]] = frozenset({"assignee", "note"})

    alert_id: Id
    action: CaseAction
    by: Id
    assignee: Id | None = None
    note: Note | None = None

    @model_validator(mode="after")
    def _fields_of_action(self) -> Self:
        if (self.action == "assign") != (self.assignee is not None):
            raise ValueError("an assign names the assignee, and only an assign does")
        if (self.action == "close") != (self.note is not None):
            raise ValueError("a close carries a note, and only a close does")
        return self


class AlertCaseChanged(OmitsUnset):
    """Monitor (casework stage): the step a ``WorkAlert`` asked for on alert ``alert_id``, from
    ``status_before`` to ``status``; when it could not be taken (``refused``: ``step_not_allowed``,
    the case being elsewhere), ``status`` equals ``status_before`` and nothing changed."""

    dumped_only_when_given: ClassVar[frozenset[str]] = frozenset({"assignee", "note", "refused"})

    alert_id: Id
    action: CaseAction
    by: Id
    status_before: CaseStatus
    status: CaseStatus
    assignee: Id | None = None
    note: Note | None = None
    refused: Literal["step_not_allowed"] | None = None


class CageDeposit(Payload):
    """Monitor (account stage): a deposit made at cage ``cage_id``, handed to the monitor's cage stage
    on ``casino.monitor.cage`` (one key per cage: the deposits of every account in one order, which the
    wallet events, keyed by account, do not give). ``deposit_id`` is the ``FundsDeposited`` event's id."""

    cage_id: Id
    account_id: Id
    deposit_id: Id
    amount_minor: Minor
    currency: Currency
