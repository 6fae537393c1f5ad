"""Suite-wide settings: quiet logs (tests that check logs configure and capture them explicitly),
hypothesis without a per-example deadline, and the one Tansu broker of a test session."""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

os.environ.setdefault("LOG_LEVEL", "WARNING")
# The suite does not depend on the terminal it is started from (issue #30: help texts wrapped at the
# caller's COLUMNS=40): tests that are about a width set COLUMNS themselves.
os.environ.pop("COLUMNS", None)
os.environ.pop("LINES", None)

from services.runtime.logging import configure
from tests.helpers.broker import tansu

configure()
pytest.register_assert_rewrite("tests.helpers.bus_contract")  # its asserts explain their failures

# No timing assertions in tests: hypothesis's default 200 ms deadline per example is one, and failed
# CI on a loaded machine (test_run_length_is_the_least_meeting_the_target took 251 ms at load 10).
settings.register_profile("casino-ledger", deadline=None)
settings.load_profile("casino-ledger")


@pytest.fixture(autouse=True)
def _quiet_logs() -> Iterator[None]:
    """Every test starts and ends with the quiet configuration, whatever the one before it set."""
    configure()
    yield
    configure()


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``127.0.0.1:PORT`` of a Tansu broker started for the test session (stopped at its end): one for
    the Kafka tests and the back office's API tests on Kafka alike."""
    with tansu(Path(tmp_path_factory.mktemp("tansu")) / "tansu.log") as bootstrap:
        yield bootstrap
