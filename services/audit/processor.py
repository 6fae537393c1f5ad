"""The audit processor: re-derives every coup and payout and checks every chain (docs/architecture.md).

Inputs: ``casino.table.events``, ``casino.wallet.requests`` and ``casino.wallet.events``. Audit joins by
ids and waits for both sides (a payout may arrive before or after its coup's result), so arrival order
cannot change its verdict. For each coup it re-runs the rules engine from the *recorded* cards and
decisions, compares hands, totals, outcome and naturals, re-computes every payout with the variant's
own settlement and compares it with the ``PayoutIssued`` recorded; it checks that postings balance,
that each event stream's ``seq`` runs 0, 1, 2, … without gap or repeat and its ``prev_hash`` links,
that every record's ``hash`` matches its content, that wallet balances follow their postings, and that
a revealed shoe seed re-derives the committed order and every card dealt from it.

Each mismatch is an ``AuditFinding`` on ``casino.audit.findings`` (keyed by table, or by account for
wallet findings) with a reason code, the ids it concerns and the expected and recorded values.
Completed game rounds are hashed (:func:`coup_record`) into per-table digests that
:func:`digest_of` folds, with the final balances, into one line two replays can compare.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast

from pydantic import ValidationError

from services.core import topics
from services.core.baccarat import TableConfig, get_variant
from services.core.baccarat.coup import CoupRecord
from services.core.boundary import account_problem, transfer_id_problem
from services.core.cards import shoe_cards
from services.core.contract import (
    PAYLOADS,
    SCHEMA_VERSIONS,
    AnomalyDetected,
    AuditCheckpoint,
    AuditFinding,
    BetAccepted,
    CardDealt,
    CoupResolved,
    DecisionMade,
    FundsDeposited,
    FundsWithdrawn,
    OperatorBalanceSynced,
    Payload,
    PayoutApplied,
    PayoutIssued,
    Posting,
    ShoeClosed,
    ShoeOpened,
    StakeRefunded,
    StakeReserved,
    TableOpened,
    Transfer,
    payload_of,
)
from services.core.envelope import Draft, Envelope, canonical, sha256_hex
from services.core.errors import DomainError
from services.core.kept import Kept
from services.core.ledger import Payout, Wager, table_accounts  # Wager: a CoupTrail field type (snapshots)
from services.core.merkle import heads_root, sorted_heads
from services.core.processor import Processor, describe
from services.core.reasons import FindingReason, Severity
from services.core.shoe import commitment, shuffle
from services.core.signing import DEMO_SIGNING_KEY, SigningKey, sign

CHECKPOINT_EVERY = 50
"""Rounds per table between two ``AuditCheckpoint`` events (one is also written at each shoe close)."""

DIGEST_GENESIS = sha256_hex(b"")
"""A table digest before its first round."""

PAYOUT_FIELDS = (
    "result",
    "win_minor",
    "commission_minor",
    "credit_minor",
    "stake_minor",
    "account_id",
    "spot",
)


def payout_of(p: PayoutIssued) -> Payout:
    """What a ``PayoutIssued`` settles, as a :class:`~services.core.ledger.Payout` (the shape the rules' own
    payouts have: the two compare field by field)."""
    rows = tuple([(r.account, r.amount_minor) for r in p.postings])
    return Payout(p.bet_id, p.account_id, p.spot, p.stake_minor, p.result, p.win_minor, p.commission_minor,
                  p.credit_minor, rows)  # fmt: skip


@dataclass(slots=True)
class CoupTrail(CoupRecord):
    """What audit has seen of one coup so far: the coup as recorded (:class:`CoupRecord`: bets, cards,
    decisions), its ``CoupResolved``, the payouts the rules call for and those recorded."""

    outcome: str | None = None
    """The outcome ``CoupResolved`` recorded; ``None`` until it is seen."""
    hands: Any = None
    """The hands as ``CoupResolved`` recorded them, verbatim (the round hash and the outcome check cover
    what was written, keys a tolerant read drops included)."""
    expected: dict[str, Payout] = field(default_factory=dict)
    recorded: dict[str, Payout] = field(default_factory=dict)
    paid_by: dict[str, str] = field(default_factory=dict)
    """The id of the record of each recorded payout, by bet id."""
    escrow_out: int = 0
    done: bool = False
    head: tuple[int, str] | None = None
    """The table chain's head (seq, hash) as of the coup's ``CoupResolved``: what a checkpoint written
    when the coup completes claims (see :func:`checkpoint`)."""


class ShoeTrail(NamedTuple):
    """An RNG shoe in play: its commitment, and each card dealt from it (position, card, event, coup)."""

    commitment: str | None
    dealt: list[tuple[int, str, str, str]]


class Jump(NamedTuple):
    """A chained record that arrived ahead of its ``seq`` (held back one record to tell a deleted
    record from two swapped ones)."""

    seq: int
    hash: str
    prev_hash: str | None
    event_id: str
    finding_key: str


@dataclass(slots=True)
class TableDigest:
    """A table's running digest, folded in coup-number order (see :func:`table_digest`).

    ``folded`` covers rounds ``1..upto``; a round completed ahead of a lower one waits in ``pending``
    (so the digest does not depend on the order payouts and results interleave). State is O(1) per
    table while rounds complete in order: the replay never keeps every round hash.
    """

    folded: str = DIGEST_GENESIS
    upto: int = 0
    pending: dict[int, str] = field(default_factory=dict)

    def add(self, number: int, coup_hash: str) -> None:
        """Fold round ``number``'s hash (or park it until the rounds before it are in)."""
        if number <= self.upto:  # a reused coup number: folded where it stands, still changes the digest
            self.folded = _fold(self.folded, coup_hash)
            return
        self.pending[number] = coup_hash
        while self.upto + 1 in self.pending:
            self.upto += 1
            self.folded = _fold(self.folded, self.pending.pop(self.upto))

    def value(self) -> str:
        """The digest of every round completed so far, in coup-number order."""
        acc = self.folded
        for n in sorted(self.pending):
            acc = _fold(acc, self.pending[n])
        return acc


def _fold(acc: str, coup_hash: str) -> str:
    return sha256_hex((acc + coup_hash).encode("ascii"))


