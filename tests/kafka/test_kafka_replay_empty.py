"""``replay --kafka`` on a topic prefix that holds no records is an error, not a clean ledger."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

pytestmark = pytest.mark.kafka


def test_a_topic_prefix_with_no_records_is_an_error(kafka_broker: str) -> None:
    """With a prefix no topic has, the replay exits 2 with one line naming the topics, never ``clean``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CASINO_")}
    env |= {"CASINO_TOPIC_PREFIX": f"nothing-{uuid.uuid4().hex[:8]}.", "LOG_LEVEL": "ERROR", "CI": "1"}
    done = subprocess.run([sys.executable, "-m", "services.cli", "replay", "--kafka", kafka_broker],
                          env=env, capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 2, done.stdout[-1000:] + done.stderr[-1000:]
    assert done.stderr.startswith("casino-ledger: error: ") and done.stderr.count("\n") == 1
    assert "no records" in done.stderr and "verdict" not in done.stdout
