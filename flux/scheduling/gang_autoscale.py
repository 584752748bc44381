"""What a waiting gang asks of the worker pools (pure, no I/O; docs/gangs.md).

A gang is asked for whole: all the workers it lacks at once, from one pool, in one
topology domain. A pool's workers are in a domain only when its template carries the
topology label (``--label rack=r9`` on the pool: every worker it starts is in rack r9),
so a pool whose template lacks the label is never asked for a gang. How many members a
new worker holds is the dispatcher's own answer for an idle worker of the template
(``Fit.members`` on ``autoscale.template_view``); what the domain's live workers hold now
(``Board``) and what the pool's starting workers will hold are subtracted. A pool that
would need more than its ``maximum`` allows is not asked for anything: a gang no pool can
hold within its ``--max`` starts no worker, and says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from flux.domain.workers import WorkerState
from flux.scheduling.autoscale import PoolTemplate, template_view
from flux.scheduling.gangs import Board, Fit, GangDemand
from flux.scheduling.snapshot import WorkerView


@dataclass(frozen=True)
class GangScale:
    """The workers one waiting gang asks of one pool, or why it asks none."""

    #: The pool to start them in; None: no pool can hold the gang.
    pool: str | None
    #: The topology value the new workers will carry.
    domain: str | None
    #: New workers to ask for, all at once.
    start: int
    reason: str


def _per_worker(fit: Fit, template: PoolTemplate) -> int:
    return len(fit.members(template_view(template))[0])


def gang_scale(
    gd: GangDemand,
    templates: Sequence[PoolTemplate],
    fleet: Iterable[WorkerView],
    counts: Mapping[str, int],
    starting: Mapping[str, int] | None = None,
) -> GangScale:
    """The first pool (in ``templates``' order, as ``autoscale.plan`` takes them) that can
    hold ``gd`` within its maximum. ``counts``: each pool's workers (running and starting);
    ``starting``: those of them not registered yet (in the template's domain too)."""
    gang, starting = gd.gang, starting or {}
    fit = Fit(gd.demand, gang)
    board = Board(fit, gang, (w for w in fleet if w.state == WorkerState.ONLINE))
    why = []
    for template in templates:
        domain = template_view(template).labels.get(gang.topology)
        if domain is None:
            why.append(f"pool {template.name}'s workers carry no label {gang.topology}")
            continue
        per = _per_worker(fit, template)
        if per == 0:
            why.append(f"a worker of pool {template.name} holds no member")
            continue
        lacking = gang.size - board.held(domain) - per * starting.get(template.name, 0)
        need = max(0, -(-lacking // per))
        room = template.maximum - counts.get(template.name, 0)
        if need > room:
            why.append(
                f"pool {template.name} would need {need} more workers, its maximum {template.maximum} leaves {room}"
            )
            continue
        where = f"{gang.topology} {domain}"
        return GangScale(
            template.name,
            domain,
            need,
            f"{need} workers of pool {template.name} in {where} ({per} member{'s' if per != 1 else ''} a worker) "
            f"for a gang of {gang.size}",
        )
    reason = "; ".join(why) if why else "no worker pools"
    return GangScale(None, None, 0, f"no pool can hold the gang of {gang.size}: {reason}")
