"""Runners execute one claimed execution and stream its events to the worker.

Contract: ``await runner.run(job, emit, stop, log=None)`` emits at most one event that closes
the attempt (WORKFLOW_COMPLETED, WORKFLOW_FAILED, WORKFLOW_CANCELLED, or ATTEMPT_ENDED
when the process running it died or hit its memory ceiling) and nothing after it,
and returns normally whatever happened to the workflow's code; ``log`` (awaited: the
back-pressure) receives the attempt's captured output lines (docs/logs.md). ``stop.cancel`` asks
the workflow to cancel; ``stop.kill`` kills the attempt at once, after which nothing
more is emitted. If the runner itself fails (raises), the worker reports WORKFLOW_FAILED
for it.
"""

from __future__ import annotations

import importlib

RUNNER_NAMES = ("subprocess", "inprocess", "docker")

#: Imported on first use: a child process (``flux.worker.runners.child``) lives in this package
#: and must not pay for the worker-side runners (the docker client, psutil) it never uses,
#: nor the command line (which names the runners) for the programming model.
_LAZY = {
    "DockerRunner": "docker",
    "InProcessRunner": "inprocess",
    "SubprocessRunner": "subprocess",
    "Job": "base",
    "Runner": "base",
    "Stop": "base",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(f"flux.worker.runners.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'flux.worker.runners' has no attribute {name!r}")


__all__ = ["Job", "Runner", "RUNNER_NAMES", "DockerRunner", "InProcessRunner", "SubprocessRunner", "Stop"]
