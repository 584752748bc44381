"""Why is it pending? Explanations, feasibility, pending_timeout and custom resources."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from waiting import eventually

from flux.domain.resource_request import ResourceRequest
from flux.domain.resources import Resources
from flux.scheduling.explain import infeasibility, summarize, verdict
from flux.scheduling.snapshot import GPU, WorkerView

TESTS = Path(__file__).parents[1]
GiB = 1024**3


def view(name, available=None, **kw) -> WorkerView:
    """cpu 2, memory 8 GiB, disk 100 GiB, all available but what ``available`` says."""
    total = Resources(cpu=2.0, memory=8 * GiB, disk=100 * GiB)
    base = dict(
        name=name, labels={}, total=total, available=total.updated(available or {}), max_concurrent_executions=1
    )
    return WorkerView(**{**base, **kw})


def test_summary_in_the_kubernetes_style():
    workers = [
        view("a", labels={"region": "us-east-1"}),
        view("b", labels={"region": "us-east-1"}, available={"cpu": 0.5}),
        view("c", labels={"region": "eu-west-1"}),
        view("d", labels={"region": "us-east-1"}, state="DRAINING"),
        view("e", labels={"region": "us-east-1"}, running=1),
        view("f", labels={"region": "us-east-1"}, state="DRAINING", running=1),
    ]
    verdicts = [verdict(ResourceRequest(cpu=1), {"region": "us-east-1"}, w) for w in workers]
    assert [v.message for v in verdicts] == [
        "available",
        "cpu_available 0.5 < requested 1",
        "label region=eu-west-1, wanted us-east-1",
        "drained",  # idle: DRAINED, as the worker list says
        "all 1 slots busy",
        "draining",  # still running something
    ]
    assert summarize(verdicts) == (
        "1/6 workers are available: 1 Insufficient cpu, 1 all slots busy, 1 didn't match affinity, "
        "1 drained, 1 draining."
    )


def test_feasibility_uses_totals_not_availability():
    busy = view("busy", available={"cpu": 0.0}, running=1, gpus=(GPU(0, "g", "x", 40 * GiB, 0),))
    assert infeasibility(ResourceRequest(cpu=2, gpu=1), None, [busy]) is None  # it would fit when idle
    reason = infeasibility(ResourceRequest(gpu=8), None, [busy, view("cpu-only")])
    assert reason == "no registered worker could ever satisfy it, even idle: 2 Insufficient gpu (of 2)"
    assert infeasibility(ResourceRequest(resources={"fpga": 1}), None, [busy]).endswith("1 Insufficient fpga (of 1)")


PENDING = """
    import asyncio
    from pathlib import Path
    from flux import ResourceRequest, task, workflow

    @task
    async def nap(seconds):
        await asyncio.sleep(seconds)
        return seconds

    @task
    async def held_until(gate):
        while not Path(gate).exists():
            await asyncio.sleep(0.05)
        return gate

    @workflow.with_options(affinity={"region": "us-east-1"}, requests=ResourceRequest(cpu=64))
    async def needs_cpu(ctx):
        return await nap(0)

    @workflow.with_options(requests=ResourceRequest(packages=["flux-engine>=999"]))
    async def needs_future_flux(ctx):
        return await nap(0)

    @workflow.with_options(affinity={"region": "us-east-1"})
    async def in_us(ctx):
        return await held_until(ctx.input)

    @workflow
    async def anywhere(ctx):
        return await nap(ctx.input)

    @workflow.with_options(requests=ResourceRequest(gpu=8))
    async def needs_8_gpus(ctx):
        return await nap(0)

    @workflow.with_options(requests=ResourceRequest(gpu=8), pending_timeout=1)
    async def needs_8_gpus_or_fails(ctx):
        return await nap(0)

    @workflow.with_options(requests=ResourceRequest(resources={"fpga": 1}))
    async def one_fpga(ctx):
        return await held_until(ctx.input)

    @workflow.with_options(requests=ResourceRequest(resources={"fpga": 4}))
    async def four_fpgas(ctx):
        return await nap(0)
