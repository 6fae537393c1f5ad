"""``casino-ledger settle``: the dispute calculator (docs/integration.md).

One coup and its bets in; acceptance, result, every payout and every posting out — computed by the
live pipeline's own code, not a copy: the records go through the real dealer processor
(:class:`services.dealer.processor.Dealer`: ``OpenTable`` with the given configuration, a smart shoe,
the betting window, one ``BetPlaced`` per bet in the order given, ``CardRead`` per card and ``Decision``
per choice) and its events through settlement's real payout stage
(:class:`services.settlement.payout_stage.PayoutStage`). What the dealer refuses is refused here, with the
same reason; what settlement pays is paid here, to the minor unit.

Input (one JSON object)::

    {"variant": "punto_banco", "config": {...}, "cards": ["9S", "KH", ...],
     "decisions": [{"hand": "player", "choice": "draw"}],
     "bets": [{"bet_id": "b1", "account_id": "alice", "spot": "banker", "stake_minor": 1000}]}

``config`` holds the variant's settings (see docs/games.md's tables); ``decisions`` are taken in order
when the dealer asks for one; when none is left the variant's default strategy answers (as ``deal``
does). Output::

    {"accepted": [bet_id, ...], "refused": [{"bet_id", "reason"}],
     "result": {"hands", "outcome", "natural", "cards_used"},
     "payouts": [{"bet_id", "result", "win_minor", "commission_minor", "credit_minor"}],
     "postings": [{"account", "amount_minor"}]}

``postings`` are every payout's postings, payout after payout, on the table's accounts
(``table:settle:escrow``, ``…:house``, ``…:commission``, ``…:bank``) and the players' wallets. The
stakes were reserved before the coup (wallet → escrow) as in the live pipeline; that movement is not
repeated here. A refused bet is refunded whole by the live pipeline (``BetRefundDue``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from services.core import topics
from services.core.baccarat import CoupState, Decide, get_variant
from services.core.boundary import DEALER_FOR
from services.core.envelope import Draft, Envelope, request, seal
from services.core.errors import DomainError
from services.dealer.processor import Dealer, DealerState
from services.settlement.payout_stage import PayoutStage, PayoutState

TABLE_ID = "settle"
"""The table the calculator plays at (its accounts are ``table:settle:…``)."""

CURRENCY = "XXX"
"""ISO 4217's "no currency": amounts are minor units of whatever the table plays."""

_AT = "2000-01-01T00:00:00+00:00"


class SettleInputError(ValueError):
    """The input is not a coup the calculator can play: one sentence saying why."""


def _require(cond: bool, message: str) -> None:
    if not cond:
        raise SettleInputError(message)


def _is_int(value: Any) -> bool:
    return type(value) is int


def parse_input(text: str) -> dict[str, Any]:
    """Decode and check the shape of the input object (types only; the rules are the dealer's)."""
    try:
        loaded = json.loads(text)
    except ValueError as exc:
        raise SettleInputError(f"the input is not JSON: {exc}") from None
    _require(isinstance(loaded, dict), "the input is one JSON object")
    data: dict[str, Any] = loaded
    unknown = sorted(set(data) - {"variant", "config", "cards", "decisions", "bets"})
    _require(not unknown, f"unknown input fields: {unknown}")
    _require(isinstance(data.get("variant"), str), "variant: a variant id is required")
    _require(isinstance(data.get("config", {}), dict), "config: an object of settings")
    cards = data.get("cards")
    _require(isinstance(cards, list) and all(isinstance(c, str) for c in cards), "cards: a list of cards")
    decisions = data.get("decisions", [])
    _require(isinstance(decisions, list), "decisions: a list of {hand, choice}")
    for d in decisions:
        _require(
            isinstance(d, dict) and isinstance(d.get("hand"), str) and isinstance(d.get("choice"), str),
            'decisions: each is {"hand": str, "choice": "draw"|"stand"}',
        )
    bets = data.get("bets", [])
    _require(isinstance(bets, list), "bets: a list of {bet_id, account_id, spot, stake_minor}")
    seen: set[str] = set()
    for b in bets:
        _require(isinstance(b, dict), "bets: each is an object")
        _require(
            isinstance(b.get("bet_id"), str) and isinstance(b.get("account_id"), str)
            and isinstance(b.get("spot"), str),
            "bets: bet_id, account_id and spot are strings",
        )  # fmt: skip
        _require(
            _is_int(b.get("stake_minor")) and b["stake_minor"] > 0,
            f"bets: {b['bet_id']}: stake_minor is a positive integer",
        )
        _require(b["bet_id"] not in seen, f"bets: {b['bet_id']} is given twice")
        seen.add(b["bet_id"])
    return data


