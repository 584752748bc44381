"""B17 hostile input, round two (issue 31): each of the nine inputs that once jammed,
looped or exhausted the server, tried against a real server and worker, with whether it
reproduced and `/health` right after; then `/health` under N slow-header connections,
during a refused checkpoint of 100,001 events, and while 2 x ``timers.BATCH`` + 100
executions pass their deadline at once (the figures tests/server/test_hostile_edge.py,
test_hostile_checkpoint.py and test_bounded_loops.py once asserted).

    python -m bench.b17_hostile              # 2,000 slow-header connections
    python -m bench.b17_hostile --quick      # 200

An item "reproduces" when the server answers as it did before the fix (a 2xx for what
must be refused, a 5xx, or an execution re-dispatched past its max_attempts).
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Callable
from urllib.parse import urlsplit

import httpx

from bench.common import p99
from flux.local import LocalCluster
from flux.server.timers import BATCH
from flux.worker import probe

PROBE = "from flux import workflow\n\n@workflow\nasync def probe(ctx):\n    return ctx.input\n"
STRANDED = "from flux import workflow\n\n@workflow\nasync def stranded(ctx):\n    return 1\n"
DEEP = (
    "from flux import workflow\n\n@workflow\nasync def deep(ctx):\n"
    "    value = 1\n    for _ in range(62):\n        value = [value]\n    return value\n"
)


def health(http: httpx.Client, count: int = 50) -> list[float]:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        http.get("/health").raise_for_status()
        times.append((time.perf_counter() - started) * 1000)
    return times


def refused(response: httpx.Response) -> bool:
    return 400 <= response.status_code < 500


def items(cluster: LocalCluster, http: httpx.Client) -> dict[str, bool]:
    """Each item: True when it reproduced."""
    run = lambda name: http.post(f"/workflows/{name}/run", json={"input": None}).json()["id"]  # noqa: E731
    out = {
        "1 schedule every 1e-9": not refused(
            http.post("/schedules", json={"name": "s", "workflow": "probe", "every": 1e-9})
        ),
        "5 schedule times out of range": not all(
            refused(http.post("/schedules", json={"name": f"r{i}", "workflow": "probe", **body}))
            for i, body in enumerate([{"every": 1e20}, {"at": 1e300}, {"at": -1e18}, {"every": 60, "anchor": 1e300}])
        ),
        "6 10,000 affinity labels": not refused(
            http.post(
                "/workflows",
                json={
                    "source": PROBE,
                    "workflows": [{"name": "probe", "affinity": {f"k{i}": "v" for i in range(10_000)}}],
                },
            )
        ),
        "9 memory 999...Ei": not refused(
            http.post(
                "/workflows",
                json={
                    "source": PROBE,
                    "workflows": [{"name": "probe", "requests": {"memory": "99999999999999999999999999Ei"}}],
                },
            )
        ),
    }
    allow = httpx.request("OPTIONS", f"{cluster.server_url}/schedules").headers.get("allow", "")
    out["7 405 lists every method"] = not {"GET", "POST"} <= set(allow.split(", "))
    out["3 128 MB header"] = not raw(cluster.server_url, b"GET /health HTTP/1.1\r\nX: " + b"a" * 1024**2).startswith(
        "HTTP/1.1 431"
    )
    out["4 silent connection left open"] = not raw(cluster.server_url, b"", read_timeout=30).startswith("HTTP/1.1 408")
    long_id = {
        "attempt": 1,
        "batch": 1,
        "events": [{"type": "TASK_STARTED", "name": "x", "task_id": "x" * 100_000, "time": 0}],
    }
    out["8 100,000-character task_id"] = (
        http.post(
            f"/executions/{run('probe')}/checkpoint",
            json=long_id,
            headers={"Authorization": f"Bearer {worker_session(cluster, http)}"},
        ).status_code
        != 422
    )
    assert (
        http.post("/workflows", json={"source": DEEP, "workflows": [{"name": "deep", "max_attempts": 3}]}).status_code
        == 201
    )
    execution = http.get(f"/executions/{run('deep')}", params={"wait": 60}).json()
    out["2 output nested 62 levels re-dispatched"] = execution["state"] != "FAILED" or execution["attempt"] > 3
    return out


def worker_session(cluster: LocalCluster, http: httpx.Client, name: str = "hand") -> str:
    """The session token of a worker registered by hand: a checkpoint passes its
    authentication, so what answers is the body's cap."""
    bootstrap = (cluster.home / "bootstrap-token").read_text().strip()
    registration = {"name": name, **probe.get_resources_info({}, 1, gpu_source="none")}
    reply = http.post("/workers/register", json=registration, headers={"Authorization": f"Bearer {bootstrap}"})
    return reply.raise_for_status().json()["session_token"]


