"""Runners execute one claimed execution and stream its events to the worker.

Contract: ``await runner.run(job, emit, cancel)`` returns after emitting exactly one
terminal event (WORKFLOW_COMPLETED, WORKFLOW_FAILED or WORKFLOW_CANCELLED), whatever
happened to the code it ran; setting ``cancel`` asks it to stop.
"""

from __future__ import annotations

from flux.runners.base import Job, Runner
from flux.runners.docker import DockerRunner
from flux.runners.inprocess import InProcessRunner
from flux.runners.subprocess import SubprocessRunner

RUNNER_NAMES = ("subprocess", "inprocess", "docker")

__all__ = ["Job", "Runner", "RUNNER_NAMES", "DockerRunner", "InProcessRunner", "SubprocessRunner"]
