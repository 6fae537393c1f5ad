"""The regulator's replay report: one self-contained HTML page (``casino-ledger replay --html FILE``),
and the page of one game round (``replay --coup ID --html FILE``).

Built from the JSON report (:meth:`services.audit.replay.Report.to_dict`) plus what the shell passes
in — ``meta`` (generation time read from the clock by the shell, tool version, source and its SHA-256,
the public keyring used) and ``odds`` (exact outcome probabilities per table, by enumeration) — and
nothing else: the same inputs give a byte-identical page. The markup is in Jinja2 templates shipped in
the package (``templates/replay/``), autoescaped: every value is escaped, quotes included, since event
payloads are data from the log, possibly hostile. This module only prepares the figures (sorted,
totalled, the charts' coordinates). No script, no external stylesheet, font or image, links only inside
the page: it opens offline, years later.

Order, for a reader who has a minute: the verdict and what it rests on; the table summary (handle,
win, hold %, commission, findings) with money in currency units; findings grouped by root cause
(explanation, event ids, expected and recorded values, consequences beneath) and the monitor's alerts;
charts (each table's outcome frequencies against the exact odds with a 95 % band; the house result
over the session); then the per-shoe detail with every coup id, each an anchor (``#coup-<id>``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import cache
from typing import Any

import jinja2
from jinja2.ext import Extension
from jinja2.lexer import Token, TokenStream
from markupsafe import Markup

from services.audit.replay.report import CLEAN_KEYS_NOT_SUPPLIED
from services.core.reasons import FindingReason

VERDICT_MEANING = {
    "clean": "A complete, authentic log was replayed and every coup and every cent agrees with the rules.",
    "findings": "The replay disagrees with the log: each root cause is listed below with its evidence.",
    "incomplete": "Nothing disagrees, but the log stops with coups open or accepted bets unpaid, or no "
    "signed tree head verifies.",
    CLEAN_KEYS_NOT_SUPPLIED: "Nothing disagrees, but the signatures were checked with a keyring found beside "
    "the log (or the public demo key), not one the regulator supplied: whoever could write the log could "
    "have written it. Replay with --keys to prove who signed.",
}

MONEY_REASONS = frozenset({
    FindingReason.COMMISSION_POSTING_MISMATCH, FindingReason.ESCROW_NOT_ZERO, FindingReason.BALANCE_MISMATCH,
    FindingReason.POSTINGS_UNBALANCED,
})  # fmt: skip
"""Findings whose expected and recorded values are amounts (minor units)."""


def text(value: Any) -> Any:
    """What a template prints for ``value`` (before escaping): JSON for structures, so nothing is lost;
    nothing for ``None`` or an undefined field; markup and strings as they are."""
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, jinja2.Undefined):
        return ""
    if isinstance(value, bool | int):
        return json.dumps(value)
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def money(minor: Any, currency: Any = None, exponent: int = 2) -> str:
    """Minor units as currency units: ``123456`` → ``1,234.56 EUR`` (a real minus sign for losses)."""
    if not isinstance(minor, int) or isinstance(minor, bool):
        return "–"
    sign = "−" if minor < 0 else ""
    units, cents = divmod(abs(minor), 10**exponent)
    amount = f"{sign}{units:,}.{cents:0{exponent}d}" if exponent else f"{sign}{units:,}"
    return f"{amount} {currency}" if currency else amount


def percent(num: Any, den: Any) -> str:
    """``num`` as a percentage of ``den`` (missing figures count 0; a dash when ``den`` is 0)."""
    num, den = int(num or 0), int(den or 0)
    return f"{100 * num / den:.2f} %" if den else "–"


def coup_anchor(coup_id: Any) -> str:
    """The in-page anchor of a coup (``#coup-<id>``)."""
    return "coup-" + str(coup_id)


class _Joined(Extension):
    """The templates are indented for reading: a line break in a template's text and the indentation
    after it are not part of the page (the page's own line breaks are written ``{{ "\\n" }}``); a
    stylesheet is kept as written. Done on the lexed text, so errors keep their template line."""

    def filter_stream(self, stream: TokenStream) -> Iterator[Token]:
        """The template's tokens, its text without its layout."""
        keep = (stream.name or "").endswith(".css")
        for token in stream:
            if token.type == "data" and not keep:
                yield Token(token.lineno, "data", re.sub(r"\n[ \t]*", "", token.value))
            else:
                yield token


@cache
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("services.runtime", "templates"),
        autoescape=True,
        finalize=text,
        keep_trailing_newline=True,
        undefined=jinja2.Undefined,
        extensions=[_Joined],
    )
    env.globals.update(money=money, percent=percent, coup_anchor=coup_anchor)
    return env


def _template(name: str) -> jinja2.Template:
    return _env().get_template(f"replay/{name}")


