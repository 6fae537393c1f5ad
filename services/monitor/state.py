"""What the monitor remembers of the tables it watches: an account at a table (:class:`Punter`), a shoe
(:class:`ShoeWatch`), a pair of accounts followed (:class:`Link`), a table (:class:`TableWatch`, at most
:data:`MAX_ACCOUNTS_PER_TABLE` accounts, the stalest found by the :class:`Stalest` cache) and every table
(:class:`MonitorState`): immutable values, what the monitor's snapshots hold."""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import field
from typing import ClassVar, Final

from services.core.baccarat import TableConfig
from services.core.baccarat.coup import Coup
from services.core.values import immutable, replace

MAX_ACCOUNTS_PER_TABLE: Final = 4096
"""Accounts remembered per table; beyond it the least recently seen (then lowest id) is dropped."""


@immutable
class Link:
    """A pair of accounts at a table: the CUSUMs of its dependence test, its last coup number, and its
    evidence (``(coup id, bet id of a, bet id of b)``, the last :data:`EVIDENCE_MAX`) and count."""

    stats: tuple[int, ...] = ()
    seen: int = 0
    run: tuple[tuple[str, str, str], ...] = ()
    count: int = 0


@immutable
class Punter:
    """What the monitor remembers of one account at one table.

    ``streak``: bet ids of the current run of decided even-money wins (shorter than the alert
    length). ``window``: ``(bet_id, net_minor, stake_minor)`` of the last decided even-money bets.
    ``late``: coup numbers of late bet attempts. ``near_limit``: ``(coup number, bet_id)`` of stakes
    just under a maximum. ``seen``: the table's coup number when the account last appeared.
    """

    streak: tuple[str, ...] = ()
    window: tuple[tuple[str, int, int], ...] = ()
    late: tuple[int, ...] = ()
    near_limit: tuple[tuple[int, str], ...] = ()
    seen: int = 0
    sort: tuple[int, ...] = ()
    """``edge_sorting``: the stake-weighted CUSUMs (micro-nats), one per :data:`SORT_LAMBDAS`, and the
    unweighted one (:data:`SORT_FLAT`)."""
    edge_bets: tuple[str, ...] = ()
    bot: tuple[tuple[str, int, int], ...] = ()
    faced: str = ""
    faced_run: tuple[str, ...] = ()
    edge: tuple[int, ...] = ()
    """``account_edge``: the CUSUMs (micro-nats), one per alternative of :data:`EDGE_LAMBDAS`."""
    edge_run: tuple[tuple[str, str], ...] = ()
    """``account_edge``: the decided even-money bets ``(coup id, bet id)`` since the CUSUMs last stood at
    zero (the last :data:`EVIDENCE_MAX`) and ``edge_count`` how many in all."""
    edge_count: int = 0
    max_stake: int = 0
    """The largest even-money stake the account has placed at the table (its stake weights' scale)."""
    lead: tuple[int, ...] = ()
    """``late_bet``: the CUSUMs on bets placed in the last second before the close."""
    lead_run: tuple[tuple[str, str], ...] = ()
    lead_count: int = 0
    habit: tuple[int, int, int, int] = (0, 0, 0, 0)
    """Own side habit: banker bets and even-money bets after a banker win, then after a player win."""


@immutable
class ShoeWatch:
    """One shoe: copies of each card dealt, the last position and the event that dealt it."""

    shoe_id: str
    decks: int | None
    counts: Mapping[str, int] = field(default_factory=dict)
    last_position: int | None = None
    last_event_id: str | None = None
    not_due: int = 0