@dataclass(slots=True)
class AuditState:
    """Audit's working state. Mutable for speed: :func:`services.core.processor.step` owns it and a
    handler raises only before it mutates (all checks that can raise run first).

    Bounded per record: completed coups are dropped, round hashes are folded (:class:`TableDigest`);
    what remains grows with tables, shoes in play, accounts and chained keys, not with the log.
    ``completed`` lists the ``(table, rounds, table digest)`` of the rounds completed by the last
    record handled (the replay keeps a window of them to check checkpoints against).
    """

    heads: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict)
    jumps: dict[tuple[str, str], Jump] = field(default_factory=dict)
    configs: dict[str, TableConfig] = field(default_factory=dict)
    coups: dict[str, CoupTrail] = field(default_factory=dict)
    bet_coup: dict[str, str] = field(default_factory=dict)
    shoes: dict[str, ShoeTrail] = field(default_factory=dict)
    balances: dict[str, int] = field(default_factory=dict)
    digests: dict[str, TableDigest] = field(default_factory=dict)
    rounds_done: dict[str, int] = field(default_factory=dict)
    checkpointed: dict[str, int] = field(default_factory=dict)
    resolved: dict[str, int] = field(default_factory=dict)
    """``CoupResolved`` records read per table: the rounds a shoe closing now has played."""
    closing: dict[str, tuple[int, tuple[int, str] | None]] = field(default_factory=dict)
    """Tables whose shoe closed before every coup resolved at them was complete (a payout not read yet):
    the rounds the shoe's checkpoint waits for, and the table chain's head at the close (it claims)."""
    completed: list[tuple[str, int, str]] = field(default_factory=list)
    checkpoint_every: int = CHECKPOINT_EVERY
    findings: int = 0
    records: int = 0
    findings_by_key: dict[str, int] = field(default_factory=dict)
    reserved: dict[str, int] = field(default_factory=dict)
    settled: Kept = field(default_factory=Kept)
    """The bets settled by a completed coup: bet id -> ``"<n> <event id of its payout>"``, ``n`` counting
    the bets settled so far (:data:`SETTLED_WINDOW`: only the last ones count). A
    :class:`~services.core.kept.Kept` map, so a shell may keep it in its store, out of snapshots."""
    settled_count: int = 0
    settled_order: deque[str] = field(default_factory=deque)
    """The bet ids of the settled window in order, while ``settled`` is in memory (to forget what left
    the window); empty once a store holds ``settled``."""
    alerts: dict[str, tuple[int, str, str]] = field(default_factory=dict)
    paytables: dict[str, dict[str, Any]] = field(default_factory=dict)
    invalid: bool = False
    """Whether the last record handled broke the event contract (an ``invalid_payload`` finding)."""
    own: dict[str, int] = field(default_factory=dict)
    """Records audit has written on its own chained stream (``casino.audit.findings``), per key: the
    length of each of its own chains, which its tree heads claim (:func:`tree_head`)."""
    tree: bool = True
    """Whether checkpoints carry a tree head (the replay's own audit derives none: it checks the log's)."""
    trees: int = 0
    """Tree heads written so far: the next one's ``n`` (orders them across tables)."""
    dirty: dict[tuple[str, str], bool] = field(default_factory=dict)
    """A stage of the partitioned audit on Kafka (:mod:`services.audit.partitioned`): the chains whose
    head advanced since it last staged its heads for the tree stage (empty in a whole audit)."""
    unstaged: int = 0
    """The same: records handled since it last staged anything."""
    in_order: bool = False
    """Complete the coups of a table in the order they were resolved (a coup whose payouts are all in
    waits for those resolved before it): set by the partitioned audit's table stage, whose payouts come
    through other members' hops in any order, so that what its checkpoints claim (rounds, digest, the
    head at the round that completes the count) is what the replay derives (payouts read first: every
    coup complete at its resolution). The whole audit completes each coup when it can."""
    queued: dict[str, list[str]] = field(default_factory=dict)
    """With :attr:`in_order`: per table, the coups resolved and not yet completed, in resolution order."""


FINDING, CHECKPOINT = AuditFinding.__name__, AuditCheckpoint.__name__
"""Audit's two output types. Drafted from dicts, not through ``to_draft``: a finding must be written
whatever a tampered record put in its key and values (the model's bounds could refuse them), and a
checkpoint is signed as written (the model's dump would add its unset signature fields as nulls)."""


def finding(
    reason: FindingReason,
    key: str,
    subject: Mapping[str, Any],
    expected: Any = None,
    recorded: Any = None,
    *,
    detail: str = "",
) -> Draft:
    """An ``AuditFinding`` draft."""
    payload = {
        "reason": reason.value, "severity": Severity.CRITICAL.value, "table_id": key,
        "subject": dict(subject), "expected": expected, "recorded": recorded, "detail": detail,
    }  # fmt: skip
    return Draft(FINDING, topics.AUDIT_FINDINGS, key, payload)


_READ_FIRST = (topics.TABLE_EVENTS, topics.WALLET_REQUESTS, topics.WALLET_EVENTS, topics.MONITOR_ALERTS)
_INPUTS = _READ_FIRST + tuple(
    sorted(topics.EVENT_STREAMS - {*_READ_FIRST, topics.AUDIT_FINDINGS, *topics.NOT_IN_TREE_HEADS})
)
"""Audit's inputs: the payout requests and every chained stream but its own and the writers' signed
heads (:data:`~services.core.topics.NOT_IN_TREE_HEADS`), so that a chained topic added to
:data:`~services.core.topics.EVENT_STREAMS` is checked and covered by the tree heads unasked."""


