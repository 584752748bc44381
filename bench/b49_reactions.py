"""B49 reactions: how soon the server reacts, the figures tests asserted before issue 49
(tests now assert the event and its order; the speed is measured here).

    python -m bench.b49_reactions            # 40 samples a figure, 5 stops
    python -m bench.b49_reactions --quick    # 10 samples, 2 stops

One server (SQLite) in a temporary home, real processes (``flux.local``). It prints:

- ``follow_log_ms``: a log line posted by a worker -> the line on an open
  ``GET /executions/ID/logs?follow=true`` stream (tests/server/test_logs_api.py);
- ``follow_event_ms``: a checkpoint posted -> its event on an open ``.../events?follow=true``
  stream (same file);
- ``server_stop_s``: SIGTERM -> the server process's exit, with a worker's claim and a
  client's ``wait`` long-polling on it (tests/e2e/test_shutdown.py), a fresh server each;
- ``claim_ms.plain`` / ``claim_ms.hanging_hook``: ``claimed_at - scheduled_at`` of runs of a
  namespace without hooks and of one whose every execution event goes to an endpoint that
  never answers (within the hooks' 300 s timeout), alternated on one worker
  (tests/e2e/test_hooks.py): a hanging endpoint must not delay placement.

The worker of the two follow figures is a protocol worker driven from here (plain HTTP,
registered by hand, no runner), so that the clock starts at the request that carries the
line or the event.
"""

from __future__ import annotations

import argparse
import os
import signal
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from queue import Queue

import httpx
from cryptography.fernet import Fernet

from bench.common import BenchCluster, Figure, print_figures
from flux.client import FluxClient
from flux.local import LocalCluster
from flux.worker import probe

WORKFLOW = "from flux import workflow\n\n@workflow\nasync def hello(ctx):\n    return ctx.input\n"
STRANDED = (
    "from flux import workflow\n\n@workflow.with_options(affinity={'pool': 'nobody'})\n"
    "async def stranded(ctx):\n    return 1\n"
)


class HandWorker:
    """A worker registered by hand that claims one run and posts its lines and events."""

    def __init__(self, cluster: BenchCluster, http: httpx.Client):
        bootstrap = (cluster.home / "bootstrap-token").read_text().strip()
        body = {"name": "by-hand", "heartbeat_interval": 3600.0, **probe.get_resources_info({}, 4, gpu_source="none")}
        reply = http.post("/workers/register", json=body, headers={"Authorization": f"Bearer {bootstrap}"})
        self.auth = {"Authorization": f"Bearer {reply.raise_for_status().json()['session_token']}"}
        self.http = http
        self.log_batch = self.event_batch = 0

    def claim(self) -> dict:
        while not (jobs := self.http.post("/workers/by-hand/claim", json={"wait": 5}, headers=self.auth).json()):
            pass
        return jobs["executions"][0]

    def line(self, job: dict, message: str) -> None:
        self.log_batch += 1
        entry = {"time": time.time(), "stream": "stdout", "task_id": None, "level": None, "logger": None}
        body = {"attempt": job["attempt"], "batch": self.log_batch, "lines": [{**entry, "message": message}]}
        self.http.post(f"/executions/{job['id']}/logs", json=body, headers=self.auth).raise_for_status()

    def event(self, job: dict, kind: str) -> None:
        self.event_batch += 1
        events = [{"type": kind, "name": "hello", "value": None, "time": time.time()}]
        body = {"attempt": job["attempt"], "batch": self.event_batch, "events": events}
        self.http.post(f"/executions/{job['id']}/checkpoint", json=body, headers=self.auth).raise_for_status()


def follow(url: str, seen: Queue, opened: threading.Event) -> None:
    """Read an SSE stream: put (arrival time, data line) for each ``data:`` line."""
    with httpx.stream("GET", url, params={"follow": "true"}, timeout=httpx.Timeout(10, read=60)) as stream:
        opened.set()
        for text in stream.iter_lines():
            if text.startswith("data:"):
                seen.put((time.perf_counter(), text))


def open_stream(url: str) -> Queue:
    seen: Queue = Queue()
    opened = threading.Event()
    threading.Thread(target=follow, args=(url, seen, opened), daemon=True).start()
    opened.wait(10)
    return seen


