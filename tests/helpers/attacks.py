"""The attacks of issue #8, as records an outsider (or a principal beyond its rights) writes mid-session.

A scenario is a seeded session at one punto banco table: two coups, then an operator's ``OpenShoe``
that names its own ``seed_hex`` (refused outside demo mode), then an *attack coup* during whose
betting window the forgeries are written, then one clean coup. The same scenario without the
forgeries is the reference: every table, wallet and audit stream must come out the same.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from services.core import topics
from services.core.envelope import Envelope, request
from services.core.trust import Principal, PrincipalKey, authenticate
from services.runtime.keyring import Keyring
from services.simulation.simulator import DEFAULT_TABLES, Bus, Session, TablePlay

TABLE = DEFAULT_TABLES[0]
T = TABLE.table_id
SEED = 11
CHOSEN_SEED = "ab" * 32
T0 = "2026-11-22T20:00:00.000Z"


@dataclass
class Injecting:
    """A bus that writes ``forgeries`` right after the first ``OpenBetting`` it publishes once armed."""

    bus: Bus
    forgeries: list[Envelope] = field(default_factory=list)
    armed: bool = False

    def publish(self, envelopes: list[Envelope]) -> None:
        """Publish, then the forgeries if this opened the armed betting window."""
        self.bus.publish(envelopes)
        if self.armed and any(e.type == "OpenBetting" for e in envelopes):
            self.armed = False
            self.bus.publish(self.forgeries)

    def drain(self) -> None:
        """The wrapped bus's drain."""
        self.bus.drain()

    def read(self, topic: str, key: str) -> list[Envelope]:
        """The wrapped bus's read."""
        return self.bus.read(topic, key)


def play(bus: Bus, ring: Keyring, forgeries: list[Envelope]) -> None:
    """The scenario (see the module docstring) on ``bus``, with ``forgeries`` in the attack coup."""
    wrapped = Injecting(bus, forgeries)
    session = Session(wrapped, seed=SEED, keyring=ring)
    session.run([TABLE], 2)
    session.command("OpenShoe", T, {"shoe_id": f"{T}-chosen", "mode": "rng", "seed_hex": CHOSEN_SEED})
    table = TablePlay(session, TABLE)
    table.shoe_no = 1
    table.open_shoe()
    wrapped.armed = True
    session.finish(table.coup())
    session.finish(table.coup())
    table.close_shoe()
    session.drain()


def _outsider(type_: str, topic: str, key: str, payload: dict[str, Any], event_id: str) -> Envelope:
    return request(type_, topic, key, payload, event_id=event_id, occurred_at=T0, producer="settlement")


@dataclass(frozen=True)
class Attack:
    """One forged record and the reason its consumer must refuse it with."""

    name: str
    record: Envelope
    reason: str


