"""The resource model end to end (worker-resources.md), through real processes.

Every test runs a real server and real ``flux start worker`` processes (LocalCluster),
but for the GPU worker, which is made up (no GPU here) and named so.
Workers publish what they really probed on this machine (``--gpu-source none``), so
requests either fit this host or, deliberately, are far larger than any host we run on
(cpu=4096, memory="1Pi", disk="1Ei", gpu=1 with GPU detection off).

"Stays SCHEDULED" is never proved by waiting alone: each such test also runs a
satisfiable execution submitted *after* the unsatisfiable ones and sees it complete,
so at least one dispatch round considered (and passed over) the stuck executions
while a worker with free slots was online; no fixed wait is added to it.
"""

from __future__ import annotations

import json
import platform
import socket
import subprocess
import sys
import time

import httpx
import psutil
import pytest

from flux.client import FluxClientError
from flux.worker import probe

pytestmark = pytest.mark.integration

#: Generous: a loaded 2-core machine starting Python children can be slow.
WAIT = 45.0
Gi = 1024**3

BASE = """
import asyncio

from flux import ResourceRequest, task, workflow


@task
async def where(label: str) -> str:
    return label


@task
async def nap(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "rested"
"""


def _completed(execution: dict) -> dict:
    assert execution["state"] == "COMPLETED", execution
    return execution


def _assert_stays_scheduled(client, execution_ids: list[str]) -> None:
    """SCHEDULED with no worker. Called once an execution submitted after these was
    placed: a round has considered them and passed them over, which waiting proves not."""
    for execution_id in execution_ids:
        execution = client.execution(execution_id)
        assert (execution["state"], execution["worker_name"]) == ("SCHEDULED", None), execution


def _wait_for_claims(client, execution_ids: list[str], timeout: float = WAIT) -> dict[str, str]:
    """execution id -> the worker dispatch gave it (set at claim time, before it runs)."""
    deadline = time.monotonic() + timeout
    while True:
        claims = {i: client.execution(i)["worker_name"] for i in execution_ids}
        if all(claims.values()) or time.monotonic() > deadline:
            return claims
        time.sleep(0.05)


def _registration(name: str = "raw") -> dict:
    """A well-formed POST /workers/register body: this machine's real probe, no GPUs."""
    return {"name": name, "heartbeat_interval": 5.0, **probe.get_resources_info({"pool": "raw"}, 1, gpu_source="none")}


def _field_errors(response: httpx.Response) -> list[tuple[str, ...]]:
    return [tuple(str(part) for part in item["loc"]) for item in response.json()["errors"]]


# --- label affinity ----------------------------------------------------------------------


def test_spec_affinity_routes_to_worker_with_matching_label(cluster, client, workflow_file):
    cluster.start_worker("us", labels={"region": "us-east-1"})
    cluster.start_worker("eu", labels={"region": "eu-west-1"})
    client.register_file(
        workflow_file(
            BASE
            + """
@workflow.with_options(affinity={"region": "us-east-1"})
async def in_us(ctx):
    return await where("us")


@workflow.with_options(affinity={"region": "eu-west-1"})
async def in_eu(ctx):
    return await where("eu")
"""
        )
    )
    # Submitted together, so least-loaded spreading would put some on the other
    # worker if affinity were only a preference; it is a hard constraint.
    us = [client.run("in_us", i)["id"] for i in range(4)]
    eu = [client.run("in_eu", i)["id"] for i in range(3)]
    for execution_id in us:
        execution = _completed(client.wait(execution_id, WAIT))
        assert (execution["worker_name"], execution["output"]) == ("us", "us")
    for execution_id in eu:
        execution = _completed(client.wait(execution_id, WAIT))
        assert (execution["worker_name"], execution["output"]) == ("eu", "eu")


# --- resource thresholds -----------------------------------------------------------------


