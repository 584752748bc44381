"""The server's rules for executions, as one value handed to every transition: the
attempts' (``AttemptPolicy``: the default bound, the backoff) and contention's (the
priority classes a run's priority resolves against, the preemption grace period;
docs/contention.md) and the cap on a gang's size (docs/gangs.md)."""

from __future__ import annotations

from dataclasses import dataclass, field

from flux.domain.attempts import AttemptPolicy
from flux.domain.gang import DEFAULT_MAX_SIZE
from flux.domain.priority import PriorityClasses

#: Seconds a preempted attempt has to finish, or return to the queue, before it is ended.
DEFAULT_PREEMPTION_GRACE = 30.0
#: Seconds after an attempt ended preempted in which the execution is chosen again only when
#: nothing else makes room (``--preemption-cooldown``).
DEFAULT_COOLDOWN = 300.0
#: Half-life of a namespace's past usage in fair share (``--fair-share-half-life``; 0: none).
DEFAULT_HALF_LIFE = 3600.0


@dataclass(frozen=True)
class ExecutionPolicy(AttemptPolicy):
    priorities: PriorityClasses = field(default_factory=PriorityClasses)
    preemption_grace: float = DEFAULT_PREEMPTION_GRACE
    preemption_cooldown: float = DEFAULT_COOLDOWN
    fair_share_half_life: float = DEFAULT_HALF_LIFE
    #: The largest gang a workflow may declare or a run ask for (``--max-gang-size``; docs/gangs.md).
    max_gang_size: int = DEFAULT_MAX_SIZE
