"""How many workers each pool needs, from the shapes of the work that waits (pure, no I/O).

A pool is a template of a worker (labels, resources, GPUs, packages, slots). Like
Ray's autoscaler and Karpenter, the pass simulates scheduling instead of counting a
backlog: every waiting execution is first fitted, first-fit decreasing, onto the free
room of the workers that exist and then of those already starting; what is left is
bin-packed onto new workers of the first pool whose template fits it, up to that
pool's ``maximum``. Fitting is the dispatcher's own filter pipeline run against a
view built from the template (``template_view``), so a pool is never asked for a
worker its template could not give the execution: that work keeps its explanation.

A pool's ``desired`` count is what its busy workers, its idle workers still within
their idle timeout, its starting workers and the new bins add up to, clamped to
``[minimum, maximum]``. Idle workers past the timeout above that count are the ones
to drain (longest idle first); a busy one never is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Iterable, Mapping, Sequence

from flux.domain.resources import Resources
from flux.domain.workers import AllocationMode, WorkerState
from flux.scheduling.allocation import allotment_for, take
from flux.scheduling.demand import Demand
from flux.scheduling.filters import PIPELINE, Pipeline
from flux.scheduling.namespaces import refusal
from flux.scheduling.snapshot import GPU, WorkerView, worker_view

#: The label every worker of a pool carries: its pool's name.
POOL_LABEL = "flux.pool"
#: What a template's GPU advertises: free, as an idle card does.
_TEMPLATE_GPU_MEMORY = 1


@dataclass(frozen=True)
class PoolTemplate:
    """A pool as the pass needs it: what each of its workers will be, and its bounds."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    #: cpu, memory, disk and custom resources, in one namespace (as a view's ``total``).
    resources: Resources = Resources()
    gpus: int = 0
    #: Installed distributions: name -> version.
    packages: Mapping[str, str] = field(default_factory=dict)
    slots: int = 4
    minimum: int = 0
    maximum: int = 10
    idle_timeout: float = 300.0


class MemberState(StrEnum):
    """Where a pool's worker is in its life, as the scaling pass sees it."""

    #: Asked of the provider; not registered yet.
    STARTING = "starting"
    #: Registered and taking work.
    RUNNING = "running"
    #: Chosen for scale-down: draining, stopped once it holds nothing.
    STOPPING = "stopping"


@dataclass(frozen=True)
class Member:
    """One worker of a pool: ``running`` executions it holds, ``idle_for`` seconds it held none."""

    name: str
    pool: str
    state: MemberState
    running: int = 0
    idle_for: float = 0.0


@dataclass(frozen=True)
class Decision:
    """What one pass decided for one pool, and why in words."""

    pool: str
    desired: int
    #: New workers to ask the provider for.
    start: int
    #: Idle workers to drain and then stop, longest idle first.
    stop: tuple[str, ...]
    #: Executions this pool's starting and new workers are for.
    waiting: int
    reason: str


@dataclass(frozen=True)
class Plan:
    decisions: dict[str, Decision]
    #: Waiting executions no pool's template could ever take (left to their explanation).
    unfit: int
    #: Waiting executions a template fits but every such pool is at its maximum.
    capped: int


def template_view(template: PoolTemplate, name: str | None = None) -> WorkerView:
    """A worker of ``template`` as placement would see it idle, booking what it is given
    (reserve mode: bin packing counts every placement against it)."""
    gpus = tuple(
        GPU(i, f"{template.name}-{i}", "template", _TEMPLATE_GPU_MEMORY, _TEMPLATE_GPU_MEMORY)
        for i in range(template.gpus)
    )
    return worker_view(
        name=name or f"{template.name}-template",
        labels={**template.labels, POOL_LABEL: template.name},
        total=template.resources,
        gpus=gpus,
        packages=template.packages,
        max_concurrent_executions=template.slots,
        allocation=AllocationMode.RESERVE,
    )


def fits(template: PoolTemplate, demand: Demand, pipeline: Pipeline = PIPELINE) -> bool:
    """Whether an idle worker of ``template`` could take ``demand`` (the dispatcher's filters)."""
    return pipeline.check(demand.request, demand.affinity, template_view(template)) is None


class _Bin:
    """Room on one worker, existing or imagined, counted down as the pass fills it."""

    def __init__(self, view: WorkerView, slots: int, pipeline: Pipeline, pool: str | None = None):
        self.view = view.evolve(gpu_allotted=dict(view.gpu_allotted))
        self.slots = slots
        self.pipeline = pipeline
        self.pool = pool

    def offer(self, demand: Demand) -> bool:
        """Take ``demand`` if it fits what is left; whether it did."""
        if self.slots <= 0 or refusal(self.view, demand.namespace) is not None:
            return False
        if self.pipeline.check(demand.request, demand.affinity, self.view) is not None:
            return False
        filters = self.pipeline.active(demand.request, demand.affinity)
        take(filters, self.view, allotment_for(filters, demand.request, self.view))
        self.slots -= 1
        return True


