"""Allotment and reserve mode: the pure core, then real processes with a fake NVML (no GPU here)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from waiting import eventually

from flux.domain.allotment import Allotment
from flux.domain.resource_request import ResourceRequest
from flux.domain.resources import Resources
from flux.scheduling.allocation import with_allotments
from flux.scheduling.demand import Demand
from flux.scheduling.filters.gpu import usable_gpus
from flux.scheduling.placement import place
from flux.scheduling.snapshot import GPU, WorkerView

GiB = 1024**3
TESTS = Path(__file__).parents[1]


def worker(allocation="sample", max_concurrent_executions=4, gpus=2, cpu=2.0, custom=None) -> WorkerView:
    return WorkerView(
        name="w",
        labels={},
        total=Resources(cpu=cpu, memory=8 * GiB, disk=100 * GiB, **(custom or {})),
        gpus=tuple(GPU(i, f"GPU-{i}", "Fake", 80 * GiB, 80 * GiB) for i in range(gpus)),
        max_concurrent_executions=max_concurrent_executions,
        allocation=allocation,
    )


def demand(i, **request) -> Demand:
    return Demand(f"e{i}", ResourceRequest(**request), None)


@pytest.mark.parametrize("allocation", ["sample", "reserve"])
def test_gpu_executions_get_distinct_indexes_while_cards_are_free(allocation):
    placed = place([demand(1, gpu=1), demand(2, gpu=1)], [worker(allocation)])
    assert [p.allotment.to_json()["gpus"] for p in placed] == [[0], [1]]


def test_sample_mode_shares_gpus_once_all_are_allotted_as_the_spec_says():
    placed = place([demand(i, gpu=1) for i in range(3)], [worker("sample")])
    assert [p.allotment.to_json()["gpus"] for p in placed] == [[0], [1], [0]]


def test_reserve_mode_never_double_books_a_gpu():
    placed = place([demand(i, gpu=1) for i in range(3)], [worker("reserve")])
    assert [p.execution_id for p in placed] == ["e0", "e1"]


def test_reserve_mode_refuses_the_third_cpu1_on_a_2cpu_worker_within_one_round():
    assert [p.execution_id for p in place([demand(i, cpu=1) for i in range(3)], [worker("reserve")])] == ["e0", "e1"]
    assert len(place([demand(i, cpu=1) for i in range(3)], [worker("sample")])) == 3  # the spec's threshold model


def test_running_allotments_reduce_reserve_availability_and_mark_gpus():
    view = with_allotments(
        worker("reserve"), map(Allotment.from_json, [{"cpu": 1, "memory": 6 * GiB, "gpus": [1]}, {}])
    )
    assert (view.available["cpu"], view.available["memory"], view.gpu_allotted, usable_gpus(view)) == (
        1,
        2 * GiB,
        {1: 1},
        1,
    )
    sampled = with_allotments(worker("sample"), [Allotment.from_json({"cpu": 1, "gpus": [1]})])
    assert (sampled.available["cpu"], usable_gpus(sampled)) == (2, 2)  # sample mode: only the live sample counts


def _wait_running(client, ids, count, timeout=30):
    def running():
        states = [client.execution(i)["state"] for i in ids]
        return states if states.count("RUNNING") >= count else None

    return eventually(running, timeout, f"never {count} running")


GPU_WORK = """
    import asyncio, os
    from flux import ResourceRequest, task, workflow

    @task
    async def visible(seconds):
        await asyncio.sleep(seconds)
        return os.environ.get("CUDA_VISIBLE_DEVICES")

    @workflow.with_options(requests=ResourceRequest(gpu=1))
    async def one_gpu(ctx):
        return await visible(ctx.input)

    @workflow.with_options(requests=ResourceRequest(cpu=1))
    async def one_cpu(ctx):
        return await visible(ctx.input)
"""


def test_two_gpu1_executions_on_a_fake_two_gpu_worker_see_different_devices(
    cluster, client, workflow_file, monkeypatch
):
    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    client.register_file(workflow_file(GPU_WORK))
    cluster.start_worker(
        "gpu-box", max_concurrent_executions=2, extra_args=("--gpu-source", "nvml:fakes:TWO_FREE_GPUS")
    )
    assert [g["uuid"] for g in client.show_worker("gpu-box")["resources"]["gpus"]] == ["GPU-fake-0", "GPU-fake-1"]
    ids = [client.run("one_gpu", 1.0)["id"] for _ in range(2)]
    outputs = sorted(client.wait(i, 30)["output"] for i in ids)
    assert outputs == ["GPU-fake-0", "GPU-fake-1"]  # by UUID


def test_reserve_mode_holds_the_extra_cpu1_execution_until_one_ends(cluster, client, workflow_file):
    """On this 2-cpu machine: the third of three cpu=1 executions waits (n+1 of n cpus elsewhere)."""
    cpus = len(os.sched_getaffinity(0))
    client.register_file(workflow_file(GPU_WORK))
    cluster.start_worker("reserving", max_concurrent_executions=cpus + 2, extra_args=("--allocation", "reserve"))
    ids = [client.run("one_cpu", 1.5)["id"] for _ in range(cpus + 1)]
    states = _wait_running(client, ids, cpus)
    waiting = ids[states.index("SCHEDULED")] if "SCHEDULED" in states else None
    assert waiting is not None, states
    # a round has weighed the one left waiting while the others run (and said why)
    eventually(lambda: client.execution(waiting)["placement_note"], 30, "the waiting one was never weighed")
    assert sorted(client.execution(i)["state"] for i in ids) == ["RUNNING"] * cpus + ["SCHEDULED"], states
    assert {client.wait(i, 30)["state"] for i in ids} == {"COMPLETED"}
    finished = sorted(client.execution(i)["finished_at"] for i in ids)
    third = max(ids, key=lambda i: client.execution(i)["started_at"])
    assert client.execution(third)["started_at"] >= finished[0]  # it started only after one ended


def test_custom_resources_are_counted_within_a_round_in_sample_mode_too():
    """They have no live sample: an fpga=2 worker takes two fpga=1 executions, never three."""
    fpga_box = worker("sample", max_concurrent_executions=4, custom={"fpga": 2.0})
    placed = place([demand(i, resources={"fpga": 1}) for i in range(3)], [fpga_box])
    assert [p.execution_id for p in placed] == ["e0", "e1"]
    assert with_allotments(worker("sample"), [Allotment.from_json({"resources": {"fpga": 1}})]).available.custom == {}
