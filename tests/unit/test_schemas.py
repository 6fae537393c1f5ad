"""The committed ``schemas/`` directory is the generated contract, and it describes real records."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from services.core import topics
from services.core.contract import PAYLOADS, SCHEMA_VERSIONS, TOPIC_OF_TYPE
from services.core.envelope import Envelope
from services.simulation.simulator import DEFAULT_TABLES, Session
from services.tools import schemas_export
from tests.helpers.membus import MemBus
from tests.unit.test_events import SAMPLES

STALE = "schemas/ is out of date with services/core/contract/: run `make schemas` and commit the result"


def test_committed_schemas_are_up_to_date(tmp_path: Path) -> None:
    """Regenerating the contract into a temporary directory gives exactly the committed files."""
    schemas_export.export(tmp_path)
    fresh = {p.name: p.read_bytes() for p in sorted(tmp_path.iterdir())}
    committed = {p.name: p.read_bytes() for p in sorted(schemas_export.SCHEMAS_DIR.iterdir())}
    assert sorted(committed) == sorted(fresh), STALE
    for name, data in fresh.items():
        assert committed[name] == data, f"{name}: {STALE}"


def test_export_is_deterministic(tmp_path: Path) -> None:
    """Two exports write byte-identical files, each ending in one newline, JSON with sorted keys."""
    a, b = tmp_path / "a", tmp_path / "b"
    schemas_export.export(a)
    schemas_export.export(b)
    for path in sorted(a.iterdir()):
        text = path.read_text(encoding="utf-8")
        assert text == (b / path.name).read_text(encoding="utf-8")
        assert text.endswith("\n") and not text.endswith("\n\n")
        if path.suffix == ".json":
            assert text == json.dumps(json.loads(text), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def test_export_removes_schemas_of_types_that_no_longer_exist(tmp_path: Path) -> None:
    """A JSON file left from a type that is gone is deleted, so the directory mirrors the registry."""
    (tmp_path / "Obsolete.json").write_text("{}\n", encoding="utf-8")
    schemas_export.export(tmp_path)
    assert not (tmp_path / "Obsolete.json").exists()
    assert {p.stem for p in tmp_path.glob("*.json")} == {*PAYLOADS, "Envelope"}


def test_topics_yaml_lists_every_topic_and_type() -> None:
    """topics.yaml names each reference topic once, with its key, and each type on its topic."""
    doc = yaml.safe_load((schemas_export.SCHEMAS_DIR / "topics.yaml").read_text(encoding="utf-8"))
    rows = {row["topic"]: row for row in doc["topics"]}
    assert list(rows) == list(topics.ALL_TOPICS)
    for row in rows.values():
        assert row["key"] and row["producers"] and row["consumers"] and row["retention"]
        assert row["chained"] == (row["topic"] in topics.EVENT_STREAMS)
    placed = {t: row["topic"] for row in rows.values() for t in row["types"]}
    assert placed == dict(TOPIC_OF_TYPE)


def test_readme_states_the_evolution_rules() -> None:
    """The README carries the evolution rules and one row per type."""
    text = (schemas_export.SCHEMAS_DIR / "README.md").read_text(encoding="utf-8")
    for rule in ("Add optional fields only", "Never rename", "bumps `schema_version`", "upcaster"):
        assert rule in text
    for name in PAYLOADS:
        assert f"[`{name}`]({name}.json)" in text


@cache
def _validator(name: str) -> Draft202012Validator:
    schema = json.loads((schemas_export.SCHEMAS_DIR / f"{name}.json").read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


@pytest.mark.parametrize("type_", list(PAYLOADS))
def test_schema_accepts_the_sample_and_refuses_an_unknown_field(type_: str) -> None:
    """Each payload's JSON Schema accepts a valid payload, refuses an extra field, and names its version."""
    validator = _validator(type_)
    assert validator.schema["x-schema-version"] == SCHEMA_VERSIONS[type_]
    assert validator.schema["x-topic"] == TOPIC_OF_TYPE[type_]
    assert list(validator.iter_errors(SAMPLES[type_])) == []
    assert list(validator.iter_errors({**SAMPLES[type_], "surprise": 1}))


@cache
def _session() -> tuple[Envelope, ...]:
    bus = MemBus()
    Session(bus, seed=5).run([DEFAULT_TABLES[0]], 12)
    return tuple(bus.log)


def test_every_simulated_record_matches_the_json_schemas() -> None:
    """Every envelope of a punto banco session, and its payload, validates against the committed schemas."""
    seen: set[str] = set()
    for env in _session():
        data: dict[str, Any] = json.loads(env.to_json())
        errors = [e.message for e in _validator("Envelope").iter_errors(data)]
        errors += [e.message for e in _validator(env.type).iter_errors(data["payload"])]
        assert errors == [], (env.type, errors)
        seen.add(env.type)
    assert {"TableOpened", "CardDealt", "CoupResolved", "PayoutIssued", "PayoutApplied"} <= seen
