"""A Kafka worker's environment (issue #31): its data directory and the topic spec the package ships."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from services.runtime.kafka.worker import PACKAGED_TOPIC_SPEC, load_topic_specs, topic_spec_path
from services.runtime.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def test_the_package_ships_the_topic_spec_schemas_holds() -> None:
    """The packaged copy is byte for byte ``schemas/topics.yaml`` (``make schemas`` writes both)."""
    assert PACKAGED_TOPIC_SPEC.read_bytes() == (ROOT / "schemas" / "topics.yaml").read_bytes()
    assert len(load_topic_specs(PACKAGED_TOPIC_SPEC)) >= 7


def test_outside_the_source_tree_topics_create_uses_the_packaged_spec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the default spec path missing (another directory) the packaged spec is used; a spec named
    in the settings is used as named, even when missing (its error then names it)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CASINO_TOPIC_SPEC", raising=False)
    assert topic_spec_path(Settings()) == PACKAGED_TOPIC_SPEC
    assert topic_spec_path(Settings(topic_spec=Path("mine.yaml"))) == Path("mine.yaml")


def test_a_data_directory_that_cannot_be_made_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """``casino-ledger worker dealer`` with CASINO_DATA_DIR under a file: one line naming the variable,
    exit 2, no traceback (before any broker is needed)."""
    (tmp_path / "afile").write_text("")
    env = {**os.environ, "CASINO_DATA_DIR": str(tmp_path / "afile" / "x"), "CASINO_DEMO_MODE": "true"}
    env.pop("CASINO_KEYRING", None)
    done = subprocess.run(
        [sys.executable, "-m", "services.cli", "worker", "dealer"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "CASINO_DATA_DIR" in lines[0] and "Traceback" not in done.stderr


def test_a_fresh_directory_gets_its_data_directory(tmp_path: Path) -> None:
    """The worker's state store makes its directories (the default ``var/faust`` of a fresh directory)."""
    from services.runtime.kafka.state import LocalStore  # noqa: PLC0415

    store = LocalStore.open(tmp_path / "var" / "faust" / "state", "dealer")
    assert (tmp_path / "var" / "faust" / "state" / "dealer").is_dir()
    store.close()
