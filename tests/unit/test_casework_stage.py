"""The monitor's casework stage (issue #29): an analyst's steps on alerts' cases made chained facts, a
step the case's status does not allow answered as refused, and a ``WorkAlert`` from anyone but the back
office refused at the input."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from services.core import topics
from services.core.contract import CASE_STEPS, WorkAlert, case_step
from services.core.envelope import Envelope, request
from services.core.processor import initial_state, step
from services.core.trust import Principal, authenticate
from services.runtime.compose import Composition
from services.runtime.keyring import new_keyring

RING = new_keyring()
STAGE = Composition(RING).casework()

ACTIONS = st.sampled_from(sorted(CASE_STEPS))


def work(
    n: int, alert_id: str, action: str, *, as_: Principal = Principal.BACKOFFICE, key: str = ""
) -> Envelope:
    payload: dict[str, Any] = {"alert_id": alert_id, "action": action, "by": "analyst-1"}
    if action == "assign":
        payload["assignee"] = f"analyst:{n % 3}"
    if action == "close":
        payload["note"] = f"note {n}"
    env = request("WorkAlert", topics.CASEWORK, key or alert_id, payload, event_id=f"w-{n}",
                  occurred_at=f"2026-01-01T00:00:{n % 60:02d}.000Z", producer=as_.value)  # fmt: skip
    return authenticate(env, RING.key(as_))


@settings(max_examples=40, deadline=None)
@given(steps=st.lists(st.tuples(st.sampled_from(("a1", "a2")), ACTIONS), max_size=12))
def test_each_step_is_answered_by_the_lifecycle(steps: list[tuple[str, str]]) -> None:
    """Every request gets one chained ``AlertCaseChanged`` keyed by its alert, naming it as its cause:
    the status the lifecycle leads to, or the status unchanged and ``step_not_allowed``."""
    state = initial_state(STAGE)
    model: dict[str, str] = {}
    for n, (alert_id, action) in enumerate(steps):
        rec = work(n, alert_id, action)
        out = step(STAGE, state, rec)
        assert len(out) == 1
        (fact,) = out
        before = model.get(alert_id, "open")
        after = case_step(before, action)  # type: ignore[arg-type]
        assert fact.type == "AlertCaseChanged" and fact.key == alert_id and fact.causation_hash == rec.hash
        assert fact.payload["status_before"] == before
        assert fact.payload["status"] == (after or before)
        assert fact.payload.get("refused") == (None if after else "step_not_allowed")
        model[alert_id] = after or before
    assert dict(state.inner.status) == {k: v for k, v in model.items() if v != "open"}


def test_closed_is_final() -> None:
    """Nothing is allowed from ``closed``; everything but acknowledge-again is allowed before it."""
    for action in CASE_STEPS:
        assert case_step("closed", action) is None
    assert case_step("acknowledged", "acknowledge") is None
    assert case_step("open", "close") == "closed" and case_step("assigned", "assign") == "assigned"


def test_a_work_alert_from_a_terminal_or_under_another_key_is_refused() -> None:
    """Only the back office may write ``WorkAlert``, keyed by the alert it names: a terminal's is
    ``not_permitted``, a back-office one keyed by another alert ``key_mismatch``; neither moves a case."""
    state = initial_state(STAGE)
    (forged,) = step(STAGE, state, work(1, "a1", "close", as_=Principal.TERMINAL))
    assert forged.type == "DeadLetter" and forged.payload["reason"] == "not_permitted"
    (moved,) = step(STAGE, state, work(2, "a1", "acknowledge", key="a2"))
    assert moved.type == "DeadLetter" and moved.payload["reason"] == "key_mismatch"
    assert dict(state.inner.status) == {}


def test_a_request_must_name_what_its_action_needs() -> None:
    """An assign without an assignee, a close without a note: refused by the contract."""
    import pydantic  # noqa: PLC0415

    for bad in ({"action": "assign"}, {"action": "close"}, {"action": "acknowledge", "note": "x"}):
        try:
            WorkAlert.model_validate({"alert_id": "a", "by": "b", **bad})
        except pydantic.ValidationError:
            continue
        raise AssertionError(bad)
