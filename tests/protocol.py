"""``ProtocolWorker``: a test tool that stands in for a worker process (``flux start
worker``) on the wire, and for nothing else.

It speaks the worker's real HTTP protocol (register, heartbeat, claim, checkpoint,
logs) to a real server process, but runs no workflow, probes nothing and sends
exactly the samples, batches and events the test writes. A test uses it where it must
choose or withhold a worker's every request: a figure no machine here has, a claim
left waiting or hung up, a batch sent twice, a stale attempt or token. What it proves
is the server's side of the protocol; a test that uses it says so in its name
(``..._with_a_protocol_worker``). Where the worker's own behaviour is the point, the
tests start a real worker (``LocalCluster.start_worker``)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
from waiting import steady

GiB = 1024**3
#: Dispatch rounds the server has run, placed or not (``metric(url, ROUNDS)``).
ROUNDS = 'flux_dispatch_round_seconds_count{part="total"}'

#: A one-task workflow (``one_task``) for tests that drive the protocol by hand.
ONE_TASK = """
    from flux import task, workflow

    @task
    async def echo(n):
        return n

    @workflow
    async def one_task(ctx):
        return await echo(ctx.input)
"""


def sample(memory_available: int = 8 * GiB, **overrides) -> dict:
    return {
        "cpu_total": 4.0,
        "cpu_available": 4.0,
        "cpu_percent": 5.0,
        "memory_total": 16 * GiB,
        "memory_available": memory_available,
        "disk_total": 100 * GiB,
        "disk_free": 50 * GiB,
        "gpus": [],
        **overrides,
    }


class ProtocolWorker:
    def __init__(self, server_url: str, home: Path, name: str, heartbeat_interval: float = 0.5, slots: int = 4):
        self.name = name
        self.heartbeat_interval = heartbeat_interval
        self.slots = slots
        self.http = httpx.Client(base_url=server_url, timeout=30)
        self.bootstrap = (Path(home) / "bootstrap-token").read_text().strip()
        self.token: str | None = None

    def register(self, labels: dict | None = None, running: list[str] = (), **sample_overrides) -> dict:
        body = {
            "name": self.name,
            "labels": labels or {},
            "max_concurrent_executions": self.slots,
            "heartbeat_interval": self.heartbeat_interval,
            "resources": sample(**sample_overrides),
            "packages": [{"name": f"pkg-{i}", "version": "1.0"} for i in range(100)],
            "runtime": {
                "python_version": "3.11.7",
                "os_name": "Linux",
                "os_version": "6",
                "hostname": "h",
                "cpu_arch": "x86_64",
            },
            "running": list(running),
            "metrics": {},
        }
        headers = {"Authorization": f"Bearer {self.bootstrap}"}
        if self.token:  # what a restarted worker presents: the token its name is bound to
            headers["X-Flux-Worker-Token"] = self.token
        reply = self.http.post("/workers/register", json=body, headers=headers)
        reply.raise_for_status()
        self.token = reply.json()["session_token"]
        return reply.json()

    def post(self, path: str, body: dict, timeout: float = 30) -> httpx.Response:
        return self.http.post(path, json=body, headers={"Authorization": f"Bearer {self.token}"}, timeout=timeout)

    def heartbeat(self, running: list[str] = (), **fields) -> dict:
        reply = self.post(f"/workers/{self.name}/heartbeat", {"running": list(running), **fields})
        reply.raise_for_status()
        return reply.json()

    def claim(self, wait: float) -> dict:
        reply = self.post(f"/workers/{self.name}/claim", {"wait": wait}, timeout=wait + 10)
        reply.raise_for_status()
        return reply.json()

    def claim_in_background(self, wait: float) -> tuple[threading.Thread, dict]:
        """Start a long-poll claim on a thread; the dict gets its ``reply`` and when it came (``at``)."""
        result: dict = {}

        def claim() -> None:
            result["reply"] = self.claim(wait=wait)
            result["at"] = time.monotonic()

        thread = threading.Thread(target=claim)
        thread.start()
        return thread, result

    def complete(self, job: dict, output=None) -> None:
        now = time.time()
        events = [
            {"type": "WORKFLOW_STARTED", "name": job["workflow_name"], "time": now},
            {"type": "WORKFLOW_COMPLETED", "name": job["workflow_name"], "value": output, "time": now},
        ]
        self.post(
            f"/executions/{job['id']}/checkpoint", {"attempt": job["attempt"], "batch": 1, "events": events}
        ).raise_for_status()

    def close(self) -> None:
        self.http.close()


def statements(server_url: str) -> dict[str, float]:
    """The server's ``flux_db_statements_total`` by kind (the scrape's own are not counted)."""
    text = httpx.get(f"{server_url}/metrics").text
    counts = {}
    for line in text.splitlines():
        if line.startswith("flux_db_statements_total{"):
            kind = line.split('kind="', 1)[1].split('"', 1)[0]
            counts[kind] = float(line.split()[-1])
    return counts


def quiet_statements(server_url: str, period: float = 1.5) -> dict[str, float]:
    """``statements`` once the server has run none for ``period``: the reads that follow a
    registration (the dispatcher reads a new worker's row within ``dispatch.WARM_SCAN``,
    1 s) are behind it, however late a loaded machine runs them."""
    return steady(lambda: statements(server_url), period, message="the server never stopped running statements")


def metric(server_url: str, name: str) -> float:
    for line in httpx.get(f"{server_url}/metrics").text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.split()[-1])
    raise KeyError(name)
