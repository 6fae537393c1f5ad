"""The seamless adapter's HTTP shell: one call to the operator's wallet, and its recorded answer.

Thin on purpose: every decision (which call, which try, when to give up) is in
:mod:`services.core.seamless`. This module turns a ``SeamlessCallRequested`` into
``POST {base}/{debit|credit|rollback}`` with the protocol's JSON body (docs/integration.md), signed
``X-Signature: hex(HMAC-SHA256(secret, body))``, waits the request's ``delay_ms`` first, and turns
whatever happens into a ``SeamlessCallAnswered``: the operator's definite answer, or ``timeout``,
``server_error`` (5xx), ``transport_error`` (no connection) or ``bad_answer`` (a body that is not the
protocol's). The answer is sealed and signed as the settlement principal (the composition root's
guard) with an id derived from the request's, so a repeated call records the same answer id.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import httpx

from services.core import topics
from services.core.envelope import Draft, Envelope, derive_id, seal, stage_namespace
from services.core.seamless import REFUSED, SUCCESS
from services.core.trust import Guard
from services.runtime.settings import SeamlessConfig

CALLER_STAGE = "settlement.seamless"
"""The namespace of the answers' derived ids (the HTTP shell's own)."""

PROTOCOL_FIELDS = ("transaction_id", "account_id", "round_id", "bet_id", "amount_minor", "currency")
"""The body of every call (``reference_transaction_id`` is added on a rollback)."""


def signature(secret: bytes, body: bytes) -> str:
    """``hex(HMAC-SHA256(secret, body))``: the ``X-Signature`` header of a call."""
    return hmac.new(secret, body, hashlib.sha256).hexdigest()


def body_of(p: Mapping[str, Any]) -> bytes:
    """The JSON body of the call a ``SeamlessCallRequested`` payload describes (compact, sorted keys)."""
    body = {f: p[f] for f in PROTOCOL_FIELDS}
    if p["call"] == "rollback":
        body["reference_transaction_id"] = p["reference_transaction_id"]
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def answer_payload(
    p: Mapping[str, Any], status: str, *, balance: Any = None, http_status: int | None = None,
    elapsed_ms: int = 0, detail: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The ``SeamlessCallAnswered`` payload for request ``p``."""
    ok_balance = isinstance(balance, int) and not isinstance(balance, bool) and balance >= 0
    return {
        "transaction_id": p["transaction_id"], "account_id": p["account_id"], "attempt": p["attempt"],
        "status": status, "balance_minor": balance if ok_balance else None, "http_status": http_status,
        "elapsed_ms": max(0, elapsed_ms), "detail": detail[:300] if detail else None,
    }  # fmt: skip


def read_answer(response: httpx.Response) -> tuple[str, Any, str | None]:
    """(status, balance, detail) of an HTTP response: a 5xx is ``server_error``, a body that is not
    ``{"status": <a protocol status>, "balance_minor": ...}`` is ``bad_answer``."""
    if response.status_code >= 500:
        return "server_error", None, f"HTTP {response.status_code}"
    try:
        data = response.json()
    except ValueError:
        return "bad_answer", None, f"HTTP {response.status_code}: not JSON"
    status = data.get("status") if isinstance(data, dict) else None
    if status not in SUCCESS and status not in REFUSED:
        return "bad_answer", None, f"HTTP {response.status_code}: status {str(status)[:40]!r}"
    return str(status), data.get("balance_minor"), None


class OperatorClient:
    """Makes calls to one operator's wallet (an ``httpx.AsyncClient`` with the TLS settings)."""

    def __init__(self, config: SeamlessConfig, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.config = config
        self._secret = config.secret.get_secret_value().encode()
        self._http = httpx.AsyncClient(
            base_url=config.url.rstrip("/"),
            timeout=httpx.Timeout(config.timeout_s),
            verify=config.tls(),
            transport=transport,
            limits=httpx.Limits(
                max_connections=config.concurrency, max_keepalive_connections=config.concurrency
            ),
        )

    async def aclose(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    async def call(self, p: Mapping[str, Any]) -> dict[str, Any]:
        """Make the call request payload ``p`` describes (after its ``delay_ms``): the answer payload."""
        started = time.perf_counter()
        delay = int(p.get("delay_ms") or 0)
        if delay:
            await asyncio.sleep(delay / 1000)
        body = body_of(p)
        headers = {"Content-Type": "application/json", "X-Signature": signature(self._secret, body)}
        http_status: int | None = None
        try:
            response = await self._http.post(f"/{p['call']}", content=body, headers=headers)
            http_status = response.status_code
            status, balance, detail = read_answer(response)
        except httpx.TimeoutException:
            status, balance, detail = "timeout", None, f"no answer within {self.config.timeout_s}s"
        except httpx.TransportError as exc:
            status, balance, detail = "transport_error", None, type(exc).__name__
        elapsed = round((time.perf_counter() - started) * 1000)
        return answer_payload(p, status, balance=balance, http_status=http_status, elapsed_ms=elapsed,
                              detail=detail)  # fmt: skip


def now_rfc3339() -> str:
    """The wall clock as the envelopes write it (an answer is an observation made now)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def answer_envelope(request: Envelope, answer: Mapping[str, Any], guard: Guard | None) -> Envelope:
    """The recorded answer to ``request``: on the wallet requests under the account, caused by the
    request, its id derived from the request's, signed as settlement when ``guard`` is given."""
    draft = Draft(
        "SeamlessCallAnswered", topics.WALLET_REQUESTS, str(answer["account_id"]), answer, chained=False
    )
    return seal(
        draft,
        event_id=derive_id(request.event_id, 0, stage_namespace(CALLER_STAGE)),
        occurred_at=now_rfc3339(),
        producer="settlement",
        cause=request,
        head=None,
        auth_for=guard.auth_for if guard is not None else None,
    )
