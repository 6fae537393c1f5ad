"""Trust at the input (docs/trust.md): principals, record authentication and the one authorization policy.

A record's place on a topic proves nothing: anyone who can reach the broker (or the log file) can
write there. So every record says who wrote it, and every consumer checks it before it acts:

* **Principals.** Each writer is a :class:`Principal`: our services (``dealer``, ``settlement``,
  ``audit``, ``monitor``) and the outside writers (``cashier``, ``operator``, ``shoe``, ``terminal``,
  ``backoffice``). Each holds a :class:`PrincipalKey` (a key id and a secret) from the keyring
  (:mod:`services.runtime.keyring` reads it; this module never reads anything).
* **Authentication.** :func:`authenticate` sets the envelope's ``auth`` to ``{"key_id", "mac"}`` with
  ``mac`` = hex HMAC-SHA256(secret, ``hash``). ``auth`` is outside the hash, and ``hash`` covers every
  other field, so the MAC binds the whole record. :func:`verify` checks it: the key id is known, the
  ``hash`` is the hash of the content (a copied MAC on edited content fails here), and the MAC matches
  (compared in constant time).
* **Authorization.** :data:`POLICY` says, in one table, which principals may write which types on
  which topic; :func:`authorize` applies it, and also checks that a request's record key names the
  account or table its payload is about (:data:`KEY_FIELDS`): a ``Deposit`` keyed to one player must
  not carry another's ``account_id``.

A record that fails is refused with a :class:`Refusal` (``unauthenticated``, ``not_permitted`` or
``key_mismatch``): :func:`services.core.processor.step` dead-letters it, changes no state and does
not count it as applied, so a forgery cannot squat the id of the real record that follows.

Cost per record: one canonical serialisation and SHA-256 (the hash check) plus one HMAC over 64 bytes
(``bench/bench_trust.py`` measures it against an unauthenticated ``step``).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final, NamedTuple

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from services.core import topics
from services.core.boundary import request_refusal
from services.core.contract import TOPIC_TYPES
from services.core.envelope import Envelope, hash_of_bytes
from services.core.errors import Reason

DEMO_KEYRING_SEED: Final = b"casino-ledger public demo keyring - not a secret"
"""The documented constant the public demo keyring is derived from: principal ``p``'s secret is
HMAC-SHA256(seed, ``p``), its key id ``p-demo0000``. Public on purpose; refused outside demo/test mode."""


class Principal(StrEnum):
    """Who may write records: our four services and the outside writers."""

    DEALER = "dealer"
    """The dealer service: the only writer of table events."""
    SETTLEMENT = "settlement"
    """Settlement (payout and wallet stages): payouts, refunds, held bets, wallet events."""
    AUDIT = "audit"
    """Audit: findings and checkpoints."""
    MONITOR = "monitor"
    """The monitor: anomaly alerts."""
    CASHIER = "cashier"
    """The cashier's cage system: deposits and withdrawals."""
    OPERATOR = "operator"
    """The table operator's console: table commands and players' decisions."""
    SHOE = "shoe"
    """A physical smart shoe: card reads."""
    TERMINAL = "terminal"
    """A table terminal: bets and players' decisions."""
    BACKOFFICE = "backoffice"
    """The back office (its HTTP API): cashier transactions and bets on a player's behalf."""


SERVICES: Final = frozenset({Principal.DEALER, Principal.SETTLEMENT, Principal.AUDIT, Principal.MONITOR})
"""The principals that are our own processors (each signs what it writes)."""

OUTSIDERS: Final = frozenset(Principal) - SERVICES
"""The principals that write from outside the pipeline."""


HEADS_KEY_CONTEXT: Final = b"casino-ledger/ed25519-heads"
"""The HMAC message that turns a principal's secret into its Ed25519 heads key in a keyring made before
each principal had its own Ed25519 seed (:func:`derived_signing_seed`)."""


def derived_signing_seed(secret: bytes) -> bytes:
    """The Ed25519 seed of a principal whose keyring entry has none (an older keyring, the demo's):
    HMAC-SHA256(secret, :data:`HEADS_KEY_CONTEXT`)."""
    return hmac.digest(secret, HEADS_KEY_CONTEXT, "sha256")


def public_key_hex(seed: bytes) -> str:
    """The raw 32-byte Ed25519 public key of ``seed``, hex."""
    return (
        Ed25519PrivateKey.from_private_bytes(seed)
        .public_key()
        .public_bytes(Encoding.Raw, PublicFormat.Raw)
        .hex()
    )


