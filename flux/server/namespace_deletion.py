"""Deleting a namespace with everything in it (docs/namespaces.md).

``DELETE /namespaces/NAME`` refuses (409) while executions in it have not finished,
unless forced: then it marks the namespace TERMINATING (nothing new enters it: runs,
registrations, schedules, secrets and schedule fires are refused with 409) and cancels
them through the normal cancel path, children included. Once none is left unfinished
the namespace is purged: its executions with their events and log lines, a batch per
transaction (as retention prunes), then its workflows, schedules, secrets and cache
entries and the namespace itself, in one last transaction. With nothing unfinished
this happens at once, in the request; otherwise the timers loop (``flux.server.timers``)
finishes every TERMINATING namespace once its executions have ended.

Nothing can be left behind: a run that read its namespace ACTIVE just before it turned
TERMINATING holds its workflow's row (a foreign key), so the last transaction, which
deletes the workflows, fails and is retried after the stray run is cancelled.
"""

from __future__ import annotations

import asyncio
from enum import Enum
from typing import Callable

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from flux.domain.events import ExecutionState
from flux.domain.namespaces import DEFAULT, NamespaceState
from flux.server import executions, namespaces, retention, topics, workflows
from flux.server.database import Database
from flux.server.errors import Conflict
from flux.server.hook_models import HookModel
from flux.server.models import ExecutionModel, NamespaceModel, ScheduleModel, WorkflowModel
from flux.server.namespace_schemas import NamespaceDeletion
from flux.server.notify import Notifier
from flux.server.service_models import SecretModel, TaskCacheModel

#: Executions cancelled or deleted per transaction.
BATCH = 500
#: What the namespace holds besides its executions, deleted in the last transaction.
HOLDINGS = (ScheduleModel, SecretModel, TaskCacheModel, WorkflowModel, HookModel)
#: Told (execution ids changed, workers to wake) after each batch of cancellations.
Changed = Callable[[list[str], list[str]], None]
TO_CANCEL = [state for state in namespaces.UNFINISHED if state != ExecutionState.CANCELLING.value]


def announce(notifier: Notifier, kick: Callable[[], None]) -> Changed:
    """What cancelling wakes: each execution's waiters, the workers that must stop one, dispatch."""

    def tell(ids: list[str], workers: list[str]) -> None:
        for worker in set(workers):
            notifier.notify(topics.worker(worker))
        for execution_id in ids:
            notifier.notify(topics.execution(execution_id))
        if ids:
            kick()

    return tell


class Step(Enum):
    GONE = "gone"
    MORE = "more"
    #: Executions in it have not finished yet.
    WAITING = "waiting"


def begin(session: Session, name: str, force: bool) -> int:
    """Mark it TERMINATING; 409 while executions in it have not finished, unless forced
    (or a forced delete already began). Returns how many have not finished."""
    if name == DEFAULT:
        raise Conflict(f"namespace {DEFAULT!r} cannot be deleted")
    row = namespaces.get_row(session, name, lock=True)
    waiting = namespaces.unfinished(session, name)
    if waiting and not force and row.state == NamespaceState.ACTIVE.value:
        raise Conflict(
            f"namespace {name!r} holds {waiting} unfinished execution(s); force=true "
            "('flux namespace delete --force') cancels them"
        )
    row.state = NamespaceState.TERMINATING.value
    return waiting


def cancel_batch(session: Session, name: str) -> tuple[list[str], list[str]]:
    """Cancel up to ``BATCH`` of its unfinished executions not being cancelled already
    (their children too). Returns the ids cancelled and the workers to wake."""
    ids = session.scalars(
        select(ExecutionModel.id)
        .where(ExecutionModel.namespace == name, ExecutionModel.state.in_(TO_CANCEL))
        .limit(BATCH)
    ).all()
    cancelled, workers = [], []
    for execution_id in ids:
        try:
            _, woken = executions.cancel(session, execution_id)
        except Conflict:  # it ended as the child of one cancelled just before
            continue
        cancelled.append(execution_id)
        workers += [worker for worker in woken if worker]
    return cancelled, workers


def purge_batch(session: Session, name: str) -> Step:
    """One transaction of purging a TERMINATING namespace."""
    row = session.get(NamespaceModel, name, with_for_update=True)
    if row is None:
        return Step.GONE  # another replica finished it
    if row.state != NamespaceState.TERMINATING.value or namespaces.unfinished(session, name):
        return Step.WAITING
    ids = list(session.scalars(select(ExecutionModel.id).where(ExecutionModel.namespace == name).limit(BATCH)))
    if retention.delete_executions(session, ids) == BATCH:
        return Step.MORE
    for model in HOLDINGS:
        session.execute(delete(model).where(model.namespace == name))
    session.delete(row)
    return Step.GONE


def terminating(session: Session) -> list[str]:
    return list(
        session.scalars(select(NamespaceModel.name).where(NamespaceModel.state == NamespaceState.TERMINATING.value))
    )


async def _batches(db: Database, work: Callable[[Session], object], done: Callable[[object], bool]) -> object:
    """``work`` in transactions until ``done`` says so, yielding to other work between them."""
    while True:
        result = await db.run(work)
        if done(result):
            return result
        await asyncio.sleep(0)


async def cancel_all(db: Database, name: str, changed: Changed) -> int:
    """Cancel every unfinished execution of the namespace; how many."""
    count = 0

    def tell(result: tuple[list[str], list[str]]) -> bool:
        nonlocal count
        count += len(result[0])
        changed(*result)
        return not result[0]

    await _batches(db, lambda s: cancel_batch(s, name), tell)
    return count


async def purge(db: Database, name: str) -> bool:
    """Purge it if none of its executions is unfinished; whether it is gone."""
    step = await _batches(db, lambda s: purge_batch(s, name), lambda step: step is not Step.MORE)
    if step is Step.GONE:
        workflows.forget(name)
    return step is Step.GONE


async def delete_namespace(db: Database, name: str, force: bool, changed: Changed) -> NamespaceDeletion:
    """``DELETE /namespaces/NAME``: gone at once when nothing in it is unfinished (after
    cancelling, when forced); else TERMINATING until the timers loop finishes it."""
    await db.run(lambda s: begin(s, name, force))
    cancelled = await cancel_all(db, name, changed)
    gone = await purge(db, name)
    left = 0 if gone else await db.read(lambda s: namespaces.unfinished(s, name))
    return NamespaceDeletion(
        name=name, state="DELETED" if gone else "TERMINATING", cancelled=cancelled, unfinished=left
    )


async def finish_terminating(db: Database, changed: Changed) -> list[str]:
    """The timers loop's pass: each TERMINATING namespace whose executions have all
    ended is purged (a run that slipped in is cancelled first). Returns those still waiting."""
    waiting = []
    for name in await db.read(terminating):
        await cancel_all(db, name, changed)
        if not await purge(db, name):
            waiting.append(name)
    return waiting