# --- charts --------------------------------------------------------------------------------------


def _f1(value: float) -> str:
    return f"{value:.1f}"


def outcome_chart(table: Mapping[str, Any], counts: Mapping[str, int], exact: Mapping[str, float]) -> str:
    """One table's outcome frequencies (dots) against the exact probabilities (ticks) with the 95 %
    band of the frequency over this many coups (shaded), as inline SVG."""
    n = sum(counts.values())
    names = sorted(set(exact) | set(counts))
    width, row, left, right = 560, 40, 90, 220
    span = width - left - right
    bands = {o: 1.96 * math.sqrt(p * (1 - p) / n) if n else 0.0 for o, p in exact.items()}
    tops = [*(p + bands[o] for o, p in exact.items()), *((counts.get(o, 0) / n) if n else 0.0 for o in names)]
    top_p = max(tops, default=0.0)
    scale_max = min(1.0, max(0.1, math.ceil((top_p + 0.08) * 10) / 10))

    def x(p: float) -> float:
        return left + span * min(max(p, 0.0), scale_max) / scale_max

    rows = []
    for i, name in enumerate(names):
        y = 30 + i * row + row / 2
        observed = counts.get(name, 0)
        freq = observed / n if n else 0.0
        p = exact.get(name)
        r: dict[str, Any] = {
            "name": name,
            "x": _f1(x(freq)),
            "y": _f1(y),
            "text_y": _f1(y + 4),
            "exact": None,
        }
        label = f"{100 * freq:.1f}% ({observed} of {n})"
        outside = False
        if p is not None:
            band = bands[name]
            outside = abs(freq - p) > band and n > 0
            r.update(
                exact=f"{100 * p:.2f}",
                exact_x=_f1(x(p)),
                tick_top=_f1(y - 13),
                tick_bottom=_f1(y + 13),
                band_x=_f1(x(p - band)),
                band_y=_f1(y - 11),
                band_width=_f1(max(x(p + band) - x(p - band), 1)),
                band_from=_f1(100 * (p - band)),
                band_to=_f1(100 * (p + band)),
            )
            label += f" · exact {100 * p:.2f}%"
        r.update(label=label, colour="#b3261e" if outside else "#1d2330")
        rows.append(r)
    ticks = [{"x": _f1(x(t / 10)), "percent": t * 10} for t in range(int(scale_max * 10) + 1)]
    chart = {
        "table_id": table.get("table_id"),
        "width": width,
        "height": 30 + row * len(names),
        "left": left,
        "right": right,
        "ticks": ticks,
        "rows": rows,
    }
    return str(_template("charts.html").module.outcome_chart(chart))  # type: ignore[attr-defined]


def _house(coups: Sequence[Mapping[str, Any]], currency: Any, points: int) -> dict[str, Any] | None:
    """The house chart's coordinates (``None`` without a coup)."""
    values, acc = [], 0
    for c in coups:
        acc += int(c.get("house_minor") or 0)
        values.append(acc)
    if not values:
        return None
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
    return {
        "width": width,
        "height": height,
        "left": left,
        "bottom": bottom,
        "top": top,
        "zero_y": _f1(zero_y),
        "zero_label": _f1(zero_y + 4) if lo < 0 < hi else "",
        "high": money(hi, currency),
        "low": money(lo, currency),
        "coups": len(values),
        "last": money(values[-1], currency),
        "points": " ".join(xy(i, v) for i, v in sample),
    }


def house_chart(coups: Sequence[Mapping[str, Any]], currency: Any, points: int = 800) -> str:
    """The house result (stakes kept less paid out) accumulated coup after coup, in log order, as
    inline SVG (at most ``points`` points: a long session is sampled evenly, the last coup always in)."""
    chart = _house(coups, currency, points)
    return str(_template("charts.html").module.house_chart(chart))  # type: ignore[attr-defined]


# --- the report ----------------------------------------------------------------------------------


def _about(report: Mapping[str, Any], meta: Mapping[str, Any]) -> dict[str, Any]:
    keys = report.get("keys") or {}
    checkpoints = report.get("checkpoints") or {}
    per_table = checkpoints.get("signed_tables") or {}
    signed = [
        (k, n, sorted((per_table.get(k) or {}).items()))
        for k, n in sorted((keys.get("signed_by") or {}).items())
    ]
    return {
        "generated_at": meta.get("generated_at"),
        "tool_version": meta.get("tool_version"),
        "rules": ", ".join(sorted({str(t.get("rules_version")) for t in report.get("tables") or []})),
        "source": meta.get("source") or {},
        "digest": report.get("digest"),
        "keyring": meta.get("keyring"),
        "supplied": keys.get("supplied", True),
        "fingerprints": sorted((keys.get("fingerprints") or {}).items()),
        "verified": checkpoints.get("verified", 0),
        "signed": signed,
        "records": report.get("records"),
        "coups": report.get("coups"),
        "scope": report.get("scope") or {},
    }


