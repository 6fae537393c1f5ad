"""The regulator's replay report: one self-contained HTML page (``casino-ledger replay --html FILE``),
and the page of one game round (``replay --coup ID --html FILE``).

Built from the JSON report (:meth:`services.audit.replay.Report.to_dict`) plus what the shell passes
in — ``meta`` (generation time read from the clock by the shell, tool version, source and its SHA-256,
the public keyring used) and ``odds`` (exact outcome probabilities per table, by enumeration) — and
nothing else: the same inputs give a byte-identical page. Every value is escaped
(:func:`html.escape`, quotes included): event payloads are data from the log, possibly hostile. No
script, no external stylesheet, font or image, links only inside the page: it opens offline, years
later.

Order, for a reader who has a minute: the verdict and what it rests on; the table summary (handle,
win, hold %, commission, findings) with money in currency units; findings grouped by root cause
(explanation, event ids, expected and recorded values, consequences beneath) and the monitor's alerts;
charts (each table's outcome frequencies against the exact odds with a 95 % band; the house result
over the session); then the per-shoe detail with every coup id, each an anchor (``#coup-<id>``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

from services.audit.replay.report import CLEAN_KEYS_NOT_SUPPLIED
from services.core.reasons import FindingReason

_STYLE = """
:root{--ink:#1d2330;--muted:#5b6475;--line:#d6dae3;--bad:#b3261e;--good:#1e6b35;--warn:#8a5a00;--band:#cfe0f5}
*{box-sizing:border-box}
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--ink);margin:0;background:#f6f7f9}
main{max-width:1180px;margin:0 auto;padding:1.5em 2em 4em;background:#fff}
h1{font-size:1.6em;margin:.2em 0}h2{font-size:1.25em;margin:1.8em 0 .6em;border-bottom:2px solid var(--line)}
h3{font-size:1.05em;margin:1.2em 0 .4em}
.verdict{display:inline-block;padding:.15em .6em;border-radius:.3em;color:#fff;font-weight:600}
.v-clean{background:var(--good)}.v-findings{background:var(--bad)}.v-incomplete{background:var(--warn)}
.v-unsupplied{background:var(--warn)}
.lead{font-size:1.05em;color:var(--muted);margin:.3em 0 1em}
dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:.2em 1.2em;margin:0}
dl.meta dt{color:var(--muted)}dl.meta dd{margin:0;overflow-wrap:anywhere}
table{border-collapse:collapse;margin:.5em 0 1em;width:100%}
th,td{border-bottom:1px solid var(--line);padding:.3em .55em;text-align:left;vertical-align:top}
th{background:#eef1f5;font-weight:600;white-space:nowrap}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td:first-child,td.t{white-space:nowrap}
tr.total td{font-weight:600;border-top:2px solid var(--ink)}
code,.id{font:12.5px ui-monospace,SFMono-Regular,Menlo,monospace;overflow-wrap:anywhere}
article.finding{border-left:4px solid var(--bad);padding:.2em 0 .2em 1em;margin:1em 0}
article.finding h3{margin-top:.2em}.explain{margin:.2em 0}.detail{color:var(--muted)}
.cmp{width:auto}.cmp td,.cmp th{font-size:.92em}
details{margin:.4em 0}summary{cursor:pointer;color:var(--muted)}
.ok{color:var(--good)}.bad{color:var(--bad);font-weight:600}
.charts{display:flex;flex-wrap:wrap;gap:1.2em}.chart{flex:1 1 520px}
svg text{font:12px system-ui,sans-serif;fill:var(--ink)}
a{color:#1a4fa0}nav{margin:.2em 0 1em}
"""

_CSP = (
    "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
)

VERDICT_MEANING = {
    "clean": "A complete, authentic log was replayed and every coup and every cent agrees with the rules.",
    "findings": "The replay disagrees with the log: each root cause is listed below with its evidence.",
    "incomplete": "Nothing disagrees, but the log stops with coups open or accepted bets unpaid, or no "
    "signed tree head verifies.",
    CLEAN_KEYS_NOT_SUPPLIED: "Nothing disagrees, but the signatures were checked with a keyring found beside "
    "the log (or the public demo key), not one the regulator supplied: whoever could write the log could "
    "have written it. Replay with --keys to prove who signed.",
}

OUTCOME_COLOURS = ("#1a4fa0", "#b3261e", "#1e6b35", "#8a5a00", "#6b3fa0", "#00707a")


def e(value: Any) -> str:
    """Any value as escaped text (JSON for structures, so nothing is lost)."""
    if isinstance(value, str):
        return escape(value, quote=True)
    if value is None:
        return ""
    if isinstance(value, bool | int):
        return escape(json.dumps(value))
    return escape(json.dumps(value, sort_keys=True, ensure_ascii=False), quote=True)


def money(minor: Any, currency: Any = None, exponent: int = 2) -> str:
    """Minor units as currency units: ``123456`` → ``1,234.56 EUR`` (a real minus sign for losses)."""
    if not isinstance(minor, int) or isinstance(minor, bool):
        return "–"
    sign = "−" if minor < 0 else ""
    units, cents = divmod(abs(minor), 10**exponent)
    text = f"{sign}{units:,}.{cents:0{exponent}d}" if exponent else f"{sign}{units:,}"
    return f"{text} {currency}" if currency else text


def _pct(num: int, den: int) -> str:
    return f"{100 * num / den:.2f} %" if den else "–"


def coup_anchor(coup_id: Any) -> str:
    """The in-page anchor of a coup (``#coup-<id>``)."""
    return "coup-" + str(coup_id)


def _coup_link(coup_id: Any) -> str:
    return f'<a class="id" href="#{e(coup_anchor(coup_id))}">{e(coup_id)}</a>'


def _grid(rows: Iterable[Mapping[str, Any]], columns: Sequence[tuple[str, str]]) -> str:
    """A plain table: ``columns`` are (key, heading); integers right-aligned."""
    head = "".join(f"<th>{e(h)}</th>" for _, h in columns)
    body = []
    for row in rows:
        cells = []
        for key, _ in columns:
            v = row.get(key)
            cls = ' class="n"' if isinstance(v, int) and not isinstance(v, bool) else ""
            cells.append(f"<td{cls}>{e(v)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    if not body:
        return "<p>None.</p>"
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


# --- sections ------------------------------------------------------------------------------------


def _css(verdict: str) -> str:
    return "unsupplied" if verdict == CLEAN_KEYS_NOT_SUPPLIED else verdict


def _keys_text(keys: Mapping[str, Any], meta: Mapping[str, Any]) -> str:
    """The keyring row: where it came from, whether the regulator supplied it, each key's fingerprint."""
    prints = keys.get("fingerprints") or {}
    listed = "; ".join(f"<code>{e(k)}</code> <code>{e(f)}</code>" for k, f in sorted(prints.items()))
    supplied = keys.get("supplied", True)
    warning = "" if supplied else " <strong>(keys not supplied independently)</strong>"
    return f"{e(meta.get('keyring') or '–')}{warning}{'<br>' + listed if listed else ''}"


def _about(report: Mapping[str, Any], meta: Mapping[str, Any]) -> str:
    source = meta.get("source") or {}
    keys = report.get("keys") or {}
    signed = keys.get("signed_by") or {}
    per_table = (report.get("checkpoints") or {}).get("signed_tables") or {}
    signed_text = "; ".join(
        f"<code>{e(k)}</code> ({n} checkpoints: "
        + ", ".join(f"{e(t)} {c}" for t, c in sorted((per_table.get(k) or {}).items()))
        + ")"
        for k, n in sorted(signed.items())
    )
    rules = sorted({str(t.get("rules_version")) for t in report.get("tables") or []})
    scope = report.get("scope") or {}
    rows = [
        ("Generated", e(meta.get("generated_at") or "–")),
        ("Tool", f"casino-ledger {e(meta.get('tool_version') or '–')}"),
        ("Rules versions", e(", ".join(rules)) or "–"),
        ("Source", f"{e(source.get('kind'))} <code>{e(source.get('path'))}</code>"),
        ("Source SHA-256", f"<code>{e(source.get('sha256') or '–')}</code>"),
        ("Replay digest", f"<code>{e(report.get('digest'))}</code>"),
        ("Public keyring", _keys_text(keys, meta)),
        ("Checkpoints verified", f"{e((report.get('checkpoints') or {}).get('verified', 0))}"
                                 f"{'; signed by ' + signed_text if signed_text else ''}"),
        ("Records", f"{e(report.get('records'))} records, {e(report.get('coups'))} coups in scope"),
        ("Scope", f"tables {e(scope.get('tables') or 'all')}, since {e(scope.get('since') or '–')}, "
                  f"until {e(scope.get('until') or '–')}"),
    ]  # fmt: skip
    items = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows)
    return f'<section id="about"><dl class="meta">{items}</dl></section>'


def _summary(report: Mapping[str, Any]) -> str:
    tables = list(report.get("tables") or [])
    head = (
        "<tr><th>Table</th><th>Variant</th><th>Rules</th><th class=n>Coups</th><th class=n>Bets</th>"
        "<th class=n>Handle</th><th class=n>Win (house)</th><th class=n>Hold</th>"
        "<th class=n>Commission</th><th class=n>Findings</th></tr>"
    )
    body = []
    for t in tables:
        cur = t.get("currency")
        bad = ' class="n bad"' if t.get("findings") else ' class="n"'
        body.append(
            f"<tr><td>{e(t.get('table_id'))}</td><td>{e(t.get('variant'))}</td><td>{e(t.get('rules_version'))}</td>"
            f"<td class=n>{e(t.get('coups'))}</td><td class=n>{e(t.get('bets'))}</td>"
            f"<td class=n>{money(t.get('handle_minor'), cur)}</td><td class=n>{money(t.get('house_minor'), cur)}</td>"
            f"<td class=n>{_pct(int(t.get('house_minor') or 0), int(t.get('handle_minor') or 0))}</td>"
            f"<td class=n>{money(t.get('commission_minor'), cur)}</td><td{bad}>{e(t.get('findings'))}</td></tr>"
        )
    currencies = {t.get("currency") for t in tables}
    if len(tables) > 1 and len(currencies) == 1:
        cur = currencies.pop()
        handle = sum(int(t.get("handle_minor") or 0) for t in tables)
        house = sum(int(t.get("house_minor") or 0) for t in tables)
        body.append(
            f'<tr class="total"><td colspan=3>All tables</td>'
            f"<td class=n>{sum(int(t.get('coups') or 0) for t in tables)}</td>"
            f"<td class=n>{sum(int(t.get('bets') or 0) for t in tables)}</td>"
            f"<td class=n>{money(handle, cur)}</td><td class=n>{money(house, cur)}</td>"
            f"<td class=n>{_pct(house, handle)}</td>"
            f"<td class=n>{money(sum(int(t.get('commission_minor') or 0) for t in tables), cur)}</td>"
            f"<td class=n>{sum(int(t.get('findings') or 0) for t in tables)}</td></tr>"
        )
    table = f"<table><thead>{head}</thead><tbody>{''.join(body)}</tbody></table>" if body else "<p>None.</p>"
    note = (
        "<p class=detail>Handle: the stakes accepted. Win: what the house kept (handle less what went back "
        "to players, commission included). Hold: win ÷ handle.</p>"
    )
    return f'<section id="summary"><h2>Table summary</h2>{table}{note}</section>'


MONEY_REASONS = frozenset({
    FindingReason.COMMISSION_POSTING_MISMATCH, FindingReason.ESCROW_NOT_ZERO, FindingReason.BALANCE_MISMATCH,
    FindingReason.POSTINGS_UNBALANCED,
})  # fmt: skip
"""Findings whose expected and recorded values are amounts (minor units)."""


def _amount(value: Any) -> str:
    """An amount in currency units, with the minor units it was recorded in."""
    return f"{money(value)} <small>({e(value)} minor units)</small>"


def _value(key: Any, value: Any) -> str:
    if str(key).endswith("_minor") and isinstance(value, int) and not isinstance(value, bool):
        return _amount(value)
    return f"<code>{e(value)}</code>"


def _values(value: Any, amounts: bool = False) -> str:
    if isinstance(value, Mapping):
        rows = "".join(f"<tr><th>{e(k)}</th><td>{_value(k, v)}</td></tr>" for k, v in sorted(value.items()))
        return f'<table class="cmp">{rows}</table>'
    if amounts and isinstance(value, int) and not isinstance(value, bool):
        return _amount(value)
    return f"<code>{e(value)}</code>"


def _ids_list(subject: Mapping[str, Any]) -> str:
    items = []
    for k, v in sorted(subject.items()):
        shown = _coup_link(v) if k == "coup_id" and v else f"<code>{e(v)}</code>"
        items.append(f"<li><b>{e(k)}</b>: {shown}</li>")
    return f"<ul>{''.join(items)}</ul>"


def _group(n: int, group: Mapping[str, Any]) -> str:
    root = group.get("root") or {}
    consequences = list(group.get("consequences") or [])
    found_at = root.get("found_at") or {}
    cmp = ""
    amounts = root.get("reason") in MONEY_REASONS
    if root.get("expected") is not None or root.get("recorded") is not None:
        cmp = (
            f'<table class="cmp"><tr><th>expected</th><td>{_values(root.get("expected"), amounts)}</td></tr>'
            f"<tr><th>recorded</th><td>{_values(root.get('recorded'), amounts)}</td></tr></table>"
        )
    cons = ""
    if consequences:
        items = "".join(
            f"<li><b>{e(c.get('reason'))}</b> at {e(c.get('table_id'))}: {e(c.get('detail'))} "
            f"<code>{e(c.get('subject'))}</code></li>"
            for c in consequences
        )
        cons = f"<details><summary>{len(consequences)} consequence(s) of this root cause</summary><ul>{items}</ul></details>"
    events = ", ".join(f"<code>{e(i)}</code>" for i in group.get("event_ids") or [])
    return (
        f'<article class="finding" id="finding-{n}"><h3>{n}. {e(root.get("reason"))} '
        f"<small>at {e(root.get('table_id'))}</small></h3>"
        f'<p class="explain">{e(root.get("explanation"))}</p>'
        f'<p class="detail">{e(root.get("detail"))}</p>{_ids_list(root.get("subject") or {})}{cmp}'
        f"<p class=detail>events: {events or '–'}; raised at <code>{e(found_at.get('event_id'))}</code>"
        f" ({e(found_at.get('occurred_at'))})</p>{cons}</article>"
    )


def _findings(report: Mapping[str, Any]) -> str:
    groups = list(report.get("groups") or [])
    total = int(report.get("findings_total") or 0)
    parts = [
        f'<section id="findings"><h2>Findings: {len(groups)} root cause(s), {total} finding(s) in all</h2>'
    ]
    if not groups:
        parts.append("<p class=ok>No findings.</p>")
    parts.extend(_group(n, g) for n, g in enumerate(groups, 1))
    listed = len(report.get("findings") or [])
    if total > listed:
        parts.append(f"<p>{total - listed} more findings counted, not listed.</p>")
    open_items = list(report.get("open_items") or [])
    if open_items:
        ends = report.get("ends_at") or {}
        parts.append(
            f"<h3>Open at the end of the log ({len(open_items)})</h3><p>The log stops at record "
            f"{e(ends.get('record'))}: {e(ends.get('type'))} <code>{e(ends.get('event_id'))}</code> "
            f"({e(ends.get('occurred_at'))}).</p>"
        )
        rows = "".join(
            f"<tr><td>{_coup_link(i.get('coup_id'))}</td><td>{e(i.get('table_id'))}</td>"
            f"<td>{'yes' if i.get('resolved') else 'no'}</td><td>{e(', '.join(i.get('missing_payouts') or []))}</td></tr>"
            for i in open_items
        )
        parts.append(
            "<table><thead><tr><th>Coup</th><th>Table</th><th>Resolved</th><th>Bets without payout</th>"
            f"</tr></thead><tbody>{rows}</tbody></table>"
        )
    refused = report.get("refused") or {}
    if refused:
        items = "".join(
            f"<li><b>{e(r)}</b>: {e(v.get('count'))} record(s) — {', '.join(f'<code>{e(i)}</code>' for i in v.get('ids') or [])}</li>"
            for r, v in sorted(refused.items())
        )
        parts.append(
            "<h3>Records refused by authentication</h3><p>Attempts turned away, not breaches: they changed "
            f"nothing.</p><ul>{items}</ul>"
        )
    parts.append("</section>")
    return "".join(parts)


def _alerts(report: Mapping[str, Any]) -> str:
    alerts = list(report.get("alerts") or [])
    count = int((report.get("types") or {}).get("AnomalyDetected", len(alerts)))
    body = _grid(
        alerts,
        (("occurred_at", "Time"), ("table_id", "Table"), ("detector", "Detector"), ("category", "Category"),
         ("severity", "Severity"), ("detail", "Detail")),
    )  # fmt: skip
    return f'<section id="alerts"><h2>Monitor alerts ({count})</h2>{body}</section>'


# --- charts --------------------------------------------------------------------------------------


def outcome_chart(table: Mapping[str, Any], counts: Mapping[str, int], exact: Mapping[str, float]) -> str:
    """One table's outcome frequencies (dots) against the exact probabilities (ticks) with the 95 %
    band of the frequency over this many coups (shaded), as inline SVG."""
    n = sum(counts.values())
    names = sorted(set(exact) | set(counts))
    width, row, left, right = 560, 40, 90, 220
    height = 30 + row * len(names)
    span = width - left - right
    bands = {o: 1.96 * math.sqrt(p * (1 - p) / n) if n else 0.0 for o, p in exact.items()}
    tops = [*(p + bands[o] for o, p in exact.items()), *((counts.get(o, 0) / n) if n else 0.0 for o in names)]
    top_p = max(tops, default=0.0)
    scale_max = min(1.0, max(0.1, math.ceil((top_p + 0.08) * 10) / 10))

    def x(p: float) -> float:
        return left + span * min(max(p, 0.0), scale_max) / scale_max

    parts = [
        f'<svg role="img" aria-label="outcomes at {e(table.get("table_id"))}" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>Outcome frequencies at {e(table.get('table_id'))} against the exact odds</title>",
    ]
    for tick in range(int(scale_max * 10) + 1):
        tx = x(tick / 10)
        parts.append(f'<line x1="{tx:.1f}" y1="18" x2="{tx:.1f}" y2="{height - 6}" stroke="#e3e6ec"/>')
        parts.append(f'<text x="{tx:.1f}" y="13" text-anchor="middle">{tick * 10}%</text>')
    for i, name in enumerate(names):
        y = 30 + i * row + row / 2
        observed = counts.get(name, 0)
        freq = observed / n if n else 0.0
        p = exact.get(name)
        parts.append(f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end">{e(name)}</text>')
        label = f"{100 * freq:.1f}% ({observed} of {n})"
        outside = False
        if p is not None:
            band = bands[name]
            outside = abs(freq - p) > band and n > 0
            parts.append(
                f'<rect class="band" x="{x(p - band):.1f}" y="{y - 11:.1f}" width="{max(x(p + band) - x(p - band), 1):.1f}" '
                f'height="22" fill="#cfe0f5"><title>95% band: {100 * (p - band):.1f}–{100 * (p + band):.1f}%</title></rect>'
            )
            parts.append(
                f'<line class="exact" x1="{x(p):.1f}" y1="{y - 13:.1f}" x2="{x(p):.1f}" y2="{y + 13:.1f}" '
                f'stroke="#1a4fa0" stroke-width="2"><title>exact {100 * p:.2f}%</title></line>'
            )
            label += f" · exact {100 * p:.2f}%"
        colour = "#b3261e" if outside else "#1d2330"
        parts.append(
            f'<circle class="observed" cx="{x(freq):.1f}" cy="{y:.1f}" r="5" fill="{colour}">'
            f"<title>observed {label}</title></circle>"
        )
        parts.append(f'<text x="{width - right + 10}" y="{y + 4:.1f}">{e(label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def house_chart(coups: Sequence[Mapping[str, Any]], currency: Any, points: int = 800) -> str:
    """The house result (stakes kept less paid out) accumulated coup after coup, in log order, as
    inline SVG (at most ``points`` points: a long session is sampled evenly, the last coup always in)."""
    values, acc = [], 0
    for c in coups:
        acc += int(c.get("house_minor") or 0)
        values.append(acc)
    if not values:
        return "<p>No coup in scope.</p>"
    stride = max(1, math.ceil(len(values) / points))
    sample = [(i, values[i]) for i in range(0, len(values), stride)]
    if sample[-1][0] != len(values) - 1:
        sample.append((len(values) - 1, values[-1]))
    width, height, left, bottom, top = 760, 260, 130, 30, 16
    lo, hi = min(0, *values), max(0, *values)
    hi = hi if hi != lo else lo + 1

    def xy(i: int, v: int) -> str:
        x = left + (width - left - 12) * (i / max(len(values) - 1, 1))
        y = top + (height - top - bottom) * (hi - v) / (hi - lo)
        return f"{x:.1f},{y:.1f}"

    zero_y = top + (height - top - bottom) * hi / (hi - lo)
    line = " ".join(xy(i, v) for i, v in sample)
    zero_label = (
        f'<text x="{left - 6}" y="{zero_y + 4:.1f}" text-anchor="end">0</text>' if lo < 0 < hi else ""
    )
    return (
        f'<svg role="img" aria-label="house result over the session" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">'
        "<title>Cumulative house result over the session</title>"
        f'<line x1="{left}" y1="{zero_y:.1f}" x2="{width - 12}" y2="{zero_y:.1f}" stroke="#888" stroke-dasharray="4 3"/>'
        f'<text x="{left - 6}" y="{top + 4}" text-anchor="end">{e(money(hi, currency))}</text>'
        f'<text x="{left - 6}" y="{height - bottom + 4}" text-anchor="end">{e(money(lo, currency))}</text>'
        f"{zero_label}"
        f'<polyline class="house" fill="none" stroke="#1a4fa0" stroke-width="2" points="{line}"/>'
        f'<text x="{left}" y="{height - 8}">coup 1</text>'
        f'<text x="{width - 12}" y="{height - 8}" text-anchor="end">coup {len(values)} · '
        f"{e(money(values[-1], currency))}</text></svg>"
    )


def _charts(report: Mapping[str, Any], odds: Mapping[str, Mapping[str, float]]) -> str:
    outcomes = report.get("outcomes") or {}
    parts = ['<section id="charts"><h2>Outcomes against the exact odds</h2>',
             "<p class=detail>Dot: the share of coups with this outcome. Tick: the exact probability (full "
             "enumeration of the shoe). Shaded: the 95 % band for this many coups; a red dot lies outside it.</p>",
             '<div class="charts">']  # fmt: skip
    for t in report.get("tables") or []:
        tid = str(t.get("table_id"))
        exact = odds.get(tid) or {}
        note = (
            "" if exact else "<p class=detail>Exact odds not available for this variant (too many hands).</p>"
        )
        parts.append(
            f'<div class="chart"><h3>{e(tid)} <small>({e(t.get("variant"))})</small></h3>'
            f"{outcome_chart(t, outcomes.get(tid) or {}, exact)}{note}</div>"
        )
    tables = list(report.get("tables") or [])
    currency = tables[0].get("currency") if tables else None
    parts.append("</div><h2>House result over the session</h2>")
    parts.append(house_chart(list(report.get("coup_list") or []), currency))
    parts.append("</section>")
    return "".join(parts)


def _shoes(report: Mapping[str, Any]) -> str:
    shoes = list(report.get("shoes") or [])
    currencies = {t.get("table_id"): t.get("currency") for t in report.get("tables") or []}
    by_shoe: dict[str, list[Mapping[str, Any]]] = {}
    for c in report.get("coup_list") or []:
        by_shoe.setdefault(str(c.get("shoe_id")), []).append(c)
    overview = _grid(
        shoes,
        (("shoe_id", "Shoe"), ("table_id", "Table"), ("mode", "Mode"), ("coups", "Coups"),
         ("cards_dealt", "Cards"), ("opened_at", "Opened"), ("closed_at", "Closed"),
         ("seed_revealed", "Seed revealed"), ("commitment_verified", "Commitment verified"),
         ("findings", "Findings")),
    )  # fmt: skip
    parts = [f'<section id="shoes"><h2>Shoes and coups</h2>{overview}']
    for s in shoes:
        sid = str(s.get("shoe_id"))
        cur = currencies.get(s.get("table_id"))
        rows = "".join(
            f'<tr id="{e(coup_anchor(c.get("coup_id")))}"><td>{_coup_link(c.get("coup_id"))}</td>'
            f"<td class=n>{e(c.get('coup_number'))}</td><td>{e(c.get('outcome'))}</td>"
            f"<td class=n>{e(c.get('bets'))}</td><td class=n>{money(c.get('stake_minor'), cur)}</td>"
            f"<td class=n>{money(c.get('credit_minor'), cur)}</td><td class=n>{money(c.get('house_minor'), cur)}</td>"
            f"<td>{e(c.get('occurred_at'))}</td></tr>"
            for c in sorted(by_shoe.get(sid, []), key=lambda c: int(c.get("coup_number") or 0))
        )
        parts.append(
            f"<h3>Shoe {e(sid)} <small>at {e(s.get('table_id'))}</small></h3>"
            f"<p class=detail>commitment <code>{e(s.get('commitment'))}</code></p>"
            "<table><thead><tr><th>Coup id (<code>replay --coup ID</code>)</th><th class=n>#</th><th>Outcome</th>"
            "<th class=n>Bets</th><th class=n>Staked</th><th class=n>Paid back</th><th class=n>House</th>"
            f"<th>Resolved at</th></tr></thead><tbody>{rows}</tbody></table>"
        )
    parts.append("</section>")
    return "".join(parts)


def render_html(
    report: Mapping[str, Any],
    meta: Mapping[str, Any] | None = None,
    odds: Mapping[str, Mapping[str, float]] | None = None,
) -> str:
    """The report as one HTML page (deterministic for the same inputs, escaped, self-contained)."""
    meta = meta or {}
    verdict = str(report.get("verdict"))
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        _CSP,
        f"<title>casino-ledger replay: {e(verdict)}</title><style>{_STYLE}</style></head><body><main>",
        f'<h1>Regulatory replay <span class="verdict v-{e(_css(verdict))}" id="verdict">{e(verdict)}</span></h1>',
        f'<p class="lead">{e(VERDICT_MEANING.get(verdict, ""))}</p>',
        '<nav><a href="#summary">Summary</a> · <a href="#findings">Findings</a> · <a href="#alerts">Alerts</a>'
        ' · <a href="#charts">Charts</a> · <a href="#shoes">Shoes and coups</a></nav>',
        _about(report, meta),
        _summary(report),
        _findings(report),
        _alerts(report),
        _charts(report, odds or {}),
        _shoes(report),
        "</main></body></html>",
        "",
    ]
    return "\n".join(parts)


def _postings(payout: Mapping[str, Any], currency: Any) -> str:
    rows = payout.get("postings") or []
    return "<br>".join(f"{e(r.get('account'))}: {money(r.get('amount_minor'), currency)}" for r in rows)


def render_coup_html(view: Mapping[str, Any]) -> str:
    """One game round as a readable page: bets, cards in order, decisions, result recorded and
    recomputed, payouts with their postings, totals, findings."""
    cur = next((b.get("currency") for b in view.get("bets") or [] if b.get("currency")), None)
    verdict = str(view.get("verdict"))
    hands = view.get("hands") or {}
    again = view.get("recomputed") or {}
    agrees = again.get("outcome") == view.get("outcome") and again.get("hands") == hands
    hand_rows = "".join(
        f"<tr><td>{e(h)}</td><td>{e(' '.join(v.get('cards') or []))}</td><td class=n>{e(v.get('total'))}</td></tr>"
        for h, v in sorted(hands.items())
    )
    bets = "".join(
        f"<tr><td class=id>{e(b.get('bet_id'))}</td><td>{e(b.get('account_id'))}</td><td>{e(b.get('spot'))}</td>"
        f"<td class=n>{money(b.get('stake_minor'), cur)}</td></tr>"
        for b in view.get("bets") or []
    )
    cards = "".join(
        f"<tr><td class=n>{e(c.get('n'))}</td><td>{e(c.get('hand'))}</td><td><b>{e(c.get('card'))}</b></td>"
        f"<td class=n>{e(c.get('shoe_position'))}</td><td class=id>{e(c.get('event_id'))}</td></tr>"
        for c in view.get("cards") or []
    )
    decisions = "".join(
        f"<li>{e(d.get('hand'))}: {e(d.get('choice'))} (by {e(d.get('decided_by'))})</li>"
        for d in view.get("decisions") or []
    )
    payouts = "".join(
        f"<tr><td class=id>{e(p.get('bet_id'))}</td><td>{e(p.get('spot'))}</td><td>{e(p.get('result'))}</td>"
        f"<td class=n>{money(p.get('stake_minor'), cur)}</td><td class=n>{money(p.get('win_minor'), cur)}</td>"
        f"<td class=n>{money(p.get('commission_minor'), cur)}</td><td class=n>{money(p.get('credit_minor'), cur)}</td>"
        f"<td>{_postings(p, cur)}</td></tr>"
        for p in view.get("payouts") or []
    )
    t = view.get("totals") or {}
    findings = "".join(
        f"<li><b>{e(f.get('reason'))}</b>: {e(f.get('detail'))} <code>{e(f.get('subject'))}</code></li>"
        for f in view.get("findings") or []
    )
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            _CSP,
            f"<title>coup {e(view.get('coup_id'))}</title><style>{_STYLE}</style></head><body><main>",
            f'<h1>Coup <span class="id">{e(view.get("coup_id"))}</span> '
            f'<span class="verdict v-{e(verdict)}" id="verdict">{e(verdict)}</span></h1>',
            f'<dl class="meta"><dt>Table</dt><dd>{e(view.get("table_id"))}</dd><dt>Shoe</dt><dd>{e(view.get("shoe_id"))}</dd>'
            f"<dt>Coup number</dt><dd>{e(view.get('coup_number'))}</dd>"
            f"<dt>Variant</dt><dd>{e(view.get('variant'))} (rules {e(view.get('rules_version'))})</dd>"
            f"<dt>Played</dt><dd>{e(view.get('started_at'))} → {e(view.get('ended_at'))}</dd></dl>",
            f"<h2>Bets ({len(view.get('bets') or [])})</h2><table><thead><tr><th>Bet</th><th>Account</th><th>Spot</th>"
            f"<th class=n>Stake</th></tr></thead><tbody>{bets}</tbody></table>",
            "<h2>Cards, in the order dealt</h2><table><thead><tr><th class=n>#</th><th>Hand</th><th>Card</th>"
            f"<th class=n>Shoe position</th><th>Event</th></tr></thead><tbody>{cards}</tbody></table>",
            f"<h3>Decisions</h3><ul>{decisions or '<li>none</li>'}</ul>",
            f"<h2>Result: {e(view.get('outcome'))}{' (natural)' if view.get('natural') else ''}</h2>"
            f"<table class=cmp><thead><tr><th>Hand</th><th>Cards</th><th class=n>Total</th></tr></thead><tbody>{hand_rows}</tbody></table>"
            f"<p class={'ok' if agrees else 'bad'}>Re-running the rules on the recorded cards gives "
            f"{e(again.get('outcome'))}: {'agrees' if agrees else 'DIFFERS from the record'}.</p>",
            "<h2>Payouts</h2><table><thead><tr><th>Bet</th><th>Spot</th><th>Result</th><th class=n>Stake</th>"
            "<th class=n>Win</th><th class=n>Commission</th><th class=n>Credit</th><th>Postings</th></tr></thead>"
            f"<tbody>{payouts}</tbody></table>",
            f"<p>Staked {money(t.get('stake_minor'), cur)}, paid back {money(t.get('credit_minor'), cur)}, "
            f"commission {money(t.get('commission_minor'), cur)}, house result {money(t.get('house_result_minor'), cur)}.</p>",
            f"<h2>Findings</h2><ul>{findings or '<li class=ok>none</li>'}</ul>",
            "</main></body></html>",
            "",
        ]
    )