class _Table:
    """The dealer and the payout stage at one table, fed records one by one."""

    def __init__(self) -> None:
        self.dealer = Dealer()
        self.dealer_state: DealerState = self.dealer.initial()
        self.payout = PayoutStage()
        self.payout_state: PayoutState = self.payout.initial()
        self.count = 0
        self.events: list[Envelope] = []
        self.payouts: list[Mapping[str, Any]] = []

    def coup_state(self) -> CoupState:
        """The dealer's state of the coup being dealt (what a strategy decides from)."""
        coup = self.dealer_state.tables[TABLE_ID].coup
        assert coup is not None and coup.state is not None
        return coup.state

    def _id(self, kind: str) -> str:
        self.count += 1
        return f"settle/{self.count:06d}/{kind}"

    def command(self, type_: str, payload: Mapping[str, Any]) -> list[Envelope]:
        """One inbox record through the dealer; its events through the payout stage. The dealer's events."""
        record = request(
            type_, topics.TABLE_INBOX, TABLE_ID, {"table_id": TABLE_ID, **payload},
            event_id=self._id(type_), occurred_at=_AT, producer="settle",
        )  # fmt: skip
        self.dealer_state, drafts = self.dealer.handle(self.dealer_state, record)
        out = [self._seal(d, record) for d in drafts]
        for event in out:
            self.events.append(event)
            self.payout_state, paid = self.payout.handle(self.payout_state, event)
            self.payouts.extend(d.payload for d in paid if d.type == "PayoutIssued")
        return out

    def _seal(self, draft: Draft, cause: Envelope) -> Envelope:
        return seal(
            draft, event_id=self._id(draft.type), occurred_at=_AT, producer="dealer", cause=cause, head=None
        )


def _refusal(events: Sequence[Envelope], what: str) -> None:
    for e in events:
        if e.type == "CommandRefused":
            raise SettleInputError(f"{what}: {e.payload['reason']}: {e.payload['detail']}")


