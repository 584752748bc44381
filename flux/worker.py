"""The worker: probe, register, heartbeat, claim, run, report.

One asyncio loop drives everything. Claims are long polls (the server answers as
soon as it assigns work, or after ``claim_wait``), so an idle worker costs no CPU.
Events from a running execution are batched: while one checkpoint request is in
flight, newer events queue and leave together in the next one.

When the server is unreachable the worker retries with exponential backoff and
jitter; when its session is refused (401: it was evicted, or the server forgot it)
it registers again, reporting what it still runs, and stops what the server has
since given to someone else.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import signal
from dataclasses import dataclass, field
from typing import Any

import httpx

from flux import probe
from flux.domain.events import TERMINAL_EVENTS, EventType
from flux.domain.samples import metrics_changed, resources_changed
from flux.loader import import_object
from flux.runtime import make_event
from flux.runners import DockerRunner, InProcessRunner, Job, Runner, SubprocessRunner
from flux.runners.limits import LimitPolicy
from flux.worker_identity import NameTaken, WorkerIdentity

log = logging.getLogger("flux.worker")



@dataclass
class WorkerConfig:
    name: str
    server_url: str
    bootstrap_token: str
    labels: dict[str, str] = field(default_factory=dict)
    max_concurrent_executions: int = 4
    heartbeat_interval: float = 5.0
    runner: str = "subprocess"
    claim_wait: float = 20.0
    gpu_source: str = "auto"
    disk_path: str = "/"
    #: Seconds a stopping worker gives its children to end after SIGTERM.
    shutdown_grace: float = 5.0
    #: ``module:function`` returning ``dict[str, float]``, called on every heartbeat.
    metrics_provider: str | None = None
    #: RLIMIT_AS for every subprocess child, in bytes (the spec's runner-level ceiling).
    subprocess_memory_limit: int | None = None
    #: Derive CPU pinning and memory ceilings from each execution's request.
    enforce_requests: bool = False
    #: Executions one subprocess child may serve in turn (1: a fresh process for each).
    max_executions_per_child: int = 100
    #: "sample": match against the last sampled availability (the spec's model);
    #: "reserve": against capacity minus what running executions were allotted.
    allocation: str = "sample"
    docker_image: str = "python:3.11-slim"
    docker_memory: int | None = None
    docker_cpus: float | None = None
    docker_args: tuple[str, ...] = ()
    #: Countable custom resources this worker advertises ({"fpga": 2}).
    custom_resources: dict[str, float] = field(default_factory=dict)
    #: Folder for this worker's identity (its session token, the lock on its name);
    #: None keeps the token in memory only (``flux.worker_identity``).
    home: str | None = None


def build_runner(config: WorkerConfig) -> Runner:
    if config.runner == "inprocess":
        if config.enforce_requests or config.subprocess_memory_limit:
            log.warning("the inprocess runner cannot enforce ceilings; enforce_requests/subprocess_memory_limit ignored")
        return InProcessRunner()
    if config.runner == "docker":
        return DockerRunner(
            config.docker_image, config.docker_memory, config.docker_cpus, config.docker_args, config.enforce_requests
        )
    policy = LimitPolicy(subprocess_memory_limit=config.subprocess_memory_limit, enforce_requests=config.enforce_requests)
    # At least two warm children even for one slot: the refill after a hand-over
    # (a Python start, ~100 ms) then never sits on the next execution's path.
    return SubprocessRunner(
        warm_processes=min(max(config.max_concurrent_executions, 2), 4),
        limits=policy,
        max_executions_per_child=config.max_executions_per_child,
        max_idle=config.max_concurrent_executions,
    )


def is_transient(exc: httpx.HTTPError) -> bool:
    """Worth retrying: the server is unreachable, shutting down or overloaded (5xx)."""
    if isinstance(exc, httpx.HTTPStatusError):
        return exc.response.status_code >= 500
    return isinstance(exc, httpx.TransportError)


def retry_after(exc: httpx.HTTPError) -> float:
    """Seconds an overloaded server (503) asked us to wait, else 0."""
    if isinstance(exc, httpx.HTTPStatusError):
        try:
            return max(0.0, min(float(exc.response.headers.get("retry-after", 0)), 60.0))
        except ValueError:
            return 0.0
    return 0.0


class SessionLost(Exception):
    """The server refused our session token: register again."""


class Backoff:
    """Exponential backoff with full jitter (AWS architecture blog's recommendation)."""

    def __init__(self, base: float = 0.2, cap: float = 10.0):
        self.base, self.cap, self.attempt = base, cap, 0

    def reset(self) -> None:
        self.attempt = 0

    async def sleep(self, at_least: float = 0.0) -> None:
        """Sleep the next backoff; a server's ``Retry-After`` is honoured, jittered up
        to twice its value so that a shed fleet does not come back all at once."""
        delay = random.uniform(0, min(self.cap, self.base * 2**self.attempt))
        if at_least:
            delay = max(delay, random.uniform(at_least, 2 * at_least))
        self.attempt += 1
        await asyncio.sleep(delay)


class Outbox:
    """Events of one execution waiting to be checkpointed, in order."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self.ready = asyncio.Event()
        self.closed = False

    def put(self, event: dict) -> None:
        if self.closed:
            return  # the terminal event is in: the log is over
        self.events.append(event)
        self.closed = event["type"] in TERMINAL_EVENTS
        self.ready.set()

    def take(self) -> list[dict]:
        batch, self.events = self.events, []
        self.ready.clear()
        return batch


@dataclass
class RunningExecution:
    job: Job
    outbox: Outbox = field(default_factory=Outbox)
    cancel: asyncio.Event = field(default_factory=asyncio.Event)
    #: Set when the server says this execution is no longer ours: stop and report nothing.
    abandoned: bool = False
    #: Checkpoint batches sent for this attempt (the server numbers them to drop re-sends).
    batches: int = 0


class Worker:
    def __init__(self, config: WorkerConfig, runner: Runner | None = None):
        self.config = config
        self.runner = runner or build_runner(config)
        self.running: dict[str, RunningExecution] = {}
        self._token: str | None = None
        self._register_lock = asyncio.Lock()
        self._slot_freed = asyncio.Event()
        self._stopping = asyncio.Event()
        self._tasks: set[asyncio.Task] = set()
        #: One task per running execution (``_execute``), apart from the loops in _tasks.
        self._executions: set[asyncio.Task] = set()
        self._http: httpx.AsyncClient | None = None
        #: Server replicas to use, current first (comma-separated in ``server_url``).
        self._urls = [url.strip() for url in config.server_url.split(",") if url.strip()]
        self._metrics_provider = import_object(config.metrics_provider) if config.metrics_provider else None
        #: The resources sample and metrics the server last accepted from us.
        self._published: tuple[dict | None, dict | None] = (None, None)
        self.identity = WorkerIdentity(config.home, config.name) if config.home else None

    # --- what the worker publishes -------------------------------------------------------

    def _metrics(self, resources: dict[str, Any]) -> dict[str, float]:
        """Built-in live metrics plus the user's provider's, published for routing policies."""
        metrics = {
            "flux.cpu_percent": float(resources.get("cpu_percent", 0.0)),
            "flux.memory_percent": 100.0 * (1 - resources["memory_available"] / max(resources["memory_total"], 1)),
        }
        if self._metrics_provider is not None:
            try:
                metrics.update({str(k): float(v) for k, v in self._metrics_provider().items()})
            except Exception:  # noqa: BLE001 - a broken provider must not stop heartbeats
                log.exception("metrics provider %s failed", self.config.metrics_provider)
        return metrics

    def _get_resources_info(self) -> dict[str, Any]:
        """The registration payload: resources, packages, runtime, labels, slots.

        GPU detection (the spec's ``Worker._get_gpu_info``) lives in ``flux.probe.detect_gpus``.
        """
        info = probe.get_resources_info(
            labels=self.config.labels,
            max_concurrent_executions=self.config.max_concurrent_executions,
            disk_path=self.config.disk_path,
            gpu_source=self.config.gpu_source,
        )
        return {
            "name": self.config.name,
            "heartbeat_interval": self.config.heartbeat_interval,
            "allocation": self.config.allocation,
            "custom_resources": self.config.custom_resources,
            "metrics": self._metrics(info["resources"]),
            **info,
        }

    # --- server calls --------------------------------------------------------------------

    async def _post(
        self, path: str, json: Any, token: str | None = None, timeout: float | None = None, headers: dict | None = None
    ) -> Any:
        assert self._http is not None
        headers = {"Authorization": f"Bearer {token or self._token}", **(headers or {})}
        response = await self._http.post(path, json=json, headers=headers, timeout=timeout or 30.0)
        if response.status_code == 401 and token is None:
            raise SessionLost(response.text)
        response.raise_for_status()
        return response.json()

    async def register(self, stale_token: str | None = None) -> None:
        """Register (again). Calls that lost the same session share one re-registration."""
        async with self._register_lock:
            if stale_token is not None and self._token != stale_token:
                return  # another call already registered again while this one waited
            payload = await asyncio.to_thread(self._get_resources_info)  # package scan, NVML: off the loop
            payload["running"] = sorted(self.running)
            # the token our name was bound to: it proves this is that worker, restarted
            held = {"X-Flux-Worker-Token": self._token} if self._token else None
            backoff = Backoff()
            while True:
                try:
                    reply = await self._post("/workers/register", payload, token=self.config.bootstrap_token, headers=held)
                    break
                except httpx.HTTPError as exc:
                    if isinstance(exc, httpx.HTTPStatusError) and exc.response.status_code == 409:
                        raise NameTaken(exc.response.json().get("detail", exc.response.text)) from None
                    if not is_transient(exc):
                        raise
                    log.warning("server unreachable (%s); retrying", exc.__class__.__name__)
                    self._fail_over()
                    await backoff.sleep(retry_after(exc))
            self._token = reply["session_token"]
            if self.identity is not None:
                self.identity.save_token(self._token)
            self._published = (payload["resources"], payload["metrics"])
            for execution_id in reply["abandon"]:
                if execution_id in self.running:
                    self._abandon(self.running[execution_id])
            log.info("worker %s registered with %s", self.config.name, self.config.server_url)

    def _fail_over(self) -> None:
        """Try the next server replica (``--server-url a,b``), if there is more than one."""
        if len(self._urls) > 1:
            self._urls.append(self._urls.pop(0))
            self._http.base_url = self._urls[0]
            log.warning("switching to server %s", self._urls[0])

    async def _call(self, path: str, json: Any, timeout: float | None = None) -> Any:
        """A session call that survives server restarts, overload and evictions.

        Transport errors and 5xx answers (a server shutting down or overloaded) are
        retried with backoff; 4xx answers other than 401 are the caller's to handle.
        """
        backoff = Backoff()
        while True:
            token = self._token
            try:
                return await self._post(path, json, timeout=timeout)
            except SessionLost:
                await self.register(stale_token=token)
            except httpx.HTTPError as exc:
                if not is_transient(exc) or self._stopping.is_set():
                    raise
                log.warning("server call %s failed (%s); retrying", path, exc.__class__.__name__)
                self._fail_over()
                await backoff.sleep(retry_after(exc))

    # --- loops ---------------------------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        """Liveness, plus a fresh resource sample when it moved materially: hot-attached
        GPUs and freed memory are seen within one beat, and an idle worker's beat is a
        few bytes that cost the server no database write (``flux.domain.samples``)."""
        state = None
        while True:
            await asyncio.sleep(self.config.heartbeat_interval)
            beat: dict[str, Any] = {"running": sorted(self.running)}
            try:
                resources = await asyncio.to_thread(probe.sample_resources, self.config.disk_path, self.config.gpu_source)
                metrics = self._metrics(resources)
                if resources_changed(self._published[0], resources):
                    beat["resources"] = resources
                if metrics_changed(self._published[1], metrics):
                    beat["metrics"] = metrics
            except Exception:  # noqa: BLE001 - a failed sample must not stop the heartbeat itself
                log.exception("resource sample failed; heartbeat sent without it")
            reply = await self._call(f"/workers/{self.config.name}/heartbeat", beat)
            self._published = (beat.get("resources", self._published[0]), beat.get("metrics", self._published[1]))
            self._cancel(reply["cancel"])
            if reply["state"] != state:
                state = reply["state"]
                log.info("worker %s is %s", self.config.name, state)

    async def _claim_loop(self) -> None:
        while not self._stopping.is_set():
            if len(self.running) >= self.config.max_concurrent_executions:
                self._slot_freed.clear()
                await self._slot_freed.wait()
                continue
            reply = await self._call(
                f"/workers/{self.config.name}/claim",
                {"wait": self.config.claim_wait},
                timeout=self.config.claim_wait + 10,
            )
            self._cancel(reply["cancel"])
            for job in reply["executions"]:
                self._start(job)

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _start(self, job: Job) -> None:
        execution = RunningExecution(job)
        previous = self.running.get(job["id"])
        if previous is not None:  # an older attempt still stopping: it is no longer ours
            self._abandon(previous)
        self.running[job["id"]] = execution
        task = asyncio.create_task(self._execute(execution))
        self._executions.add(task)
        task.add_done_callback(self._executions.discard)

    def _cancel(self, execution_ids: list[str]) -> None:
        for execution_id in execution_ids:
            if execution_id in self.running:
                self.running[execution_id].cancel.set()

    @staticmethod
    def _abandon(execution: RunningExecution) -> None:
        execution.abandoned = True
        execution.cancel.set()

    async def _execute(self, execution: RunningExecution) -> None:
        """Run one execution and report it; whatever breaks, the server hears how it ended."""
        flusher = self._spawn(self._flush(execution))
        try:
            await self.runner.run(execution.job, execution.outbox.put, execution.cancel)
        except Exception as exc:  # noqa: BLE001 - a runner failure must not kill the worker
            log.exception("execution %s failed in the runner", execution.job["id"])
            execution.outbox.put(
                make_event(EventType.WORKFLOW_FAILED, execution.job["workflow_name"], value={"error": f"worker runner error: {exc!r}"})
            )
        try:
            await flusher
        except Exception:  # noqa: BLE001 - eviction will requeue it; the worker goes on
            log.exception("could not report execution %s", execution.job["id"])
        finally:
            if self.running.get(execution.job["id"]) is execution:
                del self.running[execution.job["id"]]
            self._slot_freed.set()

    async def _flush(self, execution: RunningExecution) -> None:
        """Checkpoint batches until the terminal event is on the server."""
        path = f"/executions/{execution.job['id']}/checkpoint"
        while True:
            await execution.outbox.ready.wait()
            batch = execution.outbox.take()
            if execution.abandoned:
                return
            execution.batches += 1  # a retry inside _call re-sends the same number: the server keeps it once
            try:
                reply = await self._call(path, {"attempt": execution.job["attempt"], "batch": execution.batches, "events": batch})
            except httpx.HTTPStatusError as exc:
                if exc.response.status_code in (403, 404, 409):  # fenced: no longer ours
                    log.warning("execution %s taken from this worker: %s", execution.job["id"], exc.response.text)
                    self._abandon(execution)
                    return
                raise
            if reply["cancel"]:
                execution.cancel.set()
            if any(event["type"] in TERMINAL_EVENTS for event in batch):
                return

    # --- lifecycle -----------------------------------------------------------------------

    async def run(self) -> None:
        if self.identity is not None:
            self.identity.claim()  # NameTaken if this name already runs on this host
            self._token = self.identity.load_token()
        # Idle connections are dropped before the server's keep-alive (75 s) would drop
        # them, so a heartbeat never goes out on a connection the server is closing.
        self._http = httpx.AsyncClient(base_url=self._urls[0], limits=httpx.Limits(keepalive_expiry=30.0))
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self._stopping.set)
        try:
            await self.runner.start()
            await self.register()
            loops = [self._spawn(self._heartbeat_loop()), self._spawn(self._claim_loop())]
            stop = asyncio.create_task(self._stopping.wait())
            done, _ = await asyncio.wait([*loops, stop], return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if task is not stop:
                    task.result()  # a loop that died re-raises here
        finally:
            await self._shutdown()

    async def _shutdown(self) -> None:
        """Stop children and hand unfinished executions back to the server at once."""
        self._stopping.set()
        for execution in self.running.values():
            self._abandon(execution)
        if self._executions:
            await asyncio.wait(self._executions, timeout=self.config.shutdown_grace)
        for task in [*self._tasks, *self._executions]:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._executions, return_exceptions=True)
        try:
            if self._token:
                with contextlib.suppress(httpx.HTTPError, SessionLost):
                    await self._post(f"/workers/{self.config.name}/shutdown", None, timeout=5)
        finally:
            await self.runner.close()
            await self._http.aclose()
            if self.identity is not None:
                self.identity.release()
