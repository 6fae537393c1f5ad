"""The records a bus has read for the simulator's waits, one :class:`Stream` per topic and key, indexed
for the hints a wait's match may carry (``among``, ``after_seq``:
:class:`services.simulation.simulator.Match`).

Both buses use it: the embedded bus (:meth:`services.runtime.embedded.bus.EmbeddedBus.wait`) and the
Kafka bus (:meth:`services.runtime.kafka.bus.KafkaBus.wait`). Without the hints a wait looks through
every record read under its key from the first: on a speed-baccarat table, where the session waits
for each of the 10,000 events of a coup under the one table key, that is quadratic (on Kafka it made
the simulator's thread the second consumer of CPU, beside settlement). With them a wait for the next
event of a chain is a bisection, and a wait for a bet's or a coup's record looks only at the records
that carry that id.

**One writer, readers on other threads.** On Kafka the bus's loop thread adds records while the
simulator's thread looks (:meth:`Stream.first` with ``stop``). :meth:`Stream.add` writes a record's
index entries *before* it appends the record, and a reader takes ``len(records)`` first and looks
only below it, so every record a reader counts is fully indexed (under the GIL, list appends and dict
writes are atomic and seen in program order); index entries past ``stop`` are ignored.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import Final

from services.core.envelope import Envelope

HINTED: Final = frozenset({"bet_id", "coup_id", "causation_id"})
"""The fields a :class:`Stream` indexes its records by (``bet_id`` and ``coup_id`` of the payload,
``causation_id`` of the envelope)."""


class Stream:
    """The records of one (topic, key) a bus has read, in log order, indexed by :data:`HINTED` fields
    and, while the records form a chain (``seq`` strictly increasing), by ``seq``."""

    __slots__ = ("carrying", "records", "seqs")

    def __init__(self) -> None:
        self.records: list[Envelope] = []
        self.carrying: dict[tuple[str, str], list[int]] = {}
        """The positions of the records carrying each (field, value) of :data:`HINTED`."""
        self.seqs: list[int] | None = []
        """Every record's ``seq`` while they strictly increase (a chain), for a bisection; else None."""

    def __len__(self) -> int:
        return len(self.records)

    def add(self, env: Envelope) -> None:
        """Append ``env``: its index entries first, the record last (see the module)."""
        at = len(self.records)
        payload = env.payload
        for name, value in (("bet_id", payload.get("bet_id")), ("coup_id", payload.get("coup_id"))):
            if isinstance(value, str):
                self.carrying.setdefault((name, value), []).append(at)
        if env.causation_id is not None:
            self.carrying.setdefault(("causation_id", env.causation_id), []).append(at)
        seqs = self.seqs
        if seqs is not None:
            if env.seq is None or (seqs and env.seq <= seqs[-1]):
                self.seqs = None
            else:
                seqs.append(env.seq)
        self.records.append(env)

    def first(
        self, match: Callable[[Envelope], bool], start: int = 0, stop: int | None = None
    ) -> Envelope | None:
        """The first record at a position in ``[start, stop)`` (``stop``: all of them) that ``match``
        accepts; the hints ``match`` carries only narrow where to look, ``match`` decides."""
        records = self.records
        end = len(records) if stop is None else min(stop, len(records))
        among: tuple[tuple[str, str], ...] = getattr(match, "among", ())
        if len(among) == 1 and among[0][0] in HINTED:  # the usual hint: one id (a bet's, a coup's)
            for i in self.carrying.get(among[0], ()):
                if start <= i < end and match(env := records[i]):
                    return env
            return None
        if among and all(name in HINTED for name, _value in among):
            lists = [self.carrying.get((name, value), []) for name, value in among]
            at = sorted({i for found in lists for i in found})
            return next((records[i] for i in at if start <= i < end and match(records[i])), None)
        after = getattr(match, "after_seq", None)
        seqs = self.seqs
        if isinstance(after, int) and seqs is not None:
            start = max(start, bisect.bisect_right(seqs, after, 0, min(end, len(seqs))))
        return next((records[i] for i in range(start, end) if match(records[i])), None)
