"""The simulator's bus over the embedded log (:class:`EmbeddedBus`): the stages of a pipeline as runners
of one :class:`~services.runtime.embedded.store.EmbeddedLog`, advanced between the simulator's steps,
their transactions grouped across steps (group commit, docs/adr/0004-group-commit.md)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from services.core.envelope import Envelope
from services.core.processor import Processor
from services.runtime import intake
from services.runtime.embedded.runner import Runner, run_until_idle
from services.runtime.embedded.store import EmbeddedLog, Synchronous
from services.runtime.waits import Stream

LAGGING = frozenset({"audit"})
"""Consumers :meth:`EmbeddedBus.advance` lets lag: what they write no other stage reads back."""


GROUP_RECORDS = 1000
"""How many records :meth:`EmbeddedBus.advance` lets pile up in one transaction before it commits. The
time the commits take falls with their number while what a crash loses grows (it is re-derived, so
only time): 1,000 is where the curve flattens (docs/performance.md#embedded-group-commit,
docs/adr/0004-group-commit.md).
The crash tests' sessions (about 1,450 records) still commit once before their final drain."""


class EmbeddedBus:
    """The simulator's bus over the embedded log: dealer, settlement (payout, wallet), audit, monitor.

    :meth:`drain` runs every runner until idle. :meth:`advance` is what the simulator calls between
    the steps of a coup: the stages a table waits for and the monitor run until idle, while audit
    (:data:`LAGGING`) catches up only once ``lag_records`` records have piled up, in large batches.

    Why audit only, and why that changes no record: no stage reads audit's outputs back (findings and
    checkpoints; its dead letters raise no alert, the monitor alerts on the primary consumer's only),
    so every other stage appends the same records in the same order as if audit ran in lockstep. Audit
    reads its inputs in log order, which is then the same too, so it derives the very same records:
    only their offsets move (later in the log). The monitor does not lag: audit's checkpoints count the
    alerts audit has read so far, so alerts written later would change what a checkpoint claims.

    **Group commit across steps.** :meth:`advance` does not commit: its appends and every runner round
    it runs join one transaction the bus holds open, committed once ``group_records`` records have
    been added since it began (and by :meth:`publish`, :meth:`drain`, :meth:`commit` and
    :meth:`close`). The records and their order are those of a commit per step; only the commits are
    far fewer. A crash loses the steps since the last commit, never part of
    one: every commit ends a whole ``advance`` (a point where the log was committed before too), so
    what is left is a log the resumed session (which re-publishes from scratch; identical records are
    no-ops) carries on from, as after a kill between two steps. An error inside a step rolls the
    group back and reloads every runner from the log. ``group_records=0`` commits every step.

    **Event driven** (``event_driven=True``): the simulator then waits for each record it needs
    (:meth:`wait`) instead of advancing the bus after every table's turn. :meth:`publish` appends into
    the held group without running anything, and a :meth:`wait` returns a record already on the log at
    once, else runs the stages as :meth:`advance` does and looks again. So every table's turn goes out
    before the pipeline runs, and the runners read several records a batch, half as many batches
    (docs/performance.md#embedded-group-commit). The session's waits keep
    every stream's order as in lockstep (:class:`services.simulation.simulator.Session`), so every stream, the
    digest included, is the same; only the interleaving of the streams in the log differs (another
    export), the same for the same seed, run after run. Commits come at the end of a wait (once
    ``group_records`` records piled up): a crash leaves the log of a moment the session was waiting, and
    the resumed session, replayed from scratch, finds every record it waits for up to that moment and
    goes on from there as the uninterrupted one did.
    """

    def __init__(
        self,
        path: str | Path,
        runners: Sequence[tuple[str, Processor[Any]]],
        *,
        lag_records: int = 5000,
        synchronous: Synchronous | None = None,
        group_records: int = GROUP_RECORDS,
        event_driven: bool = False,
    ) -> None:
        self.log = EmbeddedLog(path, synchronous=synchronous)
        self.event_driven = event_driven
        self.runners: list[Runner[Any]] = [Runner(self.log, proc, name) for name, proc in runners]
        self._interactive = [r for r in self.runners if r.name not in LAGGING]
        self._lagging = [r for r in self.runners if r.name in LAGGING]
        self.lag_records = lag_records
        self.group_records = group_records
        self._cursors: dict[tuple[str, str], int] = {}
        self._group: AbstractContextManager[None] | None = None
        """The transaction :meth:`advance` holds open (group commit), if any."""
        self._group_from = 0
        """How many records the log had appended (:attr:`EmbeddedLog.appended`) when the group began."""
        self._waited: dict[tuple[str, str], Stream] = {}
        """Event driven: the records of every stream waited on so far, in log order, up to
        :attr:`_indexed_to` (:meth:`wait`)."""
        self._indexed_to = 0

    @contextmanager
    def _grouped(self) -> Iterator[None]:
        """Run the body inside the held transaction (begun if none is held); on an error roll the whole
        group back and reload every runner from what the log committed, then let the error go on."""
        if self._group is None:
            begun = self.log.transaction()
            begun.__enter__()
            self._group, self._group_from = begun, self.log.appended
        try:
            yield
        except BaseException as exc:
            held, self._group = self._group, None
            if held is not None:  # rolled back (and the decoded records forgotten)
                held.__exit__(type(exc), exc, exc.__traceback__)
            self._forget()
            raise

    def _forget(self) -> None:
        """After a rollback: reload every runner, and forget the records read that may be gone."""
        for runner in self.runners:
            runner.restore()
        self._waited.clear()
        self._indexed_to = 0

    def commit(self) -> None:
        """Commit the transaction :meth:`advance` holds, if any."""
        group, self._group = self._group, None
        if group is not None:
            try:
                group.__exit__(None, None, None)  # the runners' deferred writes, then COMMIT
            except BaseException:  # rolled back: reload every runner from what the log committed
                self._forget()
                raise
            self.log.checkpoint_if_due()

    def publish(self, envelopes: list[Envelope]) -> None:
        """Append outside records, committed on return (with whatever :meth:`advance` held); event
        driven, held in the group like the rest (committed by a later :meth:`wait` or :meth:`drain`)."""
        with self._grouped():
            self.log.append(envelopes)
        if not self.event_driven:
            self.commit()

    def drain(self, *, seal: bool = True) -> None:
        """Run every processor until nothing is left to do, then (``seal``) each writer's ``idle`` seal;
        commit."""
        with self._grouped():
            run_until_idle(self.runners, seal=seal)
        self.commit()

    def advance(self, envelopes: Sequence[Envelope] = ()) -> None:
        """Append ``envelopes`` and run every stage but the lagging ones until idle; the lagging ones once
        they lag by ``lag_records``. All of it in the transaction the bus holds (group commit: see the
        class docstring), committed once ``group_records`` records have piled up in it."""
        with self._grouped():
            if envelopes:
                self.log.append(envelopes)
            self._run_interactive()
        self._commit_if_due()

    def _run_interactive(self) -> None:
        """Every stage but the lagging ones until idle, the lagging ones once they lag by
        ``lag_records`` (inside the held group)."""
        run_until_idle(self._interactive)
        if self._lagging and self.log.head() - min(r.position for r in self._lagging) >= self.lag_records:
            run_until_idle(self._lagging, self.lag_records)

    def _commit_if_due(self) -> None:
        if self.log.appended - self._group_from >= self.group_records:
            self.commit()

    def read(self, topic: str, key: str) -> list[Envelope]:
        """The records on ``topic`` under ``key`` not yet returned by an earlier call."""
        found = list(self._records(topic, key, self._cursors.get((topic, key), 0)))
        if found:
            self._cursors[(topic, key)] = found[-1][0]
        return [env for _offset, env in found]

    def wait(self, topic: str, key: str, match: Callable[[Envelope], bool]) -> Envelope:
        """The first record on ``topic`` under ``key`` that ``match`` accepts (:class:`LookupError` if
        there is none once every processor is idle: nothing would write it).

        Not event driven: once every processor has run until idle. Event driven: a record already on
        the log is returned at once; else the stages run until idle (as :meth:`advance` runs them),
        then every processor."""
        if not self.event_driven:
            self.drain(seal=False)
            for _offset, env in self._records(topic, key, 0):
                if match(env):
                    return env
            raise LookupError(f"no such record on {topic} under {key}, and the processors are idle")
        stream = self._waited.get((topic, key))
        if stream is not None and (known := stream.first(match)) is not None:
            return known  # read already: nothing to run, nothing new to commit
        with self._grouped():
            found = self._find(topic, key, match)
            if found is None:
                self._run_interactive()
                found = self._find(topic, key, match)
            if found is None:
                run_until_idle(self.runners)
                found = self._find(topic, key, match)
        self._commit_if_due()
        if found is None:
            raise LookupError(f"no such record on {topic} under {key}, and the processors are idle")
        return found

    def _find(self, topic: str, key: str, match: Callable[[Envelope], bool]) -> Envelope | None:
        """The first record on the stream that ``match`` accepts among those on the log now, looking only
        at the records not looked at already (:meth:`wait` has looked at those read before it ran)."""
        stream = self._waited.get((topic, key))
        if stream is None:
            self._index()
            stream = self._waited[(topic, key)] = Stream()
            for _offset, env in self._records(topic, key, 0):
                stream.add(env)
            return stream.first(match)
        known = len(stream.records)  # every record up to here was looked at: by wait, or the last _find
        self._index()
        return stream.first(match, known) if len(stream.records) > known else None

    def _index(self) -> None:
        """Bring every stream waited on up to the log's head."""
        rows = self.log.read_after(self._indexed_to)
        if not rows:
            return
        waited = self._waited
        for offset, topic, key, raw in rows:
            stream = waited.get((topic, key))
            if stream is not None:
                try:
                    stream.add(self.log.decode(offset, raw))
                except intake.DecodeError:  # no match accepts it; its readers dead-letter it
                    continue
        self._indexed_to = rows[-1][0]

    def _records(self, topic: str, key: str, after: int) -> Iterator[tuple[int, Envelope]]:
        """The records on ``topic`` under ``key`` after offset ``after``, with their offsets, in log order
        (each decoded once for every reader: :meth:`EmbeddedLog.decode`; undecodable ones left out)."""
        while rows := self.log.read_key(topic, key, after):
            for offset, _topic, _key, raw in rows:
                try:
                    yield offset, self.log.decode(offset, raw)
                except intake.DecodeError:  # its readers dead-letter it
                    continue
            after = rows[-1][0]

    def close(self) -> None:
        """Commit what is held, leave a snapshot of every runner that applied records since its last
        (:meth:`Runner.snapshot_if_behind`: the next start re-applies little), then close the log."""
        self.commit()
        if any(runner.snapshot_due() for runner in self.runners):
            with self.log.transaction():  # one commit for all of them
                for runner in self.runners:
                    runner.snapshot_if_behind()
        self.log.close()