def test_spec_packages_threshold_runs_when_installed_and_waits_scheduled_until_cancelled(
    cluster, client, workflow_file
):
    cluster.start_worker("w1")
    client.register_file(
        workflow_file(
            BASE
            + """
@workflow.with_options(requests=ResourceRequest(packages=["flux-engine>=0.1"]))
async def needs_flux(ctx):
    return await where("ok")


@workflow.with_options(requests=ResourceRequest(packages=["Flux_Engine==0.1.*", "packaging"]))
async def needs_flux_noncanonical(ctx):
    return await where("ok")


@workflow.with_options(requests=ResourceRequest(packages=["definitely-not-installed-pkg"]))
async def needs_missing(ctx):
    return await where("never")


@workflow.with_options(requests=ResourceRequest(packages=["flux-engine>=999"]))
async def needs_future_flux(ctx):
    return await where("never")
"""
        )
    )
    missing = client.run("needs_missing")
    too_new = client.run("needs_future_flux")
    assert missing["requests"] == {"packages": ["definitely-not-installed-pkg"]}

    for name in ("needs_flux", "needs_flux_noncanonical"):
        execution = _completed(client.run(name, wait=WAIT))
        assert (execution["worker_name"], execution["output"]) == ("w1", "ok")
    _assert_stays_scheduled(client, [missing["id"], too_new["id"]])

    # "... until a satisfying worker registers (or the workflow is cancelled)".
    for execution in (missing, too_new):
        assert client.cancel(execution["id"])["state"] == "CANCELLED"
        final = client.execution(execution["id"])
        assert (final["state"], final["worker_name"]) == ("CANCELLED", None)
        types = [e["type"] for e in client.events(execution["id"])]
        assert (types[0], types[-1]) == ("WORKFLOW_SCHEDULED", "WORKFLOW_CANCELLED")
        # in between, only the placement notes of "Why is it pending?": never a claim
        assert set(types[1:-1]) <= {"WORKFLOW_PENDING", "WORKFLOW_UNSCHEDULABLE"}


def test_spec_every_dimension_is_a_greater_or_equal_threshold(cluster, client, workflow_file):
    cluster.start_worker("w1")
    cpu_available = client.show_worker("w1")["resources"]["cpu_available"]
    client.register_file(
        workflow_file(
            BASE
            + f"""
@workflow.with_options(requests=ResourceRequest(cpu={cpu_available!r}))
async def cpu_exactly_available(ctx):
    return await where("ok")


@workflow.with_options(requests=ResourceRequest(cpu={cpu_available + 1!r}))
async def cpu_one_more(ctx):
    return await where("never")


@workflow.with_options(requests=ResourceRequest(cpu=1, memory="64Mi", disk="1Mi", packages=["packaging>=20"]))
async def modest(ctx):
    return await where("ok")
"""
        )
    )
    one_more = client.run("cpu_one_more")
    for name in ("cpu_exactly_available", "modest"):
        execution = _completed(client.run(name, wait=WAIT))
        assert execution["worker_name"] == "w1"
    _assert_stays_scheduled(client, [one_more["id"]])


def test_spec_request_larger_than_any_worker_stays_scheduled(cluster, client, workflow_file):
    cluster.start_worker("w1")
    cluster.start_worker("w2", labels={"region": "us-east-1"})
    client.register_file(
        workflow_file(
            BASE
            + """
@workflow.with_options(requests=ResourceRequest(cpu=4096))
async def huge_cpu(ctx):
    return await where("never")


@workflow.with_options(requests=ResourceRequest(memory="1Pi"))
async def huge_memory(ctx):
    return await where("never")


@workflow.with_options(requests=ResourceRequest(disk="1Ei"))
async def huge_disk(ctx):
    return await where("never")


@workflow.with_options(requests=ResourceRequest(gpu=1))
async def needs_gpu(ctx):
    return await where("never")


@workflow.with_options(requests=ResourceRequest(cpu=4096), affinity={"region": "us-east-1"})
async def huge_cpu_in_us(ctx):
    return await where("never")


@workflow
async def anything(ctx):
    return await where("ok")
"""
        )
    )
    stuck = [client.run(name)["id"] for name in ("huge_cpu", "huge_memory", "huge_disk", "needs_gpu", "huge_cpu_in_us")]
    # Queued behind the stuck ones, and still dispatched: unmatched work does not block the queue.
    execution = _completed(client.run("anything", wait=WAIT))
    assert execution["worker_name"] in ("w1", "w2")
    _assert_stays_scheduled(client, stuck)
    for worker in ("w1", "w2"):
        assert client.show_worker(worker)["running"] == 0


