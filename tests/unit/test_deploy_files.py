"""docker-compose.yml, deploy/Dockerfile and deploy/k8s: valid by their schemas (the Compose specification,
Kubernetes' own), complete (every setting, probes, resources, the keyring mounted) and referring only to
things that exist in the repository. ``kubectl kustomize deploy/k8s`` is run by hand where kubectl exists
(docs/operations.md); these tests need no cluster and no Docker engine."""

from __future__ import annotations

import copy
import importlib.util
import json
import re
import shlex
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from services.cli import parse
from services.cli.worker import PROCESSORS
from services.core import topics
from services.runtime.kafka.worker import load_topic_specs
from services.runtime.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
CALLER_COMMAND = ["casino-ledger", "seamless-caller"]
"""The seamless wallet's HTTP caller: not a faust worker, but run and probed like one."""
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
WORKER_DEPLOYMENTS = [d for d in DEPLOYMENTS if d["spec"]["template"]["spec"]["containers"][0]["command"][:2]
                      == ["casino-ledger", "worker"]]  # fmt: skip
CALLER_DEPLOYMENTS = [d for d in DEPLOYMENTS if d["spec"]["template"]["spec"]["containers"][0]["command"]
                      == CALLER_COMMAND]  # fmt: skip
BACKOFFICE_DEPLOYMENTS = [
    d
    for d in DEPLOYMENTS
    if d["spec"]["template"]["spec"]["containers"][0]["command"][1] in ("serve", "project")
]
"""The back office on Kafka: ``serve --kafka`` and ``project --kafka --follow`` (no worker's keyring)."""
PROCESS_DEPLOYMENTS = WORKER_DEPLOYMENTS + CALLER_DEPLOYMENTS
"""The pods that run the pipeline (the whole keyring, the workers' web server)."""
JOBS = [doc for _, doc in K8S if doc["kind"] == "Job"]
CONFIGMAPS = {doc["metadata"]["name"]: doc for _, doc in K8S if doc["kind"] == "ConfigMap"}
FIELDS = set(Settings.model_fields)
PENDING_FIELDS = {"keyring", "public_keyring"}
"""Settings the trust (``CASINO_KEYRING``) and audit (``CASINO_PUBLIC_KEYRING``) branches add; the
manifests carry them already. Once merged they are fields and this set can go."""
BACKOFFICE_FIELDS = {"read_db"}
"""The back office's own variable (``CASINO_READ_DB``), read beside the Settings, not one of them."""
SECRET_FIELDS = ("sasl_username", "sasl_password", "seamless_secret")
"""Supplied to pods by the Secrets ``casino-ledger-kafka`` and ``casino-ledger-seamless``, never by the
ConfigMap."""
K8S_VERSION = "1.30.0"
WORKERS = {
    name: svc for name, svc in IMAGE_SERVICES.items() if svc["command"][:2] == ["casino-ledger", "worker"]
}


def compose_schema() -> dict[str, Any]:
    """The Compose specification's JSON Schema as check-jsonschema ships it (found, not imported)."""
    spec = importlib.util.find_spec("check_jsonschema")
    assert spec is not None and spec.submodule_search_locations
    package = Path(next(iter(spec.submodule_search_locations)))
    path = package / "builtin_schemas" / "vendor" / "compose-spec.json"
    schema: dict[str, Any] = json.loads(path.read_text())
    return schema


def compose_errors(doc: dict[str, Any]) -> list[str]:
    """What the Compose specification says is wrong with ``doc``."""
    schema = compose_schema()
    validator = jsonschema.validators.validator_for(schema)(schema)
    return [f"{e.json_path}: {e.message[:200]}" for e in validator.iter_errors(doc)]


