"""What ships for running Flux where fleets live (docs/deploy.md), checked without a
Docker daemon or a cluster: every Kubernetes manifest against the 1.31 schemas
(kubernetes-validate, strict), compose.yaml against the vendored compose-spec schema,
the Dockerfile's properties and its build steps (the wheel, a fresh venv, the
entrypoint answering /health), and a real worker started with a manifest's arguments."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import site
import subprocess
import sys
import time
from pathlib import Path

import httpx
import jsonschema
import kubernetes_validate
import pytest
import yaml
from cgroup_trees import v2_tree

from flux.local import free_port

ROOT = Path(__file__).resolve().parent.parent
KUBERNETES = ROOT / "deploy" / "kubernetes"
KUBERNETES_VERSION = "1.31.0"
GiB = 1024**3


# --- Kubernetes ---------------------------------------------------------------------------


def manifests() -> list[tuple[str, dict]]:
    """Every Kubernetes object under deploy/kubernetes (examples included), by file."""
    found = []
    for path in sorted(KUBERNETES.rglob("*.yaml")):
        if path.name != "kustomization.yaml":
            found += [(str(path.relative_to(ROOT)), doc) for doc in yaml.safe_load_all(path.read_text()) if doc]
    return found


def kind(name: str) -> list[dict]:
    return [doc for _, doc in manifests() if doc["kind"] == name]


def by_name(name: str) -> dict:
    return next(doc for _, doc in manifests() if doc["metadata"]["name"] == name)


def containers(doc: dict) -> list[dict]:
    return doc["spec"]["template"]["spec"]["containers"]


def env_of(container: dict) -> dict[str, dict]:
    return {item["name"]: item for item in container.get("env", [])}


def option(args: list[str], flag: str) -> list[str]:
    return [args[i + 1] for i, arg in enumerate(args) if arg == flag]


#: Custom resources (KEDA's): no schema ships with kubernetes-validate; checked field by field below.
CUSTOM_API = "keda.sh/"


@pytest.mark.parametrize(
    "where,doc",
    [(w, d) for w, d in manifests() if not d["apiVersion"].startswith(CUSTOM_API)],
    ids=lambda v: v if isinstance(v, str) else v.get("kind", ""),
)
def test_every_kubernetes_manifest_is_valid_for_1_31_strictly(where, doc):
    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_the_keda_example_scales_a_worker_deployment_from_the_pools_desired_count():
    """The ScaledObject's fields as KEDA's v1alpha1 CRD names them, aimed at a Deployment
    of ours and at the server's read-only endpoint, authenticated by a TriggerAuthentication."""
    (auth,) = kind("TriggerAuthentication")
    (scaled,) = kind("ScaledObject")
    assert {auth["apiVersion"], scaled["apiVersion"]} == {"keda.sh/v1alpha1"}
    assert set(scaled["spec"]) <= {
        "scaleTargetRef",
        "minReplicaCount",
        "maxReplicaCount",
        "pollingInterval",
        "cooldownPeriod",
        "idleReplicaCount",
        "fallback",
        "advanced",
        "triggers",
    }
    target = scaled["spec"]["scaleTargetRef"]
    assert target["kind"] == "Deployment" and target["name"] in {d["metadata"]["name"] for d in kind("Deployment")}
    assert scaled["spec"]["minReplicaCount"] == 0 < scaled["spec"]["maxReplicaCount"]
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "metrics-api" and trigger["authenticationRef"]["name"] == auth["metadata"]["name"]
    meta = trigger["metadata"]
    assert meta["url"] == "http://flux-server:8000/autoscale/desired" and meta["authMode"] == "bearer"
    assert meta["valueLocation"].startswith("pools.") and meta["targetValue"] == "1"
    assert all(isinstance(v, str) for v in meta.values())  # KEDA's trigger metadata is a map of strings
    (service,) = [d for d in kind("Service") if d["metadata"]["name"] == "flux-server"]
    assert any(port["port"] == 8000 for port in service["spec"]["ports"])
    assert auth["spec"]["secretTargetRef"][0]["parameter"] == "token"