def test_spec_when_no_worker_matches_execution_stays_scheduled_until_a_satisfying_worker_registers(
    cluster, client, workflow_file
):
    client.register_file(
        workflow_file(
            BASE
            + """
@workflow.with_options(affinity={"pool": "late"})
async def late_pool(ctx):
    return await where("late")


@workflow
async def anything(ctx):
    return await where("ok")
"""
        )
    )
    waiting = client.run("late_pool")
    assert waiting["state"] == "SCHEDULED"
    cluster.start_worker("early", labels={"pool": "early"})
    assert _completed(client.run("anything", wait=WAIT))["worker_name"] == "early"
    _assert_stays_scheduled(client, [waiting["id"]])

    cluster.start_worker("late", labels={"pool": "late"})
    execution = _completed(client.wait(waiting["id"], WAIT))
    assert (execution["worker_name"], execution["output"]) == ("late", "late")


# --- choosing among eligible workers -----------------------------------------------------


def test_spec_unconstrained_runs_anywhere_and_default_choice_is_least_loaded(cluster, client, workflow_file):
    # Two slots each: with one slot, slot gating alone would force a spread and the
    # test could not tell least-loaded from "first registered worker with a free slot".
    cluster.start_worker("a", max_concurrent_executions=2, labels={"pool": "x"})
    cluster.start_worker("b", max_concurrent_executions=2, labels={"pool": "y"})
    client.register_file(
        workflow_file(
            BASE
            + """
@workflow
async def sleepy(ctx):
    return await nap(1.5)


@workflow.with_options(requests=ResourceRequest(packages=["flux-engine"]))
async def sleepy_constrained(ctx):
    return await nap(1.5)
"""
        )
    )
    unconstrained = [client.run("sleepy")["id"] for _ in range(2)]
    claims = _wait_for_claims(client, unconstrained)
    assert sorted(claims.values()) == ["a", "b"], claims
    for execution_id in unconstrained:
        _completed(client.wait(execution_id, WAIT))

    # The same soft choice applies among workers that pass a resource check.
    constrained = [client.run("sleepy_constrained")["id"] for _ in range(2)]
    claims = _wait_for_claims(client, constrained)
    assert sorted(claims.values()) == ["a", "b"], claims
    for execution_id in constrained:
        _completed(client.wait(execution_id, WAIT))


# --- what is published -------------------------------------------------------------------


def test_spec_resource_request_is_serialised_with_the_workflow(cluster, client, workflow_file):
    path = workflow_file(
        BASE
        + """
@workflow.with_options(
    requests=ResourceRequest(
        cpu=4,
        memory="8Gi",
        disk=10_000_000_000,
        gpu=1,
        packages=["torch>=2.0", "transformers"],
    ),
    affinity={"license": "matlab", "region": "us-east-1"},
)
async def train(ctx):
    return await where("never")


@workflow.with_options(requests=ResourceRequest.with_cpu("500m").with_memory("512Mi"))
async def short_form(ctx):
    return await where("never")
"""
    )
    client.register_file(path)
    expected = {
        "cpu": 4.0,
        "memory": 8 * 1024**3,
        "disk": 10_000_000_000,
        "gpu": 1,
        "packages": ["torch>=2.0", "transformers"],
    }
    shown = client.show_workflow("train")
    assert shown["requests"] == expected
    assert shown["affinity"] == {"license": "matlab", "region": "us-east-1"}
    assert client.show_workflow("short_form")["requests"] == {"cpu": 0.5, "memory": 512 * 1024**2}

    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "flux.cli",
            "workflow",
            "show",
            "train",
            "--server-url",
            cluster.server_url,
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    from_cli = json.loads(result.stdout)
    assert from_cli["requests"] == expected
    assert from_cli["affinity"] == {"license": "matlab", "region": "us-east-1"}

    # Each execution carries the request it was submitted with.
    execution = client.run("train")
    assert (execution["requests"], execution["affinity"]) == (expected, shown["affinity"])
    client.cancel(execution["id"])