def env_fields(env: dict[str, Any]) -> set[str]:
    """The Settings fields named by the ``CASINO_*`` keys of an environment."""
    return {k.removeprefix("CASINO_").lower() for k in env if k.startswith("CASINO_")}


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
            parsed = parse(command[1:])
            assert not isinstance(parsed, int), (command, parsed)  # an int: the CLI refused it
        return
    assert command[:2] == ["python", "-m"], command
    assert importlib.util.find_spec(command[2]) is not None, command
    if "--spec" in command:
        spec = command[command.index("--spec") + 1]
        assert spec.startswith("/app/")
        assert (ROOT / spec.removeprefix("/app/")).is_file()


def interpolated(value: str) -> str:
    """``value`` as compose makes it from an empty environment: ``${NAME:-default}`` -> ``default``."""
    return re.sub(r"\$\{[A-Z0-9_]+:-([^}]*)\}", r"\1", value)


def settings_from(env: dict[str, Any], secret_fields: tuple[str, ...] = ()) -> Settings:
    """Settings built from ``CASINO_*`` variables (placeholders for the fields a Secret supplies)."""
    values = {
        k.removeprefix("CASINO_").lower(): interpolated(str(v))
        for k, v in env.items()
        if k.startswith("CASINO_") and interpolated(str(v)) != ""  # env_ignore_empty: "" means the default
    }
    values.update(dict.fromkeys(secret_fields, "from-secret"))
    for pending in PENDING_FIELDS - FIELDS:
        values.pop(pending, None)
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
    assert any(svc["command"] == ["casino-ledger", "topics", "create"] for svc in IMAGE_SERVICES.values())


def test_compose_environment_is_made_of_settings_fields() -> None:
    """Each CASINO_ variable in compose is a Settings field and the whole set validates."""
    for svc in IMAGE_SERVICES.values():
        env = svc["environment"]
        assert env_fields(env) <= FIELDS | PENDING_FIELDS | BACKOFFICE_FIELDS
        assert settings_from(env).bootstrap_list == ["kafka:9092"]


def test_compose_kafka_is_kraft_with_a_healthcheck_the_job_waits_for() -> None:
    """The broker runs in KRaft mode from the official image and the topic job waits for its healthcheck."""
    kafka = COMPOSE["services"]["kafka"]
    assert kafka["image"].startswith("apache/kafka:")
    assert "controller" in kafka["environment"]["KAFKA_PROCESS_ROLES"]
    assert kafka["healthcheck"]["test"]
    job = next(svc for svc in IMAGE_SERVICES.values() if svc["command"][1:] == ["topics", "create"])
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
    names = {containers(d)[0]["command"][2] for d in WORKER_DEPLOYMENTS}
    assert names == set(PROCESSORS)
    assert len(DEPLOYMENTS) == len(PROCESS_DEPLOYMENTS) + len(BACKOFFICE_DEPLOYMENTS)
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
        assert env_fields(data) <= FIELDS | PENDING_FIELDS
        settings = settings_from(data, SECRET_FIELDS)
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
    assert data.get("CASINO_DEMO_MODE", "false") == "false"
    for doc in PROCESS_DEPLOYMENTS:
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


def test_compose_file_is_valid_by_the_compose_specification() -> None:
    """docker-compose.yml validates against the Compose specification's schema, which does reject a typo."""
    assert compose_errors(COMPOSE) == []
    broken = copy.deepcopy(COMPOSE)
    broken["services"]["dealer"]["helthcheck"] = broken["services"]["dealer"]["healthcheck"]
    assert compose_errors(broken)


@pytest.mark.parametrize(("name", "doc"), [(n, d) for n, d in K8S if d["kind"] != "Kustomization"])
def test_k8s_documents_are_valid_by_the_kubernetes_schemas(name: str, doc: dict[str, Any]) -> None:
    """Each Kubernetes document validates (strictly: no unknown field) against the API's schemas."""
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    broken = copy.deepcopy(doc)
    broken["metadata"]["unknownField"] = "x"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


