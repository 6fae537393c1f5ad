"""Independent folds of a log's records (raw JSON, none of the back office's code): what the read model
and the API must agree with."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from services.runtime.embedded.store import EmbeddedLog

TRANSFERS = {"FundsDeposited", "FundsWithdrawn", "StakeReserved", "StakeRefunded", "PayoutApplied"}


def records(path: Path) -> list[dict[str, Any]]:
    """Every record of the log as parsed JSON, in log order."""
    with EmbeddedLog(path, readonly=True) as log:
        return [json.loads(raw) for _o, _t, _k, raw in log.iter_all()]


def fold(path: Path) -> tuple[dict[str, int], dict[str, list[tuple[str, int, int]]]]:
    """(balance per account, statement per account as (transfer_id, amount, balance after)) from the
    postings of every transfer on casino.wallet.events."""
    balances: dict[str, int] = {}
    lines: dict[str, list[tuple[str, int, int]]] = {}
    for rec in records(path):
        if rec["topic"] != "casino.wallet.events" or rec["type"] not in TRANSFERS:
            continue
        moved: dict[str, int] = {}
        for posting in rec["payload"]["postings"]:
            moved[posting["account"]] = moved.get(posting["account"], 0) + posting["amount_minor"]
        for account, amount in moved.items():
            balances[account] = balances.get(account, 0) + amount
            lines.setdefault(account, []).append((rec["payload"]["transfer_id"], amount, balances[account]))
    return balances, lines
