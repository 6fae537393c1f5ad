"""Audit per partition on Kafka (docs/adr/0011-partitioned-audit-monitor.md, docs/adr/0013).

The embedded runtime runs :class:`~services.audit.processor.Audit` whole (one process, one total order).
On Kafka its per-key work is split into two co-partitioned stages, run by as many replicas as there are
partitions, and one small stage that writes what a regulator reads:

* :class:`AuditAccounts` (``audit.accounts``) reads the account-keyed ``casino.wallet.requests`` and
  ``casino.wallet.events`` (co-partitioned: partition *p* of both to one member): hashes, wallet chains,
  payloads, postings, the boundary and the balance fold;
* :class:`AuditTables` (``audit.tables``) reads the table-keyed ``casino.table.events`` and
  ``casino.monitor.alerts`` and, through the repartition topics of the worker's hop, the records of the
  wallet topics that join a coup (``PayoutIssued``, ``StakeReserved``, ``StakeRefunded``) re-keyed by
  their table (:meth:`AuditTables.route`): the coup, payout, escrow, shoe and digest checks and the
  per-table checkpoints, with :class:`~services.audit.processor.Audit`'s own handlers;
* neither writes ``casino.audit.findings``: each stages what it derived (its findings and checkpoints,
  unsigned and unnumbered) with the heads of the chains it verified since its last staged record, as
  one ``AuditStaged`` record on ``casino.audit.staged`` (one partition);
* :class:`AuditTree` (``audit.tree``, one member: the lease, docs/adr/0007) reads them in one order,
  keeps the latest head of every chain of every partition, and writes each finding and checkpoint on
  ``casino.audit.findings`` as the whole audit would: one writer per chain, the records of today's
  format, each checkpoint with the tree head over every partition's heads (the same RFC 6962 root over
  the same sorted leaves) and signed with audit's key. A regulator's replay reads them unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

from services.core import topics
from services.core.contract import PayoutIssued, StakeRefunded, StakeReserved, Transfer
from services.core.envelope import Draft, Envelope
from services.core.processor import Processor
from services.core.signing import DEMO_SIGNING_KEY, SigningKey

from services.audit.processor import (  # isort: skip (audit's own module)
    _READERS,
    CHECKPOINT,
    CHECKPOINT_EVERY,
    Audit,
    AuditState,
    Reader,
    _check_postings,
    _read,
    _signed,
    boundary_findings,
    fold_balance,
    hold_stake,
    join_payout,
    on_wallet_event,
    tree_head,
)

STAGED = "AuditStaged"
"""The type of a stage's record for the tree stage (:data:`~services.core.topics.AUDIT_STAGED`)."""

HEADS_EVERY = 32
"""Records a stage handles, with chains advanced but nothing derived, before it stages their heads
anyway: how far behind a partition's chains the tree heads may be (deterministic per partition)."""

JOINS: frozenset[str] = frozenset({PayoutIssued.__name__, StakeReserved.__name__, StakeRefunded.__name__})
"""The records of the account-keyed wallet topics that join a coup (keyed by table for the table stage)."""


def _payout_postings(state: AuditState, rec: Envelope, p: PayoutIssued) -> list[Draft]:
    return _check_postings(rec, p.postings)


def _wallet_without_escrow(state: AuditState, rec: Envelope, p: Transfer) -> list[Draft]:
    out = _check_postings(rec, p.postings)
    out.extend(boundary_findings(rec, p))
    if not out:
        fold_balance(state, rec, p, out)
    return out


def _escrow_only(state: AuditState, rec: Envelope, p: Transfer) -> list[Draft]:
    if not _check_postings(rec, p.postings) and not boundary_findings(rec, p):
        hold_stake(state, p)
    return []


def _with(handlers: Mapping[str, Any], only: bool = False) -> dict[str, Reader]:
    readers = {} if only else dict(_READERS)
    for t, h in handlers.items():
        readers[t] = _READERS[t]._replace(handler=h)
    return readers


