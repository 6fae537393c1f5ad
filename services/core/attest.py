"""Signed heads (docs/trust.md): every writer of a chained stream signs, once per batch, where the chains
its batch advanced stand, so that a regulator holding only public keys can tell its records from anyone
else's.

A record's MAC (:mod:`services.core.trust`) proves its writer only to whoever holds the writer's secret;
a hash chain proves order and integrity only against someone who cannot recompute it, and anyone with
write access to the log can. So after each batch that advanced some of its chains, a writer (a stage:
``dealer``, ``settlement.wallet``, ``audit``, ``monitor``, ``monitor.accounts``) emits one
``HeadsAttested`` record on ``casino.attest``, keyed by itself, naming each advanced chain's ``(topic,
key, seq, hash)``, its ``auth`` the Ed25519 signature of its own ``hash`` under the writer principal's
key (``{"key_id", "sig"}``). The record is itself chained (``seq``, ``prev_hash`` on its key), so its
chain is one more stream audit's checkpoints cover. The hash chain of each named stream carries the
signature back to every earlier record of that stream: one signature per batch, not per record.

**Seals.** An attestation with ``seal`` set declares the writer's output complete up to it: when a shoe
closes (``shoe_closed``, on the batch's own attestation), when a gaming day ends (``day_closed``: an
empty seal right after the last attestation of the day, before the first of the next) and when the
pipeline goes idle (``idle``: an empty seal after the writer's last attestation). A writer whose last
attestation is a seal has written nothing its attestations do not cover: what follows on its chains is
not its (:mod:`services.audit.replay.attested`).

Pure: the shells (the embedded runner, the Kafka worker) call :func:`attest_batch` once per batch and
:func:`seal` when idle; the writer's :class:`AttestChain` (where its attestation chain stands) is theirs
to keep. Ed25519 signatures are deterministic (RFC 8032): the same batch gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from services.core import topics
from services.core.contract.attest import DEAD_LETTERS_MAX, HEADS_MAX
from services.core.envelope import ChainHead, Draft, Envelope, derive_id, seal_encoded, stage_namespace
from services.core.trust import Guard

ATTESTATION: Final = "HeadsAttested"
"""The type of a signed-heads record."""

Seal = Literal["shoe_closed", "day_closed", "idle"]

_NAMESPACE: Final = stage_namespace("attest")
"""The uuid5 namespace of attestation ids (``derive_id(f"{writer}/{prev_hash}", seq)``: one id per
place in a writer's attestation chain)."""


def gaming_day(occurred_at: str) -> str:
    """The gaming day of an instant: its UTC date (``YYYY-MM-DD``)."""
    return occurred_at[:10]


@dataclass(slots=True)
class AttestChain:
    """Where one writer's attestation chain stands: its head, the time and id of its last attestation,
    and whether that one was a seal (a writer that has attested nothing has nothing to seal)."""

    writer: str
    head: ChainHead | None = None
    last_at: str | None = None
    sealed: bool = True

    @classmethod
    def resume(cls, writer: str, last: Envelope | None) -> AttestChain:
        """The chain of ``writer`` after ``last``, its latest attestation on the log (``None``: none)."""
        if last is None:
            return cls(writer)
        return cls(
            writer,
            ChainHead(last.seq or 0, last.hash),
            last.occurred_at,
            last.payload.get("seal") is not None,
        )


def advanced_heads(outputs: Iterable[Envelope]) -> dict[tuple[str, str], ChainHead]:
    """The last head of every chain ``outputs`` advanced (attestations left out: they chain themselves)."""
    heads: dict[tuple[str, str], ChainHead] = {}
    streams = topics.EVENT_STREAMS
    for env in outputs:
        seq = env.seq
        if seq is not None and env.topic in streams and env.topic != topics.ATTEST:
            heads[(env.topic, env.key)] = ChainHead(seq, env.hash)
    return heads


def attestation(
    chain: AttestChain,
    heads: Mapping[tuple[str, str], ChainHead],
    guard: Guard,
    *,
    occurred_at: str,
    seal: Seal | None = None,
    dead_letters: Sequence[str] = (),
) -> list[tuple[Envelope, bytes]]:
    """The signed records naming ``heads`` and the hashes of ``dead_letters`` (one record, or one per
    :data:`HEADS_MAX` heads or :data:`DEAD_LETTERS_MAX` dead letters; the last carries ``seal``), with
    their bytes; ``chain`` advanced past them."""
    named = [{"topic": t, "key": k, "seq": h.seq, "hash": h.hash} for (t, k), h in sorted(heads.items())]
    parts = [named[i : i + HEADS_MAX] for i in range(0, len(named), HEADS_MAX)] or [[]]
    step = DEAD_LETTERS_MAX
    dead = [list(dead_letters[i : i + step]) for i in range(0, len(dead_letters), step)]
    count = max(len(parts), len(dead))
    out = []
    for n in range(count):
        payload: dict[str, Any] = {
            "writer": chain.writer,
            "heads": parts[n] if n < len(parts) else [],
            "seal": seal if n == count - 1 else None,
            "dead_letters": dead[n] if n < len(dead) else [],
        }
        head = chain.head
        seq = head.seq + 1 if head else 0
        env, raw = seal_encoded(
            Draft(ATTESTATION, topics.ATTEST, chain.writer, payload),
            event_id=derive_id(f"{chain.writer}/{head.hash if head else ''}", seq, _NAMESPACE),
            occurred_at=occurred_at,
            producer=guard.own.principal.value,
            cause=None,
            head=head,
            auth_for=guard.signed_auth_for,
        )
        chain.head, chain.last_at, chain.sealed = (
            ChainHead(seq, env.hash),
            occurred_at,
            payload["seal"] is not None,
        )
        out.append((env, raw))
    return out


def attest_batch(
    chain: AttestChain,
    outputs: Iterable[Envelope],
    guard: Guard,
    *,
    day_of: Callable[[str], str] = gaming_day,
) -> list[tuple[Envelope, bytes]]:
    """What a writer appends after a batch that wrote ``outputs``: nothing when no chain advanced and
    no dead letter was written; else :func:`attest_heads` of the heads they advanced and the dead
    letters among them (sealed ``shoe_closed`` when one closed a shoe)."""
    outputs = list(outputs)
    heads = advanced_heads(outputs)
    dead = dead_letters_of(outputs)
    if not heads and not dead:
        return []
    at = max(env.occurred_at for env in outputs)
    closed = any(env.type == "ShoeClosed" for env in outputs)
    return attest_heads(
        chain, heads, guard, occurred_at=at, closed_shoe=closed, day_of=day_of, dead_letters=dead
    )


def dead_letters_of(outputs: Iterable[Envelope]) -> list[str]:
    """The hashes of the dead letters among ``outputs``, in order (what an attestation names of them)."""
    return [env.hash for env in outputs if env.topic in topics.SIGNED_UNCHAINED]


def attest_heads(
    chain: AttestChain,
    heads: Mapping[tuple[str, str], ChainHead],
    guard: Guard,
    *,
    occurred_at: str,
    closed_shoe: bool = False,
    day_of: Callable[[str], str] = gaming_day,
    dead_letters: Sequence[str] = (),
) -> list[tuple[Envelope, bytes]]:
    """The attestation of ``heads`` and ``dead_letters`` (written up to ``occurred_at``): a
    ``day_closed`` seal first when they are of a later gaming day than the writer's last attestation,
    then the heads and the dead letters' hashes, sealed ``shoe_closed`` when the batch closed a shoe."""
    if not heads and not dead_letters:
        return []
    out: list[tuple[Envelope, bytes]] = []
    if chain.last_at is not None and not chain.sealed and day_of(chain.last_at) < day_of(occurred_at):
        out += attestation(chain, {}, guard, occurred_at=chain.last_at, seal="day_closed")
    at = max(occurred_at, chain.last_at or "")
    out += attestation(
        chain, heads, guard, occurred_at=at, seal="shoe_closed" if closed_shoe else None,
        dead_letters=dead_letters,
    )  # fmt: skip
    return out


def seal(chain: AttestChain, guard: Guard, reason: Seal = "idle") -> list[tuple[Envelope, bytes]]:
    """An empty seal after the writer's last attestation, or nothing when that one already is a seal."""
    if chain.sealed or chain.last_at is None:
        return []
    return attestation(chain, {}, guard, occurred_at=chain.last_at, seal=reason)
