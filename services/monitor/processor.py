"""The fraud and anomaly monitor: pure detectors over a table's event stream (docs/architecture.md).

Input: ``casino.table.events`` (keyed by table; docs/architecture.md: one ordered input per stateful
processor) and ``casino.deadletter`` (stateless: one alert per record refused at the input).
Output: ``AnomalyDetected`` on ``casino.monitor.alerts``, keyed by the same table_id and
chained. Every alert's payload (:class:`~services.core.contract.AnomalyDetected`) holds ``detector`` (a
stable :class:`Detector` code), ``category`` (the detector's family), ``severity``, ``table_id``,
``subject`` (the ids concerned: ``event_ids``, ``bet_ids``, ``account_id``, ``coup_id``, ``shoe_id``
where they apply), ``observed``, ``threshold`` and ``detail``. No float is written: probabilities are
exact fractions as strings, and the one reported z value is a string.

Detectors (each a small pure function of :mod:`~services.monitor.detectors` or
:mod:`~services.monitor.sequential_detectors`; thresholds are named constants with their reasons):

* **past posting** — a bet the dealer refused as ``betting_closed`` or ``wrong_coup``: a stake sent
  after the window closed or aimed at another coup. Repeated attempts by one account within
  :data:`PAST_POSTING_WINDOW_COUPS` coups escalate from ``info`` to ``warning`` to ``critical``.
* **shoe tampering** — a card read the rules did not ask for (``CommandRefused`` with
  ``card_not_due``); a card dealt more often in one shoe than the shoe's decks hold; a ``CardDealt``
  whose ``shoe_position`` repeats or goes backwards within its shoe.
* **win streak / statistical outlier** — each accepted even-money bet (:data:`EVEN_MONEY_SPOTS`) is
  graded by the variant's own ``grade()`` when its coup resolves. A run of
  :data:`WIN_STREAK_LENGTH` decided wins (computed from :data:`WIN_PROBABILITY_MAX` and
  :data:`STREAK_PROBABILITY_MAX`), and a net result over the last :data:`OUTLIER_WINDOW_BETS` decided
  bets more than :data:`OUTLIER_Z` standard deviations above the most the game allows, are flagged.
* **refused record** (docs/trust.md) — a record refused at the input (``unauthenticated``,
  ``not_permitted``, ``key_mismatch``: a forgery or a writer beyond its rights), read from its dead
  letter. Several processors read some topics and each dead-letters the record, so only the dead
  letter of the topic's primary consumer (:data:`services.core.trust.PRIMARY_CONSUMER`) raises one.
  The alert is keyed by the refused record's topic (the dead letter's own key), so its chain is fed by
  one ordered input and never interleaves with a table's alerts; ``subject`` names the refused record
  (id, type, key) and its dead letter.
* **bet pattern** — one account on both sides (``player`` and ``banker``) of one coup (a hedge that
  turns comps or laundered cash over at almost no risk); and stakes just under a spot's maximum,
  repeatedly (structuring: keeping each bet below the limit that would draw attention).

Interpretations (written here because the brief leaves them open):

* Everything about an account is counted **per table**. The monitor's only ordered input is one
  table's stream; counting across tables would make an alert depend on how partitions interleave,
  which breaks the determinism contract.
* Pushes neither extend nor break a streak and are left out of the net-result window: a push moves no
  money and carries no evidence. Only the variants whose even-money sides follow punto banco's
  forced tableau (:data:`STATISTICAL_VARIANTS`) are tested statistically: there the chance of either
  side winning a decided coup is known and bounded; where players choose (chemin de fer, baccarat
  banque) or the rules differ (the seed-001/000 games) no honest bound exists.
* An alert consumes its evidence: a streak or outlier window is cleared when it fires, and the
  near-limit bets of a structuring alert are forgotten, so each alert rests on bets no earlier alert
  of the same detector used.
* A record the monitor cannot read (a field missing or of the wrong type) is itself an anomaly
  (``unreadable_event``); the monitor never raises and never stops the stream. Through
  :func:`services.core.processor.step` a payload that breaks the event contract is dead-lettered at
  the edge first; what reaches ``unreadable_event`` is valid by the contract yet unusable here (a
  configuration the variant registry refuses, say).

State is bounded: one open coup and one shoe per table, fixed-length windows per account, at most
:data:`MAX_ACCOUNTS_PER_TABLE` accounts per table (the least recently seen is forgotten first).

This module is the processor (:class:`Monitor`); the rest of the table stage is its package's:
:mod:`~services.monitor.state` (what it remembers), :mod:`~services.monitor.alerts`, the detectors,
:mod:`~services.monitor.handlers` (one per table event) and :mod:`~services.monitor.dead_letters`.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import ValidationError

from services.core import topics
from services.core.contract import PAYLOADS, DeadLetter, Payload, read_payload, to_draft
from services.core.envelope import Draft, Envelope
from services.core.errors import DomainError
from services.core.processor import Event, Reactor
from services.monitor.alerts import UNREADABLE, Seen, unreadable
from services.monitor.dead_letters import dead_letter_alert, refused_record
from services.monitor.handlers import HANDLERS
from services.monitor.state import MonitorState, TableWatch


class Monitor(Reactor[MonitorState]):
    """The fraud and anomaly monitor (see the module docstring): a
    :class:`~services.core.processor.Reactor` to the table events and dead letters of others, in one
    pass (each detector both updates what it remembers and says what it found)."""

    name = "monitor"
    inputs = (topics.TABLE_EVENTS, topics.DEADLETTER)
    repartitioned: ClassVar[tuple[str, ...]] = (topics.DEADLETTER,)
    """The inputs a runtime that splits the state by partition re-keys by :meth:`route` first (the
    dead letters, keyed by source topic, raise alerts on the chain of the table they concern):
    docs/adr/0011-partitioned-audit-monitor.md."""

    def route(self, record: Envelope) -> str:
        """The key of the alerts ``record`` (a dead letter) raises, by the very functions that raise
        them (the table it concerns, else its source topic); its own key when it raises
        none or cannot be read (the key it is handled under then changes nothing)."""
        try:
            payload = read_payload(record)
        except (ValidationError, DomainError):
            return record.key
        if not isinstance(payload, DeadLetter):
            return record.key
        found = refused_record(record, payload) or dead_letter_alert(record, payload, self.name)
        return found[0].key if found else record.key

    def initial(self) -> MonitorState:
        """No tables watched."""
        return MonitorState()

    def handle(self, state: MonitorState, record: Envelope) -> tuple[MonitorState, list[Draft]]:
        """:meth:`apply` to the record's payload, read here: a table event the contract refuses is an
        ``unreadable_event`` alert (the monitor never raises; through ``step`` the edge refuses it first)."""
        try:
            payload = read_payload(record)
        except (ValidationError, DomainError) as exc:
            watched = record.topic != topics.DEADLETTER and PAYLOADS.get(record.type) in HANDLERS
            found = unreadable(record, exc)
            return state, [to_draft(found.found, found.key)] if watched else []
        return self.apply(state, record, payload)

    def react(
        self, state: MonitorState, record: Envelope, payload: Payload | None
    ) -> tuple[MonitorState, list[Event]]:
        """Fold one table event through the detectors, or raise the alert a dead letter calls for (a
        record refused at the input, or a processor's internal error)."""
        at = record.occurred_at
        if record.topic == topics.DEADLETTER:
            if not isinstance(payload, DeadLetter):
                return state, []
            found = refused_record(record, payload) or dead_letter_alert(record, payload, self.name)
            return state, [a.event(at) for a in found]
        handler = None if payload is None else HANDLERS.get(type(payload))
        if handler is None:
            return state, []
        table = state.tables.get(record.key) or TableWatch(record.key)
        seen = Seen(
            record.event_id, record.key, record.occurred_at,
            getattr(payload, "coup_id", None), getattr(payload, "shoe_id", None),
        )  # fmt: skip
        try:
            table, out = handler(table, payload, seen)
        except UNREADABLE as exc:
            return state, [unreadable(record, exc).event(at)]
        return MonitorState({**state.tables, record.key: table}), [a.event(at) for a in out]
