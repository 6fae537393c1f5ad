"""Suite-wide settings: quiet logs (tests that check logs configure and capture them explicitly)."""

import os
from collections.abc import Iterator

import pytest

os.environ.setdefault("LOG_LEVEL", "WARNING")

from services.runtime.logging import configure

configure()
pytest.register_assert_rewrite("tests.helpers.bus_contract")  # its asserts explain their failures


@pytest.fixture(autouse=True)
def _quiet_logs() -> Iterator[None]:
    """Every test starts and ends with the quiet configuration, whatever the one before it set."""
    configure()
    yield
    configure()
