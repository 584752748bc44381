"""An operator's drain and undrain, and the reads that show each worker's liveness
and last sample as this process knows them (a sample heard here may not be in the
database yet: ``flux.server.status`` writes them in batches)."""

from __future__ import annotations

import time
from typing import Callable

from flux.domain.workers import Liveness
from flux.server import fleet, resources, topics
from flux.server.schemas import WorkerInfo, WorkerResourcesInfo
from flux.server.services import Services


def liveness(svc: Services) -> Callable[[str], Liveness | None]:
    """name -> its liveness as this process's registry knows it (None: unknown here)."""
    return lambda name: svc.registry.liveness_of(name, time.time())


async def set_draining(svc: Services, name: str, draining: bool) -> WorkerInfo:
    """Draining: no new work for it; it finishes what it runs, then shows DRAINED."""
    known = svc.registry.liveness_of(name, time.time())
    worker = await svc.db.run(lambda s: fleet.set_draining(s, name, draining, known))
    svc.registry.set_draining(name, draining)
    svc.wake_worker(name)  # other replicas refresh what they know of it
    svc.notifier.notify(topics.status(name))
    svc.dispatcher.kick()
    return _recorded(svc, worker)


async def page(svc: Services, limit: int, after: str | None) -> list[WorkerInfo]:
    """Workers by name: ``limit`` of them after ``after`` (one more tells of a next page)."""
    return [_recorded(svc, w) for w in await svc.db.read(lambda s: fleet.list_workers(s, liveness(svc), limit, after))]


async def show(svc: Services, name: str) -> WorkerInfo:
    known = svc.registry.liveness_of(name, time.time())
    return _recorded(svc, await svc.db.read(lambda s: fleet.show(s, name, known)))


def _recorded(svc: Services, shown: WorkerInfo) -> WorkerInfo:
    """The sample this process holds for a worker that beats here (newer than the row)."""
    member = svc.registry.members.get(shown.name)
    if member is not None and member.sampled_here and shown.resources is not None:
        shown.resources = WorkerResourcesInfo(**resources.shown_sample(member.sample, member.metrics))
    return shown
