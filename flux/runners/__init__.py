"""Runners execute one claimed execution and stream its events to the worker.

Contract: ``await runner.run(job, emit, cancel)`` emits at most one terminal event
(WORKFLOW_COMPLETED, WORKFLOW_FAILED or WORKFLOW_CANCELLED) and nothing after it, and
returns normally after emitting one whatever happened to the workflow's code; setting
``cancel`` asks it to stop. If the runner itself fails (raises), the worker reports
WORKFLOW_FAILED for it.
"""

from __future__ import annotations

from flux.runners.base import Job, Runner
from flux.runners.docker import DockerRunner
from flux.runners.inprocess import InProcessRunner
from flux.runners.subprocess import SubprocessRunner

RUNNER_NAMES = ("subprocess", "inprocess", "docker")

__all__ = ["Job", "Runner", "RUNNER_NAMES", "DockerRunner", "InProcessRunner", "SubprocessRunner"]