def key_fingerprint(public_hex: str) -> str:
    """SHA-256 of the raw public key, hex (reports show its first 16 digits)."""
    return hashlib.sha256(bytes.fromhex(public_hex)).hexdigest()


@functools.lru_cache(maxsize=256)
def _public_key(public_hex: str) -> Ed25519PublicKey:
    """The key object of a raw public key (hex), made once per key (a replay verifies thousands)."""
    return Ed25519PublicKey.from_public_bytes(bytes.fromhex(public_hex))


def verify_signature(public_hex: str, record_hash: str, signature_hex: str) -> bool:
    """Whether ``signature_hex`` is an Ed25519 signature of ``record_hash`` (its ASCII hex) under the
    raw public key ``public_hex``."""
    try:
        public = _public_key(public_hex)
        public.verify(bytes.fromhex(signature_hex), record_hash.encode("ascii", "replace"))
    except (InvalidSignature, ValueError):
        return False
    return True


@dataclass(frozen=True, slots=True)
class PrincipalKey:
    """A principal's key: its id (public, written in ``auth``), its MAC secret and its Ed25519 seed (the
    key it signs its chain heads with: :mod:`services.core.attest`). ``repr`` hides both secrets.

    ``signing_seed`` is ``None`` where a keyring holds this principal's MAC secret only to verify its
    records (a service's own key file holds the other principals' MAC secrets, never their Ed25519
    seeds): such a key verifies and MACs but cannot sign heads."""

    principal: Principal
    key_id: str
    secret: bytes
    signing_seed: bytes | None = None
    _keyed: hmac.HMAC = field(init=False, repr=False, compare=False)
    _signer: Ed25519PrivateKey | None = field(init=False, repr=False, compare=False)
    """HMAC-SHA256 keyed with ``secret``, before any message: :meth:`mac` copies it instead of keying a
    new one per record (the standard library's HMAC either way). Hand-made pads would save little more,
    and an auditor reads ``hmac`` at a glance (docs/performance.md#trust-mac-and-sealed-records)."""

    def __post_init__(self) -> None:
        if not self.key_id or len(self.secret) < 16:
            raise ValueError("a principal key needs a key id and at least 16 bytes of secret")
        if self.signing_seed is not None and len(self.signing_seed) != 32:
            raise ValueError("an Ed25519 seed is 32 bytes")
        object.__setattr__(self, "_keyed", hmac.new(self.secret, digestmod=hashlib.sha256))
        signer = Ed25519PrivateKey.from_private_bytes(self.signing_seed) if self.signing_seed else None
        object.__setattr__(self, "_signer", signer)

    @property
    def can_sign(self) -> bool:
        """Whether this key holds its principal's Ed25519 seed."""
        return self._signer is not None

    @property
    def public_hex(self) -> str | None:
        """The Ed25519 public key (raw, hex), or ``None`` without a seed."""
        signer = self._signer
        return (
            None if signer is None else signer.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()
        )

    def sign(self, record_hash: str) -> str:
        """Ed25519 signature (hex) of ``record_hash`` (its ASCII hex); deterministic (RFC 8032).
        ``ValueError`` for a key without its seed."""
        if self._signer is None:
            raise ValueError(f"the key {self.key_id} holds no Ed25519 seed: it cannot sign")
        return self._signer.sign(record_hash.encode("ascii", "replace")).hex()

    def mac(self, record_hash: str) -> str:
        """:func:`mac` under this key's secret."""
        keyed = self._keyed.copy()
        keyed.update(record_hash.encode("ascii", "replace"))
        return keyed.hexdigest()

    def __repr__(self) -> str:
        return f"PrincipalKey({self.principal.value!r}, key_id={self.key_id!r}, secret=<hidden>)"


class Refusal(NamedTuple):
    """Why a record is refused: the reason code and a sentence (never a secret)."""

    reason: Reason
    detail: str


def mac(secret: bytes, record_hash: str) -> str:
    """Hex HMAC-SHA256 of ``record_hash`` (the envelope's ``hash``, as its ASCII hex) under ``secret``."""
    return hmac.digest(secret, record_hash.encode("ascii", "replace"), "sha256").hex()


def authenticate(env: Envelope, key: PrincipalKey) -> Envelope:
    """``env`` with ``auth`` set: ``{"key_id": key.key_id, "mac": mac(key.secret, env.hash)}``.

    The hash is taken as it is: seal the envelope first (its ``hash`` must be right for it to verify).
    """
    return env.model_copy(update={"auth": {"key_id": key.key_id, "mac": key.mac(env.hash)}})


def by_key_id(keys: Iterable[PrincipalKey]) -> dict[str, PrincipalKey]:
    """``keys`` indexed by key id (what :func:`verify` looks keys up in)."""
    return {k.key_id: k for k in keys}


