"""The replay freezes the heap that existed before it out of the cyclic collector while it streams
(:class:`services.audit.replay.replayer.frozen_heap`), and gives the collector back as it found it."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from services.runtime.replay import Source, replay


def _records(seen: list[int]) -> Iterator[bytes]:
    seen.append(gc.get_freeze_count())  # read while the replay streams
    yield b"not json"


def test_the_heap_is_frozen_while_the_replay_streams_and_unfrozen_after() -> None:
    gc.unfreeze()
    seen: list[int] = []
    report = replay(Source(lambda: _records(seen)))
    assert len(seen) == 1 and seen[0] > 0  # one pass: the survey of what is attested goes with the replay
    assert gc.get_freeze_count() == 0
    assert report.records == 1 and report.verdict == "incomplete"
    assert report.attestation["unattested"]["count"] == 1


def test_a_caller_who_froze_objects_keeps_them_frozen() -> None:
    gc.freeze()
    try:
        before = gc.get_freeze_count()
        seen: list[int] = []
        replay(Source(lambda: _records(seen)))
        assert seen == [before]
        assert gc.get_freeze_count() == before
    finally:
        gc.unfreeze()


def test_an_error_in_the_stream_still_unfreezes() -> None:
    gc.unfreeze()

    def broken() -> Iterator[bytes]:
        yield b"not json"
        raise OSError("disk gone")

    with pytest.raises(OSError, match="disk gone"):
        replay(broken())
    assert gc.get_freeze_count() == 0
