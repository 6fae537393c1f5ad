"""The dealer's index of accepted bets (:class:`services.dealer.processor.AcceptedBets`) answers what
scanning the coup's wagers answers, for any coup state: the latest, an older one, a diverging one,
one rebuilt from a snapshot, one of many coups."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from services.core import topics
from services.core.baccarat.coup import Coup
from services.core.envelope import request
from services.core.ledger import Wager
from services.core.processor import initial_state, step
from services.dealer.processor import ACCEPTED_COUPS_KEPT, AcceptedBets, Dealer
from services.simulation.simulator import DEFAULT_TABLES, Session
from tests.helpers.membus import MemBus

IDS = [f"b{n}" for n in range(8)]

operations = st.lists(
    st.tuples(
        st.sampled_from(["accept", "holds", "rebuild"]),
        st.integers(0, 100),  # which version (of all made so far, modulo)
        st.sampled_from(IDS),
        st.integers(0, 2),  # which coup
    ),
    max_size=80,
)


def _scan(coup: Coup, bet_id: str) -> bool:
    return any(w.bet_id == bet_id for w in coup.wagers)


@settings(max_examples=300)
@given(operations)
def test_the_index_answers_as_the_scan_for_any_state(ops: list[tuple[str, int, str, int]]) -> None:
    """Accepting on any version (branches), rebuilding a version from copies of its wagers (as a
    snapshot does), and asking about any version: the index's answer is the scan's every time."""
    index = AcceptedBets()
    versions = {c: [Coup(f"T/s/{c}", c + 1, "betting", "t")] for c in range(3)}
    for op, pick, bet_id, c in ops:
        mine = versions[c]
        coup = mine[pick % len(mine)]
        if op == "accept":  # duplicates too: the index must still answer as the scan
            mine.append(coup.accept(Wager(bet_id, "a", "player", 100)))
        elif op == "rebuild":
            copies = tuple(Wager(w.bet_id, w.account_id, w.spot, w.stake_minor) for w in coup.wagers)
            mine.append(Coup(coup.coup_id, coup.number, coup.phase, coup.started_at, copies))
        else:
            assert index.holds(coup, bet_id) == _scan(coup, bet_id)
        for version in mine[-3:]:
            for known in IDS[:4]:
                assert index.holds(version, known) == _scan(version, known)


def test_the_index_keeps_a_bounded_number_of_coups() -> None:
    """Coups beyond :data:`ACCEPTED_COUPS_KEPT` push out the one seen longest ago (answers unchanged)."""
    index = AcceptedBets()
    coups = [
        Coup(f"T/s/{n}", n + 1, "betting", "t").accept(Wager(f"b{n}", "a", "player", 1)) for n in range(200)
    ]
    for coup in coups:
        assert index.holds(coup, coup.wagers[0].bet_id)
        assert not index.holds(coup, "nobody")
    assert len(index._coups) == ACCEPTED_COUPS_KEPT
    assert index.holds(coups[0], "b0") and not index.holds(coups[0], "b1")


def test_the_dealer_refuses_a_bet_id_it_already_accepted_in_the_coup() -> None:
    """In a seeded session's inbox, a second ``BetPlaced`` with an accepted bet's id (another record)
    is refused ``duplicate_bet``; the rest of the session is accepted as before."""
    bus = MemBus()
    Session(bus, seed=7).run([DEFAULT_TABLES[0]], 2)
    dealer = Dealer(allow_seed_hex=True)
    state = initial_state(dealer)
    refused, accepted = [], 0
    for rec in (e for e in bus.log if e.topic == topics.TABLE_INBOX):
        for out in step(dealer, state, rec):
            accepted += out.type == "BetAccepted"
        if rec.type == "BetPlaced" and not refused:
            again = request(rec.type, rec.topic, rec.key, rec.payload, event_id=f"{rec.event_id}/again",
                            occurred_at=rec.occurred_at, producer="settlement")  # fmt: skip
            refused = [e for e in step(dealer, state, again) if e.type == "BetRefused"]
    assert [e.payload["reason"] for e in refused] == ["duplicate_bet"]
    assert accepted == sum(1 for e in bus.log if e.type == "BetAccepted")
