"""The smaller things of a team's first week (issue 50.9), each as a person meets it: the
CLI as a subprocess against a real server and worker, its real output read back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import httpx
import pytest

from flux.client import FluxClient
from flux.local import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

WORKFLOWS = """
    import asyncio

    from flux import ResourceRequest, task, workflow

    @workflow.with_options(requests=ResourceRequest(cpu=4096))
    async def enormous(ctx):
        return 1

    @workflow.with_options(requests=ResourceRequest(cpu=1, memory="256Mi"), affinity={"zone": "a"})
    async def modest(ctx):
        return 1

    @workflow
    async def waits(ctx):
        await asyncio.sleep(60)

    @workflow
    async def halves(ctx):
        await ctx.progress(0.5)
        await ctx.progress(1.0)
        return "done"

    @task
    async def explode(x):
        raise ValueError(f"bad {x}")

    @workflow
    async def booming(ctx):
        return await explode(1)
"""


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> LocalCluster:
    home = tmp_path_factory.mktemp("first-week")
    cluster = LocalCluster(home / "home")
    cluster.start_server()
    cluster.start_worker("w1", labels={"zone": "a"})
    source = home / "team_flows.py"
    source.write_text(textwrap.dedent(WORKFLOWS))
    with FluxClient(cluster.server_url) as client:
        client.register_file(source)
    yield cluster
    cluster.close()


def flux(*args: str, url: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLUX_")}
    env.update(COLUMNS="200", FLUX_SERVER_URL=url)
    return subprocess.run([sys.executable, "-m", "flux", *args], capture_output=True, text=True, env=env, timeout=90)


def test_a_run_that_can_never_be_placed_says_so_without_wait(fleet):
    ran = flux("workflow", "run", "enormous", "--format", "json", url=fleet.server_url)
    assert ran.returncode == 0, ran.stderr
    short = json.loads(ran.stdout)["id"][:12]
    assert f"Warning: execution {short} can never be placed as the fleet stands: " in ran.stderr
    assert "Insufficient cpu" in ran.stderr and f"flux execution explain {short}" in ran.stderr
    placed = flux("workflow", "run", "modest", url=fleet.server_url)
    assert placed.returncode == 0 and "never be placed" not in placed.stderr


def test_an_action_wants_four_characters_of_an_id(fleet):
    with FluxClient(fleet.server_url) as client:
        execution = client.run("waits", None)
    one = flux("execution", "cancel", execution["id"][0], url=fleet.server_url)
    assert one.returncode == 2
    assert f"Error: ID '{execution['id'][0]}' is too short to cancel: give at least 4 characters" in one.stderr
    four = flux("execution", "cancel", execution["id"][:4], "--format", "json", url=fleet.server_url)
    assert four.returncode == 0, four.stderr
    assert json.loads(four.stdout)["id"] == execution["id"]
    assert flux("execution", "show", execution["id"][0], url=fleet.server_url).returncode in (0, 1)  # reads: any prefix


def test_a_token_made_on_an_open_server_comes_with_a_warning(fleet):
    made = flux("token", "create", "ci", "--role", "developer", url=fleet.server_url)
    assert made.returncode == 0, made.stderr
    assert "Warning: this server has no --api-token, so every caller without a token is admin" in made.stderr


def test_a_console_url_is_named_not_dumped(fleet):
    for url in (f"{fleet.server_url}/ui", f"{fleet.server_url}/ui/"):
        failed = flux("workflow", "list", url=url)
        assert failed.returncode == 1
        lines = failed.stderr.strip().splitlines()
        assert len(lines) == 1 and "<" not in lines[0], failed.stderr
        assert f"is a page of the web console, not the Flux API: the server URL is {fleet.server_url}" in lines[0]


def test_a_missing_workflow_names_its_namespace(fleet):
    missing = flux("workflow", "run", "nope", url=fleet.server_url)
    assert "Error: HTTP 404: workflow 'nope' is not registered in namespace 'default'" in missing.stderr


def test_requests_read_the_same_in_show_as_in_lists(fleet):
    shown = flux("workflow", "show", "modest", url=fleet.server_url).stdout
    assert "cpu=1, memory=256Mi" in shown and "zone=a" in shown
    assert "268435456" not in shown and '"cpu": 1.0' not in shown
    listed = flux("workflow", "list", url=fleet.server_url).stdout
    assert "cpu=1, memory=256Mi" in listed
    with FluxClient(fleet.server_url) as client:
        done = client.run("modest", None, wait=60)
    execution = flux("execution", "show", done["id"], url=fleet.server_url).stdout
    assert "cpu=1, memory=256Mi" in execution and "268435456" not in execution
    page = httpx.get(f"{fleet.server_url}/ui/workflows", timeout=30).text  # the console's chips: the same form
    assert '<span class="chip">cpu=1</span><span class="chip">memory=256Mi</span>' in page
    assert "256.0 MiB" not in page


def test_progress_of_one_is_a_full_bar(fleet):
    ran = flux("workflow", "run", "halves", "--wait", url=fleet.server_url)
    assert ran.returncode == 0, ran.stderr
    assert "50%" in ran.stderr and "100%" in ran.stderr and "progress 1\n" not in ran.stderr


def test_a_traceback_names_the_file_in_the_bundle(fleet):
    ran = flux("workflow", "run", "booming", "--wait", "--format", "json", url=fleet.server_url)
    assert ran.returncode == 1
    execution_id = json.loads(ran.stdout)["id"]
    shown = flux("execution", "show", execution_id, url=fleet.server_url).stdout
    assert 'File "team_flows.py", line' in shown and "bundle-cache" not in shown, shown
    record = json.loads(flux("execution", "show", execution_id, "--format", "json", url=fleet.server_url).stdout)
    files = {frame["file"] for link in record["failure"]["chain"] for frame in link["frames"] if frame["user"]}
    assert files == {"team_flows.py"}