class Audit(Processor[AuditState]):
    """Audit (see the module docstring).

    ``signing``: the Ed25519 key that signs each ``AuditCheckpoint`` (:mod:`services.core.signing`);
    pure data handed in by the shell (the composition root passes the keyring's audit key). The default
    is the PUBLIC DEMO KEY (:data:`services.core.signing.DEMO_SIGNING_KEY`, demo and tests only), so a
    pipeline built without configuration still writes checkpoints that the demo public keyring
    verifies; ``None`` writes them unsigned (a replay reports them). ``checkpoint_every``: rounds per table
    between two checkpoints; a replay must use the same cadence to notice a missing one.
    """

    name = "audit"
    inputs = _INPUTS
    validates_inputs = False  # integrity first: an edited record is a hash finding before anything else
    readers: Mapping[str, Reader]
    """How each contract type is read and handled (:data:`_READERS`; a stage of the partitioned audit on
    Kafka, :mod:`services.audit.partitioned`, does part of the work)."""

    def __init__(
        self,
        signing: SigningKey | None = DEMO_SIGNING_KEY,
        checkpoint_every: int = CHECKPOINT_EVERY,
        *,
        tree: bool = True,
    ) -> None:
        if checkpoint_every < 1:
            raise ValueError("checkpoint_every must be at least 1")
        self.signing = signing
        self.checkpoint_every = checkpoint_every
        self.tree = tree

    def initial(self) -> AuditState:
        """Nothing seen."""
        return AuditState(checkpoint_every=self.checkpoint_every, tree=self.tree)

    def handle(self, state: AuditState, record: Envelope) -> tuple[AuditState, list[Draft]]:
        """Check the record's integrity, then what it says."""
        return self.handle_hashed(state, record, record.expected_hash())

    def handle_hashed(
        self, state: AuditState, record: Envelope, expected_hash: str
    ) -> tuple[AuditState, list[Draft]]:
        """:meth:`handle` with the record's recomputed hash already known (the replay computes it from
        the raw dict it decoded, once, instead of re-serialising the model)."""
        state.completed.clear()
        out = self.check_chain(state, record, expected_hash)
        state.records += 1
        reader = self.readers.get(record.type)
        if reader is None:  # a type outside the contract: nothing to read
            state.invalid = False
        else:
            payload, broken = _read(reader, record)
            state.invalid = broken is not None
            if broken is not None:
                subject = {**_subject(record), "type": record.type}
                key = _finding_key(record)
                out.append(finding(FindingReason.INVALID_PAYLOAD, key, subject, detail=broken))
            elif reader.handler is not None:
                out.extend(reader.handler(state, record, payload))
        return state, self.tally(state, out)

    def tally(self, state: AuditState, out: list[Draft]) -> list[Draft]:
        """Count a record's outputs (findings per key, the length of audit's own chains) and sign its
        checkpoints."""
        own = state.own
        for d in out:
            if d.type == FINDING:
                state.findings += 1
                key = str(d.payload["table_id"])
                state.findings_by_key[key] = state.findings_by_key.get(key, 0) + 1
            if d.chained:
                own[d.key] = own.get(d.key, 0) + 1
        if self.signing is not None:
            out = [_signed(d, self.signing) for d in out]
        return out

    def check_chain(self, state: AuditState, rec: Envelope, expected_hash: str | None = None) -> list[Draft]:
        """Hash, seq and prev_hash of one record.

        A record ahead of its ``seq`` is held back one record on its key (:class:`Jump`): if the next
        one is the record it skipped, the two were swapped (one ``seq_reordered`` naming both ids);
        otherwise records were deleted (``seq_gap``). A record behind the head is ``seq_duplicate``
        and leaves the head where it was, so one replayed record gives one finding, not a cascade.
        """
        out: list[Draft] = []
        want_hash = rec.expected_hash() if expected_hash is None else expected_hash
        if rec.hash != want_hash:
            key = _finding_key(rec)
            out.append(finding(FindingReason.HASH_MISMATCH, key, _subject(rec), want_hash, rec.hash))
        if rec.topic not in topics.EVENT_STREAMS:
            return out
        chain = (rec.topic, rec.key)
        head = state.heads.get(chain)
        if state.jumps:
            jump = state.jumps.pop(chain, None)
            if jump is not None:
                if rec.seq == (head[0] + 1 if head else 0) and jump.seq == rec.seq + 1:
                    key = _finding_key(rec)
                    return [*out, *_swapped(state, chain, head[1] if head else None, jump, rec, key=key)]
                out.insert(0, _gap_finding(jump, head))
                head = state.heads[chain] = (jump.seq, jump.hash)
        want_seq, want_prev = (head[0] + 1, head[1]) if head else (0, None)
        seq = rec.seq
        if seq == want_seq:  # the usual case first
            if rec.prev_hash != want_prev:
                key = _finding_key(rec)
                out.append(finding(FindingReason.CHAIN_BROKEN, key, _subject(rec), want_prev, rec.prev_hash))
            state.heads[chain] = (seq, rec.hash)
        elif seq is None:
            why = "no seq"
            key = _finding_key(rec)
            out.append(finding(FindingReason.CHAIN_BROKEN, key, _subject(rec), want_seq, None, detail=why))
        elif seq > want_seq:
            state.jumps[chain] = Jump(seq, rec.hash, rec.prev_hash, rec.event_id, _finding_key(rec))
        else:
            why = "seq already used on this key: a replayed or re-inserted record"
            key = _finding_key(rec)
            out.append(finding(FindingReason.SEQ_DUPLICATE, key, _subject(rec), want_seq, seq, detail=why))
        return out

    def finish(self, state: AuditState) -> list[Draft]:
        """At the end of a finite log: a record still held back was followed by nothing (a gap)."""
        out = [_gap_finding(jump, state.heads.get(chain)) for chain, jump in sorted(state.jumps.items())]
        state.jumps.clear()
        return out


def read_recorded(rec: Envelope) -> tuple[Payload | None, str | None]:
    """``rec``'s typed payload, read tolerantly, and ``None``; or ``None`` and why the payload breaks the
    event contract; ``(None, None)`` for a type outside the contract. Validated once: the handlers take
    the model it gives.

    A payload at the current schema version needs no upcast: its model's validator reads the recorded
    dict itself (what :func:`~services.core.contract.payload_of` does after copying it, without the copy);
    an older version goes through :func:`~services.core.contract.payload_of` and its upcasters."""
    reader = _READERS.get(rec.type)
    if reader is None:
        return None, None
    return _read(reader, rec)


def _read(reader: Reader, rec: Envelope) -> tuple[Payload | None, str | None]:
    try:
        if rec.schema_version == reader.version:
            payload: Payload = reader.validate(rec.payload, extra="ignore")
        else:
            payload = payload_of(rec, tolerant=True)
    except (DomainError, ValidationError) as exc:
        return None, describe(exc)
    return payload, None


def _subject(rec: Envelope) -> dict[str, Any]:
    return {"event_id": rec.event_id, "topic": rec.topic, "key": rec.key, "seq": rec.seq}


