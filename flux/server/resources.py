"""A worker's resources in the database: the last material sample, stored and read back.

The probed quantities are data: two JSON mappings of dimension name to quantity in
``worker_resources``, ``capacity`` (what the worker has) and ``available`` (what of
it was available at the last material sample), so a new probed dimension needs no
column. GPUs are devices, not quantities: rows of ``worker_resources_gpus``, each
with its memory. The custom resources a worker advertises are configuration
(``workers.custom_resources``) and join the probed quantities in one namespace in
the view dispatch places with (``quantities``). The wire form goes in and comes out
through ``flux.domain.samples`` (``from_wire``, ``to_wire``) and nowhere else.
"""

from __future__ import annotations

import time
from datetime import datetime

from sqlalchemy import delete, insert, select, update
from sqlalchemy.orm import Session

from flux.domain.allotment import Allotment
from flux.domain.events import HOLDING_STATES
from flux.domain.hooks import HookEventType
from flux.domain.resources import Resources
from flux.domain.samples import from_wire, to_wire
from flux.scheduling.snapshot import GPU_FIELDS
from flux.server import outbox
from flux.server.models import ExecutionModel, WorkerModel, WorkerResourcesGPUModel, WorkerResourcesModel
from flux.server.schemas import GPUAllotment, ResourcesInfo


def sampled_at(resources: ResourcesInfo) -> float:
    if resources.sampled_at:
        try:
            return datetime.fromisoformat(resources.sampled_at).timestamp()
        except ValueError:
            pass
    return time.time()


def row_values(resources: ResourcesInfo) -> dict:
    """The resources row's columns for a sample (besides its metrics)."""
    total, available = from_wire(dict(resources))
    return {
        "capacity": dict(total),
        "available": dict(available),
        "cpu_percent": resources.cpu_percent,
        "sampled_at": sampled_at(resources),
    }


def store_status(session: Session, worker_id: int, resources: ResourcesInfo | None, metrics: dict | None, worker: str) -> None:
    """Write a sample that moved materially: one UPDATE of the resources row (GPU rows
    only when the GPUs changed), and the version bump dispatch reloads views by."""
    values: dict = {}
    if resources is not None:
        values.update(row_values(resources))
    if metrics is not None:
        values["metrics"] = metrics
    if values:
        session.execute(update(WorkerResourcesModel).where(WorkerResourcesModel.worker_id == worker_id).values(**values))
    if resources is not None:
        store_gpus(session, worker_id, resources, worker)
    session.execute(
        update(WorkerModel).where(WorkerModel.id == worker_id).values(resources_version=WorkerModel.resources_version + 1)
    )


def store_gpus(session: Session, worker_id: int, resources: ResourcesInfo, worker: str) -> None:
    """The worker's device rows as the sample says; a device that became unhealthy
    (or unhealthy for another reason) is a ``device.unhealthy`` hook event, once."""
    rows = session.execute(
        select(WorkerResourcesGPUModel.id, WorkerResourcesGPUModel.uuid, WorkerResourcesGPUModel.unhealthy)
        .where(WorkerResourcesGPUModel.worker_id == worker_id)
        .order_by(WorkerResourcesGPUModel.index)
    ).all()
    was = {row.uuid: row.unhealthy for row in rows}
    for gpu in resources.gpus:
        if gpu.unhealthy and gpu.unhealthy != was.get(gpu.uuid):
            outbox.fleet_event(session, HookEventType.DEVICE_UNHEALTHY, worker, device=gpu.uuid, index=gpu.index, reason=gpu.unhealthy)
    if [row.uuid for row in rows] == [gpu.uuid for gpu in resources.gpus]:
        if rows:
            session.execute(
                update(WorkerResourcesGPUModel),
                [{"id": row.id, **gpu.model_dump()} for row, gpu in zip(rows, resources.gpus)],
            )
        return
    session.execute(delete(WorkerResourcesGPUModel).where(WorkerResourcesGPUModel.worker_id == worker_id))
    if resources.gpus:
        session.execute(insert(WorkerResourcesGPUModel), [{"worker_id": worker_id, **g.model_dump()} for g in resources.gpus])


def gpus(worker: WorkerModel) -> list[dict]:
    """The worker's GPUs as plain data, by ``GPU`` field name."""
    return [{name: getattr(gpu, name) for name in GPU_FIELDS} for gpu in worker.gpus]


def stored_sample(worker: WorkerModel) -> dict:
    """A worker's stored resources sample in its wire form (GPUs included)."""
    row = worker.resources
    return {
        **to_wire(row.capacity or {}, row.available or {}),
        "cpu_percent": row.cpu_percent,
        "gpus": gpus(worker),
    }


def quantities(worker: WorkerModel) -> tuple[Resources, Resources]:
    """``(total, available)`` as dispatch sees them: the probed quantities and the custom
    resources it advertises in one namespace (a custom resource is all available until
    the view's allotments are applied; a probed dimension of the same name is the probed one)."""
    custom = worker.custom_resources or {}
    row = worker.resources
    return Resources({**custom, **(row.capacity or {})}), Resources({**custom, **(row.available or {})})


def gpu_allotments(session: Session, worker_name: str) -> list[GPUAllotment]:
    """Which executions the worker's GPUs are allotted to, and how much of each: what
    ``flux worker show`` lists under each card (from the allotments of what it holds)."""
    rows = session.execute(
        select(ExecutionModel.id, ExecutionModel.allotment)
        .where(ExecutionModel.worker_name == worker_name, ExecutionModel.state.in_(HOLDING_STATES))
        .order_by(ExecutionModel.id)
    ).all()
    found = []
    for execution_id, stored in rows:
        allotment = Allotment.from_json(stored)
        for device in allotment.devices:
            found.append(GPUAllotment(index=device.index, uuid=device.uuid, execution_id=execution_id,
                                      fraction=device.fraction, memory=device.memory))
        if not allotment.devices:  # written before devices: whole cards by index
            found += [GPUAllotment(index=index, execution_id=execution_id, fraction=1.0) for index in allotment.gpus]
    return found
