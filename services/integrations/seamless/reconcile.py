"""``casino-ledger reconcile``: the operator's transactions (its export) against ours (the log).

Ours: every seamless transaction the log shows a success answer for (``ok`` or ``duplicate`` in a
recorded ``SeamlessCallAnswered``), with the call and amount of its ``SeamlessCallRequested``.
Theirs: the rows of the operator's export (JSON or CSV, the format of
:mod:`services.integrations.seamless.reference_wallet`). Every difference is listed, one per line:

* ``applied_twice`` — one transaction id on more than one of the operator's rows;
* ``missing_at_operator`` — we hold an answer saying it was applied, the operator has no row;
* ``missing_here`` — the operator applied it, our log has no success for it;
* ``amount_mismatch`` — both have it, with another amount, account or kind;
* ``debit_not_closed`` / ``closed_twice`` — an operator debit with no credit or rollback for its
  bet, or with more than one.

A debit the adapter gave up on (no definite answer in the betting window) was rolled back: the
operator may hold it with its rollback (of the same amount) or only the rollback (amount 0, a
cancellation); both are right, and neither is a difference.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.core.envelope import Envelope, parse_record
from services.core.seamless import SUCCESS
from services.integrations.seamless.reference_wallet import EXPORT_COLUMNS, EXPORT_FORMAT


class BadExport(ValueError):
    """The operator's export is not in the documented format."""


@dataclass(frozen=True, slots=True)
class Difference:
    """One difference: its kind, the transaction, and what each side says."""

    kind: str
    transaction_id: str
    ours: Any = None
    theirs: Any = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return {
            "kind": self.kind,
            "transaction_id": self.transaction_id,
            "ours": self.ours,
            "theirs": self.theirs,
        }


def load_export(path: str | Path) -> list[dict[str, Any]]:
    """The transaction rows of an operator export (JSON, or CSV with the documented header)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadExport(f"{path}: cannot read it ({type(exc).__name__})") from None
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            raise BadExport(f"{path}: not JSON") from None
        if not isinstance(data, dict) or data.get("format") != EXPORT_FORMAT:
            raise BadExport(f"{path}: not an operator export (format {EXPORT_FORMAT})")
        rows = data.get("transactions")
        if not isinstance(rows, list):
            raise BadExport(f"{path}: no transactions list")
    else:
        reader = csv.DictReader(text.splitlines())
        if tuple(reader.fieldnames or ()) != EXPORT_COLUMNS:
            raise BadExport(f"{path}: a CSV export starts with the header {','.join(EXPORT_COLUMNS)}")
        rows = list(reader)
    return [_row(r, path) for r in rows]


def _row(r: Any, path: str | Path) -> dict[str, Any]:
    if not isinstance(r, dict):
        raise BadExport(f"{path}: a transaction is not an object")
    try:
        out = {k: (None if r.get(k) in ("", None) else r.get(k)) for k in EXPORT_COLUMNS}
        out["amount_minor"] = int(r["amount_minor"])
        if not isinstance(out["transaction_id"], str) or out["kind"] not in ("debit", "credit", "rollback"):
            raise ValueError
    except (KeyError, TypeError, ValueError):
        raise BadExport(f"{path}: a transaction row lacks a transaction id, kind or integer amount") from None
    return out


def ours_from(records: Iterable[bytes | Envelope]) -> dict[str, dict[str, Any]]:
    """The transactions our log shows applied, by id: ``kind``, ``account_id``, ``amount_minor``,
    ``bet_id``, ``abandons`` (a rollback the adapter issued for a debit it gave up on)."""
    requested: dict[str, dict[str, Any]] = {}
    applied: set[str] = set()
    for raw in records:
        env = raw if isinstance(raw, Envelope) else parse_record(raw)
        p = env.payload
        if env.type == "SeamlessCallRequested":
            requested[str(p["transaction_id"])] = {
                "kind": p["call"], "account_id": p["account_id"], "amount_minor": int(p["amount_minor"]),
                "bet_id": p["bet_id"], "reference_transaction_id": p.get("reference_transaction_id"),
                "abandons": p["call"] == "rollback" and p["request"] == "PlaceBet",
            }  # fmt: skip
        elif env.type == "SeamlessCallAnswered" and p.get("status") in SUCCESS:
            applied.add(str(p["transaction_id"]))
    return {tx: requested[tx] for tx in sorted(applied) if tx in requested}


def reconcile(ours: Mapping[str, Mapping[str, Any]], theirs: list[dict[str, Any]]) -> list[Difference]:
    """Every difference between our applied transactions and the operator's rows (see the module)."""
    out: list[Difference] = []
    by_id: dict[str, dict[str, Any]] = {}
    for row in theirs:
        tx = row["transaction_id"]
        if tx in by_id:
            out.append(Difference("applied_twice", tx, None, [by_id[tx], row]))
            continue
        by_id[tx] = row
    excused = {str(o["reference_transaction_id"]) for o in ours.values() if o["abandons"]}
    for tx, mine in ours.items():
        found = by_id.get(tx)
        if found is None:
            out.append(Difference("missing_at_operator", tx, dict(mine), None))
            continue
        want = int(mine["amount_minor"])
        if mine["abandons"]:
            debit = by_id.get(str(mine["reference_transaction_id"]))
            want = int(debit["amount_minor"]) if debit is not None else 0
        if (found["kind"], found["account_id"], found["amount_minor"]) != (
            mine["kind"],
            mine["account_id"],
            want,
        ):
            out.append(Difference("amount_mismatch", tx, {**mine, "amount_minor": want}, found))
    for tx, row in by_id.items():
        if tx not in ours and tx not in excused:
            out.append(Difference("missing_here", tx, None, row))
    out.extend(_closures(by_id.values()))
    return out


