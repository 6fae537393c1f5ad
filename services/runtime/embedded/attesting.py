"""A runner's signed heads in the embedded log (docs/trust.md, :mod:`services.core.attest`).

Each :class:`~services.runtime.embedded.log.Runner` keeps one :class:`Attestor`: the chained outputs of
its batches pile up in it (:meth:`Attestor.note`), and when
:func:`~services.runtime.embedded.log.run_until_idle` ends (and, for batches stepped by hand, at the
latest just before their transaction commits), one
``HeadsAttested`` names the heads they advanced (:meth:`Attestor.flush`), in the same transaction as
the outputs, so a committed record is never left unattested by a crash. :meth:`Attestor.seal` adds the
writer's ``idle`` seal when the pipeline goes idle.

After a restart the runner re-applies the records between its snapshot and its committed offset: their
outputs are on the log and were attested when first written, so they are not attested again (an
attestation re-made over other batch boundaries would be another record under the same place in the
attestation chain); the chain resumes from the writer's last attestation on the log, not from the
snapshot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from services.core import attest, topics
from services.runtime import intake

if TYPE_CHECKING:
    from services.core.envelope import Envelope
    from services.core.processor import Processor
    from services.runtime.embedded.log import EmbeddedLog


def writer_of(processor: Processor[Any]) -> str:
    """The writer name a processor attests under: its ``writer``, else its stage name."""
    return processor.writer or processor.stage_name()


class Attestor:
    """One runner's attestations (see the module docstring)."""

    __slots__ = ("after", "chain", "guard", "log", "pending", "writer")

    def __init__(self, log: EmbeddedLog, processor: Processor[Any]) -> None:
        self.log = log
        self.guard = processor.guard
        self.writer = writer_of(processor)
        self.chain = attest.AttestChain(self.writer)
        self.pending: list[Envelope] = []
        self.after = 0

    def resume(self, committed: int) -> None:
        """Forget what was pending; resume the chain from the log; attest only what follows
        ``committed`` (the records before it were attested when first applied)."""
        self.pending = []
        self.after = committed
        if self.guard is None:
            return
        raw = self.log.last_internal(topics.ATTEST, self.writer)
        self.chain = attest.AttestChain.resume(self.writer, intake.decode(raw) if raw is not None else None)

    def note(self, last_offset: int, outputs: list[tuple[Envelope, bytes]]) -> None:
        """The outputs of a batch whose last input is at ``last_offset``."""
        if self.guard is not None and last_offset > self.after:
            self.pending.extend(env for env, _ in outputs if env.seq is not None)

    def flush(self) -> None:
        """Append the attestation of what piled up (inside the open transaction), if anything did."""
        if self.pending and self.guard is not None:
            records = attest.attest_batch(self.chain, self.pending, self.guard)
            self.pending = []
            if records:
                self.log.append_encoded(records, internal=True)

    def seal(self) -> None:
        """:meth:`flush`, then the writer's ``idle`` seal unless its last attestation is one."""
        if self.guard is None:
            return
        with self.log.transaction():
            self.flush()
            records = attest.seal(self.chain, self.guard)
            if records:
                self.log.append_encoded(records, internal=True)
