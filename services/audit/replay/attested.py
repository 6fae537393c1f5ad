"""Which records of a log are ledger facts (docs/trust.md, issue 28): the replay's first pass.

A regulator holds public keys only. A record's MAC proves nothing to them, and a hash chain proves
nothing against whoever can rewrite the log. What they can check is the writers' signed heads
(``HeadsAttested``, :mod:`services.core.attest`): so, before the replay proper, :class:`Survey` reads
every record once, cheaply (no validation), and keeps

* each attestation whose Ed25519 signature verifies under the public key of a principal that may write
  what it names (``casino.attest`` keyed by a writer of that principal; heads only on that principal's
  own streams): the highest attested ``(seq, hash)`` of every chain, and each writer's last attestation
  (a seal or not);
* the links of every chained record: ``(seq, prev_hash, causation_hash)`` by hash, per chain.

:meth:`Survey.finish` then decides (:class:`Attested`):

* a **chained** record is a fact iff its hash is reached by walking back from its chain's attested head
  through ``prev_hash`` (the signature covers the head; the hash chain carries it back). A head the log
  does not hold, or a link missing below it, is an ``attested_head_missing`` finding: something the
  writer signed was deleted or changed;
* an **unchained** record (a request, an inbox command) is a fact iff a fact names it as its cause
  (``causation_hash``): it became one through its consumer's chained output. A fact whose cause is not
  in the log at all is a ``cause_missing`` finding;
* an attestation is a fact iff its signature verifies.

Everything else is **unattested**: an outsider's record, a refused command, a record after the last
signed head. The replay counts it (with its first ids) and does not apply it: it moves no balance and
finds nothing. Where the chain's writer is not sealed (its last attestation is not a seal, or it has
none), such records are the log's unattested **tail** and the verdict is ``incomplete``; where it is
sealed, its writer declared its output complete before them: they are not its, only noise beside the
ledger. A log with no valid signature at all is never ``clean``.

Memory: each record's hash (and its chain links), not the record.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Final

import orjson

from services.core import topics
from services.core.reasons import ReplayReason
from services.core.trust import Principal, key_fingerprint, verify_signature, writer_principal

WRITER_OF_TOPIC: Final[Mapping[str, Principal]] = {
    topics.TABLE_EVENTS: Principal.DEALER,
    topics.WALLET_EVENTS: Principal.SETTLEMENT,
    topics.AUDIT_FINDINGS: Principal.AUDIT,
    topics.MONITOR_ALERTS: Principal.MONITOR,
}
"""The one principal whose signed heads may cover each chained stream."""

CONSUMER_OF_TOPIC: Final[Mapping[str, Principal]] = {
    topics.WALLET_REQUESTS: Principal.SETTLEMENT,
    topics.TABLE_INBOX: Principal.DEALER,
}
"""The principal whose chained output makes a request of each request topic a fact."""


class Standing(Enum):
    """Where a record stands while the log is still being written (:meth:`Attested.standing`): a
    decision the read model acts on, never a code written to a record or a report (so not a StrEnum of
    the vocabulary)."""

    FACT = "fact"
    """A signed head of its expected writer covers it (or a fact names it as its cause)."""
    PENDING = "pending"
    """Not yet covered, and it may still be: its writer (or consumer) has not sealed since it."""
    NEVER = "never"
    """Not covered, and it never will be: its chain moved past it under signature, its writer sealed
    after it, the pipeline went idle after it (an ``idle`` seal of its principal, or of its consumer's),
    or a processor refused it. Unattested noise."""


FIRST_IDS: Final = 20
"""Ids listed per kind of unattested record (more are counted)."""


def short(record_hash: object) -> str | None:
    """A record hash as the survey keeps it: the 64-character string itself (the one the parser made:
    kept, not copied), ``None`` for anything else."""
    return record_hash if type(record_hash) is str and len(record_hash) == 64 else None


@dataclass(frozen=True, slots=True)
class WriterKey:
    """A principal's Ed25519 public key, by key id (from the public keyring's ``principals``)."""

    principal: Principal
    public_hex: str

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the raw public key, hex."""
        return key_fingerprint(self.public_hex)