def _closures(rows: Iterable[Mapping[str, Any]]) -> list[Difference]:
    closing: dict[str, int] = {}
    debits: dict[str, Mapping[str, Any]] = {}
    for row in rows:
        bet = str(row.get("bet_id"))
        if row["kind"] == "debit":
            debits[bet] = row
        else:
            closing[bet] = closing.get(bet, 0) + 1
    out = []
    for bet, row in debits.items():
        n = closing.get(bet, 0)
        if n != 1:
            out.append(
                Difference("debit_not_closed" if n == 0 else "closed_twice", row["transaction_id"], None, n)
            )
    return out


def main(args: Any) -> int:
    """``casino-ledger reconcile``: print every difference; exit 1 when there is one, 2 on bad input."""
    import sys  # noqa: PLC0415

    from services.runtime.failures import NotALog  # noqa: PLC0415
    from services.runtime.replay import read_db, read_jsonl  # noqa: PLC0415

    try:
        theirs = load_export(args.operator)
        source = Path(args.db or args.jsonl)
        if not source.is_file():
            raise BadExport(f"{source}: no such file")
        ours = ours_from(read_db(source) if args.db else read_jsonl(source))
    except (BadExport, NotALog) as exc:
        print(f"casino-ledger: error: {exc}", file=sys.stderr)
        return 2
    diffs = reconcile(ours, theirs)
    if args.json:
        found = [d.to_dict() for d in diffs]
        print(json.dumps({"ours": len(ours), "theirs": len(theirs), "differences": found},
                         sort_keys=True))  # fmt: skip
    else:
        for d in diffs:
            print(f"{d.kind} {d.transaction_id} ours={json.dumps(d.ours, sort_keys=True)} "
                  f"theirs={json.dumps(d.theirs, sort_keys=True)}")  # fmt: skip
        print(f"reconcile: {len(ours)} transactions ours, {len(theirs)} theirs, {len(diffs)} differences")
    return 1 if diffs else 0
