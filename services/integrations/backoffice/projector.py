"""The projector: folds the log's records, in log order, into the read model (:mod:`.schema`).

It reads ``casino.wallet.events`` (every transfer: balances and statement lines, bets' reservations
and payouts, refusals), ``casino.wallet.requests`` (``PayoutIssued``: each bet's result, win and
commission), ``casino.table.events`` (tables, shoes, the full game-round record, handle per gaming day
and shift), ``casino.audit.findings`` and ``casino.monitor.alerts``.

**Exactly once.** A batch of records is applied in one database transaction that also writes the
projector's position (``bo_positions``); the position is read inside that transaction and records at
or before it are skipped. A crash before the commit leaves nothing; after it, everything. Two
projectors on one read model cannot both apply a record: the second's position update conflicts.

**Rebuildable.** Every row is a function of the records alone; :meth:`Projector.rebuild` empties the
projected tables and the same log gives the same rows (tested, on SQLite and PostgreSQL).

**Gaming days and shifts.** A coup belongs to the gaming day and shift in which its betting opened
(UTC; the day starts at ``cutoff_hour``, shifts of ``shift_hours`` from there). Its figures count in
that day and shift, each record's share given by :func:`services.core.figures.of_record` (the one
definition of bets, handle, paid back, commission, win and the player-banker's share that the demo and
the replay use too): the win is what the house kept, commission included.

Records that are not valid contract events (forgeries and garbage that processors dead-letter) are
skipped and counted in :attr:`Projector.skipped`.

**Facts only.** From the embedded log (:meth:`Projector.catch_up`) only ledger facts are applied: records
a signed head of their expected writer covers, checked with public keys, the replay's own decision
(:mod:`services.integrations.backoffice.facts`). Outsider noise is passed over and counted
(:attr:`Projector.facts`);
the projector stops before a record still waiting for a signed head, and goes on once one covers it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Connection, Engine, bindparam, delete, func, select, update

from services.audit.replay.attested import Standing, WriterKey
from services.core import figures, topics
from services.core.contract import payload_of
from services.core.envelope import Envelope, canonical, parse_record
from services.core.errors import DomainError
from services.integrations.backoffice import schema as s
from services.integrations.backoffice.casework_projection import case_changed, index_alert_accounts
from services.integrations.backoffice.facts import Facts, Gate, writer_keys_for

INPUTS: tuple[str, ...] = (
    topics.WALLET_REQUESTS, topics.WALLET_EVENTS, topics.TABLE_EVENTS, topics.AUDIT_FINDINGS,
    topics.MONITOR_ALERTS,
)  # fmt: skip
"""The topics the projector reads."""

KIND_OF_TRANSFER: Mapping[str, str] = {
    "FundsDeposited": "deposit",
    "FundsWithdrawn": "withdrawal",
    "StakeReserved": "bet",
    "StakeRefunded": "refund",
    "PayoutApplied": "payout",
    "OperatorBalanceSynced": "operator_balance",  # seamless wallet: the operator's balance taken over
}
"""A statement line's ``kind`` by transfer event type."""

_BET_OPTIONAL = (
    "reason", "balance_before_minor", "balance_after_minor", "result", "win_minor", "commission_minor",
    "credit_minor", "payout_id", "payout_balance_before_minor", "payout_balance_after_minor",
)  # fmt: skip
"""A bet's columns that its first record may not fill (an insert names every column: one statement)."""
_ROUND_LATER = (
    "started_at", "ended_at", "outcome", "natural", "hands", "versus", "round_events", "resolved_offset",
)  # fmt: skip

_STATUS_RANK = {"reserved": 0, "accepted": 1, "refused": 2, "settled": 3}

REFUSALS = frozenset({"BetRejected", "WithdrawalRejected", "TransferRefused"})

Row = tuple[int, str, str, bytes]
"""One record: (offset in its source, topic, key, raw bytes)."""

EMBEDDED = "embedded"
"""The source name of the embedded log's single global offset."""


def _json(value: Any) -> str:
    return canonical(value).decode("utf-8")


