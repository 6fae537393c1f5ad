"""The one vocabulary of reason codes (services.core.reasons)."""

from __future__ import annotations

import io
import tokenize
from enum import StrEnum
from pathlib import Path

import pytest

from services.core import reasons
from services.core.reasons import (
    CATEGORY,
    INTEGRITY_REASONS,
    ROOT_PRIORITY,
    Category,
    Detector,
    FindingReason,
    Reason,
    RefusalReason,
    ReplayReason,
)

SERVICES = Path(__file__).resolve().parents[2] / "services"

CODE_ENUMS: tuple[type[StrEnum], ...] = (
    Reason, RefusalReason, FindingReason, ReplayReason, Detector, Category,
)  # fmt: skip

CLEAN = [
    "core/processor.py",
    "dealer/processor.py",
    "settlement/payout_stage.py",
    "settlement/wallet_stage.py",
    "monitor/processor.py",
    "monitor/state.py",
    "monitor/alerts.py",
    "monitor/detectors.py",
    "monitor/sequential_detectors.py",
    "monitor/handlers.py",
    "monitor/dead_letters.py",
    "monitor/accounts.py",
    "simulation/adversaries.py",
    "audit/processor.py",
    "runtime/replay.py",
    "runtime/kafka/metrics.py",
    "runtime/report_html.py",
]
"""Modules that name every reason code by its enum member (the rest follow as they are converted)."""

NOT_CODES = {
    "dealer/processor.py": {"shoe_position"},  # a payload field, not a code
    "monitor/detectors.py": {"shoe_position"},
    "audit/processor.py": {"shoe_position"},
    "runtime/replay.py": {"shoe_position", "betting_closed"},  # a coup's fields in the report
}


def test_every_code_enum_lives_in_the_vocabulary() -> None:
    """No module but the vocabulary declares a StrEnum of codes (only trust's principals are elsewhere)."""
    found = {
        str(p.relative_to(SERVICES))
        for p in SERVICES.rglob("*.py")
        if "(StrEnum):" in p.read_text(encoding="utf-8")
    }
    assert found == {"core/reasons.py", "core/trust.py"}


def test_refusal_codes_are_reason_codes() -> None:
    """A business refusal's code is also a core Reason: one code, one meaning."""
    assert {r.value for r in RefusalReason} <= {r.value for r in Reason}


@pytest.mark.parametrize(("one", "other"), [(FindingReason, ReplayReason), (Reason, ReplayReason)])
def test_replay_codes_are_new(one: type[StrEnum], other: type[StrEnum]) -> None:
    """The replay's own codes are not findings under another name."""
    assert not {m.value for m in one} & {m.value for m in other}


def test_root_priority_orders_every_finding_and_replay_code_once() -> None:
    """Every finding and replay code has one rank in the replay's root order (none left out, none twice)."""
    assert len(ROOT_PRIORITY) == len(set(ROOT_PRIORITY))
    assert {*FindingReason, *ReplayReason, Reason.UNDECODABLE} <= set(ROOT_PRIORITY)
    assert set(ReplayReason) <= INTEGRITY_REASONS


@pytest.mark.parametrize("enum", CODE_ENUMS, ids=lambda e: e.__name__)
def test_values_are_snake_case_and_unique(enum: type[StrEnum]) -> None:
    """Codes are stable snake-case strings, each once per enum."""
    values = [m.value for m in enum]
    assert len(values) == len(set(values))
    assert all(v.replace("_", "").isalnum() and v == v.lower() for v in values)


@pytest.mark.parametrize("module", CLEAN)
def test_no_bare_reason_strings(module: str) -> None:
    """A converted module names reason codes by their member, never as a bare string literal."""
    codes = {m.value for e in CODE_ENUMS for m in e} - NOT_CODES.get(module, set())
    source = (SERVICES / module).read_text(encoding="utf-8")
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    bare = [(t.start[0], t.string) for t in tokens if t.type == tokenize.STRING and t.string[1:-1] in codes]
    assert bare == []


def test_the_vocabulary_is_documented() -> None:
    """The module says which order holds in each enum."""
    doc = reasons.__doc__ or ""
    for enum in CODE_ENUMS:
        assert f":class:`{enum.__name__}`" in doc


def test_every_detector_has_one_category() -> None:
    """Each detector belongs to exactly one family, and every family has a detector."""
    assert set(CATEGORY) == set(Detector)
    assert set(CATEGORY.values()) == set(Category)


def test_every_finding_code_is_emitted_somewhere() -> None:
    """A finding code is declared only if some module outside the vocabulary names it (one that is
    never emitted is a promise no check keeps: ``missing_payout`` was one, unpaid bets are the
    incomplete verdict's open items)."""
    sources = "\n".join(
        p.read_text(encoding="utf-8") for p in SERVICES.rglob("*.py") if p.name != "reasons.py"
    )
    assert [m.name for m in FindingReason if f"FindingReason.{m.name}" not in sources] == []
