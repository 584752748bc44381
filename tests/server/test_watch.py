"""GET /watch/executions: execution state changes as JSON after a cursor, or as a
Server-Sent Events stream that a client resumes with Last-Event-ID."""

from __future__ import annotations

import json

import httpx
import pytest

pytestmark = pytest.mark.integration

HELLO = """
    from flux import workflow

    @workflow
    async def hello(ctx):
        return ctx.input
"""


def stream_until(url: str, params: dict, headers: dict, done) -> list[tuple[str, dict]]:  # noqa: ANN001
    """(id, data) of each 'execution' event until ``done(data)``."""
    seen, event_id, event = [], None, None
    with httpx.stream("GET", url + "/watch/executions", params=params, headers=headers, timeout=30) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("id:"):
                event_id = line[3:].strip()
            elif line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:") and event == "execution":
                data = json.loads(line[5:])
                seen.append((event_id, data))
                if done(data):
                    return seen
    raise AssertionError(f"the stream ended early: {seen}")


def test_changes_as_json_and_as_a_resumable_stream(cluster, client, workflow_file):
    cluster.start_worker("w1")
    client.register_file(workflow_file(HELLO))
    url = cluster.server_url
    now = httpx.get(f"{url}/watch/executions").json()
    assert now["changes"] == [] and now["cursor"] >= 0

    first = client.run("hello", 1, wait=30)
    changes = httpx.get(f"{url}/watch/executions", params={"after": now["cursor"]}).json()
    assert [(c["id"], c["state"]) for c in changes["changes"]] == [(first["id"], "COMPLETED")]
    assert "input" not in changes["changes"][0] and changes["cursor"] > now["cursor"]
    assert (
        httpx.get(f"{url}/watch/executions", params={"after": now["cursor"], "state": "FAILED"}).json()["changes"] == []
    )

    # a stream from the cursor: the change above, then one made while it is open
    second = client.run("hello", 2)
    seen = stream_until(
        url,
        {"follow": "true", "after": now["cursor"]},
        {},
        lambda d: d["id"] == second["id"] and d["state"] == "COMPLETED",
    )
    assert seen[0][1]["id"] == first["id"]
    ids = [int(event_id) for event_id, _ in seen]
    assert ids == sorted(ids)

    # a client that reconnects with Last-Event-ID gets only what came after it
    third = client.run("hello", 3, wait=30)
    resumed = stream_until(
        url,
        {"workflow": "hello"},
        {"Accept": "text/event-stream", "Last-Event-ID": seen[-1][0]},
        lambda d: d["id"] == third["id"],
    )
    assert {d["id"] for _, d in resumed} == {third["id"]}