@immutable
class TableWatch:
    """What the monitor knows of one table. ``config`` is ``None`` until a readable ``TableOpened``."""

    table_id: str
    config: TableConfig | None = None
    max_minor: Mapping[str, int] = field(default_factory=dict)
    coups: int = 0
    coup: Coup | None = None
    """The open coup (:mod:`services.core.baccarat.coup`), numbered by this table's coup clock."""
    hedged: frozenset[str] = frozenset()
    """The accounts already flagged as hedged in the open coup."""
    delays: Mapping[str, int] = field(default_factory=dict)
    """Each account's first bet's delay after the open coup's window opened (ms)."""
    shoe: ShoeWatch | None = None
    punters: Mapping[str, Punter] = field(default_factory=dict)
    bias: tuple[tuple[int, ...], ...] = ((), ())
    """``shoe_bias``: per side (banker, player) the CUSUMs over the table's decided coups."""
    bias_run: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    bias_count: tuple[int, int] = (0, 0)
    opened_at: str = ""
    first_card: str = ""
    pairs: Mapping[str, Link] = field(default_factory=dict)
    """``linked_hedge``: the pairs of accounts followed, by ``"a|b"``."""
    crowd: int = 1
    """The crowd level (:func:`~services.monitor.sequential.level`) of the bets of a coup: the most the
    table has seen, rounded up to a power of two (the thresholds per bet follow from it)."""
    pair_crowd: int = 1
    """The crowd level of pairs tested in a coup."""
    last_winner: str = ""
    """The side that won the table's last decided coup."""
    bet_at: Mapping[str, int] = field(default_factory=dict)
    """The open coup's bets' times (ms), by bet id, until the close."""
    group: tuple[int, ...] = ()
    """``group_edge``: the CUSUMs over the suspects' majority side."""
    group_run: tuple[str, ...] = ()
    group_count: int = 0
    group_members: Mapping[str, int] = field(default_factory=dict)
    cobet: Mapping[str, int] = field(default_factory=dict)
    """``group_edge``'s co-betting links: per account, how many of the group's coups in a row it bet
    the group's side (an opposite bet breaks the run); from :data:`COBET_LINK` on, it is in the group."""

    def punter(self, account_id: str) -> Punter:
        """The account's record at this table (empty when new)."""
        return self.punters.get(account_id) or Punter()

    def with_punter(self, account_id: str, punter: Punter) -> TableWatch:
        """A copy with ``punter`` stored (seen now), forgetting the stalest account over the cap."""
        punters = dict(self.punters)
        punters[account_id] = replace(punter, seen=self.coups)
        if len(punters) > MAX_ACCOUNTS_PER_TABLE:
            STALEST.evict(self.table_id, self.punters, punters, account_id)
        else:
            STALEST.follow(self.table_id, self.punters, punters, account_id)
        return replace(self, punters=punters)


class Stalest:
    """The stalest account of a table's punters (the least ``(seen, account id)``: the one
    :meth:`TableWatch.with_punter` forgets once a table holds more than :data:`MAX_ACCOUNTS_PER_TABLE`),
    without looking at every account each time.

    A speed table's 5,000 players overflow the 4,096 kept, and every new bettor then forgot the least of
    4,096 accounts, found by a scan (docs/performance.md#monitor-stalest-account). Here a heap of
    ``(seen, account id)`` per table answers in O(log n).

    A cache beside the state, never part of it (the state stays immutable and snapshots unchanged): per
    table it keeps the heap of the one punters mapping it last saw, holding an entry for every account
    of that mapping (and entries no longer true, dropped when they reach the top: an account seen again
    or forgotten). It follows the mappings :meth:`TableWatch.with_punter` derives from that one (the
    account's new entry pushed); for any other mapping (a restored snapshot, an older or a diverging
    state) it builds the heap afresh. So :meth:`evict` answers what the scan answers, for any state
    (``tests/unit/test_monitor_caches.py``)."""

    KEPT: ClassVar[int] = 64
    """Tables whose heap is kept (the one seen longest ago goes first)."""

    def __init__(self) -> None:
        self._tables: dict[str, tuple[Mapping[str, Punter], list[tuple[int, str]]]] = {}

    def _followed(
        self, table_id: str, before: Mapping[str, Punter], after: Mapping[str, Punter], account: str
    ) -> list[tuple[int, str]] | None:
        known = self._tables.pop(table_id, None)
        if known is None or known[0] is not before or len(known[1]) > 2 * len(after) + 64:
            return None  # another mapping, or mostly entries no longer true
        heap = known[1]
        heapq.heappush(heap, (after[account].seen, account))
        return heap

    def _keep(self, table_id: str, punters: Mapping[str, Punter], heap: list[tuple[int, str]]) -> None:
        tables = self._tables
        if len(tables) >= self.KEPT:
            del tables[next(iter(tables))]
        tables[table_id] = (punters, heap)

    def follow(
        self, table_id: str, before: Mapping[str, Punter], after: Mapping[str, Punter], account: str
    ) -> None:
        """``after`` is ``before`` with ``account`` (re)set: keep the heap of ``before`` (if it is the
        one kept for the table) as the heap of ``after``."""
        heap = self._followed(table_id, before, after, account)
        if heap is not None:
            self._keep(table_id, after, heap)

    def evict(
        self, table_id: str, before: Mapping[str, Punter], after: dict[str, Punter], account: str
    ) -> None:
        """``after`` is ``before`` with ``account`` (re)set: remove its stalest account from it."""
        heap = self._followed(table_id, before, after, account)
        if heap is None:
            heap = [(p.seen, a) for a, p in after.items()]
            heapq.heapify(heap)
        while True:
            seen, stalest = heap[0]
            punter = after.get(stalest)
            if punter is not None and punter.seen == seen:
                break
            heapq.heappop(heap)  # no longer true: the account was forgotten or seen again since
        del after[stalest]  # its entry, left in the heap, is no longer true
        self._keep(table_id, after, heap)


STALEST: Final = Stalest()
"""The monitor's :class:`Stalest` cache (every answer it gives is checked against the state)."""


@immutable
class MonitorState:
    """Every table watched, by id."""

    tables: Mapping[str, TableWatch] = field(default_factory=dict)