def test_compose_and_the_config_map_set_every_setting() -> None:
    """Every Settings field (and the keyrings) is set in compose's shared environment and in the ConfigMap
    (the ConfigMap leaves the SASL credentials to the Secret)."""
    for svc in IMAGE_SERVICES.values():
        assert env_fields(svc["environment"]) >= FIELDS | PENDING_FIELDS
    for cm in CONFIGMAPS.values():
        assert env_fields(cm["data"]) | set(SECRET_FIELDS) >= FIELDS | PENDING_FIELDS
        assert not env_fields(cm["data"]) & set(SECRET_FIELDS)


def test_web_server_binds_every_interface_only_in_the_manifests() -> None:
    """The manifests set CASINO_WEB_BIND=0.0.0.0 explicitly (probes, scrapes) with the web server on;
    the code's default stays loopback."""
    assert Settings().web_bind == "127.0.0.1"
    for env in [svc["environment"] for svc in WORKERS.values()] + [cm["data"] for cm in CONFIGMAPS.values()]:
        assert env["CASINO_WEB_BIND"] == "0.0.0.0"
        assert settings_from(env, SECRET_FIELDS).web_enabled is True


def test_compose_workers_have_a_healthcheck_on_healthz_resources_and_the_keyrings() -> None:
    """Each compose worker checks /healthz with a command the image has, has resource limits, and gets
    the keyring and public keyring as secrets at the paths CASINO_KEYRING / CASINO_PUBLIC_KEYRING name."""
    assert set(WORKERS) == set(PROCESSORS)
    for svc in WORKERS.values():
        test = svc["healthcheck"]["test"]
        assert test[0] == "CMD"
        check_command(test[1:])
        assert test[-1] == "healthz"
        limits = svc["deploy"]["resources"]["limits"]
        assert limits["memory"] and limits["cpus"]
        targets = [s if isinstance(s, str) else s.get("target", s["source"]) for s in svc["secrets"]]
        mounted = {f"/run/secrets/{t}" for t in targets}
        for var in ("CASINO_KEYRING", "CASINO_PUBLIC_KEYRING"):
            assert svc["environment"][var] in mounted
        for s in svc["secrets"]:
            source = s if isinstance(s, str) else s["source"]
            assert "file" in COMPOSE["secrets"][source]
            assert not (ROOT / COMPOSE["secrets"][source]["file"]).is_relative_to(ROOT / "services")
    assert "/deploy/secrets/" in (ROOT / ".gitignore").read_text().splitlines()


def test_compose_and_k8s_pods_run_the_keyring_read_only_from_a_secret() -> None:
    """Every worker pod mounts the Secret casino-ledger-keyring read-only (readable by the pod's group
    only) at the directory of CASINO_KEYRING, and the public keyring where CASINO_PUBLIC_KEYRING says."""
    data = next(iter(CONFIGMAPS.values()))["data"]
    for doc in PROCESS_DEPLOYMENTS:
        pod = doc["spec"]["template"]["spec"]
        assert pod["securityContext"]["fsGroup"] == 10001
        volumes = {v["name"]: v for v in pod["volumes"]}
        for c in containers(doc):
            for var, secret in (
                ("CASINO_KEYRING", "casino-ledger-keyring"),
                ("CASINO_PUBLIC_KEYRING", "casino-ledger-public-keyring"),
            ):
                mount = next(m for m in c["volumeMounts"] if data[var].startswith(m["mountPath"] + "/"))
                assert mount["readOnly"] is True
                assert volumes[mount["name"]]["secret"]["secretName"] == secret
        keyring = next(
            v for v in pod["volumes"] if v.get("secret", {}).get("secretName") == "casino-ledger-keyring"
        )
        assert keyring["secret"]["defaultMode"] & 0o007 == 0  # nobody but the owner and the pod's group