def writer_keys(doc: Any) -> dict[str, WriterKey]:
    """Key id → :class:`WriterKey` from a public keyring document's ``principals`` (and ``retired``);
    empty when it has none (a public keyring written before principals signed their heads)."""
    out: dict[str, WriterKey] = {}
    if not isinstance(doc, Mapping):
        return out
    entries: list[tuple[str, Any]] = list((doc.get("principals") or {}).items())
    entries += [
        (str(e.get("principal")), e) for e in (doc.get("retired") or {}).values() if isinstance(e, Mapping)
    ]
    for name, entry in entries:
        if not isinstance(entry, Mapping):
            continue
        key_id, public = entry.get("key_id"), entry.get("ed25519")
        try:
            principal = Principal(name)
            bytes.fromhex(str(public))
        except ValueError:
            continue
        if isinstance(key_id, str) and isinstance(public, str) and len(public) == 64:
            out[key_id] = WriterKey(principal, public)
    return out


@dataclass(slots=True)
class _Writer:
    seq: int = -1
    sealed: bool = False
    key_id: str = ""
    event_id: str = ""


@dataclass(slots=True)
class Survey:
    """The first pass (see the module docstring): :meth:`add` every record, then :meth:`finish`."""

    keys: Mapping[str, WriterKey]
    heads: dict[tuple[str, str], tuple[int, str, str]] = field(default_factory=dict)
    """Chain → the highest attested ``(seq, hash, event id of the attestation)``."""
    links: dict[tuple[str, str], dict[str, tuple[int, str | None, str | None, str]]] = field(
        default_factory=dict
    )
    """Chain → record hash → ``(seq, prev hash, cause hash, cause id)``."""
    hashes: set[str] = field(default_factory=set)
    """Every record's hash (what a fact's cause must be one of)."""
    signed: set[str] = field(default_factory=set)
    """The hashes of the attestations whose signature verifies."""
    writers: dict[str, _Writer] = field(default_factory=dict)
    requests: list[tuple[str, str | None, str | None, int, str]] = field(default_factory=list)
    """Every unchained record but dead letters: ``(hash, causation_hash, event_id, position, topic)``."""
    refused: set[str] = field(default_factory=set)
    """The event ids dead letters name (records a processor refused)."""
    bad: list[str] = field(default_factory=list)
    bad_count: int = 0
    at: int = 0
    """The position of the record being noted (its log offset, or how many were noted before it)."""
    sealed_at: dict[str, int] = field(default_factory=dict)
    """Writer → the position of its latest valid seal."""
    idle_at: dict[str, int] = field(default_factory=dict)
    """Writer → the position of its latest valid ``idle`` seal (the pipeline went idle: every writer
    attested all it wrote, in the same transaction, so this one speaks for its principal's other
    writers too; a ``day_closed`` or ``shoe_closed`` seal speaks for its writer only)."""
    chain_writer: dict[tuple[str, str], str] = field(default_factory=dict)
    """Chain → the writer whose signed head last named it."""
    dead: set[str] = field(default_factory=set)
    """The hashes of the dead letters in the log."""
    dead_signed: dict[str, str] = field(default_factory=dict)
    """The hash of each dead letter a valid signed head names → the event id of the first that does."""
    raised: set[tuple[str, str]] = field(default_factory=set)
    """The chains whose attested head rose since a reader last cleared this (the one-pass replay's
    frontier: :mod:`services.audit.replay.onepass`)."""

    def add(self, raw: bytes | str | Any, at: int | None = None) -> None:
        """Note one record (bytes or an envelope) at position ``at`` (default: the next one); anything
        that is not a JSON object is skipped."""
        self.at = self.at + 1 if at is None else at
        if type(raw) is bytes and _unchained(raw) and not raw.endswith(_DEAD):  # a request: three fields
            i = raw.find(b',"hash":"')
            if i > 0:
                found = raw[i + 9 : i + 73].decode("ascii", "replace")
                self.hashes.add(found)
                self.requests.append((
                    found, _string_after(raw, b'"causation_hash":"'), _string_after(raw, b',"event_id":"'),
                    self.at, _topic_of(raw),
                ))  # fmt: skip
                return
        if isinstance(raw, bytes | str):
            try:
                rec = orjson.loads(raw)
            except orjson.JSONDecodeError:
                return
        else:  # an envelope
            rec = raw.__dict__
        if isinstance(rec, dict):
            self.note(rec)

    def note(self, rec: Mapping[str, Any], at: int | None = None) -> None:
        """Note one record read as a JSON object (an envelope's fields, or the parsed bytes) at position
        ``at`` (default: the one :meth:`add` set). The replay calls this once per record: kept lean
        (:func:`short` written out)."""
        if at is not None:
            self.at = at
        get = rec.get
        h = get("hash")
        if type(h) is not str or len(h) != 64:
            return
        self.hashes.add(h)
        topic, seq = get("topic"), get("seq")
        if seq is None:
            if topic in topics.SIGNED_UNCHAINED:  # a dead letter or a hand-off: its writer names it
                self.dead.add(h)
                payload = get("payload")
                refused = payload.get("original_event_id") if isinstance(payload, Mapping) else None
                if isinstance(refused, str):
                    self.refused.add(refused)
            elif topic != topics.ATTEST:
                cause = get("causation_hash")
                self.requests.append(
                    (h, cause if type(cause) is str else None, str(get("event_id")), self.at, str(topic))
                )
            return
        key = get("key")
        if type(seq) is not int or type(key) is not str:
            return
        if topic not in WRITER_OF_TOPIC and topic != topics.ATTEST:
            return
        links = self.links
        chain = links.get((topic, key))  # type: ignore[arg-type]
        if chain is None:
            chain = links[(topic, key)] = {}  # type: ignore[index]
        if h not in chain:
            prev, cause = get("prev_hash"), get("causation_hash")
            chain[h] = (
                seq,
                prev if type(prev) is str and len(prev) == 64 else None,
                cause if type(cause) is str and len(cause) == 64 else None,
                str(get("causation_id") or ""),
            )
        if topic == topics.ATTEST:
            self._attestation(rec, h, key, seq)

    def _attestation(self, rec: Mapping[str, Any], h: str, writer: str, seq: int) -> None:
        auth, payload = rec.get("auth"), rec.get("payload")
        principal = writer_principal(writer)
        ok = (
            isinstance(auth, Mapping) and isinstance(payload, Mapping) and rec.get("type") == "HeadsAttested"
            and principal is not None and payload.get("writer") == writer
        )  # fmt: skip
        key = self.keys.get(str(auth.get("key_id"))) if ok and isinstance(auth, Mapping) else None
        sig = auth.get("sig") if isinstance(auth, Mapping) else None
        record_hash = str(rec.get("hash"))
        if (
            key is None or key.principal is not principal or not isinstance(sig, str)
            or not verify_signature(key.public_hex, record_hash, sig)
        ):  # fmt: skip
            self.bad_count += 1
            if len(self.bad) < FIRST_IDS:
                self.bad.append(str(rec.get("event_id"))[:80])
            return
        self.signed.add(h)
        assert isinstance(payload, Mapping) and isinstance(auth, Mapping)
        w = self.writers.setdefault(writer, _Writer())
        if payload.get("seal") is not None:
            self.sealed_at[writer] = max(self.at, self.sealed_at.get(writer, -1))
            if payload.get("seal") == "idle":
                self.idle_at[writer] = max(self.at, self.idle_at.get(writer, -1))
        if seq > w.seq:
            w.seq, w.sealed, w.key_id, w.event_id = (
                seq,
                payload.get("seal") is not None,
                str(auth["key_id"]),
                str(rec.get("event_id")),
            )
        for dead in payload.get("dead_letters") or ():
            if short(dead) is not None:
                self.dead_signed.setdefault(dead, str(rec.get("event_id")))
        for head in payload.get("heads") or ():
            if not isinstance(head, Mapping) or WRITER_OF_TOPIC.get(str(head.get("topic"))) is not principal:
                continue
            chain = (str(head.get("topic")), str(head.get("key")))
            self.chain_writer[chain] = writer
            hseq, hhash = head.get("seq"), head.get("hash")
            if type(hseq) is int and isinstance(hhash, str) and hseq > self.heads.get(chain, (-1, "", ""))[0]:
                self.heads[chain] = (hseq, hhash, str(rec.get("event_id")))
                self.raised.add(chain)

    def read_by_consumer(self, topic: str, at: int) -> bool:
        """Whether a writer of the principal that consumes ``topic`` wrote an ``idle`` seal after position
        ``at``: the pipeline went idle after it, so it read the request, and would have refused it had
        it not been its own derivation. An outsider's request
        naming a real fact as its cause, appended after the pipeline last ran, is read by no one."""
        consumer = CONSUMER_OF_TOPIC.get(topic)
        return consumer is not None and any(
            seal > at for w, seal in self.idle_at.items() if writer_principal(w) is consumer
        )

    def _dead_letters(self, facts: set[str]) -> list[dict[str, Any]]:
        """The dead letters a signed head names: facts where the log holds them, else a finding each
        (deleted, or changed: a changed one has another hash)."""
        out = []
        for h, attestation in self.dead_signed.items():
            if h in self.dead:
                facts.add(h)
                continue
            out.append({
                "reason": ReplayReason.ATTESTED_HEAD_MISSING.value, "severity": "critical", "table_id": "",
                "subject": {"topic": topics.DEADLETTER, "attestation": attestation}, "expected": h,
                "recorded": None,
                "detail": "a dead letter its writer signed is not in the log: deleted or changed",
            })  # fmt: skip
        return out

    def finish(self) -> Attested:
        """Which records are facts, and what the signed heads say about the log (module docstring)."""
        facts: set[str] = set(self.signed)
        unverified: set[str] = set()
        findings: list[dict[str, Any]] = []
        for chain, (seq, head_hash, attestation) in sorted(self.heads.items()):
            links = self.links.get(chain, {})
            findings += _walk(chain, seq, head_hash, attestation, links, facts, unverified)
        findings += self._dead_letters(facts)
        consumed: set[str] = set()
        changed_causes: set[str] = set()
        for (topic, key), chain_links in sorted(self.links.items()):
            for h, (seq, _prev, cause, cause_id) in chain_links.items():
                if h not in facts or cause is None:
                    continue
                consumed.add(cause)
                if cause not in self.hashes:
                    findings.append(_missing_cause(topic, key, seq, cause))
                    changed_causes.add(cause_id)
        for h, cause, event_id, at, topic in self.requests:  # what a processor derived from a fact and
            if (  # queued (a seamless call behind another): no chained record names it, its cause is a
                h not in consumed and cause in facts and event_id not in self.refused  # fact, and its
                and self.read_by_consumer(topic, at)  # consumer went idle after it (it read it)
            ):  # fmt: skip
                consumed.add(h)
        sealed = {
            p for p in Principal
            if (mine := [w for name, w in self.writers.items() if writer_principal(name) is p])
            and all(w.sealed for w in mine)
        }  # fmt: skip
        return Attested(
            facts, consumed, findings, self, frozenset(sealed), changed_causes, unverified=unverified
        )


