"""Attempts: how an execution's tries end, which ends count, and the wait between them.

An execution runs as numbered attempts. The attempt number is its fencing token: a
worker writes to an execution only under the attempt it was given, so a superseded
attempt can no longer record anything. An attempt ends either with the workflow's
own outcome (``FINISHED``) or by an infrastructure failure, after which the
execution goes back to the queue and replays its completed tasks elsewhere.

Crashes count towards ``max_attempts``; planned hand-backs do not (a drain, a worker
shutting down, a claim that never arrived), nor a GPU failing under the attempt, as a
Kubernetes Job's pod failure policy can ignore disruptions: rolling a fleet, or a
preemption, must not use up a long job's attempts.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class AttemptEnd(StrEnum):
    #: The workflow reached COMPLETED, FAILED or CANCELLED: the execution is over.
    FINISHED = "finished"
    #: The child process died: a signal (SIGSEGV, the kernel's OOM killer) or an exit.
    CHILD_DIED = "child_died"
    #: The execution hit its memory ceiling (RLIMIT_AS or its cgroup's limit).
    MEMORY_LIMIT = "memory_limit"
    #: The worker went silent past the grace period, or restarted without it.
    WORKER_LOST = "worker_lost"
    #: A draining worker's deadline passed: it stopped the attempt and handed it back.
    DRAINED = "drained"
    #: The worker gave it back before or without running it (shutdown, a lost claim, a gang
    #: member whose gang did not start within its ``start_timeout``: docs/gangs.md).
    HANDED_BACK = "handed_back"
    #: A GPU it was allotted failed (an XID, uncorrectable ECC errors): the worker stopped
    #: it and it goes elsewhere. The card's fault, not the workflow's: it does not count.
    DEVICE_FAILURE = "device_failure"
    #: The workflow reached a durable wait (a long sleep, a pause, a call): the execution
    #: waits on the server without a worker, and a later attempt replays up to the wait.
    SUSPENDED = "suspended"
    #: A higher-priority execution needed its room: the grace period passed (or the
    #: workflow returned to the queue on its own); it replays elsewhere, uncounted.
    PREEMPTED = "preempted"

    @property
    def counts(self) -> bool:
        """Whether this end uses up one of the execution's ``max_attempts``."""
        return self in COUNTED


COUNTED = frozenset({AttemptEnd.CHILD_DIED, AttemptEnd.MEMORY_LIMIT, AttemptEnd.WORKER_LOST})
#: The ends a worker may report itself (the others are the server's own findings).
WORKER_REPORTED = frozenset(
    {
        AttemptEnd.HANDED_BACK,
        AttemptEnd.CHILD_DIED,
        AttemptEnd.MEMORY_LIMIT,
        AttemptEnd.DRAINED,
        AttemptEnd.PREEMPTED,
        AttemptEnd.DEVICE_FAILURE,
    }
)

DEFAULT_MAX_ATTEMPTS = 3


def check_max_attempts(value: object, owner: str) -> int | None:
    """``None`` (the server's default) or an int >= 1; ``ValueError`` names the owner."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1000:
        raise ValueError(f"{owner}: max_attempts must be an int from 1 to 1000, got {value!r}")
    return value


@dataclass(frozen=True)
class AttemptPolicy:
    """The server's side of attempts: the default bound and the backoff between them."""

    default_max_attempts: int = DEFAULT_MAX_ATTEMPTS
    #: Seconds before the attempt after the first crash; doubled after each further one.
    backoff: float = 1.0
    backoff_cap: float = 60.0

    def delay(self, crashes: int) -> float:
        """Wait before the next attempt after ``crashes`` counted ends (0: at once)."""
        if crashes <= 0 or self.backoff <= 0:
            return 0.0
        return min(self.backoff_cap, self.backoff * 2 ** (crashes - 1))