def settle(data: Mapping[str, Any]) -> dict[str, Any]:
    """Play the coup ``data`` (the shape :func:`parse_input` checks) through the dealer and settlement."""
    variant = get_variant(str(data["variant"]))
    table = _Table()
    _refusal(table.command("OpenTable", {
        "variant": variant.id, "currency": CURRENCY, "options": dict(data.get("config") or {}),
    }), "config refused")  # fmt: skip
    _refusal(table.command("OpenShoe", {"shoe_id": "settle", "mode": "smart"}), "shoe refused")
    _refusal(table.command("OpenBetting", {}), "betting refused")
    accepted: list[str] = []
    refused: list[dict[str, str]] = []
    for b in data.get("bets") or ():
        for e in table.command("BetPlaced", {
            "bet_id": b["bet_id"], "account_id": b["account_id"], "coup_id": None, "spot": b["spot"],
            "stake_minor": b["stake_minor"], "currency": CURRENCY,
        }):  # fmt: skip
            if e.type == "BetAccepted":
                accepted.append(str(e.payload["bet_id"]))
            elif e.type == "BetRefused":
                refused.append({"bet_id": str(e.payload["bet_id"]), "reason": str(e.payload["reason"])})
    _refusal(table.command("CloseBetting", {}), "close refused")
    out = table.command("DealCoup", {})
    _refusal(out, "deal refused")
    cards = list(data["cards"])
    decisions = [(str(d["hand"]), str(d["choice"])) for d in data.get("decisions") or ()]
    strategies = variant.strategies()
    default = getattr(variant, "default_strategy", None) or next(iter(strategies), None)
    resolved: Envelope | None = None
    while resolved is None:
        resolved = next((e for e in out if e.type == "CoupResolved"), None)
        if resolved is not None:
            break
        asked = next((e for e in reversed(out) if e.type == "DecisionRequested"), None)
        if asked is not None:
            hand = str(asked.payload["hand"])
            if decisions:
                hand, choice = decisions.pop(0)
            elif default is not None:
                step = Decide(hand, tuple(asked.payload["options"]), str(asked.payload.get("cell", "")))
                choice = strategies[default](table.coup_state(), step)
            else:
                raise SettleInputError(f"{hand} must choose and no decision was given")
            out = table.command("Decision", {"hand": hand, "choice": choice, "decided_by": DEALER_FOR})
            _refusal(out, f"decision {hand}={choice} refused")
            continue
        if not cards:
            raise SettleInputError(f"{variant.id} needs more than the {len(data['cards'])} cards given")
        card = cards.pop(0)
        out = table.command("CardRead", {"card": card})
        _refusal(out, f"card {card} refused")
    if decisions:
        raise SettleInputError(f"{len(decisions)} decision(s) given that the coup never asked for")
    p = resolved.payload
    hands = {name: {"cards": h["cards"], "total": h["total"]} for name, h in p["hands"].items()}
    return {
        "accepted": accepted,
        "refused": refused,
        "result": {
            "hands": hands, "outcome": p["outcome"], "natural": p["natural"],
            "cards_used": sum(len(h["cards"]) for h in hands.values()),
        },
        "payouts": [
            {k: po[k] for k in ("bet_id", "result", "win_minor", "commission_minor", "credit_minor")}
            for po in table.payouts
        ],
        "postings": [dict(row) for po in table.payouts for row in po["postings"]],
    }  # fmt: skip


def settle_text(text: str) -> dict[str, Any]:
    """:func:`settle` of the JSON ``text``; ``SettleInputError`` (one sentence) for anything refused."""
    data = parse_input(text)
    try:
        return settle(data)
    except DomainError as exc:
        raise SettleInputError(str(exc)) from None


def render(answer: Mapping[str, Any]) -> str:
    """The answer as printed: JSON, one line per top-level field and per payout or posting."""

    def one(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))

    lines = []
    for key, value in answer.items():
        if isinstance(value, list) and value and key in ("payouts", "postings", "refused"):
            inner = ",\n".join(f"    {one(v)}" for v in value)
            lines.append(f"  {one(key)}: [\n{inner}\n  ]")
        else:
            lines.append(f"  {one(key)}: {one(value)}")
    return "{\n" + ",\n".join(lines) + "\n}"


def main(args: Any) -> int:
    """The ``settle`` command: read ``--in FILE`` or stdin, print the JSON answer; exit 2 with one line
    on stderr for input it cannot play."""
    try:
        if args.infile:
            with open(args.infile, encoding="utf-8") as fh:
                text = fh.read()
        else:
            text = sys.stdin.read()
        answer = settle_text(text)
    except (OSError, UnicodeDecodeError) as exc:
        sys.stderr.write(f"casino-ledger: error: cannot read the input: {exc}\n")
        return 2
    except SettleInputError as exc:
        sys.stderr.write(f"casino-ledger: error: {exc}\n")
        return 2
    sys.stdout.write(render(answer) + "\n")
    return 0


__all__ = ["CURRENCY", "TABLE_ID", "SettleInputError", "parse_input", "settle", "settle_text"]