def _gap_finding(jump: Jump, head: tuple[int, str] | None) -> Draft:
    want = head[0] + 1 if head else 0
    subject = {"event_id": jump.event_id, "seq": jump.seq, "missing_seqs": [want, jump.seq - 1]}
    return finding(FindingReason.SEQ_GAP, jump.finding_key, subject, want, jump.seq,
                   detail=f"seq {want}..{jump.seq - 1} missing before this record: deleted")  # fmt: skip


def _swapped(
    state: AuditState, chain: tuple[str, str], head_hash: str | None, jump: Jump, rec: Envelope, *, key: str
) -> list[Draft]:
    """``jump`` (seq n+1) came before ``rec`` (seq n): one finding naming both; links checked as written."""
    subject = {"event_id": jump.event_id, "event_ids": [jump.event_id, rec.event_id], "topic": rec.topic,
               "key": rec.key, "seqs": [jump.seq, rec.seq]}  # fmt: skip
    out = [finding(FindingReason.SEQ_REORDERED, key, subject, [rec.seq, jump.seq], [jump.seq, rec.seq],
                   detail="two events of one stream appear in swapped order")]  # fmt: skip
    if rec.prev_hash != head_hash:
        out.append(finding(FindingReason.CHAIN_BROKEN, key, _subject(rec), head_hash, rec.prev_hash))
    if jump.prev_hash != rec.hash:
        where = {"event_id": jump.event_id, "seq": jump.seq}
        out.append(finding(FindingReason.CHAIN_BROKEN, key, where, rec.hash, jump.prev_hash))
    state.heads[chain] = (jump.seq, jump.hash)
    return out


def _signed(draft: Draft, key: SigningKey) -> Draft:
    if draft.type != CHECKPOINT:
        return draft
    return Draft(draft.type, draft.topic, draft.key, sign(draft.payload, key), draft.chained)


def _finding_key(rec: Envelope) -> str:
    # the raw payload: a finding's key is needed before (and whether or not) the payload validates
    return str(rec.payload.get("table_id") or rec.key)


def _trail(state: AuditState, table_id: str, coup_id: str) -> CoupTrail:
    trail = state.coups.get(coup_id)
    if trail is None:
        trail = state.coups[coup_id] = CoupTrail(table_id, coup_id)
    return trail


def on_table_opened(state: AuditState, rec: Envelope, opened: TableOpened) -> list[Draft]:
    """Remember the table's configuration and its recorded paytable (the raw one: a variant's own
    paytable keys, such as ``commission_to``, are not in the tolerant model)."""
    state.configs[rec.key] = TableConfig.from_dict(opened.config.model_dump(mode="json"))
    state.paytables[rec.key] = dict(rec.payload.get("paytable") or {})
    return []


def on_shoe_opened(state: AuditState, rec: Envelope, p: ShoeOpened) -> list[Draft]:
    """Remember the shoe's commitment."""
    state.shoes[p.shoe_id] = ShoeTrail(p.commitment, [])
    return []


def on_bet_accepted(state: AuditState, rec: Envelope, p: BetAccepted) -> list[Draft]:
    """Remember the bet in its coup."""
    _trail(state, rec.key, p.coup_id).bet(p.bet_id, p.account_id, p.spot, p.stake_minor)
    state.bet_coup[p.bet_id] = p.coup_id
    return []


def on_card_dealt(state: AuditState, rec: Envelope, p: CardDealt) -> list[Draft]:
    """Remember the card, its hand and shoe position."""
    trail = _trail(state, rec.key, p.coup_id)
    trail.card(p.hand, p.card, p.shoe_position)
    trail.shoe_id = p.shoe_id
    shoe = state.shoes.get(p.shoe_id)
    if shoe is not None:
        shoe.dealt.append((p.shoe_position, p.card, rec.event_id, p.coup_id))
    return []


def on_decision_made(state: AuditState, rec: Envelope, p: DecisionMade) -> list[Draft]:
    """Remember the decision and who made it."""
    _trail(state, rec.key, p.coup_id).decision(p.hand, p.choice, p.decided_by)
    return []


def on_coup_resolved(state: AuditState, rec: Envelope, p: CoupResolved) -> list[Draft]:
    """Re-run the engine from the recorded cards and decisions; compute the expected payouts. The hands
    are compared as recorded (the raw payload's), and the round record keeps them so."""
    coup_id = p.coup_id
    trail = _trail(state, rec.key, coup_id)
    trail.outcome, trail.shoe_id, trail.number = p.outcome, p.shoe_id, p.coup_number
    trail.hands = rec.payload.get("hands")
    trail.head = state.heads.get((topics.TABLE_EVENTS, rec.key))
    state.resolved[rec.key] = state.resolved.get(rec.key, 0) + 1
    config = state.configs.get(rec.key)
    subject = {"event_id": rec.event_id, "coup_id": coup_id}
    if config is None:
        why = "coup resolved at a table never opened"
        return [finding(FindingReason.UNKNOWN_TABLE, rec.key, subject, detail=why)]
    variant = get_variant(config.variant)
    try:
        result = trail.replayed(config)
    except DomainError as err:
        return [finding(FindingReason.CARD_MISMATCH, rec.key, subject, None, trail.dealt(), detail=str(err))]
    out: list[Draft] = []
    recomputed = result.to_dict()
    for name, recorded in (("hands", trail.hands), ("outcome", p.outcome), ("natural", p.natural)):
        if recomputed[name] != recorded:
            where = {**subject, "field": name}
            out.append(finding(FindingReason.OUTCOME_MISMATCH, rec.key, where, recomputed[name], recorded))
    dealt_to = {h.name: list(h.cards) for h in result.hands}
    recorded_to = trail.dealt_to()
    if {k: v for k, v in dealt_to.items() if v} != recorded_to:
        why = "cards dealt to the wrong hand"
        out.append(finding(FindingReason.CARD_MISMATCH, rec.key, subject, dealt_to, recorded_to, detail=why))
    if sorted(p.bet_ids) != sorted(trail.bets):
        out.append(
            finding(FindingReason.BET_SET_MISMATCH, rec.key, subject, sorted(trail.bets), sorted(p.bet_ids))
        )
    wagers: list[Wager] = [trail.bets[b] for b in p.bet_ids if b in trail.bets]
    for po in variant.settle(result, wagers, config, table_accounts(rec.key)):
        trail.expected[po.bet_id] = po
    for bet_id in list(trail.recorded):
        out.extend(_compare_payout(state, trail, bet_id))
    if state.in_order:
        state.queued.setdefault(rec.key, []).append(coup_id)
    out.extend(_maybe_complete(state, coup_id, trail))
    return out