def attacks(ring: Keyring, reference: list[Envelope]) -> list[Attack]:
    """The forgeries, built from what an outsider can know: the reference run stands for the public
    data from which ids and coup ids are derived (ids are derived, so they can be predicted)."""
    coup = next(e for e in reference if e.type == "BettingOpened" and e.payload["coup_number"] == 3)
    coup_id = str(coup.payload["coup_id"])
    real_payout = next(e for e in reference if e.type == "PayoutIssued" and e.payload["coup_id"] == coup_id)
    terminal, cashier = ring.key(Principal.TERMINAL), ring.key(Principal.CASHIER)
    stranger = PrincipalKey(Principal.SETTLEMENT, ring.key(Principal.SETTLEMENT).key_id, b"guessed secret!!")

    def signed(key: PrincipalKey) -> Callable[[Envelope], Envelope]:
        return lambda env: authenticate(env, key)

    bet = {"account_id": "player:001", "table_id": T, "coup_id": coup_id, "spot": "banker",
           "stake_minor": 500_000, "currency": "EUR"}  # fmt: skip

    def payout(account: str, robbed: str, payout_id: str) -> dict[str, Any]:
        return {"payout_id": payout_id, "bet_id": f"bet-{payout_id}", "account_id": account, "table_id": T,
                "coup_id": coup_id, "spot": "player", "stake_minor": 0, "result": "win", "win_minor": 780_000,
                "commission_minor": 0, "credit_minor": 780_000, "currency": "EUR",
                "postings": [{"account": robbed, "amount_minor": -780_000},
                             {"account": account, "amount_minor": 780_000}]}  # fmt: skip

    refund = {"refund_id": "refund/forged", "bet_id": "forged", "account_id": "player:002", "table_id": T,
              "coup_id": coup_id, "stake_minor": 800_000, "currency": "EUR",
              "reason": "betting_closed"}  # fmt: skip
    inbox, req = topics.TABLE_INBOX, topics.WALLET_REQUESTS
    real_id = str(real_payout.payload["payout_id"])
    deposit = {"account_id": "player:006", "amount_minor": 900_000, "currency": "EUR"}
    return [
        Attack("outsider BetPlaced on the inbox",
               _outsider("BetPlaced", inbox, T, {**bet, "bet_id": "f1"}, "f1"), "unauthenticated"),
        Attack("a terminal's BetPlaced on the inbox",
               signed(terminal)(_outsider("BetPlaced", inbox, T, {**bet, "bet_id": "f2"}, "f2")),
               "not_permitted"),
        Attack("outsider PayoutIssued robbing another wallet",
               _outsider("PayoutIssued", req, "player:002", payout("player:002", "player:003", "p/f3"), "f3"),
               "unauthenticated"),
        Attack("PayoutIssued under settlement's key id with a guessed secret",
               signed(stranger)(_outsider("PayoutIssued", req, "player:002",
                                          payout("player:002", "player:003", "p/f4"), "f4")),
               "unauthenticated"),
        Attack("a terminal's BetRefundDue",
               signed(terminal)(_outsider("BetRefundDue", req, "player:002", refund, "f5")), "not_permitted"),
        Attack("id squatting: a forged payout under the id the payout stage will derive",
               _outsider("PayoutIssued", req, "player:004", payout("player:004", "player:003", real_id),
                         real_payout.event_id), "unauthenticated"),
        Attack("a Deposit keyed to one player with another's account_id",
               signed(cashier)(_outsider("Deposit", req, "player:005", deposit, "f7")), "key_mismatch"),
    ]  # fmt: skip


def by_key(records: list[Envelope], wanted: tuple[str, ...]) -> dict[tuple[str, str], list[bytes]]:
    """Each (topic, key) stream of ``wanted`` topics, as bytes, in order."""
    out: dict[tuple[str, str], list[bytes]] = {}
    for e in records:
        if e.topic in wanted:
            out.setdefault((e.topic, e.key), []).append(e.to_json())
    return out


def balances(records: list[Envelope]) -> dict[str, int]:
    """Each wallet's last balance, from the wallet events."""
    out: dict[str, int] = {}
    for e in records:
        if e.topic == topics.WALLET_EVENTS and "balance_after_minor" in e.payload:
            out[e.key] = int(e.payload["balance_after_minor"])
    return out


def refusals(records: list[Envelope]) -> dict[str, str]:
    """Reason by refused record id, as its topic's primary consumer dead-lettered it."""
    primary = {topics.WALLET_REQUESTS: "settlement", topics.TABLE_INBOX: "dealer"}
    return {
        str(e.payload["original_event_id"]): str(e.payload["reason"])
        for e in records
        if e.type == "DeadLetter" and primary.get(str(e.payload["source_topic"])) == e.producer
    }


def alerts(records: list[Envelope]) -> dict[str, str]:
    """Reason by refused record id, from the monitor's ``refused_record`` alerts."""
    return {
        str(e.payload["subject"]["event_ids"][0]): str(e.payload["observed"]["reason"])
        for e in records
        if e.type == "AnomalyDetected" and e.payload["detector"] == "refused_record"
    }


def audit_view(records: list[Envelope]) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """Audit's findings and checkpoints per key, as what they say: a checkpoint's tree head (audit's
    Merkle root over every chain, issue #28) compared on every chain but the monitor's alerts (a
    refused forgery rightly raises an alert there, so the root and the signature over it differ)."""
    out: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for e in records:
        if e.topic != topics.AUDIT_FINDINGS:
            continue
        said = dict(e.payload)
        tree = said.pop("tree", None)
        said.pop("signature", None)
        if tree is not None:
            said["tree_heads"] = {t: c for t, c in tree["heads"].items() if t != topics.MONITOR_ALERTS}
        out.setdefault(e.key, []).append((e.type, said))
    return out
