"""The worker metrics: a batch's tally becomes the right counters; readiness; safe labels; JSON logs."""

from __future__ import annotations

import io
import json
import logging
import re
from pathlib import Path

import pytest

from services.core import topics
from services.core.envelope import Envelope, request
from services.runtime.kafka import metrics
from services.runtime.kafka.metrics import Status, Tally, WorkerMetrics, samples
from services.runtime.logging import configure
from services.runtime.settings import Settings

T = "2026-01-01T00:00:00.000Z"


def out(type_: str, topic: str, payload: dict[str, object], n: int, producer: str = "settlement") -> Envelope:
    """An output envelope as a processor writes it (only the fields the metrics read matter)."""
    return request(type_, topic, "k", payload, event_id=f"{type_}-{n}", occurred_at=T, producer=producer)


def scrape(m: WorkerMetrics) -> dict[str, float]:
    """Every sample of the registry, by ``name{labels}``."""
    return samples(m.exposition().decode())


def test_a_flushed_tally_counts_inputs_outputs_money_refusals_dead_letters_and_findings() -> None:
    """One batch's tally gives records by type, bets and payouts in counts and minor units, refusals and
    dead letters by reason, findings and anomalies by code; unknown input types are one label."""
    m = WorkerMetrics("settlement", process_collectors=False)
    tally = Tally()
    for type_ in ("CoupResolved", "CoupResolved", None, "Forged-Type-42"):
        tally.input("payout", topics.TABLE_EVENTS, type_)
    outputs = [
        out("BetAccepted", topics.TABLE_EVENTS, {"stake_minor": 500, "currency": "EUR"}, 1, "dealer"),
        out("BetAccepted", topics.TABLE_EVENTS, {"stake_minor": 250, "currency": "EUR"}, 2, "dealer"),
        out("PayoutIssued", topics.WALLET_REQUESTS, {"result": "win", "currency": "EUR", "credit_minor": 975,
                                                     "win_minor": 500, "commission_minor": 25}, 3),
        out("PayoutIssued", topics.WALLET_REQUESTS, {"result": "lose", "currency": "EUR", "credit_minor": 0,
                                                     "win_minor": 0, "commission_minor": 0}, 4),
        out("BetRejected", topics.WALLET_EVENTS, {"reason": "insufficient_funds"}, 5),
        out("DeadLetter", topics.DEADLETTER, {"reason": "invalid_payload"}, 6),
        out("AuditFinding", topics.AUDIT_FINDINGS, {"reason": "payout_mismatch", "severity": "critical"}, 7),
        out("AnomalyDetected", topics.MONITOR_ALERTS, {"detector": "past_posting", "severity": "high"}, 8),
    ]  # fmt: skip
    for env in outputs:
        tally.output(env)
    m.flush(tally, "payout", 4, 0.02)
    s = scrape(m)

    base = 'processor="payout",service="settlement",topic="casino.table.events"'
    assert s[f'casino_records_handled_total{{{base},type="CoupResolved"}}'] == 2
    assert s[f'casino_records_handled_total{{{base},type="undecodable"}}'] == 1
    assert s[f'casino_records_handled_total{{{base},type="unknown"}}'] == 1
    assert not any("Forged" in key for key in s)
    assert s['casino_bets_total{currency="EUR",service="settlement"}'] == 2
    assert s['casino_bet_stake_minor_total{currency="EUR",service="settlement"}'] == 750
    assert s['casino_payouts_total{currency="EUR",result="win",service="settlement"}'] == 1
    assert s['casino_payouts_total{currency="EUR",result="lose",service="settlement"}'] == 1
    assert s['casino_payout_credit_minor_total{currency="EUR",service="settlement"}'] == 975
    assert s['casino_payout_win_minor_total{currency="EUR",service="settlement"}'] == 500
    assert s['casino_payout_commission_minor_total{currency="EUR",service="settlement"}'] == 25
    refused = 'processor="settlement",reason="insufficient_funds",service="settlement",type="BetRejected"'
    assert s[f"casino_refusals_total{{{refused}}}"] == 1
    dead = 'processor="settlement",reason="invalid_payload",service="settlement"'
    assert s[f"casino_dead_letters_total{{{dead}}}"] == 1
    finding = 'reason="payout_mismatch",service="settlement",severity="critical"'
    assert s[f"casino_audit_findings_total{{{finding}}}"] == 1
    assert s['casino_anomalies_total{detector="past_posting",service="settlement",severity="high"}'] == 1
    written = 'service="settlement",topic="casino.table.events",type="BetAccepted"'
    assert s[f"casino_records_written_total{{{written}}}"] == 2
    assert s['casino_batch_records_sum{processor="payout",service="settlement"}'] == 4
    assert s['casino_batch_duration_seconds_count{processor="payout",service="settlement"}'] == 1
    assert not tally.handled and not tally.written and not tally.watched  # cleared for the next batch


