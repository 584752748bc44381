"""Runners and ceilings with real child processes (docker and cgroup v2 only where this machine has them)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from flux.domain.allotment import Allotment
from flux.worker.runners.base import Job
from flux.worker.runners.ceilings import CeilingPolicy, CgroupMemory, CoreAllotter
from flux.worker.runners.docker import DockerRunner

HOGS = """
    import asyncio, os
    from flux import ResourceRequest, task, workflow

    @task
    async def allocate(n_bytes):
        block = bytearray(n_bytes)
        return len(block)

    @task
    async def nap(seconds):
        await asyncio.sleep(seconds)
        return seconds

    @workflow
    async def hog(ctx):
        return await allocate(ctx.input)

    @workflow.with_options(requests=ResourceRequest(memory="256Mi"))
    async def small_hog(ctx):
        return await allocate(ctx.input)

    @workflow
    async def sibling(ctx):
        return await nap(ctx.input)

    @workflow.with_options(requests=ResourceRequest(cpu=1))
    async def one_core(ctx):
        return {"cpus": len(os.sched_getaffinity(0)), "omp": os.environ.get("OMP_NUM_THREADS")}
"""

GiB = 1024**3


@pytest.fixture
def hogs(client, workflow_file):
    client.register_file(workflow_file(HOGS))
    return client


def test_child_past_subprocess_memory_limit_dies_alone(cluster, hogs):
    cluster.start_worker("w1", max_concurrent_executions=2, extra_args=("--subprocess-memory-limit", "512Mi"))
    sibling = hogs.run("sibling", 1.0)
    hog = hogs.run("hog", 2 * GiB, wait=60)
    assert hog["state"] == "FAILED"
    assert hog["error"].startswith("memory limit 512 MiB exceeded (subprocess_memory_limit)")
    assert hogs.wait(sibling["id"], 60)["state"] == "COMPLETED"
    assert hogs.run("hog", 1024, wait=60)["output"] == 1024  # under the limit works


def test_enforced_memory_request_fails_with_a_clear_reason(cluster, hogs):
    cluster.start_worker("w1", extra_args=("--enforce-requests",))
    failed = hogs.run("small_hog", 1 * GiB, wait=60)
    assert failed["state"] == "FAILED" and failed["error"].startswith("memory limit 256 MiB exceeded (memory request)")
    assert "RLIMIT_AS" in cluster.log("worker-w1")  # the log says which mechanism (no cgroup v2 here)


def test_enforced_cpu_request_pins_the_child_and_sizes_thread_pools(cluster, hogs):
    cluster.start_worker("w1", extra_args=("--enforce-requests",))
    assert hogs.run("one_core", None, wait=60)["output"] == {"cpus": 1, "omp": "1"}


def test_without_enforcement_the_request_is_routing_guidance_only(cluster, hogs):
    """The spec's default: match is not enforce."""
    cluster.start_worker("w1")
    output = hogs.run("one_core", None, wait=60)["output"]
    assert output["cpus"] == len(__import__("os").sched_getaffinity(0)) and output["omp"] is None
    assert hogs.run("small_hog", 512 * 1024**2, wait=60)["state"] == "COMPLETED"


def test_core_allotter_spreads_children_over_least_used_cores():
    cores = CoreAllotter([0, 1, 2, 3])
    first, second = cores.take(2), cores.take(2)
    assert set(first).isdisjoint(second)
    cores.release(first)
    assert cores.take(1) in ([0], [1], [2], [3]) and cores.take(8) == [0, 1, 2, 3]


def test_limit_policy_plans_from_the_allotment_and_worker_ceiling():
    policy = CeilingPolicy(subprocess_memory_limit=GiB, cores=CoreAllotter([0, 1]))
    plain = policy.plan(Allotment.from_json({"memory": 2 * GiB, "cpu": 1, "gpus": [1]}))
    assert (plain.memory, plain.memory_source, plain.cpus) == (GiB, "subprocess_memory_limit", None)
    assert plain.env == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "1"}
    enforcing = CeilingPolicy(subprocess_memory_limit=GiB, enforce_requests=True, cores=CoreAllotter([0, 1]))
    shaped = enforcing.plan(Allotment.from_json({"memory": 2 * GiB, "cpu": 1.5}))
    assert (shaped.memory, shaped.memory_source, shaped.cpus) == (2 * GiB, "memory request", [0, 1])
    assert shaped.env["OMP_NUM_THREADS"] == "2"