def verify(
    env: Envelope, keys: Mapping[str, PrincipalKey], *, check_hash: bool = True, raw: bytes | None = None
) -> PrincipalKey | Refusal:
    """The key that authenticated ``env``, or a :class:`Refusal` (``unauthenticated``) saying why not.

    ``keys`` maps key ids to keys (:func:`by_key_id`). ``check_hash=False`` skips recomputing the hash
    from the content, for a consumer that checks it itself (audit reports an edited record as a
    finding): the MAC is then checked over the ``hash`` as written. ``raw``: the bytes ``env`` was
    parsed from, if at hand: the hash is then taken over them directly (a few microseconds instead of
    re-serialising the record), falling back to :meth:`Envelope.expected_hash` when they are not
    canonical.
    """
    auth = env.auth
    if not auth:
        return Refusal(Reason.UNAUTHENTICATED, "the record carries no auth")
    key_id, tag, sig = auth.get("key_id"), auth.get("mac"), auth.get("sig")
    if not isinstance(key_id, str) or len(auth) != 2 or not isinstance(tag if sig is None else sig, str):
        return Refusal(Reason.UNAUTHENTICATED, "auth is not {key_id, mac} or {key_id, sig}")
    key = keys.get(key_id)
    if key is None:
        return Refusal(Reason.UNAUTHENTICATED, f"unknown key id {key_id[:80]!r}")
    if check_hash and not _hash_holds(env, raw):
        return Refusal(Reason.UNAUTHENTICATED, "the hash does not match the record's content")
    if sig is not None:  # a signed head (services.core.attest): Ed25519, verified with the public key
        public = key.public_hex
        if public is None or not isinstance(sig, str) or not verify_signature(public, env.hash, sig):
            return Refusal(Reason.UNAUTHENTICATED, f"the signature does not verify under {key_id}")
        return key
    if not isinstance(tag, str) or not hmac.compare_digest(key.mac(env.hash), tag):
        return Refusal(Reason.UNAUTHENTICATED, f"the MAC does not verify under {key_id}")
    return key


def _hash_holds(env: Envelope, raw: bytes | None) -> bool:
    if raw is not None and hash_of_bytes(raw, env) == env.hash:
        return True  # a false match would be a SHA-256 collision
    return env.expected_hash() == env.hash


def _policy() -> dict[tuple[str, str], frozenset[Principal]]:
    p = Principal
    table_commands = ("OpenTable", "OpenShoe", "OpenBetting", "CloseBetting", "DealCoup", "CloseShoe")
    policy: dict[tuple[str, str], frozenset[Principal]] = {
        (topics.WALLET_REQUESTS, "Deposit"): frozenset({p.CASHIER, p.BACKOFFICE}),
        (topics.WALLET_REQUESTS, "Withdraw"): frozenset({p.CASHIER, p.BACKOFFICE}),
        (topics.WALLET_REQUESTS, "PlaceBet"): frozenset({p.TERMINAL, p.BACKOFFICE}),
        (topics.WALLET_REQUESTS, "PayoutIssued"): frozenset({p.SETTLEMENT}),
        (topics.WALLET_REQUESTS, "BetRefundDue"): frozenset({p.SETTLEMENT}),
        (topics.WALLET_REQUESTS, "SeamlessCallAnswered"): frozenset({p.SETTLEMENT}),
        (topics.TABLE_INBOX, "BetPlaced"): frozenset({p.SETTLEMENT}),
        (topics.TABLE_INBOX, "CardRead"): frozenset({p.SHOE}),
        (topics.TABLE_INBOX, "Decision"): frozenset({p.OPERATOR, p.TERMINAL}),
        (topics.DEADLETTER, "DeadLetter"): SERVICES,
        (topics.CASEWORK, "WorkAlert"): frozenset({p.BACKOFFICE}),
        (topics.CAGE, "CageDeposit"): frozenset({p.MONITOR}),
        (topics.AUDIT_STAGED, "AuditStaged"): frozenset({p.AUDIT}),
    }
    policy.update({(topics.TABLE_INBOX, t): frozenset({p.OPERATOR}) for t in table_commands})
    writers = {
        topics.TABLE_EVENTS: p.DEALER,
        topics.WALLET_EVENTS: p.SETTLEMENT,
        topics.AUDIT_FINDINGS: p.AUDIT,
        topics.MONITOR_ALERTS: p.MONITOR,
    }
    for topic, writer in writers.items():
        policy.update({(topic, cls.__name__): frozenset({writer}) for cls in TOPIC_TYPES[topic]})
    policy[(topics.ATTEST, "HeadsAttested")] = SERVICES  # each under its own writer key: authorize()
    return policy


