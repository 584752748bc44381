"""Pools' rows: create, replace, list, show, delete; and a pool as the pure planner's
``PoolTemplate``. Deleting a pool drains and stops its workers first (the scaling
loop removes the row once none is left), as deleting a namespace does its work."""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from flux.domain.resources import Resources
from flux.scheduling.autoscale import MemberState, PoolTemplate
from flux.server.autoscale.schemas import PoolCreate, PoolDemand, PoolInfo, PoolSpec, PoolWorkerInfo, template_request
from flux.server.errors import Conflict, NotFound
from flux.server.pool_models import PoolModel, PoolWorkerModel


def _fill(row: PoolModel, spec: PoolSpec) -> None:
    request = template_request(spec.resources)
    row.labels = dict(spec.labels)
    row.resources = {k: v for k, v in request.quantities.items() if k != "gpu"}
    row.gpus = request.gpu or 0
    row.packages = dict(p.partition("==")[::2] for p in spec.packages)
    row.slots, row.minimum, row.maximum = spec.slots, spec.min, spec.max
    row.idle_timeout = float(spec.idle_timeout)
    row.provider, row.options = spec.provider, spec.options


def create(session: Session, body: PoolCreate) -> PoolInfo:
    if session.get(PoolModel, body.name) is not None:
        raise Conflict(f"pool {body.name!r} already exists")
    return apply(session, body.name, body)


def apply(session: Session, name: str, spec: PoolSpec) -> PoolInfo:
    """Create the pool, or replace its template, bounds and provider (its workers and state stay)."""
    row = session.get(PoolModel, name)
    if row is None:
        row = PoolModel(name=name, created_at=time.time(), desired=0, failures=0, deleting=False)
        session.add(row)
    elif row.deleting:
        raise Conflict(f"pool {name!r} is being deleted")
    _fill(row, spec)
    session.flush()
    return info(session, row)


def get_row(session: Session, name: str) -> PoolModel:
    row = session.get(PoolModel, name)
    if row is None:
        raise NotFound(f"pool {name!r} not found")
    return row


def show(session: Session, name: str) -> PoolInfo:
    return info(session, get_row(session, name))


def list_all(session: Session) -> list[PoolInfo]:
    return [info(session, row) for row in session.scalars(select(PoolModel).order_by(PoolModel.name))]


def delete(session: Session, name: str) -> PoolInfo:
    """Its workers are drained and stopped by the next passes; then the pool is gone."""
    row = get_row(session, name)
    row.deleting = True
    session.flush()
    return info(session, row)


def any_pool(session: Session) -> bool:
    return session.scalar(select(PoolModel.name).limit(1)) is not None


def members(session: Session, pool: str | None = None) -> list[PoolWorkerModel]:
    query = select(PoolWorkerModel).order_by(PoolWorkerModel.requested_at, PoolWorkerModel.name)
    return list(session.scalars(query if pool is None else query.where(PoolWorkerModel.pool == pool)))


def info(session: Session, row: PoolModel) -> PoolInfo:
    workers = members(session, row.name)
    running = [w for w in workers if w.state == MemberState.RUNNING]
    return PoolInfo(
        name=row.name,
        labels=row.labels,
        resources={**row.resources, **({"gpu": row.gpus} if row.gpus else {})},
        packages=[f"{n}=={v}" if v else n for n, v in row.packages.items()],
        slots=row.slots,
        min=row.minimum,
        max=row.maximum,
        idle_timeout=row.idle_timeout,
        provider=row.provider,
        options=row.options,
        created_at=row.created_at,
        desired=row.desired,
        starting=sum(1 for w in workers if w.state == MemberState.STARTING),
        running=len(running),
        idle=sum(1 for w in running if w.idle_since is not None),
        stopping=sum(1 for w in workers if w.state == MemberState.STOPPING),
        decision=row.decision,
        decided_at=row.decided_at,
        provider_error=row.provider_error,
        failures=row.failures,
        retry_at=row.retry_at,
        deleting=row.deleting,
        workers=[
            PoolWorkerInfo(name=w.name, state=w.state, requested_at=w.requested_at, idle_since=w.idle_since)
            for w in workers
        ],
    )


def template(row: PoolModel) -> PoolTemplate:
    """The pool as the planner sees it; a pool being deleted wants no worker."""
    return PoolTemplate(
        name=row.name,
        labels=row.labels,
        resources=Resources(row.resources),
        gpus=row.gpus,
        packages=row.packages,
        slots=row.slots,
        minimum=0 if row.deleting else row.minimum,
        maximum=0 if row.deleting else row.maximum,
        idle_timeout=0.0 if row.deleting else row.idle_timeout,
    )


def desired(session: Session) -> PoolDemand:
    return PoolDemand(
        pools=dict(session.execute(select(PoolModel.name, PoolModel.desired).order_by(PoolModel.name)).all())
    )


@dataclass(frozen=True)
class PoolGauges:
    """One pool's figures for ``/metrics``."""

    name: str
    failures: int
    #: desired, starting, running, idle, stopping -> workers.
    workers: dict[str, int]


def gauges(session: Session) -> list[PoolGauges]:
    found = []
    for row in session.scalars(select(PoolModel).order_by(PoolModel.name)):
        pool = info(session, row)
        counts = {
            "desired": pool.desired,
            "starting": pool.starting,
            "running": pool.running,
            "idle": pool.idle,
            "stopping": pool.stopping,
        }
        found.append(PoolGauges(row.name, row.failures, counts))
    return found
