"""What the worker and its subprocess children say to each other besides events.

Jobs go down as one JSON line each on the child's stdin; events come back as JSON
lines on its original stdout, then ``IDLE`` when the child can take another job.
"""

from __future__ import annotations

#: The environment variable that tells a child its worker's pid.
PARENT_ENV = "FLUX_WORKER_PID"

#: The control line a child writes when it can take another job.
IDLE = {"type": "CHILD_IDLE"}


def reusable(limits: dict) -> bool:
    """Ceilings and device settings cannot be undone in a live process: such children retire."""
    return not (limits.get("memory") or limits.get("cpus") or limits.get("env"))
