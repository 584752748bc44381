"""A worker's resources in the database: the last material sample, stored and read back.

The probed quantities are data: two JSON mappings of dimension name to quantity in
``worker_resources``, ``capacity`` (what the worker has) and ``available`` (what of
it was available at the last material sample), so a new probed dimension needs no
column. GPUs are devices, not quantities: rows of ``worker_resources_gpus``, each
with its memory. The custom resources a worker advertises are configuration
(``workers.custom_resources``) and join the probed quantities in one namespace in
the view dispatch places with (``quantities``). The wire form goes in and comes out
through ``flux.domain.samples`` (``from_wire``, ``to_wire``) and nowhere else.

Heartbeats do not write here: the samples that moved are held in memory (the
registry) and written in batches by ``flux.server.status`` (``store_statuses``);
registration writes its own sample at once.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Mapping

from sqlalchemy import Update, bindparam, delete, insert, select, update
from sqlalchemy.orm import Session

from flux.domain.allotment import Allotment
from flux.domain.events import HOLDING_STATES
from flux.domain.hooks import HookEventType
from flux.domain.resources import Resources
from flux.domain.samples import from_wire, to_wire
from flux.scheduling.snapshot import GPU_FIELDS
from flux.server import outbox
from flux.server.models import ExecutionModel, WorkerModel, WorkerResourcesGPUModel, WorkerResourcesModel
from flux.server.schemas import GPUAllotment


def sampled_at(stamp: str | None) -> float:
    """A sample's ``sampled_at`` (ISO 8601, the worker's clock) in epoch seconds; now if absent or unreadable."""
    if stamp:
        try:
            return datetime.fromisoformat(stamp).timestamp()
        except ValueError:
            pass
    return time.time()


def row_values(sample: Mapping[str, Any]) -> dict:
    """The resources row's columns for a sample in its wire form (besides its metrics)."""
    total, available = from_wire(sample)
    return {
        "capacity": dict(total),
        "available": dict(available),
        "cpu_percent": sample.get("cpu_percent", 0.0),
        "sampled_at": sampled_at(sample.get("sampled_at")),
    }


@dataclass(frozen=True)
class Status:
    """What to write of one worker: its last material sample in its wire form and its
    metrics (None: not known here, left as stored), and whether the database may hold
    GPU rows for it."""

    worker_id: int
    #: Its name, for the hook events a sample causes (``device.unhealthy``).
    worker: str
    sample: dict | None
    metrics: dict | None
    gpu_rows: bool


def store_statuses(session: Session, batch: list[Status]) -> None:
    """Write the statuses that changed since the last batch, for every worker at once:
    one UPDATE of the resources rows for each set of columns written (at most three;
    one executemany each), the GPU rows of the workers that have or had GPUs (a read
    and an update for all of them), and one version bump, which other replicas'
    placement re-reads samples by. A sample older than the stored one is not written:
    another replica (the worker moved to it) or a registration stored a newer one."""
    rows: dict[tuple[str, ...], list[dict]] = {}
    for status in batch:
        values: dict = {"worker_id": status.worker_id}
        if status.sample is not None:
            values.update(row_values(status.sample))
        if status.metrics is not None:
            values["metrics"] = status.metrics
        if len(values) > 1:
            rows.setdefault(tuple(sorted(values)), []).append(values)
    for columns, same_columns in rows.items():
        session.execute(_status_update(columns), [{f"new_{k}": v for k, v in row.items()} for row in same_columns])
    store_gpus(
        session,
        [
            (s.worker_id, s.worker, s.sample.get("gpus") or [])
            for s in batch
            if s.sample is not None and (s.gpu_rows or s.sample.get("gpus"))
        ],
    )
    session.execute(
        update(WorkerModel)
        .where(WorkerModel.id.in_([s.worker_id for s in batch]))
        .values(resources_version=WorkerModel.resources_version + 1)
    )


@functools.cache
def _status_update(columns: tuple[str, ...]) -> Update:
    """``UPDATE worker_resources SET <columns> WHERE worker_id = ?`` (and, for a sample,
    ``AND sampled_at <= ?``), built once per set of columns."""
    table = WorkerResourcesModel.__table__
    statement = update(table).where(table.c.worker_id == bindparam("new_worker_id"))
    if "sampled_at" in columns:
        statement = statement.where(table.c.sampled_at <= bindparam("new_sampled_at"))
    return statement.values({name: bindparam(f"new_{name}") for name in columns if name != "worker_id"})