def test_cgroup_memory_on_a_fake_cgroupfs(tmp_path: Path):
    """This machine has no writable cgroup v2 memory controller: a directory stands in for cgroupfs."""
    group = CgroupMemory(tmp_path).create(tmp_path, "flux-e1", 256 * 1024**2)
    assert (group / "memory.max").read_text() == str(256 * 1024**2)
    (group / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert CgroupMemory.oom_killed(group)
    (group / "memory.events").unlink()
    (group / "memory.max").unlink()
    CgroupMemory.remove(group)
    assert not group.exists()


def test_docker_runner_builds_the_documented_command_line():
    runner = DockerRunner("flux:latest", memory=GiB, cpus=2, extra_args=("--network", "host"))
    job = Job(
        id="abc",
        workflow_name="w",
        workflow_version=1,
        source="",
        filename="w.py",
        input=None,
        attempt=2,
        completed_tasks={},
        allotment=Allotment.from_json({"cpu": 4, "memory": 8 * GiB, "gpus": [0, 2]}),
    )
    assert runner.command(job) == [
        "docker",
        "run",
        "--rm",
        "-i",
        "--init",
        "--name",
        "flux-abc-2",
        "--memory",
        str(GiB),
        "--cpus",
        "2",
        "--gpus",
        '"device=0,2"',
        "-e",
        "NVIDIA_VISIBLE_DEVICES=0,2",
        "--network",
        "host",
        "flux:latest",
        "python",
        "-m",
        "flux.worker.runners.child",
    ]
    enforcing = DockerRunner("flux:latest", memory=GiB, enforce_requests=True)
    command = enforcing.command(job)
    assert command[command.index("--memory") + 1] == str(8 * GiB) and command[command.index("--cpus") + 1] == "4"
    assert enforcing.plan(job).env["OMP_NUM_THREADS"] == "4"


def _docker_engine_available() -> bool:
    if not shutil.which("docker"):
        return False
    return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0


@pytest.mark.skipif(not _docker_engine_available(), reason="no Docker engine on this machine ('docker info' fails)")
def test_docker_runner_runs_an_execution_in_a_container(cluster, hogs):  # pragma: no cover - needs a Docker engine
    cluster.start_worker("d1", runner="docker", extra_args=("--docker-image", "flux-engine:test"))
    assert hogs.run("sibling", 0, wait=120)["state"] == "COMPLETED"


PIDS = """
    import os
    from flux import ResourceRequest, task, workflow

    @task
    async def pid():
        return os.getpid()

    @workflow
    async def which_process(ctx):
        return await pid()
"""


def _pids(client, runs):
    return [client.run("which_process", None, wait=60)["output"] for _ in range(runs)]


def test_clean_children_serve_again_with_modules_warm(cluster, client, workflow_file):
    client.register_file(workflow_file(PIDS))
    cluster.start_worker("reuse", max_concurrent_executions=1)
    pids = _pids(client, 6)
    assert len(set(pids)) < len(pids)  # some child ran more than one execution


def test_one_execution_per_child_gives_each_a_fresh_process(cluster, client, workflow_file):
    client.register_file(workflow_file(PIDS))
    cluster.start_worker("fresh", max_concurrent_executions=1, extra_args=("--max-executions-per-child", "1"))
    pids = _pids(client, 4)
    assert len(set(pids)) == 4


def test_children_with_ceilings_are_never_reused(cluster, client, workflow_file):
    client.register_file(workflow_file(PIDS))
    cluster.start_worker("capped", max_concurrent_executions=1, extra_args=("--subprocess-memory-limit", "1Gi"))
    pids = _pids(client, 4)
    assert len(set(pids)) == 4


UNREACHABLE_ENGINE = "tcp://127.0.0.1:1"  # nothing listens there: the docker client fails at once


@pytest.mark.integration
@pytest.mark.skipif(not shutil.which("docker"), reason="no docker client on this machine")
def test_docker_runner_without_an_engine_refuses_to_start_unless_a_fallback_is_asked(cluster, hogs, monkeypatch):
    """A real worker, the real docker client, an engine that cannot be reached (this
    machine has none): one clear error and exit 1; with --docker-fallback subprocess
    it warns, registers and runs executions as child processes."""
    monkeypatch.setenv("DOCKER_HOST", UNREACHABLE_ENGINE)
    refused = subprocess.run(
        [
            sys.executable,
            "-m",
            "flux.cli",
            "start",
            "worker",
            "d0",
            "--runner",
            "docker",
            "--server-url",
            cluster.server_url,
            "--home",
            str(cluster.home),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 1
    assert (
        f"cannot reach a Docker engine: Cannot connect to the Docker daemon at {UNREACHABLE_ENGINE}" in refused.stderr
    )
    assert "--docker-fallback subprocess" in refused.stderr and "Traceback" not in refused.stderr

    cluster.start_worker("d1", runner="docker", extra_args=("--docker-fallback", "subprocess"))
    assert "running executions as child processes instead" in cluster.log("worker-d1")
    assert hogs.run("sibling", 0, wait=60)["state"] == "COMPLETED"
