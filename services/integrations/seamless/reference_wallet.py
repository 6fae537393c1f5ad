"""The reference operator wallet: a small ASGI app (starlette) over its own SQLite ledger, speaking the
seamless protocol of docs/integration.md, with fault injection. For the tests, the demo and the bench.

Protocol: ``POST /debit``, ``/credit``, ``/rollback``, ``/balance``; JSON bodies ``{"transaction_id",
"account_id", "round_id", "bet_id", "amount_minor", "currency"}`` (plus ``reference_transaction_id``
on a rollback; ``/balance`` needs only ``account_id``), each signed ``X-Signature: hex(HMAC-SHA256(
secret, body))`` (a bad signature: 401). Answers ``{"status": "ok" | "insufficient_funds" |
"unknown_account" | "duplicate", "balance_minor"}``. A transaction id is applied at most once: a
repeat answers ``duplicate`` with the balance right after the original. A rollback of a debit not
seen yet applies as a cancellation (nothing moves, amount 0) and the debit, should it arrive later,
is refused with 409 ``cancelled`` (never applied).

Export (``GET /export``, ``GET /export?format=csv``, or :func:`export`; what ``casino-ledger
reconcile --operator FILE`` reads): JSON ``{"format": "casino-ledger/operator-export-1",
"transactions": [row…], "balances": [{"account_id", "currency", "balance_minor"}]}`` or CSV with one
row per applied transaction; a row is ``seq, transaction_id, kind (debit|credit|rollback),
account_id, round_id, bet_id, amount_minor (a rollback: what it gave back, 0 for a cancellation),
currency, reference_transaction_id, balance_after_minor``.

Faults (:class:`Faults`, seeded, changeable while running): ``latency_ms`` (uniform 0..n before
each call), ``timeout_after_apply`` (apply, then hang past the client's timeout), ``error_before``
(503 without applying), ``error_after`` (apply, then 500), ``duplicate_delivery`` (the call is
handled twice, as if a proxy re-sent it: the caller gets the second answer, ``duplicate``),
``insufficient`` (a debit refused ``insufficient_funds``), and :meth:`Faults.down` (every call 503
for that many seconds: "the operator down for a minute").
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import hashlib
import hmac
import io
import json
import random
import socket
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

EXPORT_FORMAT = "casino-ledger/operator-export-1"
"""The ``format`` of a JSON export."""

EXPORT_COLUMNS = (
    "seq", "transaction_id", "kind", "account_id", "round_id", "bet_id", "amount_minor", "currency",
    "reference_transaction_id", "balance_after_minor",
)  # fmt: skip
"""The columns of an exported transaction, in order (the CSV header)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS accounts (
    account_id TEXT PRIMARY KEY, currency TEXT NOT NULL, balance_minor INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS transactions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, transaction_id TEXT NOT NULL UNIQUE, kind TEXT NOT NULL,
    account_id TEXT NOT NULL, round_id TEXT, bet_id TEXT, amount_minor INTEGER NOT NULL,
    currency TEXT NOT NULL, reference_transaction_id TEXT, balance_after_minor INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS cancelled (transaction_id TEXT PRIMARY KEY);
"""


@dataclass(slots=True)
class Faults:
    """What goes wrong, with which probability (0 to 1), from a seeded generator."""

    seed: int = 0
    latency_ms: int = 0
    timeout_after_apply: float = 0.0
    error_before: float = 0.0
    error_after: float = 0.0
    duplicate_delivery: float = 0.0
    insufficient: float = 0.0
    hang_s: float = 1.0
    """How long a ``timeout_after_apply`` call hangs (longer than the caller's timeout)."""
    down_until: float = 0.0
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def down(self, seconds: float) -> None:
        """Answer every call 503 for ``seconds`` from now (the operator is down)."""
        self.down_until = time.monotonic() + seconds

    def clear(self) -> None:
        """No more faults (the operator is healthy again)."""
        self.latency_ms = 0
        self.timeout_after_apply = self.error_before = self.error_after = 0.0
        self.duplicate_delivery = self.insufficient = 0.0
        self.down_until = 0.0

    def hit(self, p: float) -> bool:
        """A seeded draw with probability ``p``."""
        return p > 0 and self.rng.random() < p


class Ledger:
    """The operator's SQLite ledger: accounts and applied transactions, each id at most once."""

    def __init__(self, path: str | Path) -> None:
        self._conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False, timeout=30)
        self._conn.execute("PRAGMA journal_mode=WAL")
        # a reference wallet: durable across a crash of its process (WAL), not across a power cut
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.executescript(_SCHEMA)
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close the file."""
        self._conn.close()

    def fund(self, accounts: Mapping[str, int], currency: str) -> None:
        """Open (or top up to) these balances: the operator's accounts, already funded."""
        with self._lock:
            for account, balance in accounts.items():
                self._conn.execute(
                    "INSERT INTO accounts VALUES (?, ?, ?) ON CONFLICT(account_id) DO UPDATE SET "
                    "balance_minor = excluded.balance_minor",
                    (account, currency, balance),
                )

    def balance(self, account: str) -> int | None:
        """An account's balance (None: no such account)."""
        row = self._conn.execute(
            "SELECT balance_minor FROM accounts WHERE account_id = ?", (account,)
        ).fetchone()
        return int(row[0]) if row else None

    def balances(self) -> dict[str, int]:
        """Every account's balance."""
        return {
            str(a): int(b) for a, b in self._conn.execute("SELECT account_id, balance_minor FROM accounts")
        }

    def apply(
        self, kind: str, body: Mapping[str, Any], *, insufficient: bool = False
    ) -> tuple[int, dict[str, Any]]:
        """Apply one call: (HTTP status, answer). Atomic; a transaction id at most once."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                out = self._apply(kind, body, insufficient)
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
            return out

    def _apply(self, kind: str, b: Mapping[str, Any], insufficient: bool) -> tuple[int, dict[str, Any]]:
        tx, account = str(b["transaction_id"]), str(b["account_id"])
        seen = self._conn.execute(
            "SELECT balance_after_minor FROM transactions WHERE transaction_id = ?", (tx,)
        ).fetchone()
        if seen is not None:
            return 200, {"status": "duplicate", "balance_minor": int(seen[0])}
        if (
            kind == "debit"
            and self._conn.execute("SELECT 1 FROM cancelled WHERE transaction_id = ?", (tx,)).fetchone()
        ):
            return 409, {"status": "cancelled", "balance_minor": self.balance(account)}
        row = self._conn.execute(
            "SELECT currency, balance_minor FROM accounts WHERE account_id = ?", (account,)
        ).fetchone()
        if row is None or row[0] != b["currency"]:
            return 200, {"status": "unknown_account", "balance_minor": None}
        balance, amount = int(row[1]), int(b["amount_minor"])
        if kind == "debit" and (insufficient or amount > balance):
            return 200, {"status": "insufficient_funds", "balance_minor": balance}
        reference = b.get("reference_transaction_id") if kind == "rollback" else None
        if kind == "rollback":
            amount = self._rollback_amount(str(reference), account)
        after = balance - amount if kind == "debit" else balance + amount
        self._conn.execute("UPDATE accounts SET balance_minor = ? WHERE account_id = ?", (after, account))
        self._conn.execute(
            "INSERT INTO transactions (transaction_id, kind, account_id, round_id, bet_id, amount_minor, "
            "currency, reference_transaction_id, balance_after_minor) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (tx, kind, account, b.get("round_id"), b.get("bet_id"), amount, b["currency"], reference, after),
        )
        return 200, {"status": "ok", "balance_minor": after}

    def _rollback_amount(self, reference: str, account: str) -> int:
        """What a rollback gives back: the debit's amount, or 0 (and the debit cancelled) if unseen."""
        debit = self._conn.execute(
            "SELECT amount_minor FROM transactions "
            "WHERE transaction_id = ? AND kind = 'debit' AND account_id = ?",
            (reference, account),
        ).fetchone()
        if debit is None:
            self._conn.execute("INSERT OR IGNORE INTO cancelled VALUES (?)", (reference,))
            return 0
        return int(debit[0])

    def transactions(self) -> list[dict[str, Any]]:
        """Every applied transaction, in the order applied (the export's rows)."""
        cols = ", ".join(EXPORT_COLUMNS)
        cur = self._conn.execute(f"SELECT {cols} FROM transactions ORDER BY seq")  # noqa: S608 (constant columns)
        return [dict(zip(EXPORT_COLUMNS, r, strict=True)) for r in cur]

    def export(self) -> dict[str, Any]:
        """The JSON export (see the module docstring)."""
        balances = [
            {"account_id": a, "currency": c, "balance_minor": int(b)}
            for a, c, b in self._conn.execute(
                "SELECT account_id, currency, balance_minor FROM accounts ORDER BY 1"
            )
        ]
        return {"format": EXPORT_FORMAT, "transactions": self.transactions(), "balances": balances}


def export_csv(rows: Iterable[Mapping[str, Any]]) -> str:
    """Transactions as CSV with the :data:`EXPORT_COLUMNS` header."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=EXPORT_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if row.get(k) is None else row[k] for k in EXPORT_COLUMNS})
    return out.getvalue()


def export(ledger: Ledger, path: str | Path) -> None:
    """Write the ledger's export to ``path``: CSV when it ends in ``.csv``, else JSON."""
    target = Path(path)
    if target.suffix == ".csv":
        target.write_text(export_csv(ledger.transactions()), encoding="utf-8")
    else:
        target.write_text(json.dumps(ledger.export(), indent=1, sort_keys=True), encoding="utf-8")


@dataclass(slots=True)
class Stats:
    """What the wallet saw: calls received and answered by status (for tests and the bench)."""

    calls: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    bad_signatures: int = 0


def make_app(
    ledger: Ledger, secret: bytes, faults: Faults | None = None, stats: Stats | None = None
) -> Starlette:
    """The ASGI app over ``ledger``, checking signatures with ``secret``."""
    f = faults if faults is not None else Faults()
    st = stats if stats is not None else Stats()

    async def call(request: Request) -> Response:
        kind = request.path_params["kind"]
        raw = await request.body()
        st.calls += 1
        given = request.headers.get("x-signature", "")
        if not hmac.compare_digest(hmac.new(secret, raw, hashlib.sha256).hexdigest(), given):
            st.bad_signatures += 1
            return JSONResponse({"status": "bad_signature"}, status_code=401)
        try:
            body = json.loads(raw)
            if not isinstance(body, dict) or not isinstance(body.get("account_id"), str):
                raise ValueError
        except ValueError:
            return JSONResponse({"status": "bad_request"}, status_code=400)
        if time.monotonic() < f.down_until:
            return _count(st, PlainTextResponse("operator down", status_code=503), "down")
        if f.latency_ms:
            await asyncio.sleep(f.rng.uniform(0, f.latency_ms) / 1000)
        if kind == "balance":
            balance = ledger.balance(body["account_id"])
            status = "ok" if balance is not None else "unknown_account"
            return JSONResponse({"status": status, "balance_minor": balance})
        if f.hit(f.error_before):
            return _count(st, PlainTextResponse("unavailable", status_code=503), "error_before")
        code, answer = ledger.apply(kind, body, insufficient=kind == "debit" and f.hit(f.insufficient))
        if f.hit(f.duplicate_delivery):
            code, answer = ledger.apply(kind, body)
        if f.hit(f.error_after):
            return _count(st, PlainTextResponse("failed after applying", status_code=500), "error_after")
        if f.hit(f.timeout_after_apply):
            await asyncio.sleep(f.hang_s)
            return _count(st, JSONResponse(answer, status_code=code), "timeout_after_apply")
        return _count(st, JSONResponse(answer, status_code=code), str(answer["status"]))

    async def export_route(request: Request) -> Response:
        if request.query_params.get("format") == "csv":
            return PlainTextResponse(export_csv(ledger.transactions()), media_type="text/csv")
        return JSONResponse(ledger.export())

    routes = [
        Route("/export", export_route, methods=["GET"]),
        Route("/{kind:str}", call, methods=["POST"]),
    ]

    app = Starlette(routes=routes)
    app.state.ledger, app.state.faults, app.state.stats = ledger, f, st
    return app


def _count(st: Stats, response: Response, status: str) -> Response:
    st.statuses[status] = st.statuses.get(status, 0) + 1
    return response


KINDS = frozenset({"debit", "credit", "rollback", "balance"})


@dataclass(slots=True)
class RunningWallet:
    """A reference wallet served on a loopback port: its URL, ledger, faults and stats."""

    url: str
    ledger: Ledger
    faults: Faults
    stats: Stats


@contextlib.contextmanager
def serve(
    db: str | Path,
    secret: bytes,
    *,
    accounts: Mapping[str, int] | None = None,
    currency: str = "EUR",
    faults: Faults | None = None,
) -> Iterator[RunningWallet]:
    """Run the reference wallet (uvicorn, in a thread) on a free loopback port until the block ends."""
    ledger = Ledger(db)
    if accounts:
        ledger.fund(accounts, currency)
    f, st = faults if faults is not None else Faults(), Stats()
    app = make_app(ledger, secret, f, st)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # accepted connections inherit it: without, each answer waits for Nagle and delayed ACK (the event
    # loop sets no TCP_NODELAY on connections of a socket handed over ready-made)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="error", access_log=False, lifespan="off", timeout_keep_alive=30)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the reference wallet did not start")
        time.sleep(0.01)
    try:
        yield RunningWallet(f"http://127.0.0.1:{port}", ledger, f, st)
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
        ledger.close()
