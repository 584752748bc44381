"""The worker: probe, register, heartbeat, claim, run, report, drain.

Rooms: ``config`` (what it is told), ``session`` (its session with the server),
``heartbeat`` (what it publishes), ``claims`` (the claim loop), ``running`` (each
execution's attempt, outbox and checkpoints), ``drain`` (stopping without losing
work), ``lifecycle`` (the ``Worker`` that ties them together).
"""

from flux.worker.config import WorkerConfig, build_runner
from flux.worker.lifecycle import Worker
from flux.worker.session import Backoff, is_transient, retry_after

__all__ = ["Worker", "WorkerConfig", "build_runner", "Backoff", "is_transient", "retry_after"]