_DEAD: Final = b',"topic":"casino.deadletter","type":"DeadLetter"}'
"""How a dead letter in the log's canonical JSON ends."""


def _string_after(raw: bytes, marker: bytes) -> str | None:
    """The JSON string right after the first ``marker`` (``None`` without one)."""
    i = raw.find(marker)
    if i < 0:
        return None
    start = i + len(marker)
    end = raw.find(b'"', start)
    return raw[start:end].decode("utf-8", "replace") if end > 0 else None


_UNCHAINED: Final = tuple(
    f',"topic":"{t}","type":'.encode()
    for t in (topics.WALLET_REQUESTS, topics.TABLE_INBOX, topics.DEADLETTER)
)


def _topic_of(raw: bytes) -> str:
    """The topic of a record in the log's canonical JSON (``topic`` its last field but ``type``)."""
    i = raw.rfind(b',"topic":"')
    end = raw.find(b'"', i + 10)
    return raw[i + 10 : end].decode("utf-8", "replace") if i > 0 and end > 0 else ""


def _unchained(raw: bytes) -> bool:
    """Whether ``raw``, in the log's canonical JSON (``topic`` and ``type`` its last two fields), is a
    record of a request topic or a dead letter. Read wrong for a crafted record, it costs nothing: the
    replay checks every cause a fact names was read (:meth:`Attested.unread_causes`)."""
    i = raw.rfind(b',"topic":"')
    return i > 0 and raw.startswith(_UNCHAINED, i)


