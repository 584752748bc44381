"""Runs each execution in its own container through the real ``docker`` CLI.

The container runs the same child entry point as the subprocess runner and speaks the
same stdin/stdout protocol, so everything but process start-up is shared. Worker
settings ``docker_memory`` / ``docker_cpus`` cap every container (the spec's
runner-level ceilings); with ``enforce_requests`` what the execution was allotted (its
request's cpu and memory) sets ``--memory``/``--cpus`` instead, and allotted GPUs are
passed with ``--gpus device=...`` and ``NVIDIA_VISIBLE_DEVICES``. The image must have this engine installed.

Engine check: a worker started with this runner first asks the engine for its version
(``engine_problem``), so a missing socket, a wrong ``DOCKER_HOST`` or a stopped daemon
is one clear error at start instead of every execution failing later; the worker runs
executions as child processes instead only when told to (``--docker-fallback
subprocess``).

Logs: ``docker run`` passes no extra file descriptor, so the protocol channel is the
container's stdout, and the child points its fd 1 at fd 2: what the container writes
to either fd arrives as ``stderr`` lines (``flux.worker.runners.pipes``); Python-level output
and ``logging`` are captured in the child as in the subprocess runner.
"""

from __future__ import annotations

import asyncio
import math
import shutil
import subprocess

from flux.worker.runners.base import Job, Stop
from flux.worker.runners.ceilings import THREAD_VARIABLES, Ceilings, gpu_list
from flux.worker.runners.pipes import Child
from flux.worker.runners.protocol import LogSink
from flux.worker.runners.subprocess import SubprocessRunner, attempt_name

#: Seconds the engine check waits for ``docker version``.
ENGINE_CHECK_TIMEOUT = 15.0
ENGINE_HINT = (
    "start a Docker engine or point DOCKER_HOST at one, choose another --runner, "
    "or pass --docker-fallback subprocess to run executions as child processes instead"
)


class EngineUnreachable(Exception):
    """The docker runner was chosen but no Docker engine answers."""

    def __init__(self, problem: str):
        super().__init__(f"{problem} ({ENGINE_HINT})")


def engine_problem(docker: str = "docker", timeout: float = ENGINE_CHECK_TIMEOUT) -> str | None:
    """Why the Docker engine cannot be used, or None when it answers."""
    if shutil.which(docker) is None:
        return f"the docker runner needs the '{docker}' command, which is not on PATH"
    try:
        result = subprocess.run(
            [docker, "version", "--format", "{{.Server.Version}}"], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return f"the Docker engine did not answer 'docker version' within {timeout:g}s"
    if result.returncode == 0 and result.stdout.strip():
        return None
    reason = (result.stderr.strip().splitlines() or ["no server version"])[-1]
    return f"the docker runner cannot reach a Docker engine: {reason}"


class DockerRunner(SubprocessRunner):
    name = "docker"
    own_channel = False

    def __init__(
        self,
        image: str,
        memory: int | None = None,
        cpus: float | None = None,
        extra_args: tuple[str, ...] = (),
        enforce_requests: bool = False,
        cancel_grace: float = 10.0,
        docker: str = "docker",
    ):
        super().__init__(warm_processes=0, cancel_grace=cancel_grace, max_executions_per_child=1)
        self.image, self.memory, self.cpus = image, memory, cpus
        self.extra_args, self.enforce_requests, self.docker = tuple(extra_args), enforce_requests, docker

    def plan(self, job: Job) -> Ceilings:
        """Inside the container only thread-pool sizes remain; docker enforces the rest."""
        cpu = job.allotment.cpu if self.enforce_requests else None
        env = {name: str(math.ceil(cpu)) for name in THREAD_VARIABLES} if cpu else {}
        return Ceilings(env=env)

    def command(self, job: Job) -> list[str]:
        """``docker run`` for one attempt: its ceilings and GPUs from its allotment (with
        ``enforce_requests``; else the worker's own ceilings), its bundle mounted."""
        allotment = job.allotment
        memory = (allotment.memory if self.enforce_requests else None) or self.memory
        cpus = (allotment.cpu if self.enforce_requests else None) or self.cpus
        args = [self.docker, "run", "--rm", "-i", "--init", "--name", self.container_name(job)]
        if memory:
            args += ["--memory", str(memory)]  # bytes
        if cpus:
            args += ["--cpus", f"{cpus:g}"]
        if allotment.gpus:
            devices = gpu_list(allotment)
            # docker parses --gpus as CSV: the quotes keep "device=0,1" one field
            args += ["--gpus", f'"device={devices}"', "-e", f"NVIDIA_VISIBLE_DEVICES={devices}"]
        root = job.bundle_root
        if root:  # the unpacked bundle, at the same path inside (read-only)
            args += ["-v", f"{root}:{root}:ro"]
        return [*args, *self.extra_args, self.image, "python", "-m", "flux.worker.runners.child"]

    async def _take(self, job: Job, limits: Ceilings) -> Child:
        return await self._spawn(*self.command(job))

    @staticmethod
    def container_name(job: Job) -> str:
        return attempt_name(job)

    async def run(self, job: Job, emit, stop: Stop, log: LogSink | None = None, ask=None) -> None:  # noqa: ANN001
        try:
            await super().run(job, emit, stop, log, ask)
        finally:
            # killing the 'docker run' client does not stop the container; --rm only acts on exit
            remove = await asyncio.create_subprocess_exec(
                self.docker,
                "rm",
                "-f",
                self.container_name(job),
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )
            await remove.wait()
