"""Audit's signed tree heads against the log: every chain head a signed checkpoint claims must be in it.

Each ``AuditCheckpoint`` carries a tree head (:func:`services.audit.processor.tree_head`): an RFC 6962
Merkle root over the head ``(topic, key, seq, hash)`` of every chained stream audit had verified when it
signed, with the heads listed. The replay does not derive those heads (on Kafka they depend on how
audit's inputs interleave); it checks, for every validly signed tree head:

* the root and size are the tree of the heads listed (``tree_head_invalid`` otherwise);
* every head listed is in the log: the chain exists (else ``chain_deleted``), reaches that ``seq``
  (else ``chain_cut``), and its record there has that ``hash`` (else ``chain_rewritten``: the history
  under a signed head was replaced). One finding per chain, however many tree heads claim it;
* in a log read in the order it was written (a SQLite log, a JSONL export), a chain that audit read
  before signing a tree head is in that tree head (``chain_not_in_tree_head``: spliced in). Audit reads
  its inputs in log order there, so every chain with a record before the furthest record a tree head
  claims was known to audit when it signed. A Kafka log, read topic by topic, has no such order;
* that some tree head verified at all, when the log holds any chained record: if none did (every
  checkpoint removed, or a log cut before the first), nothing is proven and the verdict is at best
  ``incomplete`` (:attr:`TreeHeads.unproven`).

``--expect`` pins a tree head the regulator already holds (``casino-ledger heads``): its heads are
claims like any other, and a log that does not hold them — truncated, rolled back, or forked — is
``heads_not_extended``, as is a log whose tree head of the same number has another root, or whose tree
heads stop before the pinned one.

Memory: a reference to its hash and one index per chained record (the claimed hashes are checked
whenever the claim and the record meet, in either order), plus the claims waiting for their record.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from services.audit.replay.report import entry
from services.core.envelope import Envelope
from services.core.merkle import heads_root
from services.core.reasons import ReplayReason

Chain = tuple[str, str]
_HEX = "0123456789abcdef"
Leaf = tuple[str, str, int, str | None]


@dataclass(slots=True)
class Claim:
    """One head a tree head claims: its hash (``None``: by length), which tree head, which checkpoint."""

    hash: str | None
    n: int
    event_id: str
    pinned: bool


@dataclass(slots=True)
class _Stream:
    """A chain's records as the log holds them, in ``seq`` order from 0 (hash, log index). The hashes
    are the records' own strings, which the replay's survey holds too (a reference each, not a copy)."""

    hashes: list[str] = field(default_factory=list)
    index: array[int] = field(default_factory=lambda: array("q"))
    first_id: str = ""


def parse_tree(tree: Any) -> tuple[int, int, str, list[Leaf]] | None:
    """``(n, size, root, leaves)`` of a tree head's JSON form, leaves in tree order; ``None`` when it is
    not one (a wrong type anywhere)."""
    if not isinstance(tree, Mapping):
        return None
    n, size, root, heads = tree.get("n"), tree.get("size"), tree.get("root"), tree.get("heads")
    if type(n) is not int or type(size) is not int or not isinstance(root, str):
        return None
    if not isinstance(heads, Mapping):
        return None
    leaves: list[Leaf] = []
    for topic, chains in sorted(heads.items()):
        if not isinstance(chains, Mapping):
            return None
        for key, head in sorted(chains.items()):
            if not isinstance(head, list | tuple) or len(head) != 2:
                return None
            seq, digest = head
            if type(seq) is not int or seq < 0 or not (digest is None or isinstance(digest, str)):
                return None
            leaves.append((str(topic), str(key), seq, digest))
    return n, size, root, leaves


@dataclass(slots=True)
class TreeHeads:
    """The tree heads of one replay (see the module docstring). ``ordered``: the log is read in the order
    it was written (a SQLite log or its export; not a Kafka log read topic by topic). A signed tree head
    that claims a record not read yet proves it is not, and turns it off."""

    ordered: bool = True
    strict: bool = False
    """The source's order is the order of writing by construction (a SQLite log): a tree head ahead of
    a record it claims is then a finding, not a reason to skip the splice check."""
    streams: dict[Chain, _Stream] = field(default_factory=dict)
    odd: dict[tuple[Chain, int], tuple[str, int]] = field(default_factory=dict)
    """Records out of ``seq`` order (a tampered chain), by chain and seq: their hash and log index."""
    pending: dict[tuple[Chain, int], list[Claim]] = field(default_factory=dict)
    """Claims whose record the replay has not read yet."""
    covered: set[Chain] = field(default_factory=set)
    reach: int = -1
    """The furthest log index of a record some signed tree head claims."""
    signed: int = 0
    unproven: bool = False
    """The log holds chained records but no tree head verifies: nothing in it is proven (the verdict
    is at best ``incomplete``)."""
    latest: tuple[int, str] | None = None
    """The highest tree head number signed in the log, with its root."""
    roots: dict[int, str] = field(default_factory=dict)
    pinned: tuple[int, str] | None = None
    broken: dict[tuple[Chain, bool], dict[str, Any]] = field(default_factory=dict)
    """One finding per chain, and one more per chain for the pinned tree head (the first thing found
    wrong with it)."""
    found: list[dict[str, Any]] = field(default_factory=list)
    refused: set[str] = field(default_factory=set)
    """Ids of records a processor refused live (dead letters): an outsider's chain audit never read."""

    def on_record(self, n: int, env: Envelope, proven: bool = False) -> None:
        """A chained record of the log (``n``: its index): remember its hash; settle claims waiting.
        ``proven``: its hash is the one its content calls for (so lower-case hex: not checked again)."""
        seq = env.seq
        if seq is None:
            return
        chain = (env.topic, env.key)
        stream = self.streams.get(chain)
        if stream is None:
            stream = self.streams[chain] = _Stream(first_id=env.event_id)
        digest = env.hash
        if seq == len(stream.index) and (proven or (len(digest) == 64 and not digest.strip(_HEX))):
            stream.hashes.append(digest)
            stream.index.append(n)
        else:
            self.odd.setdefault((chain, seq), (digest, n))
        if self.pending:
            for claim in self.pending.pop((chain, seq), ()):
                self._settle(chain, seq, claim, (digest, n))

    def _record(self, chain: Chain, seq: int) -> tuple[str, int] | None:
        stream = self.streams.get(chain)
        if stream is not None and seq < len(stream.index):
            return stream.hashes[seq], stream.index[seq]
        return self.odd.get((chain, seq))

    def on_tree(self, event_id: str, key: str, tree: Any, *, pinned: bool = False) -> None:
        """A validly signed checkpoint's tree head (its event id and key); or, ``pinned``, the one
        ``--expect`` holds."""
        parsed = parse_tree(tree)
        subject = {"event_id": event_id, "key": key}
        reason = ReplayReason.HEADS_NOT_EXTENDED if pinned else ReplayReason.TREE_HEAD_INVALID
        if parsed is None:
            detail = "the signed checkpoint's tree head is not a tree head (a field of the wrong type)"
            self.found.append(entry(reason, key, subject, detail=detail))
            return
        n, size, root, leaves = parsed
        want_size, want_root = heads_root(leaves)
        if (size, root) != (want_size, want_root):
            detail = f"tree head {n}: its root and size are not the Merkle tree of the heads it lists"
            self.found.append(entry(reason, key, {**subject, "tree_head": n},
                                    {"size": want_size, "root": want_root}, {"size": size, "root": root},
                                    detail=detail))  # fmt: skip
            return
        if pinned:
            self.pinned = (n, root)
        else:
            self.signed += 1
            self.roots.setdefault(n, root)
            if self.latest is None or n > self.latest[0]:
                self.latest = (n, root)
        for topic, chain_key, seq, digest in leaves:
            chain = (topic, chain_key)
            if not pinned:
                self.covered.add(chain)
            self._claim(chain, seq, Claim(digest, n, event_id, pinned))

    def _claim(self, chain: Chain, seq: int, claim: Claim) -> None:
        record = self._record(chain, seq)
        if record is not None:
            self._settle(chain, seq, claim, record)
            return
        if not claim.pinned and self.ordered:
            self._out_of_order(chain, seq, claim)
        waiting = self.pending.setdefault((chain, seq), [])
        if not any(c.hash == claim.hash and c.pinned == claim.pinned for c in waiting):
            waiting.append(claim)

    def _out_of_order(self, chain: Chain, seq: int, claim: Claim) -> None:
        """Audit claims only records it had read, so a claim ahead of its record means the log is not in
        written order: in a SQLite log (``strict``), whose order is the order of writing, it was
        reordered (which would hide a splice); any other source was just read another way (no splice
        check then)."""
        if not self.strict:
            self.ordered = False
            return
        self.ordered = self.strict = False  # one finding
        why = (f"tree head {claim.n} comes before the record at seq {seq} it claims, in a log whose order "
               "is the order of writing: records were moved")  # fmt: skip
        subject = {
            "topic": chain[0],
            "key": chain[1],
            "seq": seq,
            "tree_head": claim.n,
            "event_id": claim.event_id,
        }
        self.found.append(entry(ReplayReason.TREE_HEAD_INVALID, chain[1], subject, detail=why))

    def _settle(self, chain: Chain, seq: int, claim: Claim, record: tuple[str, int]) -> None:
        digest, index = record
        if claim.hash is not None and digest != claim.hash:
            why = (f"the record at seq {seq} is not the one {'the pinned' if claim.pinned else 'a signed'} "
                   f"tree head {claim.n} claims: the history under it was rewritten")  # fmt: skip
            self._break(chain, seq, claim, (claim.hash, digest), why)
            return
        if not claim.pinned and index > self.reach:
            self.reach = index

    def _break(self, chain: Chain, seq: int, claim: Claim, values: tuple[Any, Any], why: str) -> None:
        if (chain, claim.pinned) in self.broken:
            return
        reason = ReplayReason.HEADS_NOT_EXTENDED if claim.pinned else ReplayReason.CHAIN_REWRITTEN
        subject = {"topic": chain[0], "key": chain[1], "seq": seq, "tree_head": claim.n,
                   "event_id": claim.event_id}  # fmt: skip
        self.broken[(chain, claim.pinned)] = entry(
            reason, chain[1], subject, values[0], values[1], detail=why
        )

    def finish(self, *, chained_records: bool) -> list[dict[str, Any]]:
        """What only the end of the log tells: claimed heads never found, chains no tree head names,
        no tree head at all, a pinned tree head the log does not extend."""
        out = list(self.found)
        for (chain, seq), claims in sorted(self.pending.items(), key=lambda kv: (kv[0][0], -kv[0][1])):
            for pinned in sorted({c.pinned for c in claims}):
                if (chain, pinned) not in self.broken:
                    self._missing(chain, seq, next(c for c in claims if c.pinned == pinned))
        out.extend(f for _, f in sorted(self.broken.items(), key=lambda kv: (kv[0][0], kv[0][1])))
        out.extend(self._spliced())
        out.extend(self._pinned_root())
        self.unproven = chained_records and not self.signed
        return out

    def _missing(self, chain: Chain, seq: int, claim: Claim) -> None:
        """A claimed head the log never held: the chain deleted, or its tail cut."""
        stream = self.streams.get(chain)
        held = -1 if stream is None else len(stream.index) - 1
        if stream is None and not any(c == chain for c, _ in self.odd):
            why, reason = "the chain is not in the log at all: deleted", ReplayReason.CHAIN_DELETED
        else:
            why, reason = f"the log's chain ends at seq {held}: its tail was cut", ReplayReason.CHAIN_CUT
        if claim.pinned:
            reason = ReplayReason.HEADS_NOT_EXTENDED
            why = f"the pinned tree head {claim.n} claims seq {seq}; " + why.replace("deleted", "rolled back")
        else:
            why = f"signed tree head {claim.n} claims seq {seq}; " + why
        subject = {
            "topic": chain[0],
            "key": chain[1],
            "seq": seq,
            "tree_head": claim.n,
            "event_id": claim.event_id,
        }
        self.broken[(chain, claim.pinned)] = entry(reason, chain[1], subject, claim.hash,
                                                   held if held >= 0 else None, detail=why)  # fmt: skip

    def _spliced(self) -> list[dict[str, Any]]:
        if not self.ordered or self.reach < 0:
            return []
        out = []
        firsts = {chain: s.index[0] for chain, s in self.streams.items() if len(s.index)}
        for (chain, _), (_, index) in self.odd.items():
            firsts[chain] = min(index, firsts.get(chain, index))
        for chain, first in sorted(firsts.items()):
            if chain in self.covered or (chain, False) in self.broken or first >= self.reach:
                continue
            stream = self.streams.get(chain)
            if stream is not None and stream.first_id in self.refused:
                continue  # refused when it was written: an attempt (reported), not a spliced chain
            why = ("audit had read this chain when it signed its tree heads, yet none names it: "
                   "spliced in after they were signed")  # fmt: skip
            subject = {"topic": chain[0], "key": chain[1], "record": first,
                       "event_id": stream.first_id if stream is not None else None}  # fmt: skip
            out.append(entry(ReplayReason.CHAIN_NOT_IN_TREE_HEAD, chain[1], subject, detail=why))
        return out

    def _pinned_root(self) -> list[dict[str, Any]]:
        if self.pinned is None:
            return []
        n, root = self.pinned
        subject = {"tree_head": n}
        if n in self.roots and self.roots[n] != root:
            why = f"the log's tree head {n} has another root than the pinned one: a forked history"
            return [entry(ReplayReason.HEADS_NOT_EXTENDED, "", subject, root, self.roots[n], detail=why)]
        if self.latest is None or self.latest[0] < n:
            last = None if self.latest is None else self.latest[0]
            why = f"the log's signed tree heads stop at {last}, before the pinned {n}: rolled back or cut"
            return [entry(ReplayReason.HEADS_NOT_EXTENDED, "", subject, n, last, detail=why)]
        return []

    def to_dict(self) -> dict[str, Any]:
        """The JSON summary: tree heads verified, the latest one, chains covered."""
        latest = None if self.latest is None else {"n": self.latest[0], "root": self.latest[1]}
        return {"signed": self.signed, "latest": latest, "chains_covered": len(self.covered),
                "unproven": self.unproven}  # fmt: skip
