"""The range readers' fetch wait (``topic_io.fetch_wait``) rests on how the pinned aiokafka builds a
fetch request: from its fetcher's ``_fetch_max_wait_ms`` at each request, so a change between two
rounds of a read applies to the next round."""

from __future__ import annotations

import inspect

from aiokafka.consumer.fetcher import Fetcher  # type: ignore[import-untyped]

from services.runtime.kafka import topic_io


def test_aiokafka_builds_each_fetch_request_from_the_fetchers_wait() -> None:
    source = inspect.getsource(Fetcher._get_actions_per_node)
    assert "FetchRequest(\n                self._fetch_max_wait_ms," in source


def test_fetch_wait_sets_the_next_requests_wait_and_returns_the_one_before() -> None:
    class Consumer:  # the one attribute fetch_wait touches
        _fetcher = type("F", (), {"_fetch_max_wait_ms": topic_io.READ_FETCH_MS})()

    consumer = Consumer()
    assert topic_io.fetch_wait(consumer, topic_io.RANGE_FETCH_MS) == topic_io.READ_FETCH_MS
    assert consumer._fetcher._fetch_max_wait_ms == topic_io.RANGE_FETCH_MS
    assert topic_io.RANGE_FETCH_MS > topic_io.READ_FETCH_MS