def raw(url: str, data: bytes, read_timeout: float = 10) -> str:
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=read_timeout) as sock:
        try:
            sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except (TimeoutError, ConnectionResetError):
            pass
    return b"".join(chunks).decode(errors="replace")


def slow_connections(url: str, count: int, http: httpx.Client) -> tuple[float, float, float]:
    """Median and p99 of /health (ms) with ``count`` slow-header connections open, and
    the seconds until the server had closed them all."""
    parts = urlsplit(url)
    with ExitStack() as stack:
        opened = time.monotonic()
        socks = [
            stack.enter_context(socket.create_connection((parts.hostname, parts.port), timeout=60))
            for _ in range(count)
        ]
        for sock in socks:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        times = health(http, 200)
        for sock in socks:
            while sock.recv(65536):
                pass
        return statistics.median(times), p99(times), time.monotonic() - opened


def health_during(http: httpx.Client, request: Callable[[], object]) -> list[float]:
    """/health (ms), one probe after another, while ``request`` runs on a thread."""
    worker = threading.Thread(target=request)
    worker.start()
    times = []
    while worker.is_alive():
        times.extend(health(http, 1))
    worker.join()
    return times


def huge_checkpoint(cluster: LocalCluster, http: httpx.Client) -> list[float]:
    """A checkpoint of 100,001 events (the cap is 1,000), encoded beforehand: /health meanwhile."""
    event = {"type": "PROGRESS", "name": "probe", "value": 1, "time": time.time()}
    body = json.dumps({"attempt": 1, "batch": 1, "events": [event] * 100_001}).encode()
    headers = {"Authorization": f"Bearer {worker_session(cluster, http, 'huge')}", "Content-Type": "application/json"}
    run = http.post("/workflows/probe/run", json={"input": None}).json()["id"]
    return health_during(http, lambda: http.post(f"/executions/{run}/checkpoint", content=body, headers=headers))


def expiring_deadlines(http: httpx.Client) -> tuple[list[float], float]:
    """2 x BATCH + 100 executions no worker matches, each with a 2 s timeout: /health
    (ms) from the first submission until none is SCHEDULED, and how long that took."""
    stranded = {"name": "stranded", "timeout": 2, "affinity": {"pool": "nobody"}}
    assert http.post("/workflows", json={"source": STRANDED, "workflows": [stranded]}).status_code == 201
    started = time.monotonic()
    for _ in range(2 * BATCH + 100):
        http.post("/workflows/stranded/run", json={"input": None}).raise_for_status()
    times = []
    while http.get("/executions", params={"state": "SCHEDULED", "limit": 1}).json():
        times.extend(health(http, 1))
        time.sleep(0.05)
    return times, time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home, LocalCluster(Path(home) / "home") as cluster:
        cluster.start_server()
        cluster.start_worker("w1")
        with httpx.Client(base_url=cluster.server_url, timeout=90) as http:
            assert http.post("/workflows", json={"source": PROBE, "workflows": [{"name": "probe"}]}).status_code == 201
            results = items(cluster, http)
            for name, reproduced in sorted(results.items()):
                after = statistics.median(health(http, 20))
                print(
                    f"B17.item {name}: reproduced={'yes' if reproduced else 'no'}  /health median after {after:.1f} ms"
                )
            print(f"B17.items_reproduced {sum(results.values())} of {len(results)}")
            count = 200 if args.quick else 2000
            median, tail, closed = slow_connections(cluster.server_url, count, http)
            print(
                f"B17.slow_headers.{count}: /health median {median:.1f} ms, p99 {tail:.1f} ms; "
                f"all closed after {closed:.1f} s"
            )
            times = huge_checkpoint(cluster, http)
            print(f"B17.huge_checkpoint: /health median {statistics.median(times):.1f} ms, max {max(times):.1f} ms")
            times, took = expiring_deadlines(http)
            print(
                f"B17.expiring_deadlines.{2 * BATCH + 100}: /health median {statistics.median(times):.1f} ms, "
                f"p99 {p99(times):.1f} ms; none SCHEDULED after {took:.1f} s"
            )
        assert "Traceback" not in cluster.log("server"), "the server logged a traceback"


if __name__ == "__main__":
    main()