_ACCOUNT_READERS = _with(
    {PayoutIssued.__name__: _payout_postings}
    | {t: _wallet_without_escrow for t, r in _READERS.items() if r.handler is on_wallet_event}
)
_JOIN_READERS = _with(
    {PayoutIssued.__name__: join_payout, StakeReserved.__name__: _escrow_only,
     StakeRefunded.__name__: _escrow_only},
    only=True,
)  # fmt: skip


class _Stage(Audit):
    """A per-partition stage: :class:`Audit`'s checks of its inputs, its outputs staged for the tree
    stage (never signed nor written on ``casino.audit.findings`` here)."""

    outputs: ClassVar[tuple[str, ...]] = (topics.AUDIT_STAGED, topics.DEADLETTER)
    copartitioned: ClassVar[bool] = True
    """Its inputs are keyed alike with equal partition counts: its state is per partition number."""
    creates: ClassVar[Mapping[str, int]] = {topics.AUDIT_STAGED: 1}
    """Topics the worker creates for it, with their partition counts."""

    def __init__(self, checkpoint_every: int = CHECKPOINT_EVERY) -> None:
        super().__init__(signing=None, checkpoint_every=checkpoint_every, tree=False)

    def handle_hashed(
        self, state: AuditState, record: Envelope, expected_hash: str
    ) -> tuple[AuditState, list[Draft]]:
        """Check the record as :class:`Audit` does, then stage what it derived."""
        chain = (record.topic, record.key)
        before = state.heads.get(chain)
        state, out = self.checked(state, record, expected_hash)
        if state.heads.get(chain) != before:
            state.dirty[chain] = True
        state.unstaged += 1
        if out or (state.dirty and state.unstaged >= HEADS_EVERY):
            return state, [staged(state, record.key, out)]
        return state, []

    def checked(
        self, state: AuditState, record: Envelope, expected_hash: str
    ) -> tuple[AuditState, list[Draft]]:
        """:class:`Audit`'s checks of one record."""
        return super().handle_hashed(state, record, expected_hash)


def staged(state: AuditState, key: str, out: list[Draft]) -> Draft:
    """One ``AuditStaged`` draft: ``out`` (type, key, payload of each) and the heads of the chains
    advanced since the last one (``{"topic|key": [seq, hash]}``)."""
    heads = {f"{t}|{k}": list(state.heads[(t, k)]) for t, k in state.dirty if (t, k) in state.heads}
    state.dirty.clear()
    state.unstaged = 0
    drafts = [{"type": d.type, "key": d.key, "payload": dict(d.payload)} for d in out]
    return Draft(STAGED, topics.AUDIT_STAGED, key, {"drafts": drafts, "heads": heads}, chained=False)


class AuditAccounts(_Stage):
    """The account stage: every check of the wallet topics' records but the joins with a coup (see the
    module docstring)."""

    stage = "audit.accounts"
    inputs = (topics.WALLET_REQUESTS, topics.WALLET_EVENTS)

    def __init__(self, checkpoint_every: int = CHECKPOINT_EVERY) -> None:
        super().__init__(checkpoint_every)
        self.readers = _ACCOUNT_READERS


class AuditTables(_Stage):
    """The table stage: the table events and alerts checked as :class:`Audit` does, joined with the
    payouts and stakes the hop re-keys by table (see the module docstring)."""

    stage = "audit.tables"
    inputs = (topics.TABLE_EVENTS, topics.MONITOR_ALERTS, topics.WALLET_REQUESTS, topics.WALLET_EVENTS)
    repartitioned: ClassVar[tuple[str, ...]] = (topics.WALLET_REQUESTS, topics.WALLET_EVENTS)
    hop_dead_letters: ClassVar[bool] = False
    """The account stage reads the re-keyed topics too and dead-letters what does not decode."""

    def initial(self) -> AuditState:
        """Nothing seen; coups completed in resolution order (:attr:`AuditState.in_order`)."""
        state = super().initial()
        state.in_order = True
        return state

    def route(self, record: Envelope) -> str | None:
        """The table a wallet record joins (a payout, a stake reserved or refunded); ``None``: nothing
        to pass on (the account stage checks it all, and refuses a record that is not authentic)."""
        if record.type not in JOINS:
            return None
        guard = self.guard
        if guard is not None and guard.admit(record, check_hash=False, bind_key=False) is not None:
            return None
        table = record.payload.get("table_id")
        return table if isinstance(table, str) and table else None

    def checked(
        self, state: AuditState, record: Envelope, expected_hash: str
    ) -> tuple[AuditState, list[Draft]]:
        """A re-keyed record (its hash, payload and postings are the account stage's to check): its join
        only; any other, :class:`Audit`'s checks."""
        if record.topic not in topics.ACCOUNT_KEYED:
            return super().checked(state, record, expected_hash)
        state.completed.clear()
        state.records += 1
        reader = _JOIN_READERS.get(record.type)
        if reader is None or reader.handler is None:
            return state, []
        payload, broken = _read(reader, record)
        if broken is not None:
            return state, []
        return state, self.tally(state, reader.handler(state, record, payload))


