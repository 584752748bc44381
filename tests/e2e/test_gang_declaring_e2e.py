"""Declaring a gang against a real server (issue 53 items 1 and 8, docs/gangs.md):
registration stores it and refuses a bad one with a 422 naming ``gang.<field>`` (the
server's cap, ``--max-gang-size`` / FLUX_MAX_GANG_SIZE, included) or warns about one that
may not be preempted and that the fleet could never hold; a run takes the workflow's gang
or its own (the run API, ``FluxClient.run(gang=...)``, ``flux workflow run --gang-size``,
``call(child, input, gang=...)``), the execution shows it and its members exist."""

from __future__ import annotations

import json

import httpx
import pytest
from shared import error_line, flux
from waiting import eventually

from flux import Client, Gang
from flux.client import FluxClient, FluxClientError
from flux.local import LocalCluster

TRAIN = """
from flux import Gang, ResourceRequest, call, workflow

@workflow.with_options(requests=ResourceRequest(cpu=1), gang=Gang(size=4, topology="rack", per_worker=2))
async def train(ctx):
    return ctx.gang.rank

@workflow
async def single(ctx):
    return 1

@workflow
async def parent(ctx):
    return await call("train", None, gang={"size": 2})
"""

PINNED = """
from flux import Gang, workflow

@workflow.with_options(preemptible=False, gang=Gang(size=3, topology="rack"))
async def pinned(ctx):
    return None
"""

SOURCE = "from flux import workflow\n@workflow\nasync def w(ctx): pass\n"

pytestmark = pytest.mark.integration


def _register_spec(url: str, gang: object) -> httpx.Response:
    return httpx.post(f"{url}/workflows", json={"source": SOURCE, "workflows": [{"name": "w", "gang": gang}]})


