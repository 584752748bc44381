"""The rendezvous on the server (docs/gangs.md#started-together), spoken by protocol
workers so that the test chooses the order of every member's posts: a member that looks
again after its peers have already finished their work is still told to start (the gang
started when the last member arrived; found by ``bench.b18_gang_start``, where rank 0 of
a gang whose peers ended in milliseconds waited out ``start_timeout``)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from protocol import ProtocolWorker, metric
from waiting import eventually

from flux.client import FluxClient

pytestmark = pytest.mark.integration

WAIT = 60.0

SOURCE = """
from flux import Gang, workflow


@workflow.with_options(gang=Gang(size=3, topology="rack"))
async def trio(ctx):
    return ctx.gang.rank
"""


def _rendezvous(worker: ProtocolWorker, job: dict, port: int, wait: float = 0) -> dict:
    body = {"attempt": job["attempt"], "address": "127.0.0.1", "port": port, "wait": wait}
    reply = worker.post(f"/executions/{job['id']}/rendezvous", body)
    reply.raise_for_status()
    return reply.json()


@pytest.mark.timeout(120)
def test_a_member_that_looks_again_after_its_peers_finished_is_told_to_start_with_protocol_workers(
    make_cluster, workflow_file
):
    cluster = make_cluster()
    workers = [
        ProtocolWorker(cluster.server_url, cluster.home, f"p{i}", heartbeat_interval=30, slots=1) for i in range(3)
    ]
    with FluxClient(cluster.server_url) as client:
        try:
            client.register_file(workflow_file(SOURCE))
            for worker in workers:
                worker.register(labels={"rack": "a"})
            gang = client.run("trio", {})
            jobs = {}
            for worker in workers:
                job = eventually(lambda w=worker: w.claim(wait=2)["executions"], WAIT, f"{worker.name} got no member")[
                    0
                ]
                jobs[job["gang"]["rank"]] = (worker, job)
            late_worker, late_job = jobs[1]
            assert _rendezvous(late_worker, late_job, 7001)["ready"] is False  # arrived; its peers have not
            assert _rendezvous(*jobs[0], 7000)["ready"] is False
            assert _rendezvous(*jobs[2], 7002)["ready"] is True  # the last arrival starts the gang
            assert _rendezvous(*jobs[0], 7000)["ready"] is True
            for rank in (0, 2):
                worker, job = jobs[rank]
                worker.complete(job, output=rank)
            assert [m["state"] for m in client.execution(gang["id"])["members"]] == [
                "COMPLETED",
                "CLAIMED",
                "COMPLETED",
            ]
            again = _rendezvous(late_worker, late_job, 7001)  # its first reply came before the others arrived
            assert again["ready"] is True, again
            assert (again["master_addr"], again["master_port"]) == ("127.0.0.1", 7000)
            assert [p["rank"] for p in again["members"]] == [0, 1, 2]
            with ThreadPoolExecutor(1) as pool:
                # a waiter on the gang (as ``flux workflow run --wait``): woken by the member's
                # checkpoint that ends the gang, not by its 30 s re-read (the 20 s limit catches that)
                waiter = pool.submit(
                    httpx.get, f"{cluster.server_url}/executions/{gang['id']}", params={"wait": 60}, timeout=20
                )
                eventually(lambda: metric(cluster.server_url, "flux_long_poll_waiters") >= 1, WAIT, "no waiter")
                late_worker.complete(late_job, output=1)
                done = waiter.result().json()
            assert done["state"] == "COMPLETED" and done["output"] == 0, done
        finally:
            for worker in workers:
                worker.close()