def follows(work: Path, count: int) -> list[Figure]:
    logs, events = [], []
    with BenchCluster(work / "follow") as cluster:
        cluster.start_server()
        http = httpx.Client(base_url=cluster.server_url, timeout=30)
        http.post("/workflows", json={"source": WORKFLOW, "workflows": [{"name": "hello"}]}).raise_for_status()
        worker = HandWorker(cluster, http)
        http.post("/workflows/hello/run", json={"input": 1}).raise_for_status()
        job = worker.claim()
        worker.event(job, "WORKFLOW_STARTED")
        base = f"{cluster.server_url}/executions/{job['id']}"
        lines, changes = open_stream(f"{base}/logs"), open_stream(f"{base}/events")
        time.sleep(0.5)  # the streams have read what was there and wait
        while not changes.empty():
            changes.get()
        for n in range(count):
            sent = time.perf_counter()
            worker.line(job, f"line {n}")
            logs.append((lines.get(timeout=30)[0] - sent) * 1000)
            sent = time.perf_counter()
            worker.event(job, "TASK_STARTED")
            events.append((changes.get(timeout=30)[0] - sent) * 1000)
        http.close()
    return [
        Figure.of("B49.follow_log_ms", logs, "ms", note="POST of a line -> it on an open follow stream"),
        Figure.of("B49.follow_event_ms", events, "ms", note="checkpoint -> its event on an open follow stream"),
    ]


def stops(work: Path, count: int) -> list[Figure]:
    took = []
    for n in range(count):
        with BenchCluster(work / f"stop{n}") as cluster, httpx.Client(timeout=90) as http:
            cluster.start_server()
            cluster.start_worker("w1", heartbeat_interval=0.5)
            source = {"source": STRANDED, "workflows": [{"name": "stranded"}]}
            http.post(f"{cluster.server_url}/workflows", json=source).raise_for_status()
            run = http.post(f"{cluster.server_url}/workflows/stranded/run", json={"input": None}).json()["id"]
            wait = f"{cluster.server_url}/executions/{run}"
            threading.Thread(target=lambda: http.get(wait, params={"wait": 60}), daemon=True).start()
            time.sleep(1.0)  # the claim and the wait are parked
            started = time.perf_counter()
            cluster.server.send_signal(signal.SIGTERM)
            cluster.server.wait(timeout=60)
            took.append(time.perf_counter() - started)
            cluster.server = None
    return [Figure.of("B49.server_stop_s", took, "s", note="SIGTERM -> exit, a claim and a wait long-polling")]


class Hanging(BaseHTTPRequestHandler):
    """A webhook endpoint that reads the request and never answers."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers["Content-Length"]))
        time.sleep(3600)

    def log_message(self, *args: object) -> None:
        pass


def hooks(work: Path, count: int) -> list[Figure]:
    endpoint = ThreadingHTTPServer(("127.0.0.1", 0), Hanging)
    endpoint.daemon_threads = True
    threading.Thread(target=endpoint.serve_forever, daemon=True).start()
    os.environ.setdefault("FLUX_SECRETS_KEY", Fernet.generate_key().decode())  # hooks keep their secret sealed
    claims: dict[str, list[float]] = {"plain": [], "hanging_hook": []}
    args = ("--hooks-allow-private", "--hooks-timeout", "300")
    with LocalCluster(work / "hooks", server_args=args) as cluster:
        cluster.start_server()
        with FluxClient(cluster.server_url) as plain, FluxClient(cluster.server_url, namespace="hooked") as hooked:
            plain.create_namespace("hooked")
            source = work / "hello.py"
            source.write_text(WORKFLOW)
            for client in (plain, hooked):
                client.register(source)
            url = f"http://127.0.0.1:{endpoint.server_address[1]}/hook"
            events = ["execution.scheduled", "execution.started", "execution.completed"]
            hooked.create_hook("hangs", url, events, secret="s3cret-of-the-bench-0123456789")
            cluster.start_worker("w1")
            for i in range(count + 2):  # the first two warm up
                for name, client in (("plain", plain), ("hanging_hook", hooked)):
                    run = client.run("hello", i, wait=60)
                    if i >= 2:
                        claims[name].append((run["claimed_at"] - run["scheduled_at"]) * 1000)
    endpoint.shutdown()
    return [Figure.of(f"B49.claim_ms.{name}", values, "ms") for name, values in claims.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        figures = follows(Path(work), 10 if args.quick else 40)
        figures += stops(Path(work), 2 if args.quick else 5)
        figures += hooks(Path(work), 10 if args.quick else 40)
    print_figures(figures, args.json)


if __name__ == "__main__":
    main()