def on_payout_issued(state: AuditState, rec: Envelope, p: PayoutIssued) -> list[Draft]:
    """Join the payout with its coup; compare once both sides are known. Checked on its own first: its
    postings balance, and what it posts to the commission account is the commission it reports."""
    return [*_check_postings(rec, p.postings), *join_payout(state, rec, p)]


def join_payout(state: AuditState, rec: Envelope, p: PayoutIssued) -> list[Draft]:
    """A payout joined with its coup (a second payout of a bet is ``duplicate_payout``), compared once
    the coup is resolved."""
    bet_id, table, coup_id = p.bet_id, p.table_id, p.coup_id
    out: list[Draft] = []
    trail = state.coups.get(coup_id)
    first = _settled_by(state, bet_id)
    if first is None and trail is not None and bet_id in trail.recorded:
        first = trail.paid_by[bet_id]
    if first is not None:
        why = f"the bet was already settled by {first}: a bet is settled exactly once"
        both = {"event_id": rec.event_id, "bet_id": bet_id, "coup_id": coup_id,
                "event_ids": [first, rec.event_id]}  # fmt: skip
        return [finding(FindingReason.DUPLICATE_PAYOUT, table or rec.key, both, 1, 2, detail=why)]
    trail = _trail(state, table, coup_id)
    trail.recorded[bet_id] = payout_of(p)
    trail.paid_by[bet_id] = rec.event_id
    escrow = table_accounts(table).escrow
    trail.escrow_out += sum([r.amount_minor for r in p.postings if r.account == escrow])
    if trail.outcome is not None:
        out.extend(_compare_payout(state, trail, bet_id))
        out.extend(_maybe_complete(state, coup_id, trail))
    return out


def _check_commission_postings(state: AuditState, trail: CoupTrail, p: Payout) -> list[Draft]:
    """Paired invariant (independent of any model): the postings to the table's commission account
    equal the ``commission_minor`` the payout reports — or nothing, where the recorded paytable sends
    the spot's commission elsewhere (``commission_to: bank`` in a player-banked game). Checked once the
    payout meets its resolved coup (so the table's paytable is known, whatever the arrival order)."""
    table = trail.table_id
    account = table_accounts(table).commission
    posted = sum([m for a, m in p.postings if a == account])
    entry = state.paytables.get(table, {}).get(p.spot, {})
    to_commission = entry.get("commission_to", "commission") == "commission"
    reported = p.commission_minor if to_commission else 0
    if posted == reported:
        return []
    subject = {**_payout_subject(trail, p.bet_id), "account": account}
    why = f"{posted} posted to {account} but {reported} reported as commission"
    return [finding(FindingReason.COMMISSION_POSTING_MISMATCH, table, subject, reported, posted, detail=why)]


def _settled(p: Payout) -> tuple[str, int, int, int, int, str, str]:
    """What a payout settles, in :data:`PAYOUT_FIELDS` order."""
    return (p.result, p.win_minor, p.commission_minor, p.credit_minor, p.stake_minor, p.account_id, p.spot)


def _compare_payout(state: AuditState, trail: CoupTrail, bet_id: str) -> list[Draft]:
    got = trail.recorded[bet_id]
    want = trail.expected.get(bet_id)
    paired = _check_commission_postings(state, trail, got)
    if want is None:
        why = "a payout for a bet that is not among the coup's accepted bets"
        unexpected = finding(FindingReason.PAYOUT_UNEXPECTED, trail.table_id, _payout_subject(trail, bet_id),
                             None, got.credit_minor, detail=why)  # fmt: skip
        return [*paired, unexpected]
    out = paired
    wanted, settled = _settled(want), _settled(got)
    rows = got.postings
    if wanted == settled and same_postings(want.postings, rows):
        return out
    subject = _payout_subject(trail, bet_id)
    diff = {f: (w, g) for f, w, g in zip(PAYOUT_FIELDS, wanted, settled, strict=True) if w != g}
    if diff:
        only_commission = "commission_minor" in diff and set(diff) <= {"commission_minor", "credit_minor"}
        reason = FindingReason.COMMISSION_MISMATCH if only_commission else FindingReason.PAYOUT_MISMATCH
        why = ", ".join(f"{f} should be {w!r}, not {g!r}" for f, (w, g) in sorted(diff.items()))
        out.append(finding(reason, trail.table_id, subject, {f: w for f, (w, _) in diff.items()},
                           {f: g for f, (_, g) in diff.items()}, detail=why))  # fmt: skip
    else:
        why = "the money moves between other accounts than the rules call for"
        wanted_rows, posted = _posting_rows(want.postings), _posting_rows(rows)
        out.append(
            finding(FindingReason.POSTINGS_MISMATCH, trail.table_id, subject, wanted_rows, posted, detail=why)
        )
    return out


def _payout_subject(trail: CoupTrail, bet_id: str) -> dict[str, Any]:
    return {"event_id": trail.paid_by[bet_id], "bet_id": bet_id, "coup_id": trail.coup_id}


def _posting_rows(rows: Sequence[tuple[str, int]]) -> list[dict[str, Any]]:
    return [{"account": a, "amount_minor": m} for a, m in rows]


def same_postings(want: Sequence[tuple[str, int]], got: Sequence[tuple[str, int]]) -> bool:
    """Whether two payouts' postings, as ``(account, amount)`` rows, move the same amounts between the
    same accounts, in any order (equal rows, the usual case, need no sorting)."""
    return want == got or sorted(want) == sorted(got)


def _check_postings(rec: Envelope, rows: tuple[Posting, ...]) -> list[Draft]:
    total = sum([r.amount_minor for r in rows])
    if total != 0 or not rows:
        return [finding(FindingReason.POSTINGS_UNBALANCED, _finding_key(rec), {"event_id": rec.event_id}, 0,
                        total, detail="a transfer's postings must sum to zero")]  # fmt: skip
    return []