POLICY: Final[Mapping[tuple[str, str], frozenset[Principal]]] = _policy()
"""Who may write what: ``(topic, type) → principals``. A pair not listed is not permitted to anyone.

Wallet requests: ``Deposit``/``Withdraw`` from the cashier (and the back office), ``PlaceBet`` from
terminals and the back office, ``PayoutIssued``/``BetRefundDue``/``SeamlessCallAnswered`` (a
seamless-wallet answer, recorded by settlement's HTTP shell) from settlement only. Table inbox:
table commands from the operator, ``Decision`` from the operator or a terminal, ``CardRead`` from the
shoe, ``BetPlaced`` (funds held) from settlement only. Event streams: table events from the dealer,
wallet events from settlement, findings and checkpoints from audit, alerts from the monitor, each
only. Dead letters from any of our services."""

KEY_FIELDS: Final[Mapping[str, str]] = {
    topics.WALLET_REQUESTS: "account_id",
    topics.TABLE_INBOX: "table_id",
    topics.CASEWORK: "alert_id",
    topics.CAGE: "cage_id",
}
"""On request topics, the payload field the record key must equal: a wallet request is keyed by the
account it moves (settlement applies it to the key's wallet), an inbox record by its table."""

PRIMARY_CONSUMER: Final[Mapping[str, Principal]] = {
    topics.WALLET_REQUESTS: Principal.SETTLEMENT,
    topics.TABLE_INBOX: Principal.DEALER,
    topics.TABLE_EVENTS: Principal.SETTLEMENT,
    topics.WALLET_EVENTS: Principal.AUDIT,
    topics.DEADLETTER: Principal.MONITOR,
    topics.CASEWORK: Principal.MONITOR,
    topics.CAGE: Principal.MONITOR,
}
"""Of the consumers of a topic, the one whose refusal the monitor reports (several processors read
some topics and each dead-letters a refused record: one alert per refused record, not one per reader)."""

REFUSALS: Final = frozenset({
    Reason.UNAUTHENTICATED, Reason.NOT_PERMITTED, Reason.KEY_MISMATCH, Reason.TRANSFER_ID_NOT_OWN,
    Reason.NOT_A_PLAYER_ACCOUNT,
})  # fmt: skip
"""The reason codes of records refused at the input by this module."""


def writer_principal(writer: str) -> Principal | None:
    """The principal a writer (a stage: ``dealer``, ``settlement.wallet``, ``monitor.accounts``) signs
    as: the part before the first dot, when it is one of :data:`SERVICES`; else ``None``."""
    name = writer.split(".", 1)[0]
    try:
        principal = Principal(name)
    except ValueError:
        return None
    return principal if principal in SERVICES else None


def authorize(env: Envelope, principal: Principal, *, bind_key: bool = True) -> Refusal | None:
    """``None`` when ``principal`` may write ``env`` (by :data:`POLICY`, with ``bind_key``
    :data:`KEY_FIELDS`, and the ids, accounts and decisions it may name:
    :func:`services.core.boundary.request_refusal`), else a :class:`Refusal` (``not_permitted``,
    ``key_mismatch``, ``transfer_id_not_own`` or ``not_a_player_account``). A consumer
    that judges content (audit) leaves ``bind_key`` off: an authentic record whose key disagrees with
    its payload is a finding for it, not a record to set aside unseen."""
    allowed = POLICY.get((env.topic, env.type))
    if allowed is None or principal not in allowed:
        return Refusal(
            Reason.NOT_PERMITTED, f"{principal.value} may not write {env.type[:64]} on {env.topic}"
        )
    if env.topic == topics.ATTEST and writer_principal(env.key) is not principal:
        return Refusal(
            Reason.NOT_PERMITTED, f"{principal.value} may not attest the heads of {env.key[:64]!r}"
        )
    field = KEY_FIELDS.get(env.topic) if bind_key else None
    if field is not None and env.payload.get(field) != env.key:
        named = env.payload.get(field)
        shown = repr(named)[:80] if named is not None else "nothing"
        return Refusal(Reason.KEY_MISMATCH, f"record key {env.key[:80]!r} but {field} names {shown}")
    beyond = request_refusal(env.topic, env.type, env.payload, principal.value)  # the boundary's rules
    return None if beyond is None else Refusal(*beyond)


SEALED_KEPT: Final = 20_000
"""How many records a :class:`Sealed` memo keeps (the oldest go first): the embedded pipeline's readers
read what a stage sealed within the same few batches (audit, which lags, never asks)."""