def test_k8s_workers_have_probes_on_healthz_and_readyz_and_resources() -> None:
    """Each worker has liveness (and startup) on /healthz and readiness on /readyz, on the port the web
    server listens on, resource requests and limits, and is scraped by Prometheus at /metrics."""
    port = int(next(iter(CONFIGMAPS.values()))["data"]["CASINO_WEB_PORT"])
    for doc in PROCESS_DEPLOYMENTS:
        annotations = doc["spec"]["template"]["metadata"]["annotations"]
        assert annotations["prometheus.io/path"] == "/metrics"
        assert int(annotations["prometheus.io/port"]) == port
        for c in containers(doc):
            ports = {p["name"]: p["containerPort"] for p in c["ports"]}
            for probe, path in (("livenessProbe", "/healthz"), ("startupProbe", "/healthz"),
                                ("readinessProbe", "/readyz")):  # fmt: skip
                get = c[probe]["httpGet"]
                assert get["path"] == path
                assert ports[get["port"]] == port
            assert c["resources"]["requests"]["cpu"] and c["resources"]["requests"]["memory"]
            assert c["resources"]["limits"]["memory"]
    for doc in JOBS:
        for c in containers(doc):
            assert c["command"] == ["casino-ledger", "topics", "create"]
            assert c["resources"]["limits"]["memory"]


def test_each_service_is_its_own_deployment_and_the_readme_documents_partitions_for_scale_out() -> None:
    """One Deployment per service (its own consumer group); services that must see every partition run one
    replica; deploy/README.md says how the partition count bounds scale-out."""
    replicas = {containers(d)[0]["command"][2]: d["spec"]["replicas"] for d in WORKER_DEPLOYMENTS}
    assert len(replicas) == len(WORKER_DEPLOYMENTS)
    assert replicas["audit"] == 1
    assert replicas["monitor"] == 1
    readme = (ROOT / "deploy" / "README.md").read_text()
    assert "CASINO_PARTITIONS" in readme
    assert "consumer group" in readme


