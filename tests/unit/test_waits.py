"""The wait index both buses keep (services/runtime/waits.py): a hinted wait finds what a plain scan
finds, whatever the records, the hints and the window looked at."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from services.core.envelope import Envelope, request
from services.runtime.waits import Stream
from services.simulation.simulator import Match

IDS = ["b1", "b2", "c1", "c2", "x"]


def record(
    n: int, seq: int | None, bet: str | None, coup: str | None, cause: str | None, kind: str
) -> Envelope:
    """A record of the stream: ``seq``, a payload's ``bet_id``/``coup_id`` and a causation as given."""
    payload = {k: v for k, v in (("bet_id", bet), ("coup_id", coup), ("n", n)) if v is not None}
    env = request(kind, "casino.table.events", "t1", payload, event_id=f"e{n}", occurred_at="T", producer="p")
    return env.model_copy(update={"seq": seq, "causation_id": cause})


records = st.lists(
    st.tuples(
        st.one_of(st.none(), st.integers(0, 30)),
        st.one_of(st.none(), st.sampled_from(IDS)),
        st.one_of(st.none(), st.sampled_from(IDS)),
        st.one_of(st.none(), st.sampled_from(IDS)),
        st.sampled_from(["A", "B"]),
    ),
    max_size=30,
)


def scan(envs: list[Envelope], accepts: object, start: int, stop: int) -> Envelope | None:
    """The reference: the first record in ``[start, stop)`` that ``accepts`` takes."""
    return next((e for e in envs[start:stop] if accepts(e)), None)  # type: ignore[operator]


@given(records, st.sampled_from(["bet_id", "coup_id", "causation_id"]), st.sampled_from(IDS),
       st.sampled_from(["A", "B"]), st.integers(0, 31), st.integers(0, 31))  # fmt: skip
def test_an_among_hint_finds_what_a_scan_finds(
    rows: list[tuple[int | None, str | None, str | None, str | None, str]],
    name: str, value: str, kind: str, start: int, stop: int,
) -> None:  # fmt: skip
    envs = [record(n, *row) for n, row in enumerate(rows)]
    stream = Stream()
    for env in envs:
        stream.add(env)

    def accepts(e: Envelope) -> bool:
        got = e.causation_id if name == "causation_id" else e.payload.get(name)
        return e.type == kind and got == value

    assert stream.first(Match(accepts, among=((name, value),)), start, stop) == scan(
        envs, accepts, start, stop
    )


@given(records, st.integers(-1, 31), st.integers(0, 31), st.integers(0, 31))
def test_an_after_seq_hint_finds_what_a_scan_finds(
    rows: list[tuple[int | None, str | None, str | None, str | None, str]], after: int, start: int, stop: int
) -> None:
    """Chained or not (a seq missing or going back ends the bisection), the answer is the scan's."""
    envs = [record(n, *row) for n, row in enumerate(rows)]
    stream = Stream()
    for env in envs:
        stream.add(env)

    def accepts(e: Envelope) -> bool:
        return e.type == "A" and (e.seq if e.seq is not None else -1) > after

    assert stream.first(Match(accepts, after_seq=after), start, stop) == scan(envs, accepts, start, stop)


def test_a_chain_is_bisected_not_scanned() -> None:
    """On a chain, a wait for the next event looks at no record before it (the speed table's case)."""
    stream = Stream()
    for n in range(1000):
        stream.add(record(n, n, None, None, None, "A"))
    looked: list[int] = []

    def accepts(e: Envelope) -> bool:
        looked.append(e.seq or 0)
        return e.seq == 900

    found = stream.first(Match(accepts, after_seq=899))
    assert found is not None and found.seq == 900
    assert looked == [900]


def test_a_plain_callable_is_a_scan_within_the_window() -> None:
    """Without hints every record of ``[start, stop)`` is looked at, none outside it."""
    stream = Stream()
    for n in range(10):
        stream.add(record(n, n, None, None, None, "A"))
    assert stream.first(lambda e: True, 3, 5) is not None
    assert stream.first(lambda e: e.seq == 7, 0, 7) is None
    assert len(stream) == 10