class Sealed:
    """The records this process sealed, by event id: their exact bytes and the key that signed them.

    Filled by :func:`services.core.processor.step_encoded` as it seals each output, asked by
    :meth:`Guard.admit` for a record read back: when the bytes read are exactly the bytes sealed, their
    hash was computed over their content and their MAC under ``key`` by this very process a moment
    ago, so :func:`verify` would find what it found then (the hash holds, the MAC verifies under
    ``key``), and checking it again proves nothing new. Any other bytes under that id (one byte
    tampered, an outsider's record reusing the id) are verified in full. Only a process's own readers
    may ask (the embedded runtime's dealer, settlement and monitor); audit never does: it judges every
    record by itself (docs/trust.md), and :meth:`Guard.admit` ignores the memo when it checks no hash.

    Bounded (:data:`SEALED_KEPT`): an entry forgotten is a full verification, never a refusal.
    ``topics``: where only these are read back here (a Kafka worker reads few of the topics it writes;
    the dealer's, none), outputs to any other topic are not kept: nothing would ever ask for them."""

    __slots__ = ("_by_id", "kept", "topics")

    def __init__(self, kept: int = SEALED_KEPT, topics: frozenset[str] | None = None) -> None:
        self._by_id: OrderedDict[str, tuple[bytes, PrincipalKey]] = OrderedDict()
        self.kept = kept
        self.topics = topics

    def __len__(self) -> int:
        return len(self._by_id)

    def add(self, event_id: str, raw: bytes, key: PrincipalKey, topic: str | None = None) -> None:
        """Remember that this process sealed ``raw`` (a record with ``event_id``, on ``topic``), signed by
        ``key``; not kept where ``topic`` is not one of :attr:`topics`."""
        if self.topics is not None and topic not in self.topics:
            return
        by_id = self._by_id
        by_id[event_id] = (raw, key)
        if len(by_id) > self.kept:
            by_id.popitem(last=False)

    def key_of(self, event_id: str, raw: bytes) -> PrincipalKey | None:
        """The key that signed ``raw`` if this process sealed exactly these bytes under ``event_id``."""
        entry = self._by_id.get(event_id)
        if entry is None or entry[0] != raw:  # bytes compared in full: one byte off, verified in full
            return None
        return entry[1]


@dataclass(frozen=True, slots=True)
class Guard:
    """What one processor needs to check its inputs and sign its outputs: every principal's key (to
    verify, by key id) and its own key (to sign). Built by the composition root from the keyring."""

    keys: Mapping[str, PrincipalKey]
    own: PrincipalKey

    def admit(
        self,
        env: Envelope,
        *,
        check_hash: bool = True,
        raw: bytes | None = None,
        bind_key: bool = True,
        sealed: Sealed | None = None,
    ) -> Refusal | None:
        """``None`` when ``env`` is authentic and permitted, else why it is refused (``raw``: see
        :func:`verify`; ``bind_key``: see :func:`authorize`).

        ``sealed``: the records this process sealed (:class:`Sealed`); when ``raw`` (the bytes ``env``
        was decoded from) are exactly the bytes sealed under its id, by a key this guard knows under
        that key id, the record is authentic without verifying it again (the hash over the bytes and the
        MAC: docs/performance.md#trust-mac-and-sealed-records). Authorization is checked either way.
        Ignored with
        ``check_hash=False``: a consumer that judges hashes itself (audit) verifies independently."""
        found: PrincipalKey | Refusal | None = None
        if sealed is not None and raw is not None and check_hash:
            key = sealed.key_of(env.event_id, raw)
            if key is not None and self.keys.get(key.key_id) == key:
                found = key
        if found is None:
            found = verify(env, self.keys, check_hash=check_hash, raw=raw)
        if isinstance(found, Refusal):
            return found
        return authorize(env, found.principal, bind_key=bind_key)

    def sign(self, env: Envelope) -> Envelope:
        """``env`` authenticated with this processor's own key."""
        return authenticate(env, self.own)

    def signed_auth_for(self, record_hash: str) -> dict[str, str]:
        """The ``auth`` of a signed head of this processor: ``{"key_id", "sig"}`` (Ed25519 over the hash)."""
        return {"key_id": self.own.key_id, "sig": self.own.sign(record_hash)}

    def auth_for(self, record_hash: str) -> dict[str, str]:
        """The ``auth`` of a record with ``record_hash`` written by this processor (what ``seal`` sets)."""
        return {"key_id": self.own.key_id, "mac": self.own.mac(record_hash)}

    def __repr__(self) -> str:
        return f"Guard(own={self.own!r}, keys={len(self.keys)})"