_ESCROW_MOVES: frozenset[type[Transfer]] = frozenset({StakeReserved, StakeRefunded})
"""The transfers that move a stake into or out of a table's escrow, tested by exact type (what the
contract's validator builds; no model subclasses them): ``isinstance`` against a pydantic model class
goes through its metaclass's ``__instancecheck__``, several times slower."""


def on_wallet_event(state: AuditState, rec: Envelope, p: Transfer) -> list[Draft]:
    """Every transfer balances, each wallet's balance is the fold of its postings (before and after),
    and each stake reserved in a table's escrow is remembered for the coup's escrow check."""
    out = _check_postings(rec, p.postings)
    out.extend(boundary_findings(rec, p))
    if not out:
        fold_balance(state, rec, p, out)
        hold_stake(state, p)
    return out


def fold_balance(state: AuditState, rec: Envelope, p: Transfer, out: list[Draft]) -> None:
    """The wallet's balance before and after ``p`` must be the fold of its postings (a mismatch appended
    to ``out``); the postings folded into every account's balance."""
    balances = state.balances
    before = balances.get(rec.key, 0)
    recorded_before = p.balance_before_minor
    if recorded_before != before:
        where = {"event_id": rec.event_id, "account_id": rec.key, "field": "balance_before_minor"}
        why = "not the fold of the wallet's postings"
        out.append(
            finding(FindingReason.BALANCE_MISMATCH, rec.key, where, before, recorded_before, detail=why)
        )
    for r in p.postings:
        balances[r.account] = balances.get(r.account, 0) + r.amount_minor
    after = p.balance_after_minor
    if balances.get(rec.key, 0) != after:
        where = {"event_id": rec.event_id, "account_id": rec.key, "field": "balance_after_minor"}
        why = "not the fold of the wallet's postings"
        balance = balances.get(rec.key, 0)
        out.append(finding(FindingReason.BALANCE_MISMATCH, rec.key, where, balance, after, detail=why))


def hold_stake(state: AuditState, p: Transfer) -> None:
    """A stake reserved in (or refunded from) a table's escrow, remembered by bet for the coup's escrow
    check (:func:`_check_escrow`)."""
    if type(p) in _ESCROW_MOVES:
        stake = cast("StakeReserved | StakeRefunded", p)
        escrow = table_accounts(stake.table_id).escrow
        moved = sum([r.amount_minor for r in stake.postings if r.account == escrow])
        bet_id = stake.bet_id
        held = state.reserved.get(bet_id, 0) + moved
        if held:
            state.reserved[bet_id] = held
        else:
            state.reserved.pop(bet_id, None)


def boundary_findings(rec: Envelope, p: Transfer) -> list[Draft]:
    """A wallet event whose transfer id is outside its kind's namespace, or a deposit or withdrawal on an
    account that is no player's (:mod:`services.core.boundary`): money moved beyond a writer's rights."""
    tid = p.transfer_id
    named = transfer_id_problem(rec.type, tid, getattr(p, "bet_id", None))
    moved = account_problem(rec.type, rec.key)
    if named is None and moved is None:  # every wallet event of an honest log: nothing built
        return []
    where = {"event_id": rec.event_id, "account_id": rec.key, "transfer_id": tid}
    out: list[Draft] = []
    for reason, problem in (
        (FindingReason.TRANSFER_ID_NOT_OWN, named),
        (FindingReason.NOT_A_PLAYER_ACCOUNT, moved),
    ):
        if problem is not None:
            out.append(finding(reason, rec.key, where, None, tid, detail=problem))
    return out


def on_alert(state: AuditState, rec: Envelope, alert: AnomalyDetected) -> list[Draft]:
    """Count the monitor's alerts per table, keep the last one's hash (the checkpoints claim it) and fold
    them in their stream's order (the digest covers them)."""
    n, _, acc = state.alerts.get(rec.key, (0, "", DIGEST_GENESIS))
    state.alerts[rec.key] = (n + 1, rec.hash, _fold(acc, rec.hash))
    return []


def on_shoe_closed(state: AuditState, rec: Envelope, p: ShoeClosed) -> list[Draft]:
    """A revealed seed must re-derive the committed order and every card dealt from the shoe; then a
    checkpoint of the table (when rounds completed since the last one), so every shoe ends signed.

    The checkpoint counts every coup resolved at the table before the close. Where one of them is not
    complete yet (audit has read the close before a payout: the topics interleave as the broker hands
    them out), it is written once that coup completes, still claiming the chain head as of the close: its
    content depends on the streams, not on when audit read them, so a replay (which reads a Kafka log
    topic by topic, payouts first) derives the very same checkpoint."""
    out = _check_shoe(state, rec, p)
    table = rec.key
    due, head = state.resolved.get(table, 0), state.heads.get((topics.TABLE_EVENTS, table))
    if state.rounds_done.get(table, 0) < due:
        state.closing[table] = (due, head)
    elif state.rounds_done.get(table, 0) != state.checkpointed.get(table, 0):
        out.append(checkpoint(state, table, head))
    return out


def _check_shoe(state: AuditState, rec: Envelope, p: ShoeClosed) -> list[Draft]:
    shoe = state.shoes.pop(p.shoe_id, None)
    if shoe is None or p.mode != "rng":
        return []
    config = state.configs.get(rec.key)
    subject = {"event_id": rec.event_id, "shoe_id": p.shoe_id}
    if config is None or not p.seed_hex:
        return [finding(FindingReason.SHOE_COMMITMENT_MISMATCH, rec.key, subject, detail="no seed revealed")]
    seed = bytes.fromhex(p.seed_hex)
    order = shuffle(seed, shoe_cards(config.decks))
    out = []
    if commitment(seed, order) != shoe.commitment:
        why = "the revealed seed does not give the committed order"
        out.append(finding(FindingReason.SHOE_COMMITMENT_MISMATCH, rec.key, subject, commitment(seed, order),
                           shoe.commitment, detail=why))  # fmt: skip
    for pos, card, event_id, coup_id in shoe.dealt:
        if not 0 <= pos < len(order) or order[pos] != card:
            want = order[pos] if 0 <= pos < len(order) else None
            where = {"event_id": event_id, "coup_id": coup_id, "shoe_id": p.shoe_id, "shoe_position": pos}
            why = "not the card at this position of the revealed shoe order"
            out.append(finding(FindingReason.CARD_MISMATCH, rec.key, where, want, card, detail=why))
    return out


