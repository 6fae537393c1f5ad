"""The human replay report: one self-contained HTML page (``casino-ledger replay --html FILE``).

Built from the JSON report (:meth:`services.runtime.replay.Report.to_dict`) and nothing else, so the
page is as deterministic as the JSON: the same input log gives a byte-identical page. Every value is
escaped (:func:`html.escape`, quotes included) — event payloads are data from the log, possibly
hostile. No script, no external stylesheet, font or image: the page opens offline, years later.

Sections: the verdict and digest; per-table summaries (coups, bets, handle, paid, commission, house
result, findings, audited rounds and digest); per-shoe summaries (commitment, seed revealed, commitment
verified); one section per finding (reason, the ids it concerns, expected and recorded values); open
items; checkpoints verified.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #bbb;padding:.25em .5em;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.clean{color:#060}.findings{color:#b00}
section.finding{border-left:4px solid #b00;padding-left:1em;margin:1em 0}
pre{background:#f5f5f5;padding:.5em;white-space:pre-wrap;word-break:break-all}code{font-size:90%}
"""

_CSP = (
    "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
)

TABLE_COLUMNS = (
    "table_id", "variant", "rules_version", "coups", "bets", "refused", "handle_minor", "paid_minor",
    "commission_minor", "house_minor", "hold_bps", "findings", "rounds_audited", "table_digest",
)  # fmt: skip
SHOE_COLUMNS = (
    "shoe_id", "table_id", "mode", "coups", "cards_dealt", "opened_at", "closed_at", "commitment",
    "seed_revealed", "commitment_verified", "findings",
)  # fmt: skip


def e(value: Any) -> str:
    """Any value as escaped text (JSON for structures, so nothing is lost)."""
    if isinstance(value, str):
        return escape(value, quote=True)
    if value is None:
        return ""
    if isinstance(value, bool | int):
        return escape(json.dumps(value))
    return escape(json.dumps(value, sort_keys=True, ensure_ascii=False), quote=True)


def _grid(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> str:
    head = "".join(f"<th>{e(c)}</th>" for c in columns)
    body = []
    for row in rows:
        cells = []
        for c in columns:
            v = row.get(c)
            cls = ' class="n"' if isinstance(v, int) and not isinstance(v, bool) else ""
            cells.append(f"<td{cls}>{e(v)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    if not body:
        return "<p>none</p>"
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _ids(subject: Mapping[str, Any]) -> str:
    items = [f"<li><b>{e(k)}</b>: <code>{e(v)}</code></li>" for k, v in sorted(subject.items())]
    return f"<ul>{''.join(items)}</ul>"


def _finding(n: int, f: Mapping[str, Any]) -> str:
    found_at = f.get("found_at") or {}
    return (
        f'<section class="finding" id="finding-{n}"><h3>{n}. {e(f.get("reason"))}'
        f" <small>({e(f.get('severity'))}, {e(f.get('table_id'))})</small></h3>"
        f"<p>{e(f.get('detail'))}</p><h4>concerns</h4>{_ids(f.get('subject') or {})}"
        f"<p>raised at record <code>{e(found_at.get('event_id'))}</code>"
        f" ({e(found_at.get('occurred_at'))})</p>"
        f"<h4>expected</h4><pre>{e(f.get('expected'))}</pre><h4>recorded</h4><pre>{e(f.get('recorded'))}</pre>"
        "</section>"
    )


def render_html(report: Mapping[str, Any]) -> str:
    """The report as one HTML page (deterministic, escaped, self-contained)."""
    verdict = str(report.get("verdict"))
    scope = report.get("scope") or {}
    findings = list(report.get("findings") or [])
    total = int(report.get("findings_total") or len(findings))
    more = f"<p>{total - len(findings)} more findings not listed.</p>" if total > len(findings) else ""
    checkpoints = report.get("checkpoints") or {}
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        _CSP,
        f"<title>casino-ledger replay: {e(verdict)}</title><style>{_STYLE}</style></head><body>",
        f'<h1>Regulatory replay: <span class="{e(verdict)}">{e(verdict)}</span></h1>',
        f"<p>digest <code>{e(report.get('digest'))}</code></p>",
        f"<p>{e(report.get('records'))} records, {e(report.get('coups'))} coups in scope; "
        f"scope: tables {e(scope.get('tables') or 'all')}, since {e(scope.get('since') or '-')}, "
        f"until {e(scope.get('until') or '-')}</p>",
        f"<p>checkpoints verified: {e(checkpoints.get('verified'))}; signed by key ids: "
        f"{e(checkpoints.get('signed_by'))}</p>",
        "<h2>Tables</h2>",
        _grid(report.get("tables") or [], TABLE_COLUMNS),
        "<h2>Shoes</h2>",
        _grid(report.get("shoes") or [], SHOE_COLUMNS),
        f"<h2>Findings ({total})</h2>",
        *(_finding(n, f) for n, f in enumerate(findings, 1)),
        more,
        f"<h2>Open items ({len(report.get('open_items') or [])})</h2>",
        _grid(report.get("open_items") or [], ("coup_id", "table_id", "resolved", "missing_payouts")),
        "</body></html>",
        "",
    ]
    return "\n".join(p for p in parts if p or p == "")