@dataclass(frozen=True, slots=True)
class Periods:
    """How times map to gaming days and shifts (UTC)."""

    cutoff_hour: int = 6
    shift_hours: int = 8

    def __post_init__(self) -> None:
        if not 0 <= self.cutoff_hour <= 23:
            raise ValueError("the gaming day's cut-off hour is 0..23")
        if self.shift_hours < 1 or 24 % self.shift_hours:
            raise ValueError("shift hours must divide 24")

    def of(self, occurred_at: str) -> tuple[str, int]:
        """(gaming day ``YYYY-MM-DD``, shift 1..n) of an RFC 3339 time."""
        t = datetime.fromisoformat(occurred_at.replace("Z", "+00:00"))
        if t.utcoffset() is not None:
            t = t - (t.utcoffset() or timedelta(0))
        shifted = t.replace(tzinfo=None) - timedelta(hours=self.cutoff_hour)
        return shifted.date().isoformat(), shifted.hour // self.shift_hours + 1


def _by(table: Any, column: str) -> Any:
    return table.c[column] == bindparam("b_key")


# Statements built once: building and hashing a statement per record cost more than running it.
_INSERT = {t.name: t.insert() for t in s.PROJECTED}
_ACCOUNT = select(s.accounts.c.balance_minor, s.accounts.c.lines).where(_by(s.accounts, "account_id"))
_ACCOUNT_SET = update(s.accounts).where(_by(s.accounts, "account_id"))
_BET_STATUS = select(s.bets.c.status).where(_by(s.bets, "bet_id"))
_BET_PAYOUT = select(s.bets.c.payout_id).where(_by(s.bets, "bet_id"))
_BET_SET = update(s.bets).where(_by(s.bets, "bet_id"))
_TABLE = select(s.tables.c.variant, s.tables.c.rules_version, s.tables.c.paytable).where(
    _by(s.tables, "table_id")
)
_TABLE_SET = update(s.tables).where(_by(s.tables, "table_id"))
_SHOE_SET = update(s.shoes).where(_by(s.shoes, "shoe_id"))
_ROUND_SET = update(s.rounds).where(_by(s.rounds, "coup_id"))
_ROUND_PERIOD = select(s.rounds.c.gaming_day, s.rounds.c.shift).where(_by(s.rounds, "coup_id"))
_CARDS = select(func.count()).select_from(s.round_cards).where(_by(s.round_cards, "coup_id"))
_DECISIONS = select(func.count()).select_from(s.round_decisions).where(_by(s.round_decisions, "coup_id"))
_COUNTERS = figures.COUNTERS
_PERIOD_ADD = (
    update(s.table_periods)
    .where(
        s.table_periods.c.table_id == bindparam("b_table"),
        s.table_periods.c.day == bindparam("b_day"),
        s.table_periods.c.shift == bindparam("b_shift"),
    )
    .values({s.table_periods.c[k]: s.table_periods.c[k] + bindparam(f"add_{k}") for k in _COUNTERS})
)
_POSITION = select(s.positions.c.offset).where(
    s.positions.c.consumer == bindparam("b_consumer"), s.positions.c.source == bindparam("b_source")
)
_POSITION_SET = update(s.positions).where(
    s.positions.c.consumer == bindparam("b_consumer"), s.positions.c.source == bindparam("b_source")
)


def _account_of(subject: Mapping[str, Any]) -> str | None:
    value = subject.get("account_id") or subject.get("account")
    return value if isinstance(value, str) else None


