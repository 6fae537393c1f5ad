"""A runner's signed heads in the embedded log (docs/trust.md, :mod:`services.core.attest`).

Each :class:`~services.runtime.embedded.runner.Runner` keeps one :class:`Attestor`: the heads its batches
advanced pile up in it (:meth:`Attestor.note`), and when
:func:`~services.runtime.embedded.runner.run_until_idle` ends with :data:`ATTEST_EVERY` chained records
or more behind them, one ``HeadsAttested`` names them (:meth:`Attestor.flush`); the pipeline going
idle flushes whatever is left and adds the writer's ``idle`` seal (:meth:`Attestor.seal`). Attesting at
the end of a run, never at a commit, keeps the log the same whatever the transactions (a bus's group
commits); one attestation per :data:`ATTEST_EVERY` records keeps its cost (a signature to make, and for
every replay one to verify) small beside the records'.

What a crash loses is only time: the chain resumes from the writer's last attestation on the log (not
from the snapshot), and a runner restarted after a last attestation that is no seal attests every head
its state holds at its first flush (naming a head again is harmless; one that a crash left unattested
is covered then).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from services.core import attest, topics
from services.core.envelope import ChainHead
from services.runtime import intake

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from services.core.envelope import Envelope
    from services.core.processor import Processor
    from services.runtime.embedded.store import EmbeddedLog


def writer_of(processor: Processor[Any]) -> str:
    """The writer name a processor attests under: its ``writer``, else its stage name."""
    return processor.writer or processor.stage_name()


ATTEST_EVERY: Final = 256
"""How many chained records a runner writes between two attestations at most, but for the last ones
before the pipeline goes idle (:meth:`Attestor.seal` attests them then)."""


class Attestor:
    """One runner's attestations (see the module docstring)."""

    __slots__ = (
        "at", "chain", "closed_shoe", "dead", "guard", "log", "pending", "records", "source", "writer",
    )  # fmt: skip

    def __init__(self, log: EmbeddedLog, processor: Processor[Any]) -> None:
        self.log = log
        self.guard = processor.guard
        self.writer = writer_of(processor)
        self.chain = attest.AttestChain(self.writer)
        self.pending: dict[tuple[str, str], ChainHead] = {}
        self.dead: list[str] = []
        """The hashes of the dead letters written since the last attestation (named in the next)."""
        self.records = 0
        self.at = ""
        self.closed_shoe = False
        self.source: Callable[[], Mapping[tuple[str, str], ChainHead]] | None = None
        """Where the heads still to attest after a crash come from (the runner's state), read when
        first needed: a runner that has nothing to apply never decodes its snapshot."""

    def resume(self, heads: Callable[[], Mapping[tuple[str, str], ChainHead]]) -> None:
        """Resume the chain from the log; unless its last attestation is a seal (which attested all
        before it), every head of ``heads()`` (the runner's state) pending, read when first needed."""
        self.pending, self.records, self.closed_shoe, self.source = {}, 0, False, None
        self.dead = []
        if self.guard is None:
            return
        raw = self.log.last_internal(topics.ATTEST, self.writer)
        self.chain = attest.AttestChain.resume(self.writer, intake.decode(raw) if raw is not None else None)
        if not (self.chain.sealed and self.chain.last_at is not None):
            self.source = heads
        self.at = self.chain.last_at or ""

    def _load(self) -> None:
        """The heads a crash may have left unattested, under what the batches since noted."""
        source, self.source = self.source, None
        if source is not None:
            held = {k: h for k, h in source().items() if k[0] != topics.ATTEST}
            self.pending = {**held, **self.pending}

    def note(self, outputs: list[tuple[Envelope, bytes]]) -> None:
        """The outputs of a batch."""
        if self.guard is None:
            return
        if self.source is not None:
            self._load()
        pending = self.pending
        for env, _ in outputs:
            if env.topic in topics.SIGNED_UNCHAINED:  # named by hash in the next attestation
                self.dead.append(env.hash)
                self.records += 1
                self.at = max(self.at, env.occurred_at)
            elif env.seq is not None and env.topic != topics.ATTEST:
                pending[(env.topic, env.key)] = ChainHead(env.seq, env.hash)
                self.records += 1
                self.at = max(self.at, env.occurred_at)
                self.closed_shoe = self.closed_shoe or env.type == "ShoeClosed"

    def flush(self, *, least: int = ATTEST_EVERY) -> None:
        """Append the attestation of what piled up (inside the open transaction) once ``least``
        chained records and dead letters or more did."""
        if self.guard is None or not (self.pending or self.dead) or self.records < least:
            return
        records = attest.attest_heads(
            self.chain, self.pending, self.guard, occurred_at=self.at, closed_shoe=self.closed_shoe,
            dead_letters=self.dead,
        )  # fmt: skip
        self.pending, self.dead, self.records, self.closed_shoe = {}, [], 0, False
        self.log.append_encoded(records, internal=True)

    def seal(self) -> None:
        """Attest everything pending, then the writer's ``idle`` seal unless its last attestation is one."""
        if self.guard is None:
            return
        if self.source is not None:
            self._load()
        with self.log.transaction():
            self.flush(least=0)
            records = attest.seal(self.chain, self.guard)
            if records:
                self.log.append_encoded(records, internal=True)