def _size(demand: Demand) -> tuple:
    """Largest first: GPUs, then cpu, memory, custom resources; unconstrained last."""
    request = demand.request
    if request is None:
        return (0, 0.0, 0, 0.0, 0 if not demand.affinity else 1)
    return (
        request.gpu or 0,
        request.cpu or 0.0,
        request.memory or 0,
        sum(amount for _, amount in request.resources),
        1,
    )


def _first_fit(bins: Iterable[_Bin], demand: Demand) -> _Bin | None:
    return next((b for b in bins if b.offer(demand)), None)


def plan(
    templates: Sequence[PoolTemplate],
    waiting: Sequence[Demand],
    fleet: Sequence[WorkerView],
    members: Sequence[Member],
    pipeline: Pipeline = PIPELINE,
) -> Plan:
    """Each pool's decision for one pass. ``fleet``: the live workers' views (a pool's
    members among them); ``members``: every worker the pools asked for and still have."""
    by_pool = {t.name: t for t in templates}
    existing = [_Bin(v, v.free_slots, pipeline) for v in fleet if v.state == WorkerState.ONLINE and v.free_slots > 0]
    imagined = [
        _Bin(template_view(by_pool[m.pool], m.name), by_pool[m.pool].slots, pipeline, m.pool)
        for m in members
        if m.state == MemberState.STARTING and m.pool in by_pool
    ]
    opened = {t.name: 0 for t in templates}
    counts = {
        t.name: sum(1 for m in members if m.pool == t.name and m.state != MemberState.STOPPING) for t in templates
    }
    asked_for = {t.name: 0 for t in templates}
    capped = {t.name: 0 for t in templates}
    unfit = 0
    for demand in sorted(waiting, key=_size, reverse=True):
        if _first_fit(existing, demand) is not None:
            continue
        room = _first_fit(imagined, demand)
        if room is not None:
            asked_for[room.pool] += 1
            continue
        fitting = [t for t in templates if fits(t, demand, pipeline)]
        if not fitting:
            unfit += 1
            continue
        pool = next((t for t in fitting if counts[t.name] + opened[t.name] < t.maximum), None)
        if pool is None:
            capped[fitting[0].name] += 1
            continue
        new = _Bin(template_view(pool), pool.slots, pipeline, pool.name)
        new.offer(demand)
        imagined.append(new)
        opened[pool.name] += 1
        asked_for[pool.name] += 1
    decisions = {
        t.name: _decide(t, [m for m in members if m.pool == t.name], opened[t.name], asked_for[t.name], capped[t.name])
        for t in templates
    }
    return Plan(decisions, unfit, sum(capped.values()))


def _decide(template: PoolTemplate, members: list[Member], new: int, asked_for: int, capped: int) -> Decision:
    """Desired = busy + idle within the timeout + starting + new, within [minimum, maximum];
    the idle past the timeout above it are stopped, longest idle first."""
    running = [m for m in members if m.state == MemberState.RUNNING]
    starting = sum(1 for m in members if m.state == MemberState.STARTING)
    busy = sum(1 for m in running if m.running > 0)
    expired = sorted(
        (m for m in running if m.running == 0 and m.idle_for >= template.idle_timeout), key=lambda m: -m.idle_for
    )
    kept_idle = len(running) - busy - len(expired)
    wanted = busy + kept_idle + starting + new
    desired = min(max(wanted, template.minimum), template.maximum)
    current = len(running) + starting
    start = max(0, desired - current)
    stop = tuple(m.name for m in expired[: max(0, current - desired)])
    stopping = sum(1 for m in members if m.state == MemberState.STOPPING)
    reason = f"{busy} busy, {kept_idle + len(expired)} idle, {starting} starting" + (
        f", {stopping} stopping" if stopping else ""
    )
    if asked_for:
        reason += f"; {asked_for} waiting executions fit only new or starting workers ({new} new)"
    if capped or wanted > template.maximum:
        reason += f"; at maximum {template.maximum}" + (f": {capped} executions left waiting" if capped else "")
    if wanted < template.minimum:
        reason += f"; kept at minimum {template.minimum}"
    if stop:
        reason += f"; {len(stop)} idle past {template.idle_timeout:g}s: draining"
    return Decision(template.name, desired, start, stop, asked_for, reason)
