"""The monitor's cage stage (issue #29): deposits just under the reporting threshold across accounts,
handed on by the account stage under the one cage key, tested as one ordered stream."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from services.core import topics
from services.core.envelope import Envelope, request
from services.core.processor import initial_state, step
from services.core.trust import Principal, authenticate
from services.monitor import cage
from services.monitor.accounts import CAGE, REPORTING_THRESHOLD_MINOR
from services.monitor.sequential import MICRO
from services.runtime.compose import Composition
from services.runtime.keyring import new_keyring
from tests.helpers.membus import MemBus

RING = new_keyring()
STAGE = Composition(RING).cage_monitor()


def deposit(bus: MemBus, n: int, account: str, amount: int) -> None:
    """A cashier's deposit request, as the cage writes it."""
    env = request("Deposit", topics.WALLET_REQUESTS, account,
                  {"account_id": account, "amount_minor": amount, "currency": "EUR"}, event_id=f"d-{n}",
                  occurred_at=f"2026-11-28T20:{n // 60 % 60:02d}:{n % 60:02d}.000Z",
                  producer=Principal.CASHIER.value)  # fmt: skip
    bus.publish([authenticate(env, bus.keyring.key(Principal.CASHIER))])


class Bus(MemBus):
    def __init__(self) -> None:
        composition = Composition.demo()
        super().__init__(composition)
        self.keyring = composition.keyring


def cage_alerts(bus: MemBus) -> list[Envelope]:
    return [e for e in bus.log if e.type == "AnomalyDetected" and e.payload["detector"] == "cage_structuring"]


def test_eight_accounts_each_depositing_9800_twice_are_one_alert_naming_them_all() -> None:
    """Eight accounts, two deposits of 9,800 each, among honest round deposits: the per-account rule
    (7 of 10) sees two each and stays silent; the cage stage sees sixteen and names the eight."""
    bus = Bus()
    n = 0
    for r in range(2):
        for i in range(8):
            deposit(bus, n, f"acc:smurf-{i}", 980_000)
            deposit(bus, n + 1, f"acc:honest-{r}-{i}", 200_000)
            n += 2
    bus.drain()
    (found,) = cage_alerts(bus)
    assert found.key == CAGE and found.payload["table_id"] == CAGE
    smurfs = {f"acc:smurf-{i}" for i in range(8)}
    assert set(found.payload["account_ids"]) == smurfs <= set(found.payload["subject"]["account_ids"])
    assert float(found.payload["honest_probability"]) <= math.exp(-cage.THRESHOLD / MICRO)
    assert not [
        e for e in bus.log if e.type == "AnomalyDetected" and e.payload["detector"] == "deposit_structuring"
    ]
    handed = [e for e in bus.log if e.topic == topics.CAGE]
    assert len(handed) == 32 and {e.key for e in handed} == {CAGE}


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 3 * REPORTING_THRESHOLD_MINOR).filter(lambda a: not cage.in_band(a)),
                min_size=1, max_size=60))  # fmt: skip
def test_deposits_outside_the_band_never_alarm(amounts: list[int]) -> None:
    """However many deposits, none just under the threshold: the CUSUMs only fall (an observation out of
    the band multiplies every martingale by less than one)."""
    state = initial_state(STAGE)
    for n, amount in enumerate(amounts):
        rec = handed(n, f"acc:{n % 7}", amount)
        assert step(STAGE, state, rec) == []
    assert all(s == 0 for c in state.inner.cages.values() for s in c.stats)


def handed(n: int, account: str, amount: int, as_: Principal = Principal.MONITOR) -> Envelope:
    payload = {"cage_id": CAGE, "account_id": account, "deposit_id": f"fd-{n}", "amount_minor": amount,
               "currency": "EUR"}  # fmt: skip
    env = request("CageDeposit", topics.CAGE, CAGE, payload, event_id=f"cd-{n}",
                  occurred_at="2026-11-28T20:00:00.000Z", producer=as_.value)  # fmt: skip
    return authenticate(env, RING.key(as_))


def test_a_cage_deposit_from_anyone_but_the_monitor_is_refused() -> None:
    """Only the monitor hands deposits to the cage stage: a cashier's forged stream of in-band deposits
    is refused at the input (a dead letter), and moves no CUSUM."""
    state = initial_state(STAGE)
    out = []
    for n in range(20):
        out += step(STAGE, state, handed(n, "acc:1", 980_000, Principal.CASHIER))
    assert out and all(e.topic == topics.DEADLETTER for e in out)
    assert not state.inner.cages


def test_the_threshold_spends_the_cage_share() -> None:
    """``h = ln(K · 10 000 / share)``: K CUSUMs over 10 000 deposits, each ever reaching h with chance at
    most e^-h, expect at most the share of false alarms."""
    k = len(cage.LAMBDAS)
    assert k * 10_000 * math.exp(-cage.THRESHOLD / MICRO) <= float(cage.SHARE)
    assert all(lam < 1 / cage.P0 for lam in cage.LAMBDAS)