def _summary(report: Mapping[str, Any]) -> dict[str, Any]:
    tables = list(report.get("tables") or [])
    currencies = {t.get("currency") for t in tables}
    total = None
    if len(tables) > 1 and len(currencies) == 1:

        def add(key: str) -> int:
            return sum(int(t.get(key) or 0) for t in tables)

        total = {
            "currency": currencies.pop(),
            "coups": add("coups"),
            "bets": add("bets"),
            "handle": add("handle_minor"),
            "house": add("house_minor"),
            "commission": add("commission_minor"),
            "findings": add("findings"),
        }
    return {"tables": tables, "total": total}


def _findings(report: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "groups": list(report.get("groups") or []),
        "total": int(report.get("findings_total") or 0),
        "listed": len(report.get("findings") or []),
        "open_items": list(report.get("open_items") or []),
        "ends": report.get("ends_at") or {},
        "refused": sorted((report.get("refused") or {}).items()),
        "money_reasons": MONEY_REASONS,
    }


def _charts(report: Mapping[str, Any], odds: Mapping[str, Mapping[str, float]]) -> dict[str, Any]:
    outcomes = report.get("outcomes") or {}
    tables = list(report.get("tables") or [])
    charts = []
    for t in tables:
        tid = str(t.get("table_id"))
        exact = odds.get(tid) or {}
        chart = Markup(outcome_chart(t, outcomes.get(tid) or {}, exact))  # noqa: S704 (our template's output)
        charts.append({"table_id": tid, "variant": t.get("variant"), "exact": bool(exact), "chart": chart})
    currency = tables[0].get("currency") if tables else None
    return {"tables": charts, "house": _house(list(report.get("coup_list") or []), currency, 800)}


def _shoes(report: Mapping[str, Any]) -> dict[str, Any]:
    shoes = list(report.get("shoes") or [])
    currencies = {t.get("table_id"): t.get("currency") for t in report.get("tables") or []}
    by_shoe: dict[str, list[Mapping[str, Any]]] = {}
    for c in report.get("coup_list") or []:
        by_shoe.setdefault(str(c.get("shoe_id")), []).append(c)
    detail = [
        {
            "shoe_id": str(s.get("shoe_id")),
            "table_id": s.get("table_id"),
            "commitment": s.get("commitment"),
            "currency": currencies.get(s.get("table_id")),
            "coups": sorted(
                by_shoe.get(str(s.get("shoe_id")), []), key=lambda c: int(c.get("coup_number") or 0)
            ),
        }
        for s in shoes
    ]
    return {"shoes": shoes, "detail": detail}


def render_html(
    report: Mapping[str, Any],
    meta: Mapping[str, Any] | None = None,
    odds: Mapping[str, Mapping[str, float]] | None = None,
) -> str:
    """The report as one HTML page (deterministic for the same inputs, escaped, self-contained)."""
    meta = meta or {}
    verdict = str(report.get("verdict"))
    alerts = list(report.get("alerts") or [])
    r = {
        "verdict": verdict,
        "css": "unsupplied" if verdict == CLEAN_KEYS_NOT_SUPPLIED else verdict,
        "meaning": VERDICT_MEANING.get(verdict, ""),
        "about": _about(report, meta),
        "summary": _summary(report),
        "findings": _findings(report),
        "charts": _charts(report, odds or {}),
        "shoes": _shoes(report),
        "alerts": {
            "rows": alerts,
            "count": int((report.get("types") or {}).get("AnomalyDetected", len(alerts))),
        },
    }
    return _template("report.html").render(r=r)


def render_coup_html(view: Mapping[str, Any]) -> str:
    """One game round as a readable page: bets, cards in order, decisions, result recorded and
    recomputed, payouts with their postings, totals, findings."""
    bets: Iterable[Mapping[str, Any]] = view.get("bets") or []
    hands = view.get("hands") or {}
    again = view.get("recomputed") or {}
    v = {
        **view,
        "verdict": str(view.get("verdict")),
        "bets": list(bets),
        "cards": list(view.get("cards") or []),
        "decisions": list(view.get("decisions") or []),
        "payouts": list(view.get("payouts") or []),
        "findings": list(view.get("findings") or []),
        "totals": view.get("totals") or {},
        "hands": sorted(hands.items()),
        "recomputed_outcome": again.get("outcome"),
        "agrees": again.get("outcome") == view.get("outcome") and again.get("hands") == hands,
        "currency": next((b.get("currency") for b in bets if b.get("currency")), None),
    }
    return _template("coup.html").render(v=v)
