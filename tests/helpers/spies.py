"""Spies on the trust boundary for tests that count what is verified in full."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from services.core import trust
from services.core.envelope import Envelope


def count_verify(
    monkeypatch: pytest.MonkeyPatch, what: Callable[[Envelope], str] = lambda env: env.event_id
) -> list[str]:
    """Replace :func:`services.core.trust.verify` by itself, recording ``what`` of each envelope it
    checks (the event id by default): the records admitted without it are those missing."""
    seen: list[str] = []
    real = trust.verify

    def counted(env: Envelope, *args: Any, **kwargs: Any) -> Any:
        seen.append(what(env))
        return real(env, *args, **kwargs)

    monkeypatch.setattr(trust, "verify", counted)
    return seen
