"""The pools API and ``flux pool`` (docs/autoscaling.md): bad input is a 422 naming the
field, a taken name a 409, an unknown one a 404; pools from options and from a TOML
file; what KEDA reads and what /metrics shows per pool."""

from __future__ import annotations

import json

import httpx
from shared import assert_error, flux
from waiting import eventually

GOOD = {
    "resources": {"cpu": 8, "memory": "32Gi", "gpu": 1, "accel": 2},
    "provider": "command",
    "options": {"command": ["true"]},
}


BAD = [
    ({**GOOD, "resources": {"cpu": "lots"}}, "cpu"),
    ({**GOOD, "resources": {"memory": "32 gigs"}}, "memory"),
    ({**GOOD, "min": 5, "max": 2}, "min 5 is more than max 2"),
    ({**GOOD, "idle_timeout": "soon"}, "idle_timeout"),
    ({**GOOD, "packages": ["numpy>=1"]}, "is not a package"),
    ({**GOOD, "provider": "aws"}, "provider"),
    ({**GOOD, "options": {}}, "options for provider command: command"),
    ({**GOOD, "provider": "kubernetes", "options": {"namespace": "x"}}, "exactly one of deployment or pod_template"),
    ({**GOOD, "provider": "local", "options": {"worker_args": "--x"}}, "worker_args"),
    ({**GOOD, "name": "GPU_A100"}, "name"),
]


def test_bad_pools_are_refused_with_the_reason(cluster):
    for body, field in BAD:
        response = httpx.post(f"{cluster.server_url}/pools", json={"name": "p", **body})
        error = assert_error(response, 422, "validation_error")
        assert field in json.dumps(error), error
    assert httpx.get(f"{cluster.server_url}/pools").json() == []


def test_create_show_list_apply_delete(cluster, client):
    created = client.create_pool(
        "gpu-a100", labels={"accel": "a100"}, packages=["torch==2.5.1"], max=20, idle_timeout="5m", **GOOD
    )
    assert (created["resources"], created["idle_timeout"], created["min"], created["max"]) == (
        {"cpu": 8.0, "memory": 32 * 1024**3, "accel": 2.0, "gpu": 1},
        300.0,
        0,
        20,
    )
    assert created["options"] == {"command": ["true"], "timeout": 60.0}
    assert_error(httpx.post(f"{cluster.server_url}/pools", json={"name": "gpu-a100", **GOOD}), 409, "conflict")
    assert_error(httpx.get(f"{cluster.server_url}/pools/nope"), 404, "not_found")
    replaced = client.apply_pool("gpu-a100", **{**GOOD, "max": 4})
    assert replaced["max"] == 4 and replaced["labels"] == {}
    assert [p["name"] for p in client.list_pools()] == ["gpu-a100"]
    shown = eventually(lambda: (p := client.show_pool("gpu-a100"))["decided_at"] and p, 20, "no pass decided")
    assert shown["decision"].startswith("0 busy, 0 idle, 0 starting") and shown["desired"] == 0
    assert client.desired_workers() == {"gpu-a100": 0}
    assert 'flux_pool_workers{pool="gpu-a100",state="desired"} 0.0' in httpx.get(f"{cluster.server_url}/metrics").text
    assert client.delete_pool("gpu-a100")["deleting"] is True
    eventually(lambda: client.list_pools() == [], 20, "a pool with no workers was never removed")
    assert "gpu-a100" not in httpx.get(f"{cluster.server_url}/metrics").text


def test_the_command_line_creates_applies_shows_and_deletes(cluster, tmp_path):
    url = cluster.server_url
    flux(
        "pool",
        "create",
        "cpu",
        "--resources",
        "cpu=2,memory=4Gi",
        "--labels",
        "tier=batch,zone=a",
        "--min",
        "0",
        "--max",
        "3",
        "--idle-timeout",
        "90s",
        "--provider",
        "command",
        "--command",
        "true --quiet",
        server_url=url,
    )
    config = tmp_path / "pools.toml"
    config.write_text(
        '[pools.gpu]\nresources = {cpu = 8, gpu = 1}\nmax = 2\nprovider = "kubernetes"\n'
        '[pools.gpu.options]\nnamespace = "flux"\ndeployment = "workers-gpu"\n'
    )
    flux("pool", "apply", str(config), server_url=url)
    listed = json.loads(flux("pool", "list", "--format", "json", server_url=url).stdout)
    assert {p["name"]: p["provider"] for p in listed} == {"cpu": "command", "gpu": "kubernetes"}
    table = flux("pool", "list", server_url=url, env={"COLUMNS": "80"}).stdout  # no provider failed: no such column
    assert max(map(len, table.splitlines())) <= 80 and "provider_error" not in table and "kubernetes" in table, table
    assert "stopping" in flux("pool", "list", server_url=url, env={"COLUMNS": "120"}).stdout  # room for it at 120
    cpu = json.loads(flux("pool", "show", "cpu", "--format", "json", server_url=url).stdout)
    assert (cpu["labels"], cpu["idle_timeout"], cpu["options"]["command"]) == (
        {"tier": "batch", "zone": "a"},
        90.0,
        ["true", "--quiet"],
    )
    assert "idle_timeout" in flux("pool", "show", "cpu", server_url=url).stdout
    bad = flux("pool", "create", "x", "--resources", "cpu", "--provider", "local", server_url=url, check=False)
    assert bad.returncode == 2 and "Invalid value for --resources: 'cpu' is not KEY=VALUE" in bad.stderr
    assert "being deleted" in flux("pool", "delete", "cpu", server_url=url).stdout