def test_spec_unknown_resource_fields_are_rejected_at_decoration_time(client, workflow_file):
    path = workflow_file(
        BASE
        + """
@workflow.with_options(requests=ResourceRequest(cpu=1, fpga=1))
async def wants_fpga(ctx):
    return await where("never")
"""
    )
    with pytest.raises(FluxClientError) as excinfo:
        client.register_file(path)
    assert "unknown field 'fpga'" in str(excinfo.value)
    assert "labels" in str(excinfo.value) and "affinity" in str(excinfo.value)
    with pytest.raises(FluxClientError, match="not registered"):
        client.show_workflow("wants_fpga")


def test_spec_worker_publishes_resources_runtime_labels_slots_and_packages(cluster, client):
    cluster.start_worker("w1", labels={"region": "eu-west-1", "license": "matlab"}, max_concurrent_executions=3)
    worker = client.show_worker("w1")
    assert worker["state"] == "ONLINE"
    assert worker["labels"] == {"region": "eu-west-1", "license": "matlab"}
    assert worker["max_concurrent_executions"] == 3

    resources = worker["resources"]
    for key in ("cpu_total", "cpu_available", "memory_total", "memory_available", "disk_total", "disk_free"):
        assert resources[key] > 0, key
    assert resources["cpu_available"] <= resources["cpu_total"] == psutil.cpu_count(logical=True)
    assert resources["memory_available"] <= resources["memory_total"] == psutil.virtual_memory().total
    assert resources["disk_free"] <= resources["disk_total"]
    assert resources["gpus"] == []  # --gpu-source none, and no NVIDIA GPU here anyway
    assert resources["sampled_at"] > 0

    runtime = worker["runtime"]
    assert runtime["python_version"] == platform.python_version()
    assert runtime["os_name"] == platform.system()
    assert runtime["hostname"] == socket.gethostname()

    packages = {p["name"]: p["version"] for p in worker["packages"]}
    assert packages["flux-engine"] == probe.installed_packages()["flux-engine"]
    assert "psutil" in packages and "packaging" in packages
    assert all(name == name.lower() and "_" not in name and "." not in name for name in packages)


# --- a made-up worker with GPUs, registered by hand --------------------------------------


