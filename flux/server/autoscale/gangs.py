"""Waiting gangs in the scaling pass (issue 53; docs/gangs.md#autoscaling).

A gang is asked of the pools whole (``flux.scheduling.gang_autoscale.gang_scale``): all
the workers it lacks at once, from one pool whose template carries the gang's topology
label, in that domain, within the pool's ``max``; or nothing, and the pools' decisions
say why. What it asks is added to that pool's decision beside ``autoscale.plan``'s own
(the pool's desired count rises, its maximum holds).

A gang's workers do not all register at once. While it waits for the last of them the
first ones are idle, and ``autoscale.plan``, which sees no single execution for them,
would drain them once past their idle timeout: the gang would then ask for them again,
for ever. So the idle workers ``plan`` chose to stop in a waiting gang's domain are kept
as long as the gang's count of its room needs them (``_keep``): ``gang_scale`` counted
every ONLINE worker of the domain, and keeping what that count relies on keeps the two in
step. A gang that waits on something else (a quota) keeps them too, as a waiting single
execution keeps the worker it fits.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from flux.domain.events import ExecutionState
from flux.domain.workers import WorkerState
from flux.domain.workflow_options import gang_from_json
from flux.scheduling.autoscale import Decision, Member, MemberState, Plan, PoolTemplate, template_view
from flux.scheduling.demand import demand_from_row
from flux.scheduling.gang_autoscale import GangScale, gang_scale
from flux.scheduling.gangs import Fit, GangDemand
from flux.scheduling.snapshot import WorkerView
from flux.server.autoscale import store
from flux.server.models import ExecutionModel
from flux.server.pool_models import PoolModel

log = logging.getLogger("flux.server.autoscale")

#: Waiting gangs one pass reads at most (queue order). Each is a scan of the fleet:
#: 200 gangs on 1,000 workers cost 0.9 s of CPU on the shared 2-core VM (load 10),
#: nearly all of it ``gang_scale``'s ``Board`` per gang; ten waiting gangs, 50 ms.
GANG_LIMIT = 200
#: Gangs no pool can hold that a decision names at most (the rest are counted).
NAMED = 3


def waiting(session: Session) -> list[GangDemand]:
    """The gangs that wait (their own rows, SCHEDULED), in queue order: priority, then age."""
    rows = session.execute(
        select(
            ExecutionModel.id,
            ExecutionModel.requests,
            ExecutionModel.affinity,
            ExecutionModel.namespace,
            ExecutionModel.gang,
        )
        .where(ExecutionModel.state == ExecutionState.SCHEDULED.value, ExecutionModel.gang.is_not(None))
        .order_by(ExecutionModel.priority.desc(), ExecutionModel.scheduled_at, ExecutionModel.id)
        .limit(GANG_LIMIT)
    )
    gangs = []
    for r in rows:
        try:
            gang = gang_from_json(r.gang)  # the cap was checked at submission
        except ValueError:
            log.warning("execution %s: unreadable gang %r; not scaled for", r.id, r.gang)
            continue
        demand = demand_from_row(execution_id=r.id, requests=r.requests, affinity=r.affinity, namespace=r.namespace)
        gangs.append(GangDemand(demand, gang))
    return gangs


@dataclass
class _Pool:
    """What the gangs add to one pool's decision."""

    start: int = 0
    keep: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def with_gangs(
    plan: Plan,
    templates: Sequence[PoolTemplate],
    gangs: Sequence[GangDemand],
    fleet: Sequence[WorkerView],
    members: Sequence[Member],
) -> Plan:
    """``plan`` with each waiting gang's workers added to its pool's decision, the idle
    workers a gang counts on taken off the decisions' stops, and why in the reasons."""
    if not gangs:
        return plan
    by_name = {t.name: t for t in templates}
    starting = Counter(m.pool for m in members if m.state == MemberState.STARTING)
    counts = Counter(m.pool for m in members if m.state != MemberState.STOPPING)
    counts.update({name: d.start for name, d in plan.decisions.items()})
    stops = {name: list(d.stop) for name, d in plan.decisions.items()}
    keepable = {name: names for name, names in stops.items() if by_name[name].maximum > 0}  # not a deleted pool's
    added = {t.name: _Pool() for t in templates}
    nowhere = []
    for gd in gangs:
        scale = gang_scale(gd, templates, fleet, counts, starting)
        if scale.pool is None:
            nowhere.append(f"gang {gd.execution_id}: {scale.reason}")
            continue
        counts[scale.pool] += scale.start
        pool = added[scale.pool]
        pool.start += scale.start
        pool.notes += (_note(gd, scale),)
        for name, kept in _keep(gd, scale, by_name[scale.pool], fleet, keepable, starting[scale.pool] + scale.start):
            stops[name].remove(kept)
            added[name].keep += (kept,)
    decisions = {}
    for name, decision in plan.decisions.items():
        pool, template = added[name], by_name[name]
        reason = "; ".join((_draining(decision, template, len(stops[name])), *pool.notes))
        if pool.keep:
            reason += f"; {len(pool.keep)} idle kept for waiting gangs"
        if nowhere:
            more = len(nowhere) - NAMED
            reason += "; " + "; ".join(nowhere[:NAMED]) + (f"; {more} more gangs no pool can hold" if more > 0 else "")
        desired = decision.desired + pool.start + len(pool.keep)
        decisions[name] = replace(
            decision,
            desired=min(template.maximum, desired),
            start=decision.start + pool.start,
            stop=tuple(stops[name]),
            reason=reason,
        )
    return replace(plan, decisions=decisions)


