"""The tables play concurrently (``Session.play``: a fixed round robin, each table running until it
waits for a record), and the log depends on that schedule only, never on how soon a record comes: an
event-driven bus with two timings (``tests/helpers/shuffled.py``: records of different keys processed
in a seeded random order, each wait letting a random number of steps run first) gets the very same
streams, and so does the embedded bus (every record processed before the next table runs) and the
in-memory bus in lockstep."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from services.core import topics
from services.core.envelope import Envelope, parse_record
from services.runtime.compose import demo_pipeline
from services.runtime.embedded.bus import EmbeddedBus
from services.runtime.embedded.store import EmbeddedLog
from services.simulation.adversaries import ADVERSARIES
from services.simulation.simulator import Session, TablePlay, TableSpec, demo_tables
from tests.helpers.membus import MemBus
from tests.helpers.shuffled import ShuffledBus

SEED = 21
TABLES = 3
COUPS = 4
WAITED = (topics.WALLET_REQUESTS, topics.WALLET_EVENTS, topics.TABLE_INBOX, topics.TABLE_EVENTS)
"""The streams the session's schedule decides (audit's and the monitor's follow from them)."""


def streams(records: list[Envelope]) -> dict[tuple[str, str], list[str]]:
    """Each waited-on (topic, key) stream's records (hashes) in order."""
    out: dict[tuple[str, str], list[str]] = {}
    for env in records:
        if env.topic in WAITED:
            out.setdefault((env.topic, env.key), []).append(env.hash)
    return out


def shuffled(timing: int) -> ShuffledBus:
    bus = ShuffledBus(timing)
    Session(bus, seed=SEED).run(demo_tables(TABLES), COUPS)
    return bus


def test_two_timings_write_the_same_log_as_the_embedded_bus_and_lockstep(tmp_path: Path) -> None:
    one, two = shuffled(1), shuffled(2)
    assert one.steps == two.steps and one.log != two.log, "the two timings interleave alike: nothing shown"
    assert streams(one.log) == streams(two.log)
    bus = EmbeddedBus(tmp_path / "e.db", demo_pipeline())
    try:
        Session(bus, seed=SEED).run(demo_tables(TABLES), COUPS)
    finally:
        bus.close()
    with EmbeddedLog(tmp_path / "e.db", readonly=True) as log:
        embedded = [parse_record(raw) for *_, raw in log.iter_all()]
    assert streams(one.log) == streams(embedded)
    mem = MemBus()
    Session(mem, seed=SEED, lockstep=True).run(demo_tables(TABLES), COUPS)
    assert streams(mem.log) == streams(embedded)


def test_a_player_bets_at_two_tables_while_both_coups_are_open() -> None:
    """The tables do play concurrently: some account has stakes reserved at two tables at once (a
    second table's stake before the first table's payout), in the order the schedule wrote them."""
    bus = shuffled(3)
    both = 0
    for (topic, _key), records in _by_stream(bus.log).items():
        if topic != topics.WALLET_EVENTS:
            continue
        open_at: set[str] = set()
        bet_table: dict[str, str] = {}
        for env in records:
            bet = str(env.payload.get("bet_id"))
            if env.type == "StakeReserved":
                bet_table[bet] = str(env.payload.get("table_id"))
                open_at.add(bet)
                both += len({bet_table[b] for b in open_at}) > 1
            elif env.type in ("PayoutApplied", "StakeRefunded", "TransferRefused"):
                open_at.discard(bet)
    assert both > 0


def _by_stream(records: list[Envelope]) -> dict[tuple[str, str], list[Envelope]]:
    out: dict[tuple[str, str], list[Envelope]] = {}
    for env in records:
        out.setdefault((env.topic, env.key), []).append(env)
    return out


@pytest.mark.parametrize("name", sorted(ADVERSARIES))
def test_with_every_adversary_two_timings_write_the_in_memory_log(name: str) -> None:
    """The adversaries' own bets (a bot's, a past poster's) wait in turn like the players'; a cheater
    betting at two tables at once (hedger, structurer, bot) keeps its wallet chain: the same streams
    whatever the timing, and those of the in-memory bus."""
    adversary = ADVERSARIES[name]
    tables = [TableSpec(f"A{i + 1:02d}-{v.replace('_', '-')}", v) for i, v in enumerate(adversary.variants)]
    tables += [TableSpec("B01-punto-banco", "punto_banco"), TableSpec("B02-super6", "super6")]
    mem = MemBus()
    Session(mem, seed=5, adversaries=[adversary(5)]).run(tables, 6)
    for timing in (1, 2):
        bus = ShuffledBus(timing)
        Session(bus, seed=5, adversaries=[adversary(5)]).run(tables, 6)
        assert streams(bus.log) == streams(mem.log)


class _WaitLog(ShuffledBus):
    """A shuffled bus that notes the type of every record a wait returns, and whether a shoe was closing."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.closing = False
        self.waited: list[tuple[str, bool]] = []

    def wait(self, topic: str, key: str, match: Callable[[Envelope], bool]) -> Envelope:
        found = super().wait(topic, key, match)
        self.waited.append((found.type, self.closing))
        return found


def test_a_payout_is_waited_for_as_settlements_request_not_as_the_wallet_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before an account's next request the session waits for the payout (or refund) request on the
    account's wallet requests, not for the wallet event it becomes, one hop later: the wallet stage
    applies an account's requests in their order (the streams stay those of every other timing,
    above). Only before a shoe closes does it wait for the wallet event (audit signs the rounds)."""
    bus = _WaitLog(4)
    close_shoe = TablePlay.close_shoe

    def closing(play: TablePlay) -> None:
        bus.closing = True
        try:
            close_shoe(play)
        finally:
            bus.closing = False

    monkeypatch.setattr(TablePlay, "close_shoe", closing)
    Session(bus, seed=SEED).run(demo_tables(TABLES), COUPS)
    assert ("PayoutIssued", False) in bus.waited
    applied = {t for t, shoe in bus.waited if t in ("PayoutApplied", "StakeRefunded", "TransferRefused")}
    assert applied and not {t for t, shoe in bus.waited if t in applied and not shoe}
    assert streams(bus.log) == streams(shuffled(1).log)
