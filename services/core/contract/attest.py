"""What every writer of a chained stream signs: ``HeadsAttested`` on ``casino.attest`` (docs/trust.md)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from services.core.contract.base import Count, Digest, Payload

__all__ = ["DEAD_LETTERS_MAX", "HEADS_MAX", "AttestedHead", "HeadsAttested"]

HEADS_MAX = 10_000
"""The most chain heads one attestation names (a batch is at most a few thousand records)."""

DEAD_LETTERS_MAX = 10_000
"""The most dead letters one attestation names (more go in the next one of the same batch)."""

Topic = Annotated[str, StringConstraints(min_length=1, max_length=249, pattern=r"^[a-z0-9._-]+$")]
Key = Annotated[str, StringConstraints(min_length=1, max_length=256)]


class AttestedHead(Payload):
    """One chain a writer's batch advanced: where it stands (its last ``seq`` and ``hash``)."""

    topic: Topic
    key: Key
    seq: Count
    hash: Digest


class HeadsAttested(Payload):
    """A writer's signed heads: every chain its batch advanced, named by ``(topic, key, seq, hash)``.

    The record's own envelope ``auth`` carries the Ed25519 signature over its ``hash`` under the writer
    principal's key (:mod:`services.core.attest`), so a regulator verifies it with the public keyring
    alone, and the hash chain of each named stream carries it back to every earlier record of that
    stream. ``writer``: the stage that wrote the chains (the record's key). ``seal``: set when the
    writer declares its output complete up to here — ``shoe_closed`` (a shoe closed), ``day_closed``
    (a gaming day ended), ``idle`` (the pipeline went idle); ``None`` for an attestation of a batch.
    ``dead_letters``: the hashes of the dead letters the writer wrote since its last attestation (they
    are unchained, so each is named; empty in an attestation written before they were)."""

    writer: Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[a-z][a-z0-9._]*$")]
    heads: Annotated[tuple[AttestedHead, ...], Field(max_length=HEADS_MAX)]
    seal: Literal["shoe_closed", "day_closed", "idle"] | None = None
    dead_letters: Annotated[tuple[Digest, ...], Field(max_length=DEAD_LETTERS_MAX)] = ()
