"""What blocks first: the binding constraint that leads an explanation (pure, no I/O).

An execution can be held by several things at once: its namespace's quota, a
concurrency key, room a higher priority holds, a gang that cannot be laid out, no
worker that can take it now, no pool that could start one. Only one of them is the
first that must move for it to start, and that one leads every explanation - the
first line of ``flux execution explain``, ``summary`` in ``GET
/executions/ID/placement``, the console's placement section and the round's note -
so "held by namespace ml's quota" is never line 4 under ``2/2 workers are available``.

Each kind is a value in ``ORDER``, known by the ``Reason.filter`` that says it: a new
blocker (gang topology, when gangs exist) is one entry there and one ``Reason`` from
the code that judges it, not a new branch here. The workers' tally follows the lead,
as the Kubernetes scheduler's ``0/3 nodes are available`` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Iterable, Sequence

from flux.domain.workers import AllocationMode
from flux.scheduling import concurrency, quotas
from flux.scheduling.autoscale import PoolTemplate, template_view
from flux.scheduling.demand import Demand
from flux.scheduling.explain import Verdict, summarize
from flux.scheduling.filters import PIPELINE, Pipeline, Reason

#: ``Reason.filter`` of room held for it, or made by preemption (``flux.scheduling.contention``).
ROOM = "preemption"
#: ``Reason.filter`` of a gang whose members cannot be laid out together (no gangs yet: the seam).
GANG = "gang"
#: ``Reason.filter`` of "no pool can start a worker for it" (``no_pool``).
POOLS = "pools"
#: ``Reason.filter`` of "no worker can take it now": the workers' tally itself.
WORKERS = "workers"
#: Pools named in a "no pool" line at most; the rest are counted.
POOLS_NAMED = 3


class Blocker(StrEnum):
    """The kinds of binding constraint, as ``PlacementInfo.binding.kind`` names them."""

    QUOTA = "quota"
    CONCURRENCY = "concurrency"
    PRIORITY_ROOM = "priority room"
    GANG_TOPOLOGY = "gang topology"
    NO_POOL = "no pool"
    NO_WORKER = "no worker"


#: The order in which constraints bind, first first, each with the ``Reason.filter``
#: that says it. A quota or a key refuses before any worker is looked at; room held
#: for a higher priority outlasts a free worker; a gang needs all its members' room;
#: "no pool can start one" says more than "no worker can take it", which it implies.
ORDER: tuple[tuple[Blocker, str], ...] = (
    (Blocker.QUOTA, quotas.NAME),
    (Blocker.CONCURRENCY, concurrency.NAME),
    (Blocker.PRIORITY_ROOM, ROOM),
    (Blocker.GANG_TOPOLOGY, GANG),
    (Blocker.NO_POOL, POOLS),
    (Blocker.NO_WORKER, WORKERS),
)
_RANK = {name: (rank, kind) for rank, (kind, name) in enumerate(ORDER)}


@dataclass(frozen=True)
class Binding:
    """The constraint that binds: its kind and the line that leads, with its numbers."""

    kind: Blocker
    message: str


@dataclass(frozen=True)
class Explanation:
    """An execution's summary, led by what binds (``None``: nothing holds it but time)."""

    summary: str
    binding: Binding | None


def binding(reasons: Iterable[Reason | None]) -> Binding | None:
    """The reason that binds first in ``ORDER``; reasons of no kind there never lead."""
    ranked = [(_RANK[r.filter], r) for r in reasons if r is not None and r.filter in _RANK]
    if not ranked:
        return None
    (_, kind), reason = min(ranked, key=lambda pair: pair[0][0])
    return Binding(kind, reason.message)


def explain(verdicts: Sequence[Verdict], holds: Iterable[Reason | None] = ()) -> Explanation:
    """The summary: what binds, then the workers' tally (which leads alone when no
    worker can take it and nothing binds before that)."""
    return led(summarize(list(verdicts)), any(v.available for v in verdicts), holds)


def led(tally: str, available: bool, holds: Iterable[Reason | None] = ()) -> Explanation:
    """``explain`` from a tally already made (a round makes one per set of constraints
    and leads it with each execution's own holds)."""
    reasons = list(holds)
    if not available:
        reasons.append(Reason(WORKERS, "no worker", tally.rstrip(".")))
    lead = binding(reasons)
    if lead is None or lead.kind == Blocker.NO_WORKER:
        return Explanation(tally, lead)
    return Explanation(f"{lead.message}; {tally}", lead)


def no_pool(templates: Sequence[PoolTemplate], demand: Demand, pipeline: Pipeline = PIPELINE) -> Reason | None:
    """Why no pool can start a worker for ``demand``: each template's first failing check
    as an idle worker of it; ``None`` when there are no pools or one fits."""
    verdicts: list[tuple[str, str]] = []
    for template in templates:
        view = template_view(template)
        reason = pipeline.check(demand.request, demand.affinity, view)  # as the planner's ``fits`` judges it
        if reason is None and template.maximum > 0:
            return None
        if reason is not None:  # its numbers as a worker's line says them, nothing reserved on it yet
            reason = (
                pipeline.check(demand.request, demand.affinity, view.evolve(allocation=AllocationMode.SAMPLE)) or reason
            )
        verdicts.append((template.name, reason.message if reason is not None else "its maximum is 0"))
    if not verdicts:
        return None
    named = "; ".join(f"pool {name}: {message}" for name, message in verdicts[:POOLS_NAMED])
    more = len(verdicts) - POOLS_NAMED
    return Reason(
        POOLS,
        "no pool fits",
        f"no pool can start a worker for it ({named}" + (f"; {more} more" if more > 0 else "") + ")",
    )