def test_strict_validation_catches_a_misspelt_field():
    doc = json.loads(json.dumps(by_name("flux-server")))
    containers(doc)[0]["readinessprobe"] = containers(doc)[0].pop("readinessProbe")
    with pytest.raises(kubernetes_validate.ValidationError, match="readinessprobe"):
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_the_kustomization_lists_every_manifest_beside_it():
    kustomization = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())
    assert kustomization["kind"] == "Kustomization" and kustomization["namespace"] == "flux"
    beside = {p.name for p in KUBERNETES.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == beside
    images = {image["name"] for image in kustomization["images"]}
    used = {
        c["image"].split(":")[0]
        for doc in kind("Deployment") + kind("Job")
        for c in containers(doc)
        if c["image"].startswith("flux-engine")
    }
    assert used <= images


def test_the_server_runs_two_replicas_probed_on_health_with_secrets_from_secrets():
    server = by_name("flux-server")
    assert server["kind"] == "Deployment" and server["spec"]["replicas"] == 2
    (container,) = containers(server)
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert container[probe]["httpGet"]["path"] == "/health"
    env = env_of(container)
    for name in ("FLUX_DATABASE_URL", "FLUX_BOOTSTRAP_TOKEN", "FLUX_API_TOKEN"):
        assert "secretKeyRef" in env[name]["valueFrom"] and "value" not in env[name]
    service = next(doc for doc in kind("Service") if doc["metadata"]["name"] == "flux-server")
    assert service["spec"]["selector"] == server["spec"]["selector"]["matchLabels"]
    assert kind("Job")[0]["spec"]["template"]["spec"]["containers"][0]["args"] == ["server", "migrate"]


def test_workers_drain_within_their_grace_and_label_themselves_from_the_downward_api():
    workers = [
        doc
        for doc in kind("Deployment")
        if doc["metadata"]["labels"].get("app.kubernetes.io/component") == "flux-worker"
    ]
    assert {w["metadata"]["name"] for w in workers} >= {"flux-worker-cpu-zone-a", "flux-worker-gpu"}
    for worker in workers:
        pod = worker["spec"]["template"]["spec"]
        container = next(c for c in pod["containers"] if c["name"] == "worker")
        args, env = container["args"], env_of(container)
        (drain_timeout,) = option(args, "--drain-timeout")
        assert pod["terminationGracePeriodSeconds"] >= float(drain_timeout) + 15
        assert "kill -TERM 1" in container["lifecycle"]["preStop"]["exec"]["command"][-1]
        assert args[:3] == ["start", "worker", "$(POD_NAME)"]
        assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
        assert "node=$(NODE_NAME)" in option(args, "--label")
        assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
        assert "secretKeyRef" in env["FLUX_BOOTSTRAP_TOKEN"]["valueFrom"]
    cpu = by_name("flux-worker-cpu-zone-a")["spec"]["template"]
    assert "zone=$(ZONE)" in option(containers(by_name("flux-worker-cpu-zone-a"))[0]["args"], "--label")
    zone_field = env_of(cpu["spec"]["containers"][0])["ZONE"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert zone_field == "metadata.labels['topology.kubernetes.io/zone']"
    assert (
        cpu["metadata"]["labels"]["topology.kubernetes.io/zone"]
        == cpu["spec"]["nodeSelector"]["topology.kubernetes.io/zone"]
    )
    gpu = by_name("flux-worker-gpu")["spec"]["template"]["spec"]
    assert gpu["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert gpu["nodeSelector"] and gpu["tolerations"][0]["key"] == "nvidia.com/gpu"
    pdbs = {doc["metadata"]["name"]: doc["spec"] for doc in kind("PodDisruptionBudget")}
    assert pdbs["flux-worker"]["selector"]["matchLabels"] == {"app.kubernetes.io/component": "flux-worker"}
    assert pdbs["flux-server"]["minAvailable"] == 1


@pytest.mark.parametrize(
    "where,doc",
    [(w, d) for w, d in manifests() if d["kind"] in ("Deployment", "Job", "StatefulSet")],
    ids=lambda v: v if isinstance(v, str) else v["metadata"]["name"],
)
def test_every_container_has_requests_and_limits(where, doc):
    for container in containers(doc):
        resources = container["resources"]
        assert {"cpu", "memory"} <= set(resources["requests"]) and {"cpu", "memory"} <= set(resources["limits"])


def test_flux_pods_run_as_the_images_non_root_user():
    for doc in kind("Deployment") + kind("Job"):
        if doc["metadata"]["name"] == "flux-worker-docker":
            continue  # the example's dind sidecar must be privileged (documented)
        pod = doc["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 10001
        assert pod["automountServiceAccountToken"] is False
        for container in pod["containers"]:
            assert container["securityContext"]["allowPrivilegeEscalation"] is False


# --- compose ------------------------------------------------------------------------------


def compose() -> dict:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


def compose_validator() -> jsonschema.protocols.Validator:
    schema = json.loads((ROOT / "deploy" / "schemas" / "compose-spec.json").read_text())
    return jsonschema.Draft201909Validator(schema)


def test_compose_file_matches_the_compose_spec_schema():
    validator = compose_validator()
    errors = [f"{e.json_path}: {e.message}" for e in validator.iter_errors(compose())]
    assert errors == []
    broken = compose()
    broken["services"]["server"]["replica"] = 2
    assert not validator.is_valid(broken)


def test_compose_runs_postgres_two_replicas_behind_one_port_and_two_labelled_workers():
    services = compose()["services"]
    assert services["postgres"]["image"].startswith("postgres:")
    assert services["migrate"]["command"] == ["server", "migrate"]
    assert services["server"]["deploy"]["replicas"] == 2 and "ports" not in services["server"]
    assert services["server"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert services["lb"]["ports"] == ["8000:8000"]
    conf = (ROOT / "deploy" / "compose" / "nginx.conf").read_text()
    assert "server server:8000" in conf and "listen 8000" in conf
    labels = {}
    for name in ("worker-cpu", "worker-io"):
        command = shlex.split(services[name]["entrypoint"][-1])
        labels[name] = option(command, "--label")
        assert int(services[name]["stop_grace_period"].rstrip("s")) >= float(option(command, "--drain-timeout")[0]) + 15
        assert services[name]["environment"]["FLUX_SERVER_URL"] == "http://lb:8000"
    assert labels["worker-cpu"] != labels["worker-io"]
    assert "${FLUX_DB_PASSWORD" in json.dumps(services)  # no password in the file


# --- Dockerfile ---------------------------------------------------------------------------


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuations joined and comments dropped."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "") for line in lines]


def stages() -> list[tuple[str, str | None, list[tuple[str, str]]]]:
    """(base, name, instructions) for each FROM."""
    found: list = []
    for instruction, args in dockerfile():
        if instruction == "FROM":
            words = args.split()
            found.append((words[0], words[2] if len(words) > 2 and words[1].upper() == "AS" else None, []))
        elif found:
            found[-1][2].append((instruction, args))
    return found


def effective(stage_name: str | None = None) -> dict[str, str]:
    """The last value of each instruction for a stage, following FROM <stage> (the
    default target, the last stage, when no name is given)."""
    all_stages = stages()
    chain, stage = [], all_stages[-1] if stage_name is None else next(s for s in all_stages if s[1] == stage_name)
    while stage is not None:
        chain.insert(0, stage)
        stage = next((s for s in all_stages if s[1] == stage[0]), None)
    values: dict[str, str] = {}
    for _, _, instructions in chain:
        values.update({instruction: args for instruction, args in instructions})
    return values


def test_dockerfile_is_multi_stage_slim_non_root_with_flux_as_entrypoint_and_a_healthcheck():
    all_stages = stages()
    assert all_stages[0][1] == "build" and len(all_stages) >= 2
    assert dockerfile()[0] == ("ARG", "PYTHON_IMAGE=python:3.11-slim")  # the base of every stage
    for target in (None, "gpu"):
        final = effective(target)
        user = final["USER"].split(":")[0]
        assert user not in ("root", "0") and user.isdigit()
        assert json.loads(final["ENTRYPOINT"]) == ["flux"]
        assert "/health" in final["HEALTHCHECK"]
    assert any(i == "COPY" and args.startswith("--from=build") for _, _, ins in all_stages for i, args in ins)
    assert "pip wheel" in dict(all_stages[0][2])["RUN"]


def build_context_copies() -> list[str]:
    """What the build stage copies from the context (its COPY sources)."""
    return [src for instruction, args in stages()[0][2] if instruction == "COPY" for src in args.split()[:-1]]


def see_these_packages(venv: Path) -> None:
    """The new venv resolves its dependencies from the packages this test runs with: a
    ``.pth`` naming their folders (``--system-site-packages`` would name the base
    interpreter's instead, which a CI run inside its own venv does not install into)."""
    purelib = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(purelib, "parent-packages.pth").write_text("\n".join(site.getsitepackages()) + "\n")


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_the_images_build_steps_and_entrypoint_in_a_fresh_venv(tmp_path):
    """The Dockerfile without Docker: the wheel built from exactly what the build stage
    copies, installed into a fresh venv (dependencies resolved offline against this
    machine's packages), and the image's command and HEALTHCHECK run from the venv."""
    context = tmp_path / "context"
    context.mkdir()
    for source in build_context_copies():
        subprocess.run(["cp", "-r", str(ROOT / source), str(context / source)], check=True)
    wheels = tmp_path / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "--wheel-dir",
            str(wheels),
            str(context),
        ],
        check=True,
        timeout=120,
    )
    (wheel,) = wheels.glob("flux_engine-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=60)
    see_these_packages(venv)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FLUX_API_TOKEN")}
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-index", f"{wheel}[postgres]"],
        check=True,
        timeout=120,
        env=env,
    )
    flux = str(venv / "bin" / "flux")
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import flux; print(flux.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=tmp_path,
    ).stdout
    assert where.startswith(str(venv))  # the wheel's flux, not the checkout's
    assert "start" in subprocess.run([flux, "--help"], capture_output=True, text=True, check=True, env=env).stdout

    image = effective()
    command = [flux, *json.loads(image["CMD"])]
    port = free_port()
    env.update({"FLUX_HOME": str(tmp_path / "home"), "FLUX_HOST": "127.0.0.1", "FLUX_PORT": str(port)})
    server = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).json() == {"status": "ok"}:
                    break
            except httpx.HTTPError:
                pass
            assert server.poll() is None and time.monotonic() < deadline, server.stdout.read().decode()
            time.sleep(0.2)
        healthcheck = json.loads(image["HEALTHCHECK"].split("CMD", 1)[1])
        assert healthcheck[0] == "python"
        probe = subprocess.run([str(venv / "bin" / "python"), *healthcheck[1:]], env=env, timeout=10)
        assert probe.returncode == 0
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=20) == 0


# --- a worker as the manifest starts it --------------------------------------------------


def expand(arg: str, values: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion in container args."""
    return re.sub(r"\$\((\w+)\)", lambda m: values[m.group(1)], arg)


@pytest.mark.integration
def test_a_worker_started_as_the_manifest_starts_it_advertises_its_cgroup_and_drains_on_prestop(
    cluster, tmp_path, monkeypatch
):
    """The CPU worker's own arguments (labels from the downward API), a cgroup tree
    like the pod's (limits.cpu 1500m, limits.memory 3Gi) under FLUX_CGROUP_ROOT:
    GET /workers shows the cgroup's figures, not the host's; the preStop hook drains
    it and waits for it to exit 0."""
    manifest = by_name("flux-worker-cpu-zone-a")
    container = containers(manifest)[0]
    values = {
        "POD_NAME": "flux-worker-cpu-zone-a-7d9f-x2kq",
        "NODE_NAME": "node-1",
        "ZONE": manifest["spec"]["template"]["metadata"]["labels"]["topology.kubernetes.io/zone"],
    }
    args = [expand(arg, values) for arg in container["args"]]
    monkeypatch.setenv(
        "FLUX_CGROUP_ROOT",
        str(
            v2_tree(tmp_path / "cgroup", cpu_max="150000 100000", memory_max=str(3 * GiB), current=GiB, inactive_file=0)
        ),
    )
    worker = cluster.start_worker(args[2], extra_args=tuple(args[3:]))

    (shown,) = httpx.get(f"{cluster.server_url}/workers", timeout=5).json()
    assert shown["name"] == values["POD_NAME"]
    assert {k: shown["labels"][k] for k in ("pool", "node", "zone")} == {
        "pool": "cpu",
        "node": "node-1",
        "zone": "zone-a",
    }
    resources = shown["resources"]
    assert resources["cpu_total"] == 1.5 and resources["cpu_available"] <= 1.5
    assert resources["memory_total"] == 3 * GiB and 0 < resources["memory_available"] <= 2 * GiB
    assert shown["max_concurrent_executions"] == 4

    hook = container["lifecycle"]["preStop"]["exec"]["command"]
    script = re.sub(r"(?<=kill -TERM )1\b|(?<=kill -0 )1\b", str(worker.pid), hook[-1])
    pre_stop = subprocess.Popen([*hook[:-1], script])
    assert worker.wait(timeout=30) == 0  # reaped here, so the hook's kill -0 sees it gone
    assert pre_stop.wait(timeout=10) == 0
    del cluster.workers[values["POD_NAME"]]
    assert httpx.get(f"{cluster.server_url}/workers/{values['POD_NAME']}", timeout=5).json()["state"] == "OFFLINE"


# --- the Grafana dashboard (docs/production.md#dashboards) -----------------------------------------

DASHBOARD = ROOT / "deploy" / "grafana" / "flux-dashboard.json"


def test_the_grafana_dashboard_is_json_and_queries_only_metrics_flux_exports():
    from prometheus_client import generate_latest

    from flux.server.metrics import ServerMetrics

    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["panels"] and dashboard["__inputs"][0]["pluginId"] == "prometheus"
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    exported = generate_latest(ServerMetrics().registry).decode()
    families = set(re.findall(r"^# TYPE (\w+) (\w+)", exported, re.M))
    names = {name for name, kind in families} | {
        f"{name}_{suffix}" for name, kind in families for suffix in ("bucket", "count", "sum", "total")
    }
    queries = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    queries += [variable["definition"] for variable in dashboard["templating"]["list"]]
    used = {name for query in queries for name in re.findall(r"\bflux_\w+", query)}
    assert used and used <= names, used - names
    assert {"flux_execution_duration_seconds_bucket", "flux_execution_queue_wait_seconds_bucket"} <= used
