"""A round delivers to a claim waiting on its replica (docs/latency.md): the claim
answers with the job the round's transaction delivered, once and complete, and news
the round did not read (a cancel) still reaches the worker's next claim."""

from __future__ import annotations

import json
import socket

import httpx
import pytest
from protocol import ProtocolWorker, metric
from waiting import eventually

from flux.server.registry import Member

pytestmark = pytest.mark.integration

SOURCE = """
    from flux import workflow

    @workflow
    async def handed(ctx):
        return ctx.input
"""


def test_a_waiting_claim_gets_the_job_the_round_delivered_with_a_protocol_worker(cluster, client, workflow_file):
    client.register_file(workflow_file(SOURCE))
    worker = ProtocolWorker(cluster.server_url, cluster.home, "handed", heartbeat_interval=5)
    try:
        worker.register()
        assert worker.claim(wait=0.2)["executions"] == []  # its first claim has read what it holds
        thread, result = worker.claim_in_background(wait=20)
        eventually(lambda: metric(cluster.server_url, "flux_long_poll_waiters") >= 1, timeout=10)  # the poll waits
        client.run("handed", 1)
        thread.join(timeout=25)
        jobs = result["reply"]["executions"]
        assert [job["input"] for job in jobs] == [1]
        assert jobs[0]["max_payload_size"] > 0 and jobs[0]["max_json_depth"] > 0  # the claim's own, as on its read
        assert worker.claim(wait=0.5)["executions"] == []  # delivered once

        client.cancel(jobs[0]["id"])  # news after the round: the next claim carries it
        assert eventually(lambda: worker.claim(wait=2)["cancel"], timeout=10) == [jobs[0]["id"]]
    finally:
        worker.close()


def _member() -> Member:
    return Member(id=1, name="w", token_hash="h", heartbeat_interval=5.0, last_seen=0.0)


def test_a_hand_over_clears_the_hint_only_when_the_round_woke_it_last():
    quiet, busy = _member(), _member()
    for member, news in ((quiet, 0), (busy, 1)):
        seen = member.notices
        member.notices += news + 1  # other wake-ups, then the round's own
        member.work_hint = True
        member.hand([], ["x"], {}, seen)
    assert (quiet.work_hint, busy.work_hint) == (False, True)
    assert quiet.take_handed() == ([], ["x"]) and quiet.take_handed() is None


def _hung_up_claim(server_url: str, worker: ProtocolWorker, wait: float) -> None:
    """A claim whose connection closes unread, as a SIGKILLed worker's does."""
    url = httpx.URL(server_url)
    body = json.dumps({"wait": wait}).encode()
    with socket.create_connection((url.host, url.port), timeout=5) as conn:
        conn.sendall(
            f"POST /workers/{worker.name}/claim HTTP/1.1\r\nHost: {url.host}\r\n"
            f"Authorization: Bearer {worker.token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        eventually(lambda: metric(server_url, "flux_long_poll_waiters") >= 1, timeout=10)


def test_a_claim_that_hung_up_stops_listening_and_what_was_placed_meanwhile_stays_undelivered_with_a_protocol_worker(
    cluster, client, workflow_file
):
    client.register_file(workflow_file(SOURCE))
    worker = ProtocolWorker(cluster.server_url, cluster.home, "gone", heartbeat_interval=5)
    try:
        worker.register()
        assert worker.claim(wait=0.2)["executions"] == []
        _hung_up_claim(cluster.server_url, worker, wait=30)
        eventually(lambda: metric(cluster.server_url, "flux_long_poll_waiters") == 0, timeout=5)  # not after 30 s
        execution = client.run("handed", 2)
        eventually(lambda: client.execution(execution["id"])["state"] == "CLAIMED", timeout=10)
        assert [job["input"] for job in worker.claim(wait=5)["executions"]] == [2]  # never handed to the dead poll
    finally:
        worker.close()