def test_spec_gpu_counts_published_gpus_with_free_memory_and_thresholds_are_inclusive_with_made_up_gpus(
    cluster, client, workflow_file
):
    """No GPU here, so a made-up worker with two NVIDIA GPUs (one with no free memory)
    registers over the API with fixed figures: the test speaks for it, and no worker
    process runs. Dispatch assigns to it (CLAIMED, worker_name set); nothing claims the
    work, which is fine: placement is what is under test."""
    token = (cluster.home / "bootstrap-token").read_text().strip()
    gpus = [
        {
            "index": 0,
            "uuid": "GPU-free",
            "name": "NVIDIA H100",
            "memory_total": 80 * Gi,
            "memory_available": 10 * Gi,
            "utilization": 12.5,
        },
        {
            "index": 1,
            "uuid": "GPU-full",
            "name": "NVIDIA H100",
            "memory_total": 80 * Gi,
            "memory_available": 0,
            "utilization": 100.0,
        },
    ]
    registration = _registration("gpu-box")
    registration.update(
        heartbeat_interval=600.0,  # it never heartbeats; keep it ONLINE for the test
        max_concurrent_executions=10,
        packages=[{"name": "torch", "version": "2.1.0+cu121"}, {"name": "numpy", "version": "1.26.4"}],
    )
    registration["resources"].update(
        cpu_total=8.0,
        cpu_available=8.0,
        memory_total=32 * Gi,
        memory_available=16 * Gi,
        disk_total=200 * 10**9,
        disk_free=100 * 10**9,
        gpus=gpus,
    )
    response = httpx.post(
        f"{cluster.server_url}/workers/register",
        json=registration,
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    assert response.status_code == 200, response.text
    assert client.show_worker("gpu-box")["resources"]["gpus"] == gpus

    client.register_file(
        workflow_file(
            BASE
            + """
@workflow.with_options(requests=ResourceRequest(gpu=2))
async def two_gpus(ctx):
    return 0


@workflow.with_options(requests=ResourceRequest(memory=16 * 1024**3 + 1))
async def one_byte_too_much(ctx):
    return 0


@workflow.with_options(requests=ResourceRequest(packages=["torch>=2.2"]))
async def newer_torch(ctx):
    return 0


@workflow.with_options(requests=ResourceRequest(
    cpu=8, memory="16Gi", disk="100G", gpu=1, packages=["torch==2.1.0", "numpy>=1.26"],
))
async def exactly_what_it_has(ctx):
    return 0
"""
        )
    )
    stuck = [client.run(name)["id"] for name in ("two_gpus", "one_byte_too_much", "newer_torch")]
    fits = client.run("exactly_what_it_has")["id"]
    assert _wait_for_claims(client, [fits]) == {fits: "gpu-box"}
    assert client.execution(fits)["state"] == "CLAIMED"
    _assert_stays_scheduled(client, stuck)
    for execution_id in (*stuck, fits):
        assert client.cancel(execution_id)["state"] == "CANCELLED"


# --- malformed input is refused with a reason --------------------------------------------


def test_spec_malformed_worker_registration_is_refused_with_a_reason(cluster):
    token = (cluster.home / "bootstrap-token").read_text().strip()
    auth = {"Authorization": f"Bearer {token}"}
    url = f"{cluster.server_url}/workers/register"
    with httpx.Client(timeout=10) as http:
        bad_cpu = _registration()
        bad_cpu["resources"]["cpu_total"] = "lots"
        response = http.post(url, json=bad_cpu, headers=auth)
        assert response.status_code == 422
        assert ("body", "resources", "cpu_total") in _field_errors(response)

        no_resources = _registration()
        del no_resources["resources"]
        response = http.post(url, json=no_resources, headers=auth)
        assert response.status_code == 422
        assert ("body", "resources") in _field_errors(response)

        negative_memory = _registration()
        negative_memory["resources"]["memory_available"] = -1
        response = http.post(url, json=negative_memory, headers=auth)
        assert response.status_code == 422
        assert ("body", "resources", "memory_available") in _field_errors(response)

        custom_resource = _registration()
        custom_resource["resources"]["fpga"] = 2
        response = http.post(url, json=custom_resource, headers=auth)
        assert response.status_code == 422
        assert ("body", "resources", "fpga") in _field_errors(response)

        for headers in ({"Authorization": "Bearer not-the-token"}, {}):
            response = http.post(url, json=_registration(), headers=headers)
            assert response.status_code == 401
            assert "bootstrap token" in response.json()["detail"]

        # None of the above registered anything; the well-formed payload does.
        assert http.get(f"{cluster.server_url}/workers/raw").status_code == 404
        response = http.post(url, json=_registration(), headers=auth)
        assert response.status_code == 200 and response.json()["session_token"]
        assert http.get(f"{cluster.server_url}/workers/raw").json()["labels"] == {"pool": "raw"}


def test_spec_invalid_request_in_api_workflow_registration_is_refused(cluster):
    source = "from flux import workflow\n\n@workflow\nasync def x(ctx):\n    return 1\n"
    with httpx.Client(base_url=cluster.server_url, timeout=10) as http:
        for requests, named in (
            ({"memory": "8Gb"}, "memory"),
            ({"cpu": 1, "fpga": 1}, "fpga"),
            ({"gpu": 0}, "gpu"),
            ({"gpu": 1.5}, "gpu"),
            ({"gpu": 0.5, "gpu_memory": "lots"}, "gpu_memory"),
        ):
            response = http.post(
                "/workflows", json={"source": source, "workflows": [{"name": "x", "requests": requests}]}
            )
            assert response.status_code == 422, response.text
            detail = response.json()["detail"]
            assert isinstance(detail, str) and named in detail and "workflow 'x'" in detail
        assert http.get("/workflows/x").status_code == 404

        response = http.post(
            "/workflows", json={"source": source, "workflows": [{"name": "x", "requests": {"memory": "8Gi"}}]}
        )
        assert response.status_code == 201
        assert response.json()[0]["requests"] == {"memory": 8 * 1024**3}
