"""The server's rules for executions, as one value handed to every transition: the
attempts' (``AttemptPolicy``: the default bound, the backoff) and contention's (the
priority classes a run's priority resolves against, the preemption grace period;
docs/contention.md)."""

from __future__ import annotations

from dataclasses import dataclass, field

from flux.domain.attempts import AttemptPolicy
from flux.domain.priority import PriorityClasses

#: Seconds a preempted attempt has to finish, or return to the queue, before it is ended.
DEFAULT_PREEMPTION_GRACE = 30.0


@dataclass(frozen=True)
class ExecutionPolicy(AttemptPolicy):
    priorities: PriorityClasses = field(default_factory=PriorityClasses)
    preemption_grace: float = DEFAULT_PREEMPTION_GRACE