class Projector:
    """Keeps the read model at ``engine`` from records given in log order (see the module docstring)."""

    def __init__(
        self,
        engine: Engine,
        *,
        name: str = "backoffice",
        periods: Periods | None = None,
        writers: Mapping[str, WriterKey] | None = None,
    ) -> None:
        self.engine = engine
        self.name = name
        self.periods = periods or Periods()
        self.skipped = 0
        self.facts = Facts(writers if writers is not None else writer_keys_for(None))
        """Which records of the embedded log are facts (``writers``: the principals' public keys)."""

    # -- positions ------------------------------------------------------------------------------------

    def position(self, source: str = EMBEDDED) -> int:
        """The last offset of ``source`` applied (0 when none)."""
        with self.engine.connect() as conn:
            return self._position(conn, source)

    def _position(self, conn: Connection, source: str) -> int:
        found = conn.execute(_POSITION, {"b_consumer": self.name, "b_source": source}).scalar_one_or_none()
        return int(found) if found is not None else 0

    # -- applying -------------------------------------------------------------------------------------

    def apply(self, rows: Sequence[Row], source: str = EMBEDDED, *, gate: Gate | None = None) -> int:
        """Apply ``rows`` (ascending offsets of ``source``) in one transaction with the new position;
        rows at or before the stored position are skipped; with a ``gate``, facts only, up to the first
        record still pending. Returns how many were applied (or passed over)."""
        if not rows:
            return 0
        with self.engine.begin() as conn:
            at = self._position(conn, source)
            applied = 0
            for offset, topic, _key, raw in rows:
                if offset <= at:
                    continue
                if not self._apply_one(conn, offset, topic, raw, gate):
                    break
                at, applied = offset, applied + 1
            if applied:
                self._set_position(conn, source, at)
        return applied

    def _set_position(self, conn: Connection, source: str, offset: int) -> None:
        key = {"b_consumer": self.name, "b_source": source}
        if not conn.execute(_POSITION_SET, {**key, "offset": offset}).rowcount:
            conn.execute(_INSERT["bo_positions"], {"consumer": self.name, "source": source, "offset": offset})

    def catch_up(self, log: Any, batch: int = 1000) -> int:
        """Apply every fact of the embedded ``log`` after the stored position, up to the first record
        still waiting for a signed head (:mod:`services.integrations.backoffice.facts`); returns how many."""
        gate = self.facts
        gate.pending_at = None
        if not log.read(INPUTS, self.position(), 1):
            return 0  # up to date: no need to survey what the log gained (signed heads, noise)
        gate.follow(log)
        total = 0
        while True:
            rows = log.read(INPUTS, self.position(), batch)
            if not rows:
                return total
            total += self.apply(rows, gate=gate)
            if gate.pending_at is not None:
                return total

    def rebuild(self, log: Any | None = None) -> int:
        """Empty every projected table (and the position) in one transaction; then, given a ``log``,
        project it again from the start. Returns how many records were applied."""
        with self.engine.begin() as conn:
            for table in reversed(s.PROJECTED):
                conn.execute(delete(table))
        self.facts.unattested, self.facts.first_ids = 0, []
        return self.catch_up(log) if log is not None else 0

    def _apply_one(self, conn: Connection, offset: int, topic: str, raw: bytes, gate: Gate | None) -> bool:
        """Apply one record (a fact, with a ``gate``); ``False``: it is pending, stop before it."""
        try:
            env = parse_record(raw)
            if env.topic != topic:
                raise ValueError("topic mismatch")
            handler = _HANDLERS.get(env.type)
            if handler is None:
                return True
            payload = payload_of(env, tolerant=True).model_dump(mode="json")
        except (ValueError, RecursionError, DomainError, ValidationError):
            self.skipped += 1
            return True
        if gate is not None:
            standing = gate.standing(env, offset) if offset <= gate.read else Standing.PENDING
            if standing is Standing.PENDING:
                gate.pending_at = offset
                return False
            if standing is Standing.NEVER:
                return True
        handler(self, conn, offset, env, payload)
        return True

    # -- wallet ---------------------------------------------------------------------------------------

    def _transfer(self, conn: Connection, offset: int, env: Envelope, p: dict[str, Any]) -> None:
        kind = KIND_OF_TRANSFER[env.type]
        per_account: dict[str, int] = {}
        for posting in p["postings"]:
            account = str(posting["account"])
            per_account[account] = per_account.get(account, 0) + int(posting["amount_minor"])
        for account, amount in per_account.items():
            row = conn.execute(_ACCOUNT, {"b_key": account}).first()
            balance, lines = (int(row[0]) + amount, int(row[1]) + 1) if row else (amount, 1)
            if row:
                conn.execute(_ACCOUNT_SET, {"b_key": account, "balance_minor": balance, "lines": lines,
                                            "last_offset": offset})  # fmt: skip
            else:
                conn.execute(_INSERT["bo_accounts"], {
                    "account_id": account, "currency": p["currency"], "balance_minor": balance,
                    "lines": lines, "last_offset": offset,
                })  # fmt: skip
            conn.execute(_INSERT["bo_statement_lines"], {
                "account_id": account, "line": lines, "transfer_id": p["transfer_id"],
                "event_id": env.event_id, "offset": offset, "occurred_at": env.occurred_at, "kind": kind,
                "amount_minor": amount,
                "balance_after_minor": balance, "currency": p["currency"], "table_id": p.get("table_id"),
                "coup_id": p.get("coup_id"), "bet_id": p.get("bet_id"),
            })  # fmt: skip
        if env.type == "StakeReserved":
            self._bet(conn, p, env, "reserved", coup_id=p.get("coup_id"), spot=p["spot"],
                      stake_minor=p["amount_minor"], balance_before_minor=p["balance_before_minor"],
                      balance_after_minor=p["balance_after_minor"])  # fmt: skip
        elif env.type in ("PayoutApplied", "StakeRefunded"):
            extra = {"result": "refund"} if env.type == "StakeRefunded" else {}
            self._bet(conn, p, env, "reserved", payout_balance_before_minor=p["balance_before_minor"],
                      payout_balance_after_minor=p["balance_after_minor"], **extra)  # fmt: skip

    def _bet(self, conn: Connection, p: dict[str, Any], env: Envelope, status: str, **values: Any) -> None:
        """Set ``values`` on bet ``p["bet_id"]``, creating its row when this is the first record of it
        seen; the status only moves forward (reserved < accepted < refused < settled), so that the
        rows do not depend on the order in which records of different topics arrive (Kafka)."""
        found = conn.execute(_BET_STATUS, {"b_key": p["bet_id"]}).first()
        if found is None:
            conn.execute(_INSERT["bo_bets"], {
                "bet_id": p["bet_id"], "account_id": p["account_id"], "table_id": p["table_id"],
                "coup_id": p.get("coup_id"), "spot": p.get("spot", ""),
                "stake_minor": p.get("stake_minor", 0), "currency": p["currency"], "status": status,
                "placed_at": env.occurred_at, **dict.fromkeys(_BET_OPTIONAL), **values,
            })  # fmt: skip
            return
        if _STATUS_RANK[status] > _STATUS_RANK.get(str(found[0]), -1):
            values["status"] = status
        if values:
            conn.execute(_BET_SET, {"b_key": p["bet_id"], **values})

    def _refusal(self, conn: Connection, offset: int, env: Envelope, p: dict[str, Any]) -> None:
        conn.execute(_INSERT["bo_refusals"], {
            "event_id": env.event_id, "transfer_id": p["transfer_id"], "account_id": p["account_id"],
            "request": p["request"], "reason": p["reason"], "detail": p.get("detail"),
            "bet_id": p.get("bet_id"), "occurred_at": env.occurred_at,
        })  # fmt: skip

    def _payout_issued(self, conn: Connection, offset: int, env: Envelope, p: dict[str, Any]) -> None:
        found = conn.execute(_BET_PAYOUT, {"b_key": p["bet_id"]}).first()
        if found is not None and found[0] is not None:
            return  # a second payout for the bet: audit reports it; it is counted once here
        self._bet(conn, p, env, "settled", coup_id=p["coup_id"], spot=p["spot"],
                  stake_minor=p["stake_minor"], result=p["result"], win_minor=p["win_minor"],
                  commission_minor=p["commission_minor"], credit_minor=p["credit_minor"],
                  payout_id=p["payout_id"])  # fmt: skip
        self._figures(conn, env, p)

    # -- tables and rounds ----------------------------------------------------------------------------

    def _table_opened(self, conn: Connection, offset: int, env: Envelope, p: dict[str, Any]) -> None:
        values = {
            "variant": p["variant"], "rules_version": p["rules_version"], "currency": p["currency"],
            "decks": p["decks"], "paytable": _json(p["paytable"]), "limits": _json(p["limits"]),
            "opened_at": env.occurred_at, "last_offset": offset,
        }  # fmt: skip
        if not conn.execute(_TABLE_SET, {"b_key": p["table_id"], **values}).rowcount:
            conn.execute(_INSERT["bo_tables"], {
                "table_id": p["table_id"], "shoe_id": None, "last_coup_id": None, **values,
            })  # fmt: skip

    def _shoe_opened(self, conn: Connection, offset: int, env: Envelope, p: dict[str, Any]) -> None:
        conn.execute(_INSERT["bo_shoes"], {
            "shoe_id": p["shoe_id"], "table_id": p["table_id"], "mode": p["mode"],
            "commitment": p["commitment"], "algorithm": p["algorithm"], "opened_at": env.occurred_at,
            "closed_at": None, "seed_hex": None,
            "cards_dealt": None, "coups": None,
        })  # fmt: skip
        self._touch_table(conn, p["table_id"], offset, shoe_id=p["shoe_id"])

    def _shoe_closed(self, conn: Connection, offset: int, env: Envelope, p: dict[str, Any]) -> None:
        conn.execute(_SHOE_SET, {
            "b_key": p["shoe_id"], "closed_at": env.occurred_at, "seed_hex": p["seed_hex"],
            "cards_dealt": p["cards_dealt"], "coups": p["coups"],
        })  # fmt: skip
        self._touch_table(conn, p["table_id"], offset)

    def _touch_table(self, conn: Connection, table_id: str, offset: int, **values: Any) -> None:
        conn.execute(_TABLE_SET, {"b_key": table_id, "last_offset": offset, **values})

    def _betting_opened(self, conn: Connection, offset: int, env: Envelope, p: dict[str, Any]) -> None:
        table = conn.execute(_TABLE, {"b_key": p["table_id"]}).first()
        variant, rules_version, paytable = table if table else ("", "", "{}")
        day, shift = self.periods.of(env.occurred_at)
        conn.execute(_INSERT["bo_rounds"], {
            "coup_id": p["coup_id"], "table_id": p["table_id"], "shoe_id": p["shoe_id"],
            "coup_number": p["coup_number"], "variant": variant, "rules_version": rules_version,
            "paytable": paytable, "gaming_day": day, "shift": shift, "status": "betting",
            "opened_at": env.occurred_at, **dict.fromkeys(_ROUND_LATER),
        })  # fmt: skip
        self._touch_table(conn, p["table_id"], offset, last_coup_id=p["coup_id"])

    def _bet_accepted(self, conn: Connection, offset: int, env: Envelope, p: dict[str, Any]) -> None:
        stake = p["stake_minor"]
        self._bet(conn, p, env, "accepted", coup_id=p["coup_id"], spot=p["spot"], stake_minor=stake)
        self._figures(conn, env, p)

    def _bet_refused(self, conn: Connection, offset: int, env: Envelope, p: dict[str, Any]) -> None:
        self._bet(conn, p, env, "refused", spot=p["spot"], stake_minor=p["stake_minor"], reason=p["reason"])
        self._figures(conn, env, p)

    def _betting_closed(self, conn: Connection, offset: int, env: Envelope, p: dict[str, Any]) -> None:
        conn.execute(_ROUND_SET, {"b_key": p["coup_id"], "status": "dealing"})

    def _card_dealt(self, conn: Connection, offset: int, env: Envelope, p: dict[str, Any]) -> None:
        n = int(conn.execute(_CARDS, {"b_key": p["coup_id"]}).scalar_one())
        conn.execute(_INSERT["bo_round_cards"], {
            "coup_id": p["coup_id"], "n": n, "hand": p["hand"], "card": p["card"],
            "shoe_position": p["shoe_position"], "occurred_at": env.occurred_at,
        })  # fmt: skip

    def _decision_made(self, conn: Connection, offset: int, env: Envelope, p: dict[str, Any]) -> None:
        n = int(conn.execute(_DECISIONS, {"b_key": p["coup_id"]}).scalar_one())
        conn.execute(_INSERT["bo_round_decisions"], {
            "coup_id": p["coup_id"], "n": n, "hand": p["hand"], "choice": p["choice"],
            "decided_by": p["decided_by"], "occurred_at": env.occurred_at,
        })  # fmt: skip

    def _coup_resolved(self, conn: Connection, offset: int, env: Envelope, p: dict[str, Any]) -> None:
        conn.execute(_ROUND_SET, {
            "b_key": p["coup_id"], "status": "resolved", "variant": p["variant"],
            "rules_version": p["rules_version"], "started_at": p["started_at"], "ended_at": p["ended_at"],
            "outcome": p["outcome"], "natural": p["natural"], "hands": _json(p["hands"]),
            "versus": _json(p["versus"]), "round_events": _json(p["events"]), "resolved_offset": offset,
        })  # fmt: skip
        self._figures(conn, env, p)
        self._touch_table(conn, p["table_id"], offset)

    def _figures(self, conn: Connection, env: Envelope, p: dict[str, Any]) -> None:
        """Add what the record adds to its table's figures (:mod:`services.core.figures`)."""
        add = figures.of_record(env.topic, env.type, p)
        if add is not None:
            self._count(conn, p["table_id"], p.get("coup_id"), env.occurred_at, add)

    def _count(self, conn: Connection, table_id: str, coup_id: str | None, occurred_at: str,
               add: figures.Figures) -> None:  # fmt: skip
        """Add ``add`` to the table's counters for the coup's gaming day, in total and in its shift."""
        found = conn.execute(_ROUND_PERIOD, {"b_key": coup_id}).first() if coup_id else None
        day, shift = (str(found[0]), int(found[1])) if found else self.periods.of(occurred_at)
        amounts = {k: getattr(add, k) for k in _COUNTERS}
        for part in (0, shift):
            key = {"b_table": table_id, "b_day": day, "b_shift": part}
            if not conn.execute(_PERIOD_ADD, {**key, **{f"add_{k}": v for k, v in amounts.items()}}).rowcount:
                conn.execute(_INSERT["bo_table_periods"], {"table_id": table_id, "day": day, "shift": part,
                                                           **amounts})  # fmt: skip

    # -- findings and alerts --------------------------------------------------------------------------

    def _anomaly(self, conn: Connection, offset: int, env: Envelope, p: dict[str, Any]) -> None:
        conn.execute(_INSERT["bo_alerts"], {
            "event_id": env.event_id, "offset": offset, "occurred_at": env.occurred_at,
            "table_id": p["table_id"], "account_id": _account_of(p["subject"]), "detector": p["detector"],
            "category": p["category"],
            "severity": p["severity"], "subject": _json(p["subject"]), "observed": _json(p["observed"]),
            "threshold": _json(p["threshold"]), "detail": p["detail"],
        })  # fmt: skip
        index_alert_accounts(conn, offset, env.event_id, p)

    def _finding(self, conn: Connection, offset: int, env: Envelope, p: dict[str, Any]) -> None:
        conn.execute(_INSERT["bo_findings"], {
            "event_id": env.event_id, "offset": offset, "occurred_at": env.occurred_at,
            "table_id": p["table_id"], "account_id": _account_of(p["subject"]), "reason": p["reason"],
            "severity": p["severity"],
            "subject": _json(p["subject"]), "expected": _json(p["expected"]),
            "recorded": _json(p["recorded"]), "detail": p["detail"],
        })  # fmt: skip