def _walk(  # noqa: PLR0917 (a signed head's fields, once)
    chain: tuple[str, str],
    seq: int,
    head_hash: str,
    attestation: str,
    links: Mapping[str, tuple[int, str | None, str | None, str]],
    facts: set[str],
    unverified: set[str],
) -> list[dict[str, Any]]:
    """Mark the records reached back from a signed head; where the walk breaks, a finding, and every
    record of the chain up to the signed ``seq`` is judged as a fact all the same, so that the replay
    names what was changed in them (an authentic log never breaks here: noise cannot reach this); those
    the walk did not reach go in ``unverified`` too (what moves money elsewhere leaves them out)."""
    cur, want = short(head_hash), seq
    while cur is not None and want >= 0:
        link = links.get(cur)
        if link is None or link[0] != want:
            topic, key = chain
            judged = [h for h, other in links.items() if other[0] <= seq]
            unverified.update(h for h in judged if h not in facts)
            facts.update(judged)
            what = "the signed head" if want == seq else f"the record at seq {want} below the signed head"
            return [{
                "reason": ReplayReason.ATTESTED_HEAD_MISSING.value, "severity": "critical", "table_id": key,
                "subject": {"topic": topic, "key": key, "seq": want, "attestation": attestation},
                "expected": {"seq": seq, "hash": head_hash}, "recorded": None,
                "detail": f"{what} of {topic}/{key} is not in the log: signed records deleted or changed",
            }]  # fmt: skip
        facts.add(cur)
        cur, want = link[1], want - 1
    return []


