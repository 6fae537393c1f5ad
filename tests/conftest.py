"""Suite-wide settings: quiet logs (tests that check logs configure and capture them explicitly), and
hypothesis without a per-example deadline."""

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

os.environ.setdefault("LOG_LEVEL", "WARNING")
# The suite does not depend on the terminal it is started from (issue #30: help texts wrapped at the
# caller's COLUMNS=40): tests that are about a width set COLUMNS themselves.
os.environ.pop("COLUMNS", None)
os.environ.pop("LINES", None)

from services.runtime.logging import configure

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
