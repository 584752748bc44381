"""A real server and worker sharing fake GPUs: whole cards and halves, by UUID (no GPU here)."""

from __future__ import annotations

import json
from pathlib import Path

from waiting import eventually

TESTS = Path(__file__).parents[1]

WORK = """
    import asyncio, os
    from flux import ResourceRequest, task, workflow

    @task
    async def devices(seconds):
        await asyncio.sleep(seconds)
        return [os.environ.get("CUDA_VISIBLE_DEVICES"), os.environ.get("FLUX_GPU_FRACTION")]

    @workflow.with_options(requests=ResourceRequest(gpu=1))
    async def whole_gpu(ctx):
        return await devices(ctx.input)

    @workflow.with_options(requests=ResourceRequest(gpu=0.5, gpu_memory="20Gi"))
    async def half_gpu(ctx):
        return await devices(ctx.input)
"""


def test_one_whole_and_two_half_gpus_share_two_cards_by_uuid_fake_nvml(
    cluster, client, workflow_file, monkeypatch, tmp_path
):
    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    monkeypatch.setenv("FLUX_FAKE_NVML_EVENTS", str(tmp_path / "faults.json"))
    client.register_file(workflow_file(WORK))
    cluster.start_worker(
        "h200-box", max_concurrent_executions=3, extra_args=("--gpu-source", "nvml:fakes:TWO_FAKE_H200")
    )
    shown = client.show_worker("h200-box")
    assert shown["labels"]["flux.gpu/model"] == "NVIDIA-H200"
    assert shown["labels"]["flux.gpu/compute-capability"] == "9.0"
    ids = [client.run(name, 3.0)["id"] for name in ("half_gpu", "whole_gpu", "half_gpu")]
    outputs = [client.wait(i, 60)["output"] for i in ids]
    halves, whole = [outputs[0], outputs[2]], outputs[1]
    assert halves[0] == halves[1] and halves[0][1] == "0.5"  # both halves on one card
    assert whole[1] is None and {whole[0], halves[0][0]} == {"GPU-fake-h200-0", "GPU-fake-h200-1"}
    allotment = client.placement(ids[0])["chosen"]["allotment"]
    assert allotment["devices"] == [
        {"uuid": halves[0][0], "index": int(halves[0][0][-1]), "fraction": 0.5, "memory": 20 * 1024**3}
    ]
    json.dumps(shown)  # plain JSON all through


def test_a_card_failing_under_an_execution_ends_its_attempt_as_a_device_failure_and_it_runs_elsewhere_fake_nvml(
    cluster,
    client,
    workflow_file,
    monkeypatch,
    tmp_path,
):
    faults = tmp_path / "faults.json"
    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    monkeypatch.setenv("FLUX_FAKE_NVML_EVENTS", str(faults))
    client.register_file(workflow_file(WORK))
    cluster.start_worker(
        "h200-box", max_concurrent_executions=2, extra_args=("--gpu-source", "nvml:fakes:TWO_FAKE_H200")
    )
    execution_id = client.run("whole_gpu", 4.0)["id"]
    first = eventually(
        lambda: (client.placement(execution_id).get("chosen") or {}).get("allotment"), 30, "never placed"
    )
    failing = first["devices"][0]["uuid"]
    holders = eventually(lambda: client.show_worker("h200-box")["gpu_allotments"], 30, "allotment never shown")
    assert [(a["uuid"], a["execution_id"], a["fraction"]) for a in holders] == [(failing, execution_id, 1.0)]
    faults.write_text(json.dumps({"xid": {failing: 79}}))  # the card falls off the bus
    done = client.wait(execution_id, 60)
    assert done["state"] == "COMPLETED" and done["output"][0] != failing
    attempts = client.placement(execution_id)["attempts"]
    assert [(a["end"], a["counted"]) for a in attempts[:1]] == [("device_failure", False)]
    assert attempts[0]["cause"] == f"GPU {failing} failed: XID 79"
    shown = {g["uuid"]: g for g in client.show_worker("h200-box")["resources"]["gpus"]}
    assert shown[failing]["unhealthy"] == "XID 79"
    verdict = client.placement(client.run("whole_gpu", 0.0, wait=30)["id"])
    assert verdict["chosen"]["allotment"]["devices"][0]["uuid"] != failing