def test_flushes_add_up_and_catch_up_is_counted_apart() -> None:
    """Two batches add up, and records re-applied by a catch-up are counted apart from records handled."""
    m = WorkerMetrics("dealer", process_collectors=False)
    tally = Tally()
    for _ in range(2):
        tally.input("dealer", topics.TABLE_INBOX, "DealCoup")
        tally.replayed("dealer", topics.TABLE_INBOX, 7)
        m.flush(tally, "dealer", 1, 0.001)
    s = scrape(m)
    labels = 'processor="dealer",service="dealer",topic="casino.table.inbox"'
    assert s[f'casino_records_handled_total{{{labels},type="DealCoup"}}'] == 2
    assert s[f"casino_records_caught_up_total{{{labels}}}"] == 14


def test_a_label_from_a_payload_is_a_short_string_or_unknown() -> None:
    """A reason that is not a short string (a hostile or broken payload) becomes the label ``unknown``."""
    m = WorkerMetrics("audit", process_collectors=False)
    tally = Tally()
    tally.output(out("DeadLetter", topics.DEADLETTER, {"reason": "x" * 500}, 1, "audit"))
    tally.output(out("DeadLetter", topics.DEADLETTER, {"reason": {"nested": 1}}, 2, "audit"))
    m.flush(tally, "audit", 2, 0.0)
    assert scrape(m)['casino_dead_letters_total{processor="audit",reason="unknown",service="audit"}'] == 2


@pytest.mark.parametrize(
    ("status", "max_lag", "ready"),
    [
        (Status(False, {}), 100, False),  # the group has not assigned anything yet
        (Status(True, {}), 0, True),  # a standby: more members than partitions
        (Status(True, {("casino.table.inbox", 0): 0, ("casino.table.inbox", 1): 3}), 3, True),
        (Status(True, {("casino.table.inbox", 0): 0, ("casino.table.inbox", 1): 4}), 3, False),
        (Status(True, {("casino.table.inbox", 0): None}), 100, False),  # no fetch answered yet
    ],
)
def test_ready_means_assigned_and_every_partition_known_and_within_the_lag(
    status: Status, max_lag: int, ready: bool
) -> None:
    """Ready = assigned, and every assigned partition's lag is known and at most the allowed lag."""
    assert status.ready(max_lag) is ready


def test_scraped_gauges_follow_the_status_source() -> None:
    """Lag per partition, assigned partitions and readiness are read from the status when scraped."""
    m = WorkerMetrics("dealer", process_collectors=False)
    assert scrape(m)['casino_ready{service="dealer"}'] == 0
    m.status_source = lambda: Status(True, {("casino.table.inbox", 2): 5, ("casino.table.inbox", 3): None})
    m.max_lag = 10
    s = scrape(m)
    assert s['casino_consumer_lag_records{partition="2",service="dealer",topic="casino.table.inbox"}'] == 5
    assert not any('partition="3"' in key for key in s)  # unknown lag: no sample rather than a wrong one
    assert s['casino_assigned_partitions{service="dealer"}'] == 2
    assert s['casino_ready{service="dealer"}'] == 0