_HANDLERS: dict[str, Any] = {
    **dict.fromkeys(KIND_OF_TRANSFER, Projector._transfer),
    **dict.fromkeys(REFUSALS, Projector._refusal),
    "PayoutIssued": Projector._payout_issued,
    "TableOpened": Projector._table_opened,
    "ShoeOpened": Projector._shoe_opened,
    "ShoeClosed": Projector._shoe_closed,
    "BettingOpened": Projector._betting_opened,
    "BetAccepted": Projector._bet_accepted,
    "BetRefused": Projector._bet_refused,
    "BettingClosed": Projector._betting_closed,
    "CardDealt": Projector._card_dealt,
    "DecisionMade": Projector._decision_made,
    "CoupResolved": Projector._coup_resolved,
    "AnomalyDetected": Projector._anomaly,
    "AlertCaseChanged": case_changed,
    "AuditFinding": Projector._finding,
}
"""Which method projects each event type (types not listed are read and passed over)."""


def dump_rows(engine: Engine) -> dict[str, list[tuple[Any, ...]]]:
    """Every projected table's rows, sorted: what two read models must agree on to be identical."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    with engine.connect() as conn:
        for table in s.PROJECTED:
            rows = [tuple(r) for r in conn.execute(select(table))]
            out[table.name] = sorted(rows, key=lambda r: json.dumps(r, default=str))
    return out


def records_of(rows: Iterable[Row]) -> list[Row]:
    """The rows the projector reads from an iterable of log rows (its input topics only)."""
    return [r for r in rows if r[1] in INPUTS]
