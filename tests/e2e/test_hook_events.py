"""Webhooks through real processes, beyond tests/e2e/test_hooks.py: an execution that
stays unschedulable is told once, after --hooks-unschedulable-after and not before; a
GPU that fails its health check is told once (fake NVML: no GPU here); two
server replicas on one PostgreSQL database deliver each event once per delivery id
(docs/hooks.md)."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from protocol import ROUNDS, metric
from receivers import Receiver
from shared import HELLO
from waiting import eventually

from flux.client import FluxClient
from flux.local import LocalCluster

TESTS = Path(__file__).parents[1]
DELIVERED = 'flux_hook_deliveries_total{outcome="delivered"}'
SECRET = "s3cret-of-the-tests-0123456789"
ALLOW = ("--hooks-allow-private", "--hooks-backoff", "0.2", "--hooks-timeout", "2")
HUGE = """
    from flux import workflow
    from flux.domain.resource_request import ResourceRequest

    @workflow.with_options(requests=ResourceRequest(cpu=4096))
    async def huge(ctx):
        return "never"
"""


def delivered(server_url: str) -> float:
    """Deliveries this server process sent and saw answered 2xx (none yet: no sample)."""
    try:
        return metric(server_url, DELIVERED)
    except KeyError:
        return 0.0


@pytest.fixture
def receiver():
    made = Receiver()
    yield made
    made.close()


@pytest.mark.slow
@pytest.mark.timeout(60)
@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_an_execution_unschedulable_past_the_threshold_is_told_once(
    make_cluster, monkeypatch, receiver, workflow_file, database, request
):
    monkeypatch.setenv("FLUX_SECRETS_KEY", Fernet.generate_key().decode())
    url = request.getfixturevalue("pg_url") if database == "postgresql" else None
    cluster = make_cluster(server_args=(*ALLOW, "--hooks-unschedulable-after", "3s"), database_url=url)
    with FluxClient(cluster.server_url) as client:
        client.create_hook("stuck", receiver.url, ["execution.unschedulable"], secret=SECRET)
        client.register(workflow_file(HUGE))
        cluster.start_worker("w1")
        submitted = time.time()
        execution = client.run("huge")
        eventually(lambda: client.execution(execution["id"])["unschedulable"], 20, "never judged unschedulable")
        judged = time.time()
        body = eventually(lambda: receiver.bodies(), 20, "never told")[0]
        arrived = receiver.received[0]["at"]  # stamped by the receiver: not told on the verdict, before the threshold
        # rounds go on (the execution still waits), each of which could tell again: two of them
        rounds = metric(cluster.server_url, ROUNDS)
        eventually(lambda: metric(cluster.server_url, ROUNDS) >= rounds + 2, 30, "no round ran after")
        assert len(receiver.bodies()) == 1, receiver.bodies()
        assert body["type"] == "execution.unschedulable" and body["data"]["execution_id"] == execution["id"]
        assert "cpu" in body["data"]["reason"] and body["data"]["waited"] >= 3
        assert submitted <= body["data"]["since"] <= judged and arrived - body["data"]["since"] >= 3
        assert [d["type"] for d in client.hook_deliveries("stuck")] == ["execution.unschedulable"]
        client.cancel(execution["id"])


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_a_device_that_became_unhealthy_is_told_once_fake_nvml(make_cluster, monkeypatch, receiver, tmp_path):
    faults = tmp_path / "faults.json"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("FLUX_FAKE_NVML_EVENTS", str(faults))
    monkeypatch.setenv("FLUX_SECRETS_KEY", Fernet.generate_key().decode())
    cluster = make_cluster(server_args=ALLOW)
    with FluxClient(cluster.server_url) as client:
        client.create_hook("devices", receiver.url, ["device.unhealthy"], secret=SECRET)
        cluster.start_worker("h200-box", extra_args=("--gpu-source", "nvml:fakes:TWO_FAKE_H200"))
        failing = client.show_worker("h200-box")["resources"]["gpus"][1]["uuid"]
        faults.write_text(json.dumps({"xid": {failing: 79}}))  # the card falls off the bus
        body = eventually(lambda: receiver.bodies(), 30, "never told")[0]
        # heartbeats go on reporting it unhealthy, each of which could tell again: three of them
        beats = metric(cluster.server_url, "flux_heartbeats_total")
        eventually(lambda: metric(cluster.server_url, "flux_heartbeats_total") >= beats + 3, 30, "no beat after")
        assert [d["type"] for d in client.hook_deliveries("devices")] == ["device.unhealthy"]  # told once
    assert len(receiver.bodies()) == 1, receiver.bodies()
    assert body["type"] == "device.unhealthy" and body["namespace"] is None
    assert body["data"] == {"worker": "h200-box", "device": failing, "index": 1, "reason": "XID 79"}


@pytest.mark.timeout(180)  # ~12 s on an idle machine; minutes where the machine is shared
@pytest.mark.slow  # over ~20 s: CI's second step
def test_two_replicas_deliver_each_event_once_per_delivery_id(
    tmp_path: Path, pg_url, monkeypatch, receiver, workflow_file
):
    """Both replicas run the delivery loop on one outbox (rows leased with SKIP LOCKED)
    and both take submissions; a worker on each. Every event arrives, each delivery id once."""
    monkeypatch.setenv("FLUX_SECRETS_KEY", Fernet.generate_key().decode())
    home = tmp_path / "home"
    servers = [
        LocalCluster(home, database_url=pg_url, log_dir=tmp_path / f"logs{i}", server_args=ALLOW) for i in range(2)
    ]
    events = ["execution.scheduled", "execution.started", "execution.completed"]
    try:
        for server in servers:
            server.start_server()
        with FluxClient(servers[0].server_url) as one, FluxClient(servers[1].server_url) as two:
            one.create_hook("both", receiver.url, events, secret=SECRET)
            one.register(workflow_file(HELLO))
            servers[0].start_worker("w0")
            servers[1].start_worker("w1")
            ids = [client.run("hello", f"n{i}")["id"] for i in range(10) for client in (one, two)]
            for execution_id in ids:
                assert one.wait(execution_id, 60)["state"] == "COMPLETED"
            expected = {(execution_id, event) for execution_id in ids for event in events}

            def arrived() -> set:
                return {(b["data"]["execution_id"], b["type"]) for b in receiver.bodies()}

            eventually(lambda: arrived() >= expected, 60, f"missing: {expected - arrived()}")
            # every delivery recorded as delivered, and the sends both replicas counted are as
            # many: none is still on its way (a copy would be sent by a replica, and counted)
            eventually(lambda: {d["state"] for d in two.hook_deliveries("both")} == {"delivered"}, 30, "undelivered")
            eventually(lambda: sum(delivered(s.server_url) for s in servers) >= len(expected), 30, "sends not counted")
            assert sum(delivered(s.server_url) for s in servers) == len(expected)
            recorded = {d["id"] for d in two.hook_deliveries("both")}
    finally:
        for server in servers:
            server.close()
    copies = Counter(b["id"] for b in receiver.bodies())
    assert max(copies.values()) == 1, [key for key, n in copies.items() if n > 1]
    assert set(copies) <= recorded and len(copies) == len(expected)