def pools_say(
    gd: GangDemand, templates: Sequence[PoolTemplate], fleet: Sequence[WorkerView], members: Sequence[Member]
) -> str | None:
    """What the pools say of a waiting gang, for ``flux execution explain``: the pass's own
    verdict (``gang_scale`` on the same counts), or None when no pool has a part in it."""
    if not templates:
        return None
    starting = Counter(m.pool for m in members if m.state == MemberState.STARTING)
    counts = Counter(m.pool for m in members if m.state != MemberState.STOPPING)
    scale = gang_scale(gd, templates, fleet, counts, starting)
    where = f"in {gd.gang.topology} {scale.domain}"
    if scale.pool is None:
        return scale.reason
    if scale.start:
        return f"pool {scale.pool} is to start {scale.start} workers for it {where}"
    if starting[scale.pool]:
        return f"{starting[scale.pool]} workers of pool {scale.pool} are starting {where}"
    return None


def explain_note(session: Session, gd: GangDemand, fleet: Sequence[WorkerView]) -> str | None:
    """``pools_say`` on the pools and their workers as the last pass left them (pools in
    the pass's order: the first that can hold the gang is the one asked)."""
    templates = [
        store.template(p) for p in session.scalars(select(PoolModel).order_by(PoolModel.created_at, PoolModel.name))
    ]
    members = [Member(r.name, r.pool, MemberState(r.state)) for r in store.members(session)] if templates else []
    return pools_say(gd, templates, fleet, members)


def _draining(decision: Decision, template: PoolTemplate, left: int) -> str:
    """The plan's reason with its count of idle workers to drain as it is once the gangs kept theirs."""
    said = f"; {len(decision.stop)} idle past {template.idle_timeout:g}s: draining"
    if left == len(decision.stop) or said not in decision.reason:
        return decision.reason
    return decision.reason.replace(said, f"; {left} idle past {template.idle_timeout:g}s: draining" if left else "")


def _note(gd: GangDemand, scale: GangScale) -> str:
    if scale.start:
        return f"gang {gd.execution_id}: {scale.reason}"
    return (
        f"gang {gd.execution_id} of {gd.gang.size} waits for the live and starting workers of pool {scale.pool} "
        f"in {gd.gang.topology} {scale.domain}"
    )


def _keep(
    gd: GangDemand,
    scale: GangScale,
    template: PoolTemplate,
    fleet: Sequence[WorkerView],
    stops: Mapping[str, list[str]],
    coming: int,
) -> list[tuple[str, str]]:
    """The (pool, worker) pairs of workers ``plan`` would stop that the gang needs: its
    domain's ONLINE workers that stay, and the pool's ``coming`` workers (starting, and
    asked for now), hold fewer than ``size`` members without them. Those that hold the
    most members first, then the least idle (the plan drains the longest idle first)."""
    stopped = {worker: (pool, at) for pool, names in stops.items() for at, worker in enumerate(names)}
    domain = [v for v in fleet if v.state == WorkerState.ONLINE and v.labels.get(gd.gang.topology) == scale.domain]
    if not any(v.name in stopped for v in domain):  # the common case: nothing to keep, nothing counted
        return []
    fit = Fit(gd.demand, gd.gang)
    room = len(fit.members(template_view(template))[0]) * coming
    candidates = []
    for view in domain:
        held = len(fit.members(view)[0])
        if view.name in stopped:
            candidates.append((held, stopped[view.name][1], view.name))
        else:
            room += held
    kept = []
    for held, _, name in sorted(candidates, reverse=True):  # the plan drains the longest idle first: kept last
        if room >= gd.gang.size or held == 0:
            break
        room += held
        kept.append((stopped[name][0], name))
    return kept