def test_the_web_server_listens_on_loopback_only_unless_told() -> None:
    """By default the web server binds 127.0.0.1 and serves none of faust's own pages (router, tables)."""
    options = metrics.web_settings(Settings())
    assert options["web_bind"] == "127.0.0.1"
    assert options["web_enabled"] is False
    assert not any(options[k] for k in ("web_router_enabled", "web_tables_enabled", "web_stats_enabled"))
    assert metrics.web_settings(Settings(web_bind="0.0.0.0", web_enabled=True))["web_bind"] == "0.0.0.0"


def test_probe_exits_1_with_one_line_when_nothing_answers(capsys: pytest.CaptureFixture[str]) -> None:
    """The container probe (``python -m services.runtime.kafka.metrics healthz``) exits 1, says why in one
    line."""
    from tests.helpers.broker import free_port  # noqa: PLC0415

    assert metrics.main(["healthz", "--url", f"http://127.0.0.1:{free_port()}/healthz"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "no answer" in err


def test_library_log_records_come_out_as_json_lines() -> None:
    """After configure(fmt="json"), a warning logged by a library through the standard ``logging`` module
    (with its traceback) is one JSON line on the same stream as our own lines; its INFO chatter is not."""
    stream = io.StringIO()
    root = logging.getLogger()
    before = (list(root.handlers), root.level)
    try:
        configure(level="INFO", fmt="json", stream=stream)
        logging.getLogger("aiokafka.consumer").warning("Heartbeat failed for group %s", "g1")
        logging.getLogger("faust.transport").info("rebalance narration")
        try:
            raise ValueError("boom")
        except ValueError:
            logging.getLogger("mode").exception("service crashed")
    finally:
        configure()
        root.handlers[:] = before[0]
        root.setLevel(before[1])
    lines = stream.getvalue().splitlines()
    parsed = [json.loads(line) for line in lines]
    assert [p["event"] for p in parsed] == ["Heartbeat failed for group g1", "service crashed"]
    assert parsed[0]["logger"] == "aiokafka.consumer"
    assert parsed[0]["level"] == "warning"
    assert "ValueError: boom" in parsed[1]["exception"]


DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "casino-ledger-workers.json"
PROMQL_WORDS = {
    "sum", "by", "rate", "increase", "max", "min", "histogram_quantile", "on", "and", "group_left",
    "label_values", "le", "service", "topic", "partition", "type", "reason", "severity", "detector",
    "currency", "result", "instance",
}  # fmt: skip


def dashboard_metric_names() -> set[str]:
    """Every metric name the example Grafana dashboard queries (panels and template variables)."""
    doc = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in doc["panels"] for t in p.get("targets", [])]
    exprs += [v["definition"] for v in doc["templating"]["list"] if "definition" in v]
    bare = [re.sub(r'"[^"]*"|\[[^]]*]', "", e) for e in exprs]  # label values and ranges out
    return {w for e in bare for w in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", e)} - PROMQL_WORDS


def test_every_metric_the_dashboard_queries_exists() -> None:
    """Each metric in deploy/grafana's dashboard is a family a worker exposes (histogram series included),
    and the dashboard covers lag, latency, dead letters, refusals, money and findings."""
    m = WorkerMetrics("dealer")  # with the process collectors, as a worker has them
    m.flush(Tally(), "dealer", 1, 0.0)
    exposed_names = {key.partition("{")[0] for key in samples(m.exposition().decode())}
    exposed_names |= {  # families with no sample yet (no label set seen)
        f"{name}{suffix}"
        for name, (kind, _, _) in metrics.METRICS.items()
        for suffix in (("_bucket", "_sum", "_count") if kind == "histogram" else ("",))
    }
    queried = dashboard_metric_names()
    assert queried <= exposed_names, queried - exposed_names
    needed = {
        "casino_consumer_lag_records", "casino_batch_duration_seconds_bucket", "casino_dead_letters_total",
        "casino_refusals_total", "casino_bet_stake_minor_total", "casino_payout_commission_minor_total",
        "casino_audit_findings_total", "casino_ready",
    }  # fmt: skip
    assert needed <= queried