def _payout_record(p: Payout) -> dict[str, Any]:
    return {"account_id": p.account_id, "bet_id": p.bet_id, "commission_minor": p.commission_minor,
            "credit_minor": p.credit_minor, "result": p.result, "spot": p.spot, "stake_minor": p.stake_minor,
            "win_minor": p.win_minor}  # fmt: skip


def coup_record(trail: CoupTrail, coup_id: str) -> dict[str, Any]:
    """The canonical game-round record of a completed coup (what the digest covers)."""
    return {
        "bets": [{"account_id": w.account_id, "bet_id": b, "spot": w.spot, "stake_minor": w.stake_minor}
                 for b, w in sorted(trail.bets.items())],
        "cards": [[h, c, pos] for h, c, pos in trail.cards], "coup_id": coup_id, "coup_number": trail.number,
        "decisions": [[h, c] for h, c, _ in trail.decisions], "hands": trail.hands,
        "outcome": trail.outcome,
        "payouts": [_payout_record(trail.recorded[b]) for b in sorted(trail.recorded)],
        "shoe_id": trail.shoe_id, "table_id": trail.table_id,
    }  # fmt: skip


def coup_hash(trail: CoupTrail, coup_id: str) -> str:
    """SHA-256 of the canonical JSON of :func:`coup_record` (sorting a round's few small dicts in C
    costs less than checking in Python whether they are already in order)."""
    return sha256_hex(canonical(coup_record(trail, coup_id)))


SETTLED_WINDOW = 1 << 16
"""How many settled bet ids audit remembers after their coup completed (a later second payout for one
of them is a ``duplicate_payout``; further back, it is an orphan left open at the end)."""


def _settled_by(state: AuditState, bet_id: str) -> str | None:
    """The payout record that settled ``bet_id``, if it is among the last :data:`SETTLED_WINDOW` bets
    settled (its entry's number is at least ``settled_count - SETTLED_WINDOW``), else ``None``."""
    entry = state.settled.get(bet_id)
    if entry is None:
        return None
    n, _, event_id = entry.partition(" ")
    return event_id if int(n) >= state.settled_count - SETTLED_WINDOW else None


def _settle(state: AuditState, bet_id: str, event_id: str) -> None:
    """Remember that ``event_id`` settled ``bet_id``; in memory, forget the entries that left the window
    (a store keeps them all: :func:`_settled_by` looks at their numbers)."""
    state.settled[bet_id] = f"{state.settled_count} {event_id}"
    state.settled_count += 1
    if state.settled.bound:
        return
    order = state.settled_order
    order.append(bet_id)
    while len(order) > SETTLED_WINDOW:
        gone = order.popleft()
        entry = state.settled.entries.get(gone)
        if entry is not None and int(entry.partition(" ")[0]) < state.settled_count - SETTLED_WINDOW:
            del state.settled.entries[gone]


def _ready(trail: CoupTrail) -> bool:
    recorded, bets = trail.recorded, trail.bets
    # (the lengths first: a coup of n bets is checked n times, each set costs n)
    return not (
        trail.done or trail.outcome is None or len(recorded) != len(bets) or set(recorded) != set(bets)
    )


def _maybe_complete(state: AuditState, coup_id: str, trail: CoupTrail) -> list[Draft]:
    if not _ready(trail):
        return []
    if state.in_order:
        return _complete_in_order(state, coup_id, trail)
    return _complete(state, coup_id, trail)


def _complete_in_order(state: AuditState, coup_id: str, trail: CoupTrail) -> list[Draft]:
    """Complete the coups resolved at the table in the order they were resolved: a coup ready before
    one resolved ahead of it waits for it (see :attr:`AuditState.in_order`)."""
    table = trail.table_id
    queue = state.queued.get(table)
    if not queue or coup_id not in queue:  # resolved without a check that completes it: as it comes
        return _complete(state, coup_id, trail)
    out: list[Draft] = []
    while queue:
        first = state.coups.get(queue[0])
        if first is not None and not first.done and not _ready(first):
            break
        done = queue.pop(0)
        if first is not None and not first.done:
            out.extend(_complete(state, done, first))
    if not queue:
        del state.queued[table]
    return out


def _complete(state: AuditState, coup_id: str, trail: CoupTrail) -> list[Draft]:
    trail.done = True
    table = trail.table_id
    out = _check_escrow(state, coup_id, trail)
    digest = state.digests.setdefault(table, TableDigest())
    digest.add(trail.number, coup_hash(trail, coup_id))
    for bet_id in trail.bets:
        state.bet_coup.pop(bet_id, None)
        _settle(state, bet_id, trail.paid_by[bet_id])
    del state.coups[coup_id]
    n = state.rounds_done[table] = state.rounds_done.get(table, 0) + 1
    state.completed.append((table, n, digest.value()))
    if n % state.checkpoint_every == 0:
        out.append(checkpoint(state, table, trail.head))
    closing = state.closing.get(table)
    if closing is not None and n >= closing[0]:
        del state.closing[table]
        if n != state.checkpointed.get(table, 0):
            out.append(checkpoint(state, table, closing[1]))
    return out


def _check_escrow(state: AuditState, coup_id: str, trail: CoupTrail) -> list[Draft]:
    """Paired invariant: what the coup's stakes put into the table's escrow (the wallet stage's
    ``StakeReserved``) is what its payouts take out, so the escrow nets to zero per coup. Checked when
    every reservation was seen (a deleted one is a chain finding of its own)."""
    if any(b not in state.reserved for b in trail.bets):
        for b in trail.bets:
            state.reserved.pop(b, None)
        return []
    held = sum(state.reserved.pop(b) for b in trail.bets)
    if held + trail.escrow_out == 0:
        return []
    ids = sorted(trail.paid_by.values())
    why = f"stakes put {held} into escrow, payouts took {-trail.escrow_out} out"
    return [finding(FindingReason.ESCROW_NOT_ZERO, trail.table_id, {"coup_id": coup_id, "event_ids": ids}, 0,
                    held + trail.escrow_out, detail=why)]  # fmt: skip


