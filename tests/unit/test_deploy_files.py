"""docker-compose.yml, deploy/Dockerfile and deploy/k8s refer only to things that exist in the repository."""

from __future__ import annotations

import importlib.util
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from services.cli import build_parser
from services.core import topics
from services.runtime.kafka import PROCESSORS, load_topic_specs
from services.runtime.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
K8S = [
    (path.name, doc)
    for path in sorted((ROOT / "deploy" / "k8s").glob("*.yaml"))
    for doc in yaml.safe_load_all(path.read_text())
    if doc
]
DOCKERFILE = (ROOT / "deploy" / "Dockerfile").read_text()
SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
IMAGE_SERVICES = {
    name: svc for name, svc in COMPOSE["services"].items() if "casino-ledger" in svc.get("image", "")
}
DEPLOYMENTS = [doc for _, doc in K8S if doc["kind"] == "Deployment"]
JOBS = [doc for _, doc in K8S if doc["kind"] == "Job"]
CONFIGMAPS = {doc["metadata"]["name"]: doc for _, doc in K8S if doc["kind"] == "ConfigMap"}
FIELDS = set(Settings.model_fields)


def containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The containers of a Deployment or Job."""
    spec: list[dict[str, Any]] = doc["spec"]["template"]["spec"]["containers"]
    return spec


def dockerfile_env() -> dict[str, str]:
    """The ``ENV`` pairs of the Dockerfile (one ``ENV`` with continuation lines or several)."""
    text = DOCKERFILE.replace("\\\n", " ")
    pairs: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            for token in shlex.split(line[4:]):
                key, _, value = token.partition("=")
                pairs[key] = value
    return pairs


def check_command(command: list[str]) -> None:
    """A container command runs a declared console script (with arguments the CLI accepts) or a module."""
    if command[0] in SCRIPTS:
        if command[0] == "casino-ledger" and command[1:2] == ["worker"]:
            assert command[2] in PROCESSORS
        if "--help" not in command:
            build_parser().parse_args(command[1:])
        return
    assert command[:2] == ["python", "-m"], command
    assert importlib.util.find_spec(command[2]) is not None, command
    if "--spec" in command:
        spec = command[command.index("--spec") + 1]
        assert spec.startswith("/app/")
        assert (ROOT / spec.removeprefix("/app/")).is_file()


def settings_from(env: dict[str, Any], secret_fields: tuple[str, ...] = ()) -> Settings:
    """Settings built from ``CASINO_*`` variables (placeholders for the fields a Secret supplies)."""
    values = {k.removeprefix("CASINO_").lower(): str(v) for k, v in env.items() if k.startswith("CASINO_")}
    values.update(dict.fromkeys(secret_fields, "from-secret"))
    return Settings(**values)


def test_compose_services_use_the_dockerfile_that_exists() -> None:
    """Every compose service built from the repository names an existing Dockerfile in an existing context."""
    built = [svc for svc in COMPOSE["services"].values() if "build" in svc]
    assert built
    for svc in built:
        context = ROOT / svc["build"]["context"]
        assert (context / svc["build"]["dockerfile"]).resolve() == (ROOT / "deploy" / "Dockerfile")


def test_compose_runs_every_service_of_the_registry_and_the_topic_job() -> None:
    """Compose runs a worker per registered service, with commands the CLI accepts, and the topic job."""
    workers = {
        svc["command"][2]
        for svc in IMAGE_SERVICES.values()
        if svc["command"][:2] == ["casino-ledger", "worker"]
    }
    assert workers == set(PROCESSORS)
    for svc in IMAGE_SERVICES.values():
        check_command(svc["command"])
    assert any("create-topics" in svc["command"] for svc in IMAGE_SERVICES.values())


def test_compose_environment_is_made_of_settings_fields() -> None:
    """Each CASINO_ variable in compose is a Settings field and the whole set validates."""
    for svc in IMAGE_SERVICES.values():
        env = svc["environment"]
        assert {k.removeprefix("CASINO_").lower() for k in env if k.startswith("CASINO_")} <= FIELDS
        assert settings_from(env).bootstrap_list == ["kafka:9092"]


def test_compose_kafka_is_kraft_with_a_healthcheck_the_job_waits_for() -> None:
    """The broker runs in KRaft mode from the official image and the topic job waits for its healthcheck."""
    kafka = COMPOSE["services"]["kafka"]
    assert kafka["image"].startswith("apache/kafka:")
    assert "controller" in kafka["environment"]["KAFKA_PROCESS_ROLES"]
    assert kafka["healthcheck"]["test"]
    job = next(svc for svc in IMAGE_SERVICES.values() if "create-topics" in svc["command"])
    assert job["depends_on"]["kafka"]["condition"] == "service_healthy"
    for name, svc in COMPOSE["services"].items():
        for dep in svc.get("depends_on", {}):
            assert dep in COMPOSE["services"], (name, dep)


def test_dockerfile_copies_what_exists_runs_as_non_root_and_sets_only_settings() -> None:
    """The Dockerfile copies existing paths, ends as a non-root user, and its CASINO_ variables are fields."""
    for line in DOCKERFILE.splitlines():
        if line.startswith("COPY ") and "--from" not in line:
            for src in line.split()[1:-1]:
                assert (ROOT / src).exists(), src
    users = re.findall(r"^USER\s+(\S+)", DOCKERFILE, re.MULTILINE)
    assert users
    assert users[-1].split(":")[0] not in ("0", "root")
    env = dockerfile_env()
    assert {k.removeprefix("CASINO_").lower() for k in env if k.startswith("CASINO_")} <= FIELDS
    settings_from(env)


def test_k8s_has_a_deployment_per_service_with_valid_commands() -> None:
    """deploy/k8s has one Deployment per registered service and a topic Job, each with a valid command."""
    names = {containers(d)[0]["command"][2] for d in DEPLOYMENTS}
    assert names == set(PROCESSORS)
    assert JOBS
    for doc in DEPLOYMENTS + JOBS:
        for c in containers(doc):
            check_command(c["command"])


def test_k8s_config_map_holds_settings_fields_and_is_referenced() -> None:
    """Every pod reads an existing ConfigMap whose CASINO_ keys are Settings fields that validate together."""
    for doc in DEPLOYMENTS + JOBS:
        for c in containers(doc):
            refs = [e["configMapRef"]["name"] for e in c["envFrom"] if "configMapRef" in e]
            assert refs
            assert set(refs) <= set(CONFIGMAPS)
    for cm in CONFIGMAPS.values():
        data = cm["data"]
        assert {k.removeprefix("CASINO_").lower() for k in data} <= FIELDS
        settings = settings_from(data, ("sasl_username", "sasl_password"))
        assert settings.security_protocol == "SASL_SSL"
        for doc in DEPLOYMENTS:
            assert doc["spec"]["replicas"] <= settings.partitions


def test_k8s_pods_run_as_non_root_and_mount_the_ca_file_they_are_told_to_read() -> None:
    """Pods run as non-root, and CASINO_SSL_CAFILE lies under a mounted volume of every container."""
    cafile = next(iter(CONFIGMAPS.values()))["data"]["CASINO_SSL_CAFILE"]
    for doc in DEPLOYMENTS + JOBS:
        assert doc["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
        for c in containers(doc):
            assert any(cafile.startswith(m["mountPath"] + "/") for m in c["volumeMounts"])


def test_k8s_workers_mount_the_keyring_they_are_told_to_read() -> None:
    """Every worker container mounts the directory of CASINO_KEYRING (the workers refuse to run without
    a keyring outside demo mode), and no manifest turns demo mode on."""
    data = next(iter(CONFIGMAPS.values()))["data"]
    keyring = data["CASINO_KEYRING"]
    assert "CASINO_DEMO_MODE" not in data
    for doc in DEPLOYMENTS:
        for c in containers(doc):
            assert any(keyring.startswith(m["mountPath"] + "/") for m in c["volumeMounts"])


def test_kustomization_lists_existing_files() -> None:
    """kustomization.yaml lists only files present in deploy/k8s."""
    kustom = next(doc for name, doc in K8S if name == "kustomization.yaml")
    for res in kustom["resources"]:
        assert (ROOT / "deploy" / "k8s" / res).is_file()


@pytest.mark.parametrize("topic", topics.ALL_TOPICS)
def test_topic_spec_the_job_reads_declares_each_topic(topic: str) -> None:
    """schemas/topics.yaml, read by the topic job, declares each topic of the topology."""
    names = {s.name for s in load_topic_specs(ROOT / "schemas" / "topics.yaml")}
    assert topic in names
