"""``casino-ledger alerts`` (the monitor's alerts an analyst can work) and ``monitor-eval``.

``alerts --db PATH [--table T] [--account A] [--severity S] [--since WHEN] [--json]`` reads the
embedded log read-only and lists the ``AnomalyDetected`` records in log order: when, how severe, which
detector, the table and account, what was seen against the threshold, the probability of it under
honest play where the detector knows one, and the event ids to look at. ``--severity`` is a minimum
(``info`` < ``warning`` < ``critical``). Text by default; ``--json`` prints one JSON array.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from services.core import topics
from services.runtime.textfit import fit, printable, printable_data

SEVERITIES = ("info", "warning", "critical")


def read_alerts(db: Path) -> list[dict[str, Any]]:
    """Every alert of the log, in log order, as ``{event_id, occurred_at, key, **payload}``."""
    from services.runtime.replay import open_readonly  # noqa: PLC0415

    conn = open_readonly(db)
    try:
        rows = conn.execute(
            'SELECT body FROM records WHERE topic = ? ORDER BY "offset"', (topics.MONITOR_ALERTS,)
        ).fetchall()
    finally:
        conn.close()
    out = []
    for (body,) in rows:
        env = json.loads(bytes(body))
        if env.get("type") == "AnomalyDetected":
            out.append({"event_id": env["event_id"], "occurred_at": env["occurred_at"], "key": env["key"],
                        **env["payload"]})  # fmt: skip
    return out


def accounts_of(alert: dict[str, Any]) -> set[str]:
    """The accounts an alert names."""
    subject = alert.get("subject") or {}
    found = {str(a) for a in subject.get("account_ids") or []}
    if subject.get("account_id"):
        found.add(str(subject["account_id"]))
    if str(alert.get("key", "")).startswith(("player:", "adv:")) or alert.get("table_id") == "cage":
        found.add(str(alert["key"]))
    return found


def select(alerts: list[dict[str, Any]], args: argparse.Namespace) -> list[dict[str, Any]]:
    """The alerts that pass the filters."""
    from services.audit.replay import iso_instant  # noqa: PLC0415

    since = iso_instant(args.since) if args.since else None
    floor = SEVERITIES.index(args.severity) if args.severity else 0
    return [
        a for a in alerts
        if (not args.table or a.get("table_id") == args.table or a.get("key") == args.table)
        and (not args.account or args.account in accounts_of(a))
        and SEVERITIES.index(str(a.get("severity"))) >= floor
        and (since is None or str(a.get("occurred_at")) >= since)
    ]  # fmt: skip


def describe(a: dict[str, Any]) -> str:
    """One alert as a few readable lines (every value from the log made printable: it is a log's)."""
    a = printable_data(a)
    who = sorted(accounts_of(a))
    head = (f"{a['occurred_at']}  {str(a['severity']).upper():8} {a['detector']} ({a['category']})"
            f"  table {a['table_id']}" + (f"  account {', '.join(who)}" if who else ""))  # fmt: skip
    lines = [head, f"    {a.get('detail', '')}"]
    lines.append(f"    seen: {json.dumps(a.get('observed') or {}, sort_keys=True)}")
    lines.append(f"    threshold: {json.dumps(a.get('threshold') or {}, sort_keys=True)}")
    if a.get("honest_probability") is not None:
        lines.append(f"    probability under honest play: {a['honest_probability']}")
    events = (a.get("subject") or {}).get("event_ids") or []
    lines.append(f"    events: {' '.join(str(e) for e in events)}  (alert {a['event_id']})")
    return "\n".join(lines)


def cmd_alerts(args: argparse.Namespace) -> int:
    """List the monitor's alerts of a log."""
    from services.runtime.replay import SourceError  # noqa: PLC0415

    db = Path(args.db)
    if not db.is_file():
        sys.stderr.write(f"casino-ledger: error: no log at {db}\n")
        return 2
    try:
        if args.since:
            from services.audit.replay import iso_instant  # noqa: PLC0415

            iso_instant(args.since)
        chosen = select(read_alerts(db), args)
    except ValueError:
        sys.stderr.write(f"casino-ledger: error: --since {args.since!r} is not an ISO 8601 instant\n")
        return 2
    except (SourceError, sqlite3.Error) as exc:
        sys.stderr.write(f"casino-ledger: error: {printable(str(exc)[:200])}\n")
        return 2
    if args.json:
        sys.stdout.write(json.dumps(chosen, indent=2, sort_keys=True) + "\n")
        return 0
    for a in chosen:  # at the terminal's width, wrapped between words: an id is never cut
        sys.stdout.write(fit(describe(a)) + "\n")
    counts = Counter(str(a["severity"]) for a in chosen)
    summary = ", ".join(f"{counts.get(s, 0)} {s}" for s in SEVERITIES)
    sys.stdout.write(f"{len(chosen)} alert(s): {summary}\n")
    return 0


def cmd_monitor_eval(args: argparse.Namespace) -> int:
    """Run the monitor's evaluation (``monitor_eval.main``)."""
    from services.simulation.monitor_eval import main  # noqa: PLC0415

    return main(args)
