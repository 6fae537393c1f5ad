"""Signed heads in tests: they follow a runtime's batches, so two runs that batch differently (group
commits, a restart, event-driven waits) write the same streams but their own ``casino.attest``."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

ATTEST = "casino.attest"

V = TypeVar("V")


def without_attestations(streams: Mapping[tuple[str, str], V]) -> dict[tuple[str, str], V]:
    """``streams`` (by topic and key) without the writers' signed heads."""
    return {k: v for k, v in streams.items() if k[0] != ATTEST}


def rows_without_attestations(rows: Sequence[Any]) -> list[Any]:
    """Log rows ``(topic, key, ...)`` or record bytes, without the signed heads."""
    return [r for r in rows if (r[0] if isinstance(r, tuple) else json.loads(r)["topic"]) != ATTEST]


def assert_every_chain_head_attested(raws: Sequence[bytes]) -> None:
    """Every chained stream's last record is named by a signed head of the log (its records as bytes)."""
    heads: dict[tuple[str, str], tuple[int, str]] = {}
    last: dict[tuple[str, str], tuple[int, str]] = {}
    for raw in raws:
        rec = json.loads(raw)
        if rec["topic"] == ATTEST:
            for h in rec["payload"]["heads"]:
                heads[(h["topic"], h["key"])] = (h["seq"], h["hash"])
        elif rec.get("seq") is not None:
            last[(rec["topic"], rec["key"])] = (rec["seq"], rec["hash"])
    assert last and {k: heads.get(k) for k in last} == last
