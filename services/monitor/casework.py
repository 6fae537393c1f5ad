"""The monitor's casework stage: an analyst's steps on alerts' cases, made facts (issue #29).

Input: ``casino.monitor.casework`` only (``WorkAlert`` from the back office, keyed by the alert's id).
Output: one ``AlertCaseChanged`` per request on ``casino.monitor.alerts``, keyed by the same alert id
(one chain per alert worked, never interleaved with a table's or an account's alerts), naming the
request it answers (``causation_hash``). A request that the case's status does not allow (an alert
acknowledged twice, any step on a closed case) is answered with ``refused``: the attempt is on the
record and nothing changed.

The stage does not know which alerts exist (it reads no alert): the back office checks that before it
writes, and its projector applies a case change only to an alert it holds.

State: the status of every case worked (a few bytes per alert an analyst touched).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any

from services.core import topics
from services.core.contract import AlertCaseChanged, CaseStatus, Payload, WorkAlert, case_step
from services.core.envelope import Envelope
from services.core.processor import Event, Observer
from services.core.values import immutable


@immutable
class CasesState:
    """The status of every alert's case worked, by alert id (an alert not here is ``open``)."""

    status: Mapping[str, CaseStatus] = field(default_factory=dict)


def work(status: CaseStatus, request: WorkAlert) -> AlertCaseChanged:
    """The fact that answers ``request`` on a case at ``status``: the step taken, or refused."""
    after = case_step(status, request.action)
    given: dict[str, Any] = {} if after is not None else {"refused": "step_not_allowed"}
    if request.assignee is not None:
        given["assignee"] = request.assignee
    if request.note is not None:
        given["note"] = request.note
    return AlertCaseChanged(
        alert_id=request.alert_id, action=request.action, by=request.by, status_before=status,
        status=status if after is None else after, **given,
    )  # fmt: skip


class Casework(Observer[CasesState]):
    """The casework stage of the monitor (see the module docstring)."""

    name = "monitor"
    writer = "monitor.casework"
    inputs = (topics.CASEWORK,)

    def initial(self) -> CasesState:
        """No case worked."""
        return CasesState()

    def react(
        self, state: CasesState, record: Envelope, payload: Payload | None
    ) -> tuple[CasesState, list[Event]]:
        """Answer a ``WorkAlert`` keyed by its alert (another key or type passes)."""
        if not isinstance(payload, WorkAlert) or payload.alert_id != record.key:
            return state, []
        changed = work(state.status.get(payload.alert_id, "open"), payload)
        out = [Event(record.key, record.occurred_at, changed)]
        if changed.refused is not None:
            return state, out
        return CasesState({**state.status, payload.alert_id: changed.status}), out
