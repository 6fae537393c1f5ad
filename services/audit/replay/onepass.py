"""The replay of a log with signed heads in one pass (docs/trust.md, issue 28): each record decoded once.

The replay applies facts only (:mod:`services.audit.replay.attested`), and whether a record is one is
known only once a signed head of its writer covers it, which comes after it in the log. The two-pass
replay surveyed the whole log first, then replayed it, reading every record twice. Here each record is
decoded once: its fields go to the :class:`~services.audit.replay.attested.Survey` as they are read,
and the record waits in a queue, in log order, while its standing is unknown. When a run of signed
heads has been read, a :class:`Frontier` walks each chain back from the heads that rose (as
:meth:`Survey.finish` does from the last one) and the queue's head is released while its standing is
known: a fact is replayed, a record that never will be one (:meth:`Attested.standing`: its chain moved
past it under signature, its writer sealed or the pipeline went idle after it) is counted as
unattested. At the end of the log, the survey is finished as before and decides what still waits.

The answers given early are then checked against the finished survey, in log order, through the very
calls the two-pass replay makes (:meth:`Attested.admit`, which counts what is unattested): where every
one agrees, the report is the one the two-pass replay gives, record for record. Where one does not (a
signed head that a later one contradicts: a forked or tampered log), or when more than
:data:`HOLD_MAX` records wait at once (a log whose heads come last, or none at all), the log is replayed
again in two passes with that finished survey (:func:`replay_surveyed`): slower, the same report.

The survey reads each record as the replay decodes it (an envelope's fields); a record that does not
decode is surveyed from its bytes, as before.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Literal

from pydantic import ValidationError

from services.audit.replay.attested import (
    CONSUMER_OF_TOPIC,
    Attested,
    Standing,
    Survey,
    WriterKey,
)
from services.audit.replay.collector import CoupCollector
from services.audit.replay.replayer import Replayer, decode, frozen_heap, replay_records, replayer
from services.audit.replay.report import Report
from services.audit.replay.scope import Scope
from services.core import topics
from services.core.envelope import Envelope

HOLD_MAX: Final = 1 << 14
"""The most records the one pass holds back at once; beyond, the log is replayed in two passes."""

FREEZE_EVERY: Final = 128
"""How many records apart the one pass freezes what lives (:meth:`frozen_heap.again`): the records it
holds back are then not visited again by each collection while they wait."""

Held = tuple[int, Envelope | None, str]
"""A record waiting for its standing: its index, its envelope (``None``: it does not decode), the hash
its content calls for."""


class Frontier:
    """Which records the signed heads read so far make facts (see the module docstring)."""

    __slots__ = ("consumed", "facts", "survey", "view")

    def __init__(self, survey: Survey) -> None:
        self.survey = survey
        self.facts: set[str] = set()
        self.consumed: set[str] = set()
        self.view = Attested(self.facts, self.consumed, [], survey, frozenset())
        """The standing of a record not yet covered (:meth:`Attested.standing` over these facts)."""

    def advance(self) -> None:
        """Walk back from each head that rose, down to the records an earlier walk reached: each record
        reached is a fact, and so is the cause it names. A walk that breaks stops (what it did not reach
        waits for the end of the log)."""
        s, facts, consumed = self.survey, self.facts, self.consumed
        for chain in s.raised:
            seq, head, _ = s.heads[chain]
            links = s.links.get(chain, {})
            cur: str | None = head
            while cur is not None and seq >= 0 and cur not in facts:
                link = links.get(cur)
                if link is None or link[0] != seq:
                    break
                facts.add(cur)
                if link[2] is not None:
                    consumed.add(link[2])
                cur, seq = link[1], seq - 1
        s.raised.clear()

    def decide(self, env: Envelope, at: int) -> bool | None:
        """Whether the record at survey position ``at`` is a fact; ``None``: not known yet."""
        h = env.hash
        s = self.survey
        if h in self.consumed or h in self.facts or h in s.signed:
            return True
        topic = env.topic
        if topic in topics.SIGNED_UNCHAINED:  # named by its writer's signed head, else noise:
            if h in s.dead_signed:  # known once the pipeline went idle
                return True
            return False if max(s.idle_at.values(), default=-1) > at else None
        if (  # a request a processor derived and queued (:meth:`Survey.finish`)
            topic in CONSUMER_OF_TOPIC and env.causation_hash in self.facts
            and env.event_id not in s.refused and s.read_by_consumer(topic, at)
        ):  # fmt: skip
            self.consumed.add(h)
            return True
        standing = self.view.standing(topic, env.key, env.seq, h, env.event_id, at)
        return None if standing is Standing.PENDING else standing is Standing.FACT


def survey_decoded(records: Iterable[bytes | str | Envelope], keys: Mapping[str, WriterKey]) -> Attested:
    """:func:`~services.audit.replay.attested.survey` reading each record as the replay decodes it
    (an envelope's fields; its bytes when it does not decode), finished."""
    s = Survey(keys)
    for at, raw in enumerate(records, 1):
        try:
            env, _ = decode(raw)
        except (ValueError, ValidationError):
            s.add(raw, at)
        else:
            s.note(env.__dict__, at)
    return s.finish()


def replay_surveyed(
    make: Callable[[], Iterable[bytes | str | Envelope]],
    writers: Mapping[str, WriterKey],
    again: Callable[[], Iterable[bytes | str | Envelope]] | None = None,
    **options: Any,
) -> Report:
    """The replay in two passes: ``again()`` (default ``make()``) surveyed (:func:`survey_decoded`), then
    ``make()`` replayed."""
    return replay_records(make(), attested=survey_decoded((again or make)(), writers), **options)


def replay_one_pass(
    make: Callable[[], Iterable[bytes | str | Envelope]],
    writers: Mapping[str, WriterKey],
    *,
    again: Callable[[], Iterable[bytes | str | Envelope]] | None = None,
    keys: Mapping[str, str],
    checkpoint_every: int,
    scope: Scope | None = None,
    collector: CoupCollector | None = None,
    ordered: bool | Literal["strict"] = False,
    expect: Mapping[str, Any] | None = None,
) -> Report:
    """The replay of the records ``make()`` gives (in log order), facts only, each decoded once (module
    docstring); where the log must be replayed in two passes, ``again()`` (default ``make()``) gives the
    records of the first and ``make()`` those of the second."""
    one = _OnePass(writers, replayer(keys, checkpoint_every, scope, collector, ordered, expect))
    report = one.run(make())
    if report is not None:
        return report
    del one
    return replay_surveyed(make, writers, again, keys=keys, checkpoint_every=checkpoint_every, scope=scope,
                           collector=collector, ordered=ordered, expect=expect)  # fmt: skip


class _OnePass:
    """One replay in one pass (module docstring): the survey, its frontier, the replayer, the records
    held back (index, envelope or ``None`` when it does not decode, the hash its content calls for) and
    the answers given."""

    __slots__ = ("frontier", "held", "r", "said", "survey")

    def __init__(self, writers: Mapping[str, WriterKey], r: Replayer) -> None:
        self.survey = Survey(writers)
        self.frontier = Frontier(self.survey)
        self.r = r
        self.held: deque[Held] = deque()
        self.said = _Said()

    def run(self, records: Iterable[bytes | str | Envelope]) -> Report | None:
        """The report; ``None`` when the log must be replayed in two passes."""
        with frozen_heap() as heap:
            if not (self._read(records, heap) and self._end()):
                return None
        return self.r.finish()

    def _read(self, records: Iterable[bytes | str | Envelope], heap: frozen_heap) -> bool:
        s, held, frontier = self.survey, self.held, self.frontier
        heads = False  # a signed head was read since the queue was last released
        for n, raw in enumerate(records):
            try:
                env, want = decode(raw)
            except (ValueError, ValidationError):
                s.add(raw, n + 1)
                held.append((n, None, ""))
                continue
            s.note(env.__dict__, n + 1)
            if env.topic == topics.ATTEST:
                heads = True
            elif heads:  # a run of signed heads ended (an idle seal's run: every writer's)
                heads = False
                frontier.advance()
                _release(held, frontier, self.r, self.said)
            held.append((n, env, want))
            if not n % FREEZE_EVERY:
                heap.again()
            if len(held) > HOLD_MAX:
                return False
        return True

    def _end(self) -> bool:
        """The end of the log: the survey finished, the answers given checked, the rest replayed."""
        self.frontier.advance()
        _release(self.held, self.frontier, self.r, self.said)
        attested = self.survey.finish()
        if not self.said.agree(attested):
            return False
        r = self.r
        r.attested = attested
        for n, waiting, want in self.held:
            if waiting is None:
                r.undecodable(n, ValueError())
            else:
                r.take(n, waiting, want, attested.admit(waiting.topic, waiting.hash, waiting.event_id))
        return True


class _Said:
    """The answers the one pass gave before the end of the log: the hashes of the records it replayed
    as facts, and in log order the others (``(topic, hash, event id)``; an ``int``: the index of a
    record that does not decode)."""

    __slots__ = ("facts", "others")

    def __init__(self) -> None:
        self.facts: set[str] = set()
        self.others: list[tuple[str, str, str] | int] = []

    def agree(self, attested: Attested) -> bool:
        """Whether the finished survey gives every answer given (counting what is unattested, in log
        order, and the causes read, as the two-pass replay's :meth:`Attested.admit` calls do). A fact
        :meth:`Attested.admit` takes by its id alone (a changed cause) is not taken here: replayed again."""
        if not (self.facts - attested.facts) <= attested.consumed:
            return False
        attested.read_causes |= self.facts & attested.consumed
        admit = attested.admit
        for item in self.others:
            if type(item) is int:
                attested.undecodable(item)
            elif admit(*item):  # type: ignore[misc]
                return False
        return True


def _release(held: deque[Held], frontier: Frontier, r: Replayer, said: _Said) -> None:
    """Replay the records at the queue's head while their standing is known."""
    decide, take, popleft = frontier.decide, r.take, held.popleft
    facts, consumed, said_facts, others = frontier.facts, frontier.consumed, said.facts.add, said.others
    while held:
        n, env, want = held[0]
        if env is None:
            popleft()
            r.report.records += 1
            others.append(n)
            continue
        h = env.hash
        if h in facts or h in consumed:
            popleft()
            said_facts(h)
            take(n, env, want, True)
            continue
        fact = decide(env, n + 1)
        if fact is None:
            return
        popleft()
        if fact:
            said_facts(h)
        else:
            others.append((env.topic, h, env.event_id))
        take(n, env, want, fact)