def checkpoint(state: AuditState, table: str, head: tuple[int, str] | None) -> Draft:
    """An unsigned ``AuditCheckpoint`` for ``table`` now (:class:`Audit` signs it): rounds completed,
        the table digest over them, the table's chain head ``head``, its findings so far, the count and
        digest of how many alerts the monitor raised at the table and the last one's hash (a claim the
        replay checks against the alerts stream, whatever order topics interleave in: deleting alerts
        breaks it).

    ``head`` is the table chain's head where the stream decides it — at the ``CoupResolved`` of the round
    that completes the count (every ``cadence``-th), or at the ``ShoeClosed`` — never wherever audit has
    read the table's events to by then: on Kafka that depends on how the topics interleave, and the
    replay, which checks every checkpoint, reads them in another order."""
    n = state.rounds_done.get(table, 0)
    state.checkpointed[table] = n
    digest = state.digests.get(table)
    alerts, alerts_head, _ = state.alerts.get(table, (0, "", DIGEST_GENESIS))
    payload = {
        "table_id": table, "rounds": n, "table_digest": digest.value() if digest else DIGEST_GENESIS,
        "chain_heads": {} if head is None else {f"{topics.TABLE_EVENTS}|{table}": {"seq": head[0],
                                                                                   "hash": head[1]}},
        "findings": state.findings_by_key.get(table, 0),
        "alerts": {"count": alerts, "head": alerts_head or None},
    }  # fmt: skip
    if state.tree:
        payload["tree"] = tree_head(state)
    return Draft(CHECKPOINT, topics.AUDIT_FINDINGS, table, payload)


def tree_head(state: AuditState) -> dict[str, Any]:
    """The tree head a checkpoint signs: an RFC 6962 Merkle root (:mod:`services.core.merkle`) over the
    head ``(topic, key, seq, hash)`` of every chained stream audit has verified so far — tables,
    wallets, alerts, any other chained topic it reads — and of its own chains (``casino.audit.findings``)
    by length (their records are sealed after this payload is signed: ``hash`` null), sorted by
    ``(topic, key)``; ``n`` numbers audit's tree heads across tables, ``heads`` lists the leaves
    (``{topic: {key: [seq, hash]}}``) so that a regulator checks each against the log.

    Unlike the checkpoint's other claims, these heads are where audit had read each stream when the
    checkpoint was due, which on Kafka depends on how its inputs interleave; so the replay does not
    derive them: it checks that the root is the tree of the listed heads and that every head is in the
    log (:mod:`services.audit.replay.tree_head`). A deleted chain, a cut tail or a rewritten record under
    a head then breaks a signed claim."""
    heads: dict[tuple[str, str], tuple[int, str | None]] = {
        chain: head for chain, head in state.heads.items() if chain[0] not in topics.NOT_IN_TREE_HEADS
    }
    for key, n in state.own.items():
        heads[(topics.AUDIT_FINDINGS, key)] = (n - 1, None)
    leaves = sorted_heads(heads)
    size, root = heads_root(leaves)
    listed: dict[str, dict[str, list[Any]]] = {}
    for t, k, s, h in leaves:
        listed.setdefault(t, {})[k] = [s, h]
    state.trees += 1
    return {"n": state.trees, "size": size, "root": root, "heads": listed}


def table_digest(hashes: Mapping[int, str]) -> str:
    """One table's digest: its round hashes folded in coup-number order,
    ``d = SHA-256(d ‖ coup_hash)`` from :data:`DIGEST_GENESIS` (what :class:`TableDigest` streams)."""
    acc = DIGEST_GENESIS
    for n in sorted(hashes):
        acc = _fold(acc, hashes[n])
    return acc


def digest_of(state: AuditState, findings_records: Mapping[str, int] | None = None) -> str:
    """The replay digest: every table's digest, every wallet's final balance, every table's alerts
    (folded in their stream's order) and how many ``AuditFinding`` records each key of the findings
    stream holds, canonically. None of it depends on how topics interleave."""
    tables = {t: d.value() for t, d in sorted(state.digests.items())}
    wallets = {a: b for a, b in sorted(state.balances.items()) if not a.startswith(("table:", "cage:"))}
    alerts = {t: d for t, (_, _, d) in sorted(state.alerts.items())}
    found = dict(sorted((findings_records or {}).items()))
    doc = {"tables": tables, "balances": wallets, "alerts": alerts, "findings_records": found}
    return sha256_hex(canonical(doc))


def open_items(state: AuditState) -> list[dict[str, Any]]:
    """Coups not yet complete at the end of a replay: missing payouts, unresolved coups."""
    items = []
    for coup_id, trail in sorted(state.coups.items()):
        missing = sorted(set(trail.bets) - set(trail.recorded))
        items.append({"coup_id": coup_id, "table_id": trail.table_id, "resolved": trail.outcome is not None,
                      "missing_payouts": missing})  # fmt: skip
    return items


Handler = Callable[[AuditState, Envelope, Any], list[Draft]]
"""A handler of one event type: the state, the record and its typed payload (:func:`read_recorded`)."""

_ON: Mapping[type[Payload], Handler] = {
    TableOpened: on_table_opened,
    ShoeOpened: on_shoe_opened,
    BetAccepted: on_bet_accepted,
    CardDealt: on_card_dealt,
    DecisionMade: on_decision_made,
    CoupResolved: on_coup_resolved,
    ShoeClosed: on_shoe_closed,
    PayoutIssued: on_payout_issued,
    FundsDeposited: on_wallet_event,
    FundsWithdrawn: on_wallet_event,
    StakeReserved: on_wallet_event,
    PayoutApplied: on_wallet_event,
    StakeRefunded: on_wallet_event,
    OperatorBalanceSynced: on_wallet_event,  # seamless wallet: the operator's balance, posted
    AnomalyDetected: on_alert,
}
"""Audit's handler of each payload model it reads."""

_HANDLERS: Mapping[str, Handler] = {model.__name__: handler for model, handler in _ON.items()}
"""The same, by event type (a type is its model's name)."""


class Reader(NamedTuple):
    """How audit reads one contract type: its payload model's validator, its current schema version, its
    handler (``None``: validated, nothing more)."""

    validate: Callable[..., Any]
    version: int
    handler: Handler | None


_READERS: Mapping[str, Reader] = {
    t: Reader(model.__pydantic_validator__.validate_python, SCHEMA_VERSIONS[t], _HANDLERS.get(t))
    for t, model in PAYLOADS.items()
}
"""Every contract type's :class:`Reader`, looked up once per record."""

Audit.readers = _READERS