@pytest.fixture(scope="module")
def capped(tmp_path_factory):
    """One server for the module (a server's start is the slow part), whose cap on gang
    size is 8, set through its environment."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FLUX_MAX_GANG_SIZE", "8")
        cluster = _started(LocalCluster(tmp_path_factory.mktemp("capped") / "home"))
    yield cluster
    cluster.close()


def _started(cluster: LocalCluster) -> LocalCluster:
    """A server started with time to spare: a loaded machine takes more than 30 s to start one."""
    try:
        cluster.start_server(timeout=120)
    except BaseException:
        cluster.close()
        raise
    return cluster


@pytest.mark.parametrize(
    ("gang", "field", "message"),
    [
        ({"size": 4, "topology": "my rack"}, "topology", "'my rack' is not a label key"),
        ({"size": 4, "topology": "rack", "per_worker": 5}, "per_worker", "5 is more than the gang's size, 4"),
        ({"size": 9, "topology": "rack"}, "size", "9 is more than the server's cap on gang size, 8"),
        ({"size": 1, "topology": "rack"}, "size", "must be at least 2"),
        ({"size": 4, "topology": "rack", "prefer": "a b"}, "prefer", "'a b' is not a label key"),
        ({"size": 4, "topology": "rack", "start_timeout": "soon"}, "start_timeout", "soon"),
    ],
)
def test_registration_refuses_a_bad_gang_naming_the_field(capped, gang, field, message):
    refused = _register_spec(capped.server_url, gang)
    body = refused.json()
    assert refused.status_code == 422 and body["code"] == "validation_error", body
    assert body["errors"][0]["loc"] == ["body", "workflows", 0, "gang", field]
    assert message in body["errors"][0]["msg"] and body["detail"].startswith(f"workflows.0.gang.{field}: ")


def test_a_bundle_with_a_bad_gang_is_a_422_naming_the_field_file_and_line(capped, workflow_file):
    url = capped.server_url
    with FluxClient(url) as client:
        for gang, field, text in [
            ('Gang(size=4, topology="my rack")', "topology", "wf.py:3: 'my rack' is not a label key"),
            ('Gang(size=16, topology="rack")', "size", "wf.py:4: workflow 'big': 16 is more than the server's cap"),
        ]:
            source = (
                f"from flux import Gang, workflow\n\n@workflow.with_options(gang={gang})\nasync def big(ctx): pass\n"
            )
            with pytest.raises(FluxClientError) as refused:
                client.register_file(workflow_file(source))
            assert refused.value.status == 422 and f"bundle.gang.{field}: {text}" in str(refused.value)
    line = error_line(flux("workflow", "register", str(workflow_file(source)), server_url=url, check=False))
    assert "HTTP 422: bundle.gang.size: wf.py:4: workflow 'big': 16 is more than the server's cap" in line


def test_a_server_started_with_a_higher_cap_takes_a_larger_gang(tmp_path, request, workflow_file):
    cluster = _started(LocalCluster(tmp_path / "home", server_args=("--max-gang-size", "1024")))
    request.addfinalizer(cluster.close)
    source = (
        "from flux import Gang, workflow\n\n"
        '@workflow.with_options(gang=Gang(size=600, topology="rack", max_size=1024))\n'
        "async def wide(ctx): pass\n"
    )
    with FluxClient(cluster.server_url) as client:
        registered = client.register_file(workflow_file(source))
        assert registered[0]["gang"]["size"] == 600
        with pytest.raises(FluxClientError, match="gang.size: 1025 is more than the server's cap on gang size, 1024"):
            client.run("wide", None, gang={"size": 1025})
        ran = client.run("wide", None, gang={"size": 1000})
        assert ran["gang"]["size"] == 1000


def test_runs_take_the_workflows_gang_or_their_own_and_get_their_members(capped, workflow_file):
    url = capped.server_url
    with FluxClient(url) as client:
        registered = {w["name"]: w for w in client.register_file(workflow_file(TRAIN))}
        declared = {"size": 4, "topology": "rack", "per_worker": 2, "start_timeout": 300.0}
        assert registered["train"]["gang"] == declared and registered["single"]["gang"] is None
        assert client.show_workflow("train")["gang"] == declared

        as_declared = client.run("train", None)
        assert as_declared["gang"] == declared and as_declared["state"] == "SCHEDULED"
        members = _members(client, as_declared["id"])
        assert [m["rank"] for m in members] == [0, 1, 2, 3]
        assert all(m["gang"] is None and m["workflow_name"] == "train" for m in members)

        resized = client.run("train", None, gang={"size": 2})
        assert resized["gang"] == {**declared, "size": 2}
        assert [m["rank"] for m in _members(client, resized["id"])] == [0, 1]

        with Client(url) as typed:
            assert typed.run("train", None, gang={"size": 3}).execution().gang["size"] == 3

        own = client.run("single", None, gang=Gang(size=3, topology="zone"))
        assert own["gang"] == {"size": 3, "topology": "zone", "per_worker": 1, "start_timeout": 300.0}
        assert client.run("single", None)["gang"] is None

        ran = json.loads(
            flux("workflow", "run", "train", "null", "--gang-size", "3", "--format", "json", server_url=url).stdout
        )
        assert ran["gang"]["size"] == 3 and len(_members(client, ran["id"])) == 3


@pytest.mark.parametrize(
    ("name", "gang", "field", "message"),
    [
        ("single", {"size": 2}, "topology", "workflow 'single' declares no gang"),
        ("train", {"size": 9}, "size", "9 is more than the server's cap on gang size, 8"),
        ("train", {"size": 8, "per_worker": 9}, "per_worker", "9 is more than the gang's size, 8"),
        ("train", {"size": 2, "ranks": 2}, "gang", "unknown field(s) 'ranks'"),
        ("train", [2], "gang", "Input should be a valid dictionary"),
    ],
)
def test_a_bad_gang_in_a_run_is_a_422_naming_the_field(capped, workflow_file, name, gang, field, message):
    with FluxClient(capped.server_url) as client:
        client.register_file(workflow_file(TRAIN))
    refused = httpx.post(f"{capped.server_url}/workflows/{name}/run", json={"input": None, "gang": gang})
    body = refused.json()
    assert refused.status_code == 422 and body["code"] == "validation_error", body
    assert body["errors"][0]["loc"][-1] == field and message in body["errors"][0]["msg"], body


def test_the_cli_says_why_a_gang_size_is_refused(capped, workflow_file):
    url = capped.server_url
    flux("workflow", "register", str(workflow_file(TRAIN)), server_url=url)
    line = error_line(flux("workflow", "run", "single", "--gang-size", "2", server_url=url, check=False))
    assert line.startswith("Error: HTTP 422: gang.topology: required: workflow 'single' declares no gang")
    too_small = flux("workflow", "run", "train", "--gang-size", "1", server_url=url, check=False)
    assert too_small.returncode != 0 and "--gang-size" in too_small.stderr


def test_a_gang_step_starts_a_gang_child_and_an_unplaceable_pinned_gang_is_warned_about(capped, workflow_file):
    url = capped.server_url
    capped.start_worker("w1", labels={"rack": "a"})
    with FluxClient(url) as client:
        client.register_file(workflow_file(TRAIN))
        parent = client.run("parent", None)
        children = eventually(lambda: client.execution(parent["id"])["children"], 60, "never called")
        child = client.execution(children[0])
        assert child["gang"]["size"] == 2 and child["parent"] == parent["id"]
        assert [m["rank"] for m in _members(client, child["id"])] == [0, 1]

        warned = client.register_file(workflow_file(PINNED, "pinned.py"))[0]
        assert any(
            "no rack could ever hold it, even idle (the most one holds is 1)" in warning
            for warning in warned["warnings"]
        ), warned


def _members(client: FluxClient, gang_id: str) -> list[dict]:
    """The gang's member rows by rank (each read on its own: ``gang_id``, ``rank``, ``gang``)."""
    listed = httpx.get(f"{client.server_url}/executions", params={"members": "true", "limit": 200})
    rows = listed.raise_for_status().json()
    ids = [row["id"] for row in sorted((r for r in rows if r.get("gang_id") == gang_id), key=lambda r: r["rank"])]
    return [client.execution(member) for member in ids]
