"""Namespaces through real server and worker processes (docs/namespaces.md): the same
workflow name with other code in two namespaces, a call()'s child in its parent's
namespace, the task cache and secrets per namespace, and a forced delete that waits
for a running execution to end."""

from __future__ import annotations

import httpx
from cryptography.fernet import Fernet
from waiting import eventually

from flux.client import FluxClient

VERSION = """
    from flux import call, task, workflow

    @workflow
    async def hello(ctx):
        return "{greeting} " + str(ctx.input)

    @workflow
    async def parent(ctx):
        return await call(hello, ctx.input)
"""

CACHED_AND_SECRET = """
    import uuid
    from flux import task, workflow

    @task.with_options(cache=True, cache_ttl=3600)
    async def stamp(n):
        return uuid.uuid4().hex

    @task.with_options(secret_requests=["TOKEN"])
    def token(secrets):
        return len(secrets["TOKEN"])

    @workflow
    async def both(ctx):
        return {"stamp": await stamp(1), "token": await token()}
"""

SLOW = """
    import asyncio
    from flux import task, workflow

    @task
    async def nap():
        await asyncio.sleep(600)

    @workflow
    async def slow(ctx):
        await nap()
"""


def test_two_namespaces_run_the_same_name_with_their_own_code_and_calls_stay_in_theirs(cluster, workflow_file):
    cluster.start_worker("w1")
    with FluxClient(cluster.server_url) as default, FluxClient(cluster.server_url, namespace="team-a") as team:
        default.create_namespace("team-a")
        default.register(workflow_file(VERSION.format(greeting="hello"), "d.py"))
        team.register(workflow_file(VERSION.format(greeting="bonjour"), "a.py"))
        ours = team.run("hello", "a", wait=60)
        theirs = default.run("hello", "d", wait=60)
        parent = team.run("parent", "p", wait=60)
        child = team.execution(team.execution(parent["id"])["children"][0])
        listed = {e["id"] for e in team.list_executions(limit=100)}

    assert (ours["output"], ours["namespace"]) == ("bonjour a", "team-a")
    assert (theirs["output"], theirs["namespace"]) == ("hello d", "default")
    assert parent["output"] == "bonjour p" and child["namespace"] == "team-a" and child["parent"] == parent["id"]
    assert listed == {ours["id"], parent["id"], child["id"]}


def test_cache_entries_and_secrets_belong_to_a_namespace(make_cluster, workflow_file, tmp_path):
    key_file = tmp_path / "secrets.key"
    key_file.write_text(Fernet.generate_key().decode())
    cluster = make_cluster(server_args=("--secrets-key-file", str(key_file)))
    cluster.start_worker("w1")
    with FluxClient(cluster.server_url) as default, FluxClient(cluster.server_url, namespace="team-a") as team:
        default.create_namespace("team-a")
        for client, value in ((default, "short"), (team, "a-much-longer-token")):
            client.set_secret("TOKEN", value)
            client.register(workflow_file(CACHED_AND_SECRET, f"{client.namespace}.py"))
        first, again = (default.run("both", None, wait=60) for _ in range(2))
        other = team.run("both", None, wait=60)
        cleared = team.clear_cache()
        secrets = (default.list_secrets(), team.list_secrets())

    assert first["output"]["stamp"] == again["output"]["stamp"], "a hit within the namespace"
    assert other["output"]["stamp"] != first["output"]["stamp"], "no hit from another namespace's entry"
    assert (first["output"]["token"], other["output"]["token"]) == (len("short"), len("a-much-longer-token"))
    assert cleared == {"deleted": 1}, "only team-a's entry"
    assert [[s["name"] for s in listed] for listed in secrets] == [["TOKEN"], ["TOKEN"]]


def test_a_forced_delete_cancels_what_runs_and_the_namespace_goes_once_it_has_ended(cluster, workflow_file):
    cluster.start_worker("w1")
    with FluxClient(cluster.server_url, namespace="doomed") as client:
        client.create_namespace("doomed")
        client.register(workflow_file(SLOW))
        running = client.run("slow")
        queued = client.run("slow", "not placed yet")  # placed or queued: either way cancelled
        eventually(lambda: client.execution(running["id"])["state"] == "RUNNING", 30, "never ran")
        refused = httpx.delete(f"{cluster.server_url}/namespaces/doomed")
        deletion = client.delete_namespace("doomed", force=True)
        refused_run = httpx.post(f"{cluster.server_url}/namespaces/doomed/workflows/slow/run", json={"input": None})
        eventually(lambda: httpx.get(f"{cluster.server_url}/namespaces/doomed").status_code == 404, 30, "never went")
        gone = httpx.get(f"{cluster.server_url}/namespaces/doomed/executions/{queued['id']}")
        names = [n["name"] for n in FluxClient(cluster.server_url).list_namespaces()]

    assert refused.status_code == 409 and "holds 2 unfinished execution(s)" in refused.json()["detail"]
    # TERMINATING: what ran (one, or both) had not ended when the purge was tried; by the count
    # that follows, its worker may have stopped it already (a loaded run saw 0)
    assert deletion["state"] == "TERMINATING" and deletion["cancelled"] == 2 and 0 <= deletion["unfinished"] <= 2, (
        deletion
    )
    assert refused_run.status_code == 409 and refused_run.json()["detail"] == "namespace 'doomed' is being deleted"
    assert gone.status_code == 404 and gone.json()["detail"] == "namespace 'doomed' not found"
    assert names == ["default"]