def store_gpus(session: Session, devices: list[tuple[int, str, list[dict]]]) -> None:
    """Each worker's GPU rows as its sample lists them (``(worker id, worker name, GPUs as
    GPUInfo mappings)``): updated in place while the set of cards is the same, else
    replaced. A device that became unhealthy (or unhealthy for another reason) is a
    ``device.unhealthy`` hook event, once, in the transaction that stores the sample."""
    if not devices:
        return
    stored: dict[int, list] = {}
    for row in session.execute(
        select(
            WorkerResourcesGPUModel.id,
            WorkerResourcesGPUModel.worker_id,
            WorkerResourcesGPUModel.uuid,
            WorkerResourcesGPUModel.unhealthy,
        )
        .where(WorkerResourcesGPUModel.worker_id.in_([worker_id for worker_id, _, _ in devices]))
        .order_by(WorkerResourcesGPUModel.worker_id, WorkerResourcesGPUModel.index)
    ):
        stored.setdefault(row.worker_id, []).append(row)
    same, replaced = [], []
    for worker_id, worker, gpus in devices:
        rows = stored.get(worker_id, [])
        _unhealthy_events(session, worker, {row.uuid: row.unhealthy for row in rows}, gpus)
        if [row.uuid for row in rows] == [gpu["uuid"] for gpu in gpus]:
            same += [{"id": row.id, **gpu} for row, gpu in zip(rows, gpus)]
        else:
            replaced.append((worker_id, gpus))
    if same:
        session.execute(update(WorkerResourcesGPUModel), same)
    if replaced:
        session.execute(
            delete(WorkerResourcesGPUModel).where(WorkerResourcesGPUModel.worker_id.in_([w for w, _ in replaced]))
        )
        new = [{"worker_id": worker_id, **gpu} for worker_id, gpus in replaced for gpu in gpus]
        if new:
            session.execute(insert(WorkerResourcesGPUModel), new)


def _unhealthy_events(session: Session, worker: str, was: dict[str, str | None], gpus: list[dict]) -> None:
    for gpu in gpus:
        reason = gpu.get("unhealthy")
        if reason and reason != was.get(gpu["uuid"]):
            outbox.fleet_event(
                session,
                HookEventType.DEVICE_UNHEALTHY,
                worker,
                device=gpu["uuid"],
                index=gpu.get("index"),
                reason=reason,
            )


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


def view_sample(sample: Mapping[str, Any], metrics: Mapping[str, float] | None, custom: Mapping[str, Any]) -> dict:
    """What a placement view takes of a sample held in memory (its wire form), as
    ``quantities`` and ``gpus`` give it from the database: the custom resources the
    worker advertises in one namespace with the probed quantities, its GPUs by field."""
    total, available = from_wire(sample)
    return dict(
        total=Resources({**custom, **total}),
        available=Resources({**custom, **available}),
        gpus=[{name: gpu.get(name) for name in GPU_FIELDS} for gpu in sample.get("gpus") or ()],
        metrics=dict(metrics or {}),
    )


def shown_sample(sample: Mapping[str, Any], metrics: Mapping[str, float] | None) -> dict:
    """A sample held in memory as ``GET /workers`` shows a stored one (``stored_sample``
    and the row's metrics and time)."""
    return {
        **to_wire(*from_wire(sample)),
        "cpu_percent": sample.get("cpu_percent", 0.0),
        "gpus": list(sample.get("gpus") or ()),
        "metrics": dict(metrics or {}),
        "sampled_at": sampled_at(sample.get("sampled_at")),
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
            found.append(
                GPUAllotment(
                    index=device.index,
                    uuid=device.uuid,
                    execution_id=execution_id,
                    fraction=device.fraction,
                    memory=device.memory,
                )
            )
        if not allotment.devices:  # written before devices: whole cards by index
            found += [GPUAllotment(index=index, execution_id=execution_id, fraction=1.0) for index in allotment.gpus]
    return found