def test_the_seamless_caller_runs_at_most_once_with_its_secret_and_probes() -> None:
    """The seamless caller has a Deployment that never runs two pods (at most one replica, Recreate),
    reads the HMAC secret from the Secret casino-ledger-seamless, and is probed like the workers (the
    probe checks above cover it); in compose it is a service of the ``seamless`` profile, and the
    shared environment hands the seamless URL and secret from the shell to it and to settlement."""
    assert len(CALLER_DEPLOYMENTS) == 1
    doc = CALLER_DEPLOYMENTS[0]
    assert doc["spec"]["replicas"] <= 1
    assert doc["spec"]["strategy"]["type"] == "Recreate"
    refs = {e["secretRef"]["name"]: e["secretRef"] for e in containers(doc)[0]["envFrom"] if "secretRef" in e}
    assert "casino-ledger-seamless" in refs and not refs["casino-ledger-seamless"].get("optional")
    for worker in WORKER_DEPLOYMENTS:  # a URL in the ConfigMap makes every pod's settings want the secret
        sources = [e["secretRef"] for e in containers(worker)[0]["envFrom"] if "secretRef" in e]
        assert {"name": "casino-ledger-seamless", "optional": True} in sources
    callers = [svc for svc in IMAGE_SERVICES.values() if svc["command"] == CALLER_COMMAND]
    assert len(callers) == 1 and callers[0]["profiles"] == ["seamless"]
    for svc in [*callers, COMPOSE["services"]["settlement"]]:
        assert svc["environment"]["CASINO_SEAMLESS_URL"] == "${CASINO_SEAMLESS_URL:-}"
        assert svc["environment"]["CASINO_SEAMLESS_SECRET"] == "${CASINO_SEAMLESS_SECRET:-}"
    assert interpolated("${CASINO_SEAMLESS_URL:-}") == "" and interpolated("${X:-https://w}") == "https://w"


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="no kubectl here: the schema tests above stand")
def test_kubectl_kustomize_renders_every_manifest_with_the_common_label() -> None:
    """``kubectl kustomize deploy/k8s`` renders the ConfigMap, the topic Job and every Deployment (the
    seamless caller's included), each labelled part-of casino-ledger."""
    done = subprocess.run(["kubectl", "kustomize", str(ROOT / "deploy" / "k8s")], capture_output=True,
                          text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    docs = [d for d in yaml.safe_load_all(done.stdout) if d]
    rendered = {(d["kind"], d["metadata"]["name"]) for d in docs}
    expected = {(d["kind"], d["metadata"]["name"]) for _, d in K8S if d["kind"] != "Kustomization"}
    assert rendered == expected
    assert ("Deployment", "casino-ledger-seamless-caller") in rendered
    for d in docs:
        assert d["metadata"]["labels"]["app.kubernetes.io/part-of"] == "casino-ledger"


def _backoffice(command: str) -> list[dict[str, Any]]:
    return [d for d in BACKOFFICE_DEPLOYMENTS if containers(d)[0]["command"][1] == command]


def test_the_back_office_runs_in_compose_and_k8s_on_its_own_key_only() -> None:
    """Compose and the manifests run ``serve --kafka`` and ``project --kafka --follow`` on the read
    model CASINO_READ_DB names (compose: a PostgreSQL service they wait for; k8s: a Secret); serve gets
    the back office's key file alone (never the whole keyring), the projector no secret key, only the
    public keyring it checks signed heads with (docs/trust.md); serve is
    probed on /healthz and, for readiness, /readyz on the port it listens on; one projector."""
    services = COMPOSE["services"]
    serve, projector = services["backoffice"], services["backoffice-projector"]
    assert serve["command"][:4] == ["casino-ledger", "serve", "--kafka", "kafka:9092"]
    assert projector["command"] == ["casino-ledger", "project", "--kafka", "kafka:9092", "--follow"]
    for svc in (serve, projector):
        assert svc["environment"]["CASINO_READ_DB"].startswith("postgresql+psycopg://")
        assert svc["depends_on"]["postgres"]["condition"] == "service_healthy"
        assert "healthcheck" in services["postgres"]
    assert [s["source"] for s in serve["secrets"]] == ["casino-backoffice-key"]
    assert serve["environment"]["CASINO_KEYRING"] == "/run/secrets/casino-backoffice-key"
    assert COMPOSE["secrets"]["casino-backoffice-key"]["file"].endswith("/backoffice.json")
    assert projector["secrets"] == [{"source": "casino-public-keyring"}]
    assert projector["environment"]["CASINO_KEYRING"] == ""
    assert projector["environment"]["CASINO_PUBLIC_KEYRING"] == "/run/secrets/casino-public-keyring"
    port = serve["command"][serve["command"].index("--port") + 1]
    assert serve["healthcheck"]["test"][-1] == f"http://127.0.0.1:{port}/readyz"
    check_command(serve["healthcheck"]["test"][1:])

    (k_serve,) = _backoffice("serve")
    (k_projector,) = _backoffice("project")
    assert k_projector["spec"]["replicas"] == 1 and k_projector["spec"]["strategy"]["type"] == "Recreate"
    for doc in (k_serve, k_projector):
        c = containers(doc)[0]
        assert {"name": "casino-ledger-read-db"} in [e["secretRef"] for e in c["envFrom"] if "secretRef" in e]
        secrets = {
            v["secret"]["secretName"] for v in doc["spec"]["template"]["spec"]["volumes"] if "secret" in v
        }
        assert "casino-ledger-keyring" not in secrets
        if doc is k_projector:
            assert "casino-ledger-public-keyring" in secrets
    c = containers(k_serve)[0]
    keyring = next(e["value"] for e in c["env"] if e["name"] == "CASINO_KEYRING")
    mount = next(m for m in c["volumeMounts"] if keyring.startswith(m["mountPath"] + "/"))
    volumes = {v["name"]: v for v in k_serve["spec"]["template"]["spec"]["volumes"]}
    assert volumes[mount["name"]]["secret"]["secretName"] == "casino-ledger-backoffice-key"
    assert mount["readOnly"] is True
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports[c["readinessProbe"]["httpGet"]["port"]] == int(
        c["command"][c["command"].index("--port") + 1]
    )
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
