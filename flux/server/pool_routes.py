"""``/pools`` (docs/autoscaling.md): worker pools, fleet-wide like ``/workers``; and
``GET /autoscale/desired``, what KEDA's metrics-api scaler reads. Thin: one
transaction each; the scaling loop acts on the next pass."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Path

from flux.server import topics
from flux.server.auth import CLIENT
from flux.server.autoscale import store
from flux.server.autoscale.schemas import POOL_NAME, PoolCreate, PoolDemand, PoolInfo, PoolSpec
from flux.server.errors import CHANGE, READ, READ_ONE
from flux.server.services import Services, services

router = APIRouter(tags=["pools"], dependencies=CLIENT)
SVC = Depends(services)
NAME = Path(pattern=POOL_NAME, max_length=40)


async def change(svc: Services, fn):  # noqa: ANN001, ANN202 - a store function of a Session
    """One transaction, then the scaling loop (here or on another replica) acts on it at once."""
    result = await svc.db.run(fn)
    svc.notifier.notify(topics.POOLS)
    return result


@router.post("/pools", response_model=PoolInfo, status_code=201, responses=CHANGE)
async def create_pool(body: PoolCreate, svc: Services = SVC):
    """A pool of workers started on demand; 409 if the name is taken."""
    return await change(svc, lambda s: store.create(s, body))


@router.put("/pools/{name}", response_model=PoolInfo, responses=CHANGE)
async def apply_pool(body: PoolSpec, name: str = NAME, svc: Services = SVC):
    """Create the pool or replace its template, bounds and provider (its workers stay)."""
    return await change(svc, lambda s: store.apply(s, name, body))


@router.get("/pools", response_model=list[PoolInfo], responses=READ)
async def list_pools(svc: Services = SVC):
    return await svc.db.read(store.list_all)


@router.get("/pools/{name}", response_model=PoolInfo, responses=READ_ONE)
async def show_pool(name: str = NAME, svc: Services = SVC):
    return await svc.db.read(lambda s: store.show(s, name))


@router.delete("/pools/{name}", response_model=PoolInfo, responses=READ_ONE)
async def delete_pool(name: str = NAME, svc: Services = SVC):
    """Its workers are drained and stopped (busy ones finish first); then it is gone."""
    return await change(svc, lambda s: store.delete(s, name))


@router.get("/autoscale/desired", response_model=PoolDemand, responses=READ)
async def desired_workers(svc: Services = SVC):
    """Desired workers per pool, for KEDA's metrics-api scaler (valueLocation: pools.NAME)."""
    return await svc.db.read(store.desired)