@dataclass(slots=True)
class TreeState:
    """The tree stage's state: the latest head of every chain the stages verified, the length of each
    of audit's own chains, the tree heads written (what :func:`~services.audit.processor.tree_head`
    reads)."""

    heads: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict)
    own: dict[str, int] = field(default_factory=dict)
    trees: int = 0
    checkpointed: dict[str, int] = field(default_factory=dict)
    """Per table, the rounds of the last checkpoint written."""


class AuditTree(Processor[TreeState]):
    """The tree stage (see the module docstring): the one writer of ``casino.audit.findings`` on Kafka.

    Its records are the stages': an ``AuditStaged`` record not authentic under audit's key is refused
    by the guard before it is read."""

    name = "audit"
    stage = "audit.tree"
    inputs = (topics.AUDIT_STAGED,)
    outputs: ClassVar[tuple[str, ...]] = (topics.AUDIT_FINDINGS, topics.DEADLETTER)
    validates_inputs = False
    single: ClassVar[bool] = True
    """One member at a time: it holds the service's lease (docs/adr/0007)."""
    creates: ClassVar[Mapping[str, int]] = {topics.AUDIT_STAGED: 1}

    def __init__(self, signing: SigningKey | None = DEMO_SIGNING_KEY) -> None:
        self.signing = signing

    def cause_of(self, record: Envelope) -> Envelope:
        """The record the stage derived the staged results from: what audit's records name as their
        cause, as the whole audit's do (the hand-off is not in the log a regulator reads)."""
        return Envelope.model_construct(
            event_id=record.causation_id or record.event_id,
            hash=record.causation_hash or record.hash,
            correlation_id=record.correlation_id,
        )

    def initial(self) -> TreeState:
        """Nothing staged yet."""
        return TreeState()

    def handle(self, state: TreeState, record: Envelope) -> tuple[TreeState, list[Draft]]:
        """Take the staged heads, then write each staged finding and checkpoint (a checkpoint with the
        tree head over every chain head known, signed). A checkpoint of a table for rounds it already
        has one for is not written again (the whole audit never writes two; a stage that re-applied
        records after a restore may derive one again from another record, under another id)."""
        if record.type != STAGED:
            return state, []
        p = record.payload
        heads, drafts = p.get("heads"), p.get("drafts")
        if not isinstance(heads, Mapping) or not isinstance(drafts, list):
            return state, []
        for name, head in heads.items():
            topic, _, key = str(name).partition("|")
            if isinstance(head, list) and len(head) == 2:
                state.heads[(topic, key)] = (int(head[0]), str(head[1]))
        out: list[Draft] = []
        for d in drafts:
            payload = dict(d["payload"])
            if d["type"] == CHECKPOINT:
                table, rounds = str(d["key"]), payload.get("rounds")
                if not isinstance(rounds, int) or rounds <= state.checkpointed.get(table, 0):
                    continue  # a stage that re-applied its inputs after a restore derived it again
                state.checkpointed[table] = rounds
                payload["tree"] = tree_head(cast(AuditState, state))
            out.append(Draft(str(d["type"]), topics.AUDIT_FINDINGS, str(d["key"]), payload))
        for d in out:
            state.own[d.key] = state.own.get(d.key, 0) + 1
        if self.signing is not None:
            out = [_signed(d, self.signing) for d in out]
        return state, out