"""


def reasons(client, execution_id) -> dict[str, str]:
    return {w["name"]: w["reason"] for w in client.placement(execution_id)["workers"]}


def test_explanation_names_each_workers_first_failing_check(cluster, client, workflow_file, tmp_path):
    client.register_file(workflow_file(PENDING))
    cluster.start_worker("a", labels={"region": "us-east-1"}, max_concurrent_executions=1)
    cluster.start_worker("b", labels={"region": "eu-west-1"}, max_concurrent_executions=1)
    cluster.start_worker("c", labels={"region": "us-east-1"})
    client.drain_worker("c")

    cpu = client.run("needs_cpu")
    pkg = client.run("needs_future_flux")
    holding, open_gate = tmp_path / "holding", tmp_path / "open"
    open_gate.touch()
    holder = client.run("in_us", str(holding))  # holds a's one slot until the test opens its gate
    eventually(lambda: client.execution(holder["id"])["state"] == "RUNNING")
    queued = client.run("in_us", str(open_gate))

    assert reasons(client, cpu["id"]) == {
        "a": "cpu_available 2.0 < requested 64",
        "b": "label region=eu-west-1, wanted us-east-1",
        "c": "drained",
    }
    assert client.placement(cpu["id"])["workers"][2]["state"] == client.show_worker("c")["state"] == "DRAINED"
    assert client.placement(cpu["id"])["summary"] == (
        "0/3 workers are available: 1 Insufficient cpu, 1 didn't match affinity, 1 drained."
    )
    assert reasons(client, pkg["id"])["b"] == "package flux-engine 0.1.0 does not satisfy >=999"
    assert reasons(client, queued["id"])["a"] == "all 1 slots busy"

    # the same summary was recorded as an event, and the unsatisfiable one flagged at once
    eventually(lambda: client.execution(cpu["id"])["unschedulable"])
    events = client.events(cpu["id"])
    pending = [e["value"]["summary"] for e in events if e["type"] == "WORKFLOW_PENDING"]
    assert pending[0].startswith("0/3 workers are available")
    assert "WORKFLOW_UNSCHEDULABLE" in [e["type"] for e in events]

    # once the slot frees, the queued one runs and the explanation says who won and why
    holding.touch()
    done = client.wait(queued["id"], 30)
    assert done["state"] == "COMPLETED"
    explained = client.placement(queued["id"])
    assert explained["chosen"]["worker"] == "a"
    assert explained["summary"] == "dispatched to a: least loaded of 1 eligible: 0/1 slots busy"
    summaries = [e["value"]["summary"] for e in client.events(queued["id"]) if e["type"] == "WORKFLOW_PENDING"]
    assert summaries and "1 all slots busy" in summaries[0]

    result = subprocess.run(
        [sys.executable, "-m", "flux.cli", "execution", "explain", cpu["id"], "--server-url", cluster.server_url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "0/3 workers are available" in result.stdout and "cpu_available 2.0 < requested 64" in result.stdout


def test_gpu8_on_one_gpu_workers_is_flagged_at_once_and_warned_at_registration_with_fake_nvml(
    cluster, client, workflow_file, monkeypatch
):
    """No GPU here: the two workers' one card each is a fake NVML's (tests/fakes.py)."""
    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    cluster.start_worker("g1", extra_args=("--gpu-source", "nvml:fakes:ONE_FREE_GPU"))
    cluster.start_worker("g2", extra_args=("--gpu-source", "nvml:fakes:ONE_FREE_GPU"))
    registered = {w["name"]: w for w in client.register_file(workflow_file(PENDING))}
    assert registered["needs_8_gpus"]["warnings"] == [
        "no registered worker could ever satisfy it, even idle: 2 Insufficient gpu (of 2)"
    ]
    assert registered["in_us"]["warnings"] == [
        "no registered worker could ever satisfy it, even idle: 2 didn't match affinity (of 2)"
    ]
    execution = client.run("needs_8_gpus")
    flagged = eventually(lambda: client.execution(execution["id"])["unschedulable"])
    assert flagged == "no registered worker could ever satisfy it, even idle: 2 Insufficient gpu (of 2)"
    # at once: by the first round that looked at it, before that round's explanation
    assert [e["type"] for e in client.events(execution["id"])][:3] == [
        "WORKFLOW_SCHEDULED",
        "WORKFLOW_UNSCHEDULABLE",
        "WORKFLOW_PENDING",
    ]
    # it still waits (a worker may register) while the rounds go on placing other work
    assert client.wait(client.run("anywhere", 0)["id"], 30)["state"] == "COMPLETED"
    assert client.execution(execution["id"])["state"] == "SCHEDULED"

    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "flux.cli",
            "workflow",
            "register",
            str(workflow_file(PENDING, "again.py")),
            "--server-url",
            cluster.server_url,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Warning: workflow 'needs_8_gpus': no registered worker could ever satisfy it" in result.stderr


def test_pending_timeout_fails_with_the_reason(cluster, client, workflow_file):
    client.register_file(workflow_file(PENDING))
    cluster.start_worker("w")
    execution = client.run("needs_8_gpus_or_fails")
    failed = client.wait(execution["id"], 30)
    assert failed["state"] == "FAILED"
    assert failed["error"] == (
        "pending_timeout of 1s exceeded: "
        "no registered worker could ever satisfy it, even idle: 1 Insufficient gpu (of 1)"
    )


def test_custom_resources_matched_exhausted_and_released_under_reserve(cluster, client, workflow_file, tmp_path):
    client.register_file(workflow_file(PENDING))
    cluster.start_worker(
        "f", max_concurrent_executions=4, extra_args=("--resource", "fpga=2", "--allocation", "reserve")
    )
    assert client.show_worker("f")["custom_resources"] == {"fpga": 2.0}
    gate = tmp_path / "gate"
    ids = [client.run("one_fpga", str(gate))["id"] for _ in range(3)]  # each holds its fpga until the gate opens
    eventually(lambda: [client.execution(i)["state"] for i in ids].count("RUNNING") == 2)
    waiting = next(i for i in ids if client.execution(i)["state"] == "SCHEDULED")
    assert reasons(client, waiting)["f"] == "resource fpga 0 after reservations < requested 1"
    gate.touch()
    assert {client.wait(i, 30)["state"] for i in ids} == {"COMPLETED"}  # released, then the third ran

    too_many = client.run("four_fpgas")
    assert eventually(lambda: client.execution(too_many["id"])["unschedulable"]).endswith("1 Insufficient fpga (of 1)")


def test_worker_refuses_malformed_custom_resources(cluster):
    process = cluster.start_worker("bad", extra_args=("--resource", "FPGA=x"), wait=False)
    assert process.wait(timeout=60) != 0
    assert "--resource" in cluster.log("worker-bad")
