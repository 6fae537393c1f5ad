"""What the seamless adapter costs: calls per second through it, and the latency it adds per bet.

Both against the reference operator wallet (uvicorn on a loopback port, in this process, no faults),
each beside a baseline measured in the same run:

* **Throughput.** ``CALLS`` debits for distinct wallets go through the whole adapter path — the
  ``PlaceBet`` stepped through the adapter stage (a ``SeamlessCallRequested``), the signed call made
  by the HTTP shell (``CONCURRENCY`` in flight), the answer sealed, signed and stepped back in (the
  ``StakeReserved`` and ``BetPlaced``). Baseline: the same number of signed raw ``httpx`` posts to the
  same wallet with the same concurrency. Ratio: adapter calls/s over raw calls/s.
  The adapter alone: the same path with the operator replaced by an in-memory ``httpx.MockTransport``
  (its own ceiling; with the in-process wallet both runs are bounded by the wallet).
* **Latency per bet.** ``BETS`` bets one after the other, each from its ``PlaceBet`` to its
  ``BetPlaced``: through the adapter (stage, HTTP, answer, stage) and through the internal wallet
  stage (one ``step``). The p99 added per bet is the difference of the two p99s.

Run: ``.venv/bin/python -m bench seamless``.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

import httpx
from pydantic import SecretStr

from services.core import topics
from services.core.envelope import Envelope, request
from services.core.processor import initial_state, step
from services.integrations.seamless.client import OperatorClient, answer_envelope, body_of, signature
from services.integrations.seamless.reference_wallet import serve
from services.runtime.compose import Composition
from services.runtime.settings import SeamlessConfig
from services.settlement.seamless_stage import SeamlessWalletStage
from services.settlement.wallet_stage import WalletStage

CALLS = 2_000
CONCURRENCY = 8
BETS = 500
SECRET = "bench-seamless-secret-0123456789"


def place_bet(n: int, account: str) -> Envelope:
    """A signed-looking ``PlaceBet`` (the stages here have no guard: the cost measured is the adapter's)."""
    payload = {"account_id": account, "bet_id": f"b{n}", "table_id": "T1", "coup_id": "c1", "spot": "banker",
               "stake_minor": 100, "currency": "EUR"}  # fmt: skip
    return request("PlaceBet", topics.WALLET_REQUESTS, account, payload, event_id=f"pb-{n}",
                   occurred_at="2026-11-23T00:00:00Z", producer="terminal")  # fmt: skip


async def through_adapter(client: OperatorClient, first: int) -> float:
    """Seconds for ``CALLS`` debits through the adapter path, ``CONCURRENCY`` calls in flight."""
    stage = SeamlessWalletStage()
    state = initial_state(stage)
    guard = Composition.demo().settlement_guard()
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(req: Envelope) -> Envelope:
        async with gate:
            return answer_envelope(req, await client.call(req.payload), guard)

    started = time.perf_counter()
    asked = [out for n in range(CALLS) for out in step(stage, state, place_bet(first + n, f"acct{n}"))]
    answers = await asyncio.gather(*(one(r) for r in asked if r.type == "SeamlessCallRequested"))
    placed = sum(1 for a in answers for out in step(stage, state, a) if out.type == "BetPlaced")
    seconds = time.perf_counter() - started
    assert placed == CALLS, placed
    return seconds


async def raw_calls(url: str, first: int) -> float:
    """Seconds for ``CALLS`` signed raw posts with the same concurrency."""
    gate = asyncio.Semaphore(CONCURRENCY)
    limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
    async with httpx.AsyncClient(base_url=url, limits=limits) as http:

        async def one(n: int) -> None:
            p = {"transaction_id": f"raw/{first + n}", "account_id": f"acct{n}", "round_id": "c1",
                 "bet_id": f"raw{first + n}", "amount_minor": 100, "currency": "EUR", "call": "debit"}  # fmt: skip
            body = body_of(p)
            async with gate:
                r = await http.post(
                    "/debit", content=body, headers={"X-Signature": signature(SECRET.encode(), body)}
                )
            assert r.json()["status"] == "ok"

        started = time.perf_counter()
        await asyncio.gather(*(one(n) for n in range(CALLS)))
        return time.perf_counter() - started


async def latencies(client: OperatorClient) -> tuple[list[float], list[float]]:
    """Per-bet seconds from ``PlaceBet`` to ``BetPlaced``: through the adapter, and the internal stage."""
    adapter, internal = SeamlessWalletStage(), WalletStage()
    a_state, i_state = initial_state(adapter), initial_state(internal)
    guard = Composition.demo().settlement_guard()
    deposit = request("Deposit", topics.WALLET_REQUESTS, "lat", {"account_id": "lat", "amount_minor": 10**9,
                      "currency": "EUR"}, event_id="dep", occurred_at="2026-11-23T00:00:00Z", producer="c")  # fmt: skip
    step(internal, i_state, deposit)
    through, alone = [], []
    for n in range(BETS):
        bet = place_bet(10_000_000 + n, "lat")
        started = time.perf_counter()
        [req] = [o for o in step(adapter, a_state, bet) if o.type == "SeamlessCallRequested"]
        outs = step(adapter, a_state, answer_envelope(req, await client.call(req.payload), guard))
        through.append(time.perf_counter() - started)
        assert any(o.type == "BetPlaced" for o in outs)
        started = time.perf_counter()
        outs = step(internal, i_state, bet)
        alone.append(time.perf_counter() - started)
        assert any(o.type == "BetPlaced" for o in outs)
    return through, alone


def mock_operator() -> httpx.MockTransport:
    """An operator answering every call ``ok`` at once, in memory: the adapter's own ceiling."""
    balances: dict[str, int] = {}

    def answer(req: httpx.Request) -> httpx.Response:
        body = json.loads(req.content)
        after = balances.get(body["account_id"], 10**12) - body["amount_minor"]
        balances[body["account_id"]] = after
        return httpx.Response(200, json={"status": "ok", "balance_minor": after})

    return httpx.MockTransport(answer)


def p99(xs: list[float]) -> float:
    """The 99th percentile."""
    return statistics.quantiles(xs, n=100)[98]


async def measure(url: str) -> None:
    """Run both measurements (alternated, best of 3 for throughput) and print them."""
    config = SeamlessConfig(url=url, secret=SecretStr(SECRET), concurrency=CONCURRENCY)
    client = OperatorClient(config)
    try:
        adapter = raw = float("inf")
        for r in range(3):
            raw = min(raw, await raw_calls(url, 2 * r * CALLS))
            adapter = min(adapter, await through_adapter(client, (2 * r + 1) * CALLS))
        through, alone = await latencies(client)
        mocked = OperatorClient(config, transport=mock_operator())
        alone_s = min([await through_adapter(mocked, (10 + r) * CALLS) for r in range(3)])
        await mocked.aclose()
    finally:
        await client.aclose()
    a_rate, r_rate = CALLS / adapter, CALLS / raw
    print(f"{CALLS} debits, {CONCURRENCY} in flight, reference wallet on loopback (best of 3)")
    print(f"through the adapter: {a_rate:,.0f} calls/s; raw signed httpx: {r_rate:,.0f} calls/s; "
          f"ratio adapter/raw: {a_rate / r_rate:.3f}")  # fmt: skip
    print(f"the adapter alone (operator in memory, httpx.MockTransport): {CALLS / alone_s:,.0f} calls/s, "
          f"{alone_s / CALLS * 1e6:.0f} us of CPU per call")  # fmt: skip
    ms_t, ms_a = p99(through) * 1e3, p99(alone) * 1e3
    print(f"{BETS} bets one at a time, PlaceBet to BetPlaced: p99 through the adapter {ms_t:.2f} ms, "
          f"internal wallet stage {ms_a:.3f} ms; p99 added per bet: {ms_t - ms_a:.2f} ms "
          f"(median added {(statistics.median(through) - statistics.median(alone)) * 1e3:.2f} ms)")  # fmt: skip


def main() -> None:
    """Start the reference wallet, fund the wallets, measure."""
    with tempfile.TemporaryDirectory() as tmp:
        accounts = {f"acct{n}": 10**12 for n in range(CALLS)} | {"lat": 10**12}
        with serve(Path(tmp) / "operator.db", SECRET.encode(), accounts=accounts) as wallet:
            asyncio.run(measure(wallet.url))


if __name__ == "__main__":
    main()
