"""What a worker is told at start: its name, server, labels, slots, runner and ceilings."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from flux.domain.workers import AllocationMode
from flux.worker import cgroups
from flux.worker.runners.base import Runner
from flux.worker.runners.ceilings import CeilingPolicy
from flux.worker.runners.docker import DockerRunner, EngineUnreachable, engine_problem
from flux.worker.runners.subprocess import SubprocessRunner
from flux.worker.runners.template import ChildTemplate

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
    #: Disk figures are this path's filesystem: the working directory, where executions run.
    disk_path: str = "."
    #: Where the probe reads this process's cgroup limits (``flux.worker.cgroups``).
    cgroup_root: str = cgroups.DEFAULT_ROOT
    #: Seconds a stopping worker (SIGTERM, SIGINT) lets running executions finish
    #: before it hands the rest back to the server to resume elsewhere.
    drain_timeout: float = 60.0
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
    allocation: str = AllocationMode.SAMPLE.value
    docker_image: str = "python:3.11-slim"
    docker_memory: int | None = None
    docker_cpus: float | None = None
    docker_args: tuple[str, ...] = ()
    #: With the docker runner and no reachable engine: "none" (refuse to start) or
    #: "subprocess" (run executions as child processes instead, with a warning).
    docker_fallback: str = "none"
    #: Countable custom resources this worker advertises ({"fpga": 2}).
    custom_resources: dict[str, float] = field(default_factory=dict)
    #: The only namespaces whose executions it takes (``--namespace``); empty: every one.
    namespaces: tuple[str, ...] = ()
    #: Log bytes (sum of message bytes) shipped per attempt; later lines are dropped.
    max_log_bytes: int = 10 * 1024**2
    #: Log lines an execution may have waiting for the server before its child's
    #: output stops being read (back-pressure).
    log_buffer_lines: int = 10_000
    #: Capture what executions print and log and ship it to the server (docs/logs.md);
    #: off: the children's output goes to this worker's stderr.
    capture_output: bool = True
    #: Subprocess children kept warm whatever the demand (a burst grows the pool up to
    #: the slots; children idle past ``child_idle_timeout`` exit: docs/footprint.md).
    warm_children: int = 1
    child_idle_timeout: float = 60.0
    #: Folder for this worker's identity (its session token, the lock on its name);
    #: None keeps the token in memory only (``flux.worker.identity``).
    home: str | None = None
    #: Bytes of unpacked workflow bundles kept on disk (``flux.worker.bundles``).
    bundle_cache_size: int = 2 * 1024**3
    #: Where they are kept; None: HOME/bundle-cache/NAME, or a temporary folder.
    bundle_cache_dir: str | None = None
    #: The address a gang member's peers reach it at (docs/gangs.md#on-the-worker); None:
    #: this host's address toward the server (``flux.worker.gangs.advertise_address``).
    advertise_address: str | None = None


def build_runner(config: WorkerConfig, template: ChildTemplate | None = None) -> Runner:
    """``template``: forks the subprocess runner's children (``flux.worker.runners.template``)."""
    if config.runner == "inprocess":
        from flux.worker.runners.inprocess import InProcessRunner  # runs workflows here: the programming model with it

        if config.enforce_requests or config.subprocess_memory_limit:
            log.warning(
                "the inprocess runner cannot enforce ceilings; enforce_requests/subprocess_memory_limit ignored"
            )
        return InProcessRunner()
    if config.runner == "docker":
        problem = engine_problem()
        if problem is None:
            return DockerRunner(
                config.docker_image,
                config.docker_memory,
                config.docker_cpus,
                config.docker_args,
                config.enforce_requests,
            )
        if config.docker_fallback != "subprocess":
            raise EngineUnreachable(problem)
        log.warning("%s; running executions as child processes instead (--docker-fallback subprocess)", problem)
    policy = CeilingPolicy(
        subprocess_memory_limit=config.subprocess_memory_limit, enforce_requests=config.enforce_requests
    )
    return SubprocessRunner(
        warm_processes=min(config.warm_children, config.max_concurrent_executions),
        limits=policy,
        max_executions_per_child=config.max_executions_per_child,
        max_idle=config.max_concurrent_executions,
        idle_timeout=config.child_idle_timeout,
        template=template,
    )