def _missing_cause(topic: str, key: str, seq: int, cause: str) -> dict[str, Any]:
    return {
        "reason": ReplayReason.CAUSE_MISSING.value, "severity": "critical", "table_id": key,
        "subject": {"topic": topic, "key": key, "seq": seq}, "expected": cause, "recorded": None,
        "detail": "an attested record names a cause (causation_hash) the log does not hold: deleted, changed",
    }  # fmt: skip


@dataclass(slots=True)
class Attested:
    """The first pass's verdict on each record (:meth:`admit`) and what the report says of it."""

    facts: set[str]
    consumed: set[str]
    findings: list[dict[str, Any]]
    survey: Survey
    sealed: frozenset[Principal]
    changed_causes: set[str] = field(default_factory=set)
    """The ids of causes a fact names by a hash the log does not hold (a ``cause_missing`` finding): a
    record under such an id is judged as a fact, so that the replay names what was changed in it."""
    read_causes: set[str] = field(default_factory=set)
    """The causes of facts the replay read (what :meth:`unread_causes` compares with)."""
    unattested: int = 0
    tail: int = 0
    first_ids: list[str] = field(default_factory=list)
    tail_ids: list[str] = field(default_factory=list)
    by_topic: dict[str, int] = field(default_factory=dict)
    unverified: set[str] = field(default_factory=set)
    """Records judged as facts below a broken walk (:func:`_walk`) but reached from no signed head."""

    def standing(  # noqa: PLR0917 (a record's identity, once)
        self, topic: str, key: str, seq: int | None, record_hash: str, event_id: str, at: int
    ) -> Standing:
        """Where the record at position ``at`` stands, for a reader that applies facts as the log grows
        (the back office's read model): :class:`Standing`. Stricter than :meth:`admit`, which judges
        everything a signed head claims so that the replay can name what was changed: a record below a
        broken walk is no fact here. Pure: the same survey and record give the same answer."""
        h = short(record_hash)
        if h is not None and (h in self.consumed or (h in self.facts and h not in self.unverified)):
            return Standing.FACT
        s = self.survey
        principal = WRITER_OF_TOPIC.get(topic)
        if principal is not None and type(seq) is int:
            head = s.heads.get((topic, key))
            if head is not None and seq <= head[0]:
                return Standing.NEVER  # its chain moved past it under signature, without it
            writer = s.chain_writer.get((topic, key))
        else:
            principal = CONSUMER_OF_TOPIC.get(topic)
            if principal is None or event_id in s.refused:
                return Standing.NEVER
            writer = None
        if writer is not None and s.sealed_at.get(writer, -1) > at:
            return Standing.NEVER  # its writer declared all it wrote before covered
        if any(seal > at for w, seal in s.idle_at.items() if writer_principal(w) is principal):
            return Standing.NEVER  # the pipeline went idle after it: every writer (reader) covered all
        return Standing.PENDING

    def admit(self, topic: str, record_hash: str, event_id: str) -> bool:
        """Whether the record is a fact; if not, count it (unattested, and tail where its writer is not
        sealed)."""
        h = short(record_hash)
        if h is not None and h in self.consumed:
            self.read_causes.add(h)
            return True
        if h is not None and h in self.facts:
            return True
        if event_id in self.changed_causes:
            return True
        self.unattested += 1
        self.by_topic[topic] = self.by_topic.get(topic, 0) + 1
        if len(self.first_ids) < FIRST_IDS:
            self.first_ids.append(event_id[:80])
        principal = WRITER_OF_TOPIC.get(topic)
        if principal is not None and principal not in self.sealed:
            self.tail += 1
            if len(self.tail_ids) < FIRST_IDS:
                self.tail_ids.append(event_id[:80])
        return False

    def unread_causes(self) -> list[dict[str, Any]]:
        """A finding for each cause a fact names that the survey found in the log but the replay never
        read as a record (bytes that look like one thing to a quick look and another to the parser)."""
        reported = {f["expected"] for f in self.findings if f["reason"] == ReplayReason.CAUSE_MISSING.value}
        return [
            {"reason": ReplayReason.CAUSE_MISSING.value, "severity": "critical", "table_id": "",
             "subject": {"causation_hash": h}, "expected": h, "recorded": None,
             "detail": "an attested record names a cause the replay could not read as a record"}
            for h in sorted(self.consumed - self.read_causes - reported)
        ]  # fmt: skip

    def undecodable(self, n: int) -> None:
        """A record that is no envelope: unattested (no signed head can name it)."""
        self.unattested += 1
        self.by_topic["(undecodable)"] = self.by_topic.get("(undecodable)", 0) + 1
        if len(self.first_ids) < FIRST_IDS:
            self.first_ids.append(f"record {n}")

    def incomplete(self) -> list[str]:
        """Why the verdict cannot be ``clean`` although nothing disagrees (empty: it can)."""
        s = self.survey
        why = []
        if not s.signed:
            why.append("no valid signature: nothing in this log is attested under the keys given")
        open_writers = sorted(name for name, w in s.writers.items() if not w.sealed)
        if open_writers:
            why.append(
                f"not sealed at the end: {', '.join(open_writers)} (attested up to their last signed head)"
            )
        if self.tail:
            why.append(f"{self.tail} chained record(s) after the last signed head of their writer")
        return why

    def to_dict(self) -> dict[str, Any]:
        """The report's ``attestation`` section."""
        s = self.survey
        writers = {}
        for name, w in sorted(s.writers.items()):
            key = s.keys.get(w.key_id)
            writers[name] = {
                "last_seq": w.seq, "sealed": w.sealed, "last_event_id": w.event_id, "key_id": w.key_id,
                "fingerprint": key.fingerprint[:16] if key is not None else None,
            }  # fmt: skip
        return {
            "signed_heads": len(s.signed),
            "invalid_signatures": {"count": s.bad_count, "ids": list(s.bad)},
            "writers": writers,
            "unattested": {
                "count": self.unattested,
                "first_ids": list(self.first_ids),
                "by_topic": dict(self.by_topic),
            },
            "tail": {"count": self.tail, "first_ids": list(self.tail_ids)},
            "incomplete": self.incomplete(),
        }


def survey(records: Iterable[Any], keys: Mapping[str, WriterKey]) -> Attested:
    """:class:`Survey` over ``records`` (in any order), finished."""
    s = Survey(keys)
    add = s.add
    for raw in records:
        add(raw)
    return s.finish()
