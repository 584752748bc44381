"""The outbox: an event becomes one delivery row per hook that wants it, inserted in
the caller's transaction, so a delivery exists exactly when the change it tells of
was committed (never lost by a crash between them, never sent for a rolled-back one).

``enqueue(session, event)`` is the one entry point, for every feature that emits an
event (preemption and device health call it too: docs/hooks.md#emitting). It matches
against this replica's copy of the subscriptions (``Subscriptions``, in
``session.info``): with no hook at all it costs nothing, not a statement. The copy
is read again when a hook changes here or on another replica (``topics.HOOKS``), and
every few seconds where replicas share the database.

The delivery loop is woken once a transaction that enqueued commits, by ``committed``,
a hook the server registers with ``Database.after_commit`` beside the metrics' one:
the server's one post-commit mechanism. Each hook is registered on one database's
sessions and reads what its transaction left in ``session.info`` (cleared by a
rollback), rather than a listener on every ``Session`` of the process that runs for
every database's commits wherever this module is imported (``flux.server.database``).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any, Callable

from sqlalchemy import func, select
from sqlalchemy import insert as sql_insert
from sqlalchemy.orm import Session

from flux.domain.events import HOLDING_STATES, EventType
from flux.domain.hooks import ENDED, HookEvent, HookEventType, Subscription
from flux.server import topics
from flux.server.hook_models import HookDeliveryModel, HookModel
from flux.server.models import ExecutionEventModel, ExecutionModel, WorkerModel

log = logging.getLogger("flux.server.hooks")

#: The key of ``session.info`` (``Database.context``) under which the subscriptions live.
SLOT = "flux.hooks"
#: The key of ``session.info`` that says its transaction enqueued deliveries.
ENQUEUED = "flux.hooks.enqueued"
#: Seconds a delivery is retried for, where a session has no ``Subscriptions`` to say.
DEFAULT_MAX_AGE = 24 * 3600.0
#: Seconds an execution stays unschedulable before its hook event, by default (5 min, as
#: a Kubernetes alert on a Pending pod waits ``for: 5m``).
DEFAULT_UNSCHEDULABLE_AFTER = 300.0
#: At most this long between two looks for executions unschedulable past the threshold.
OVERDUE_CHECK = 5.0
PENDING, DELIVERED, DEAD = "pending", "delivered", "dead"
INSERT_DELIVERY = sql_insert(HookDeliveryModel.__table__)


def subscriptions(session: Session) -> list[Subscription]:
    """Every hook, as matching sees it."""
    rows = session.execute(select(HookModel.id, HookModel.namespace, HookModel.events, HookModel.workflow))
    return [
        Subscription(row.id, row.namespace, frozenset(HookEventType(e) for e in row.events), row.workflow)
        for row in rows
    ]


class Subscriptions:
    """This replica's copy of the hooks' subscriptions, and what an enqueue wakes."""

    def __init__(
        self, max_age: float = DEFAULT_MAX_AGE, unschedulable_after: float = DEFAULT_UNSCHEDULABLE_AFTER
    ) -> None:
        self.max_age = max_age
        #: Seconds unschedulable before ``execution.unschedulable`` (``unschedulable_overdue``).
        self.unschedulable_after = unschedulable_after
        #: When a round last looked for executions unschedulable past it (``time.time()``).
        self.overdue_checked_at = 0.0
        self.hooks: list[Subscription] = []
        #: Called (from a database thread) once rows enqueued were committed: wakes the delivery loop.
        self.wake: Callable[[], None] = lambda: None
        self._reload: Callable[[], Any] | None = None

    def wants(self, type_: HookEventType) -> bool:
        return any(type_ in hook.events for hook in self.hooks)

    def attach(self, reload: Callable[[], Any]) -> None:
        """``reload``: a coroutine function that reads the hooks again (``refresh``)."""
        self._reload = reload

    async def reload(self) -> None:
        """Read the hooks again now (after a change made here: before its answer)."""
        if self._reload is not None:
            await self._reload()

    def on_notify(self, key: str) -> None:
        """A hook for ``Notifier``: a hook changed here or on another replica."""
        if key == topics.HOOKS and self._reload is not None:
            asyncio.ensure_future(self._reload())


def _copy(session: Session) -> Subscriptions | None:
    return session.info.get(SLOT)


def wants(session: Session, type_: HookEventType) -> bool:
    """Whether some hook may want an event of this type: callers skip building one
    (and the queries it needs) when none does."""
    copy = _copy(session)
    return copy.wants(type_) if copy is not None else any(type_ in hook.events for hook in subscriptions(session))


def enqueue(session: Session, event: HookEvent) -> int:
    """One delivery per hook that wants ``event``, in ``session``'s transaction. Returns how many."""
    copy = _copy(session)
    hooks = copy.hooks if copy is not None else subscriptions(session)
    matching = [hook.id for hook in hooks if hook.wants(event)]
    if matching:
        deliver_to(session, event, matching)
    return len(matching)


def deliver_to(session: Session, event: HookEvent, hook_ids: list[int]) -> list[str]:
    """Deliveries of ``event`` to these hooks (``enqueue``'s, or a test's to one); their ids."""
    copy = _copy(session)
    max_age = copy.max_age if copy is not None else DEFAULT_MAX_AGE
    now = time.time()
    rows = []
    for hook_id in hook_ids:
        delivery_id = uuid.uuid4().hex
        body = {
            "id": delivery_id,
            "type": event.type.value,
            "time": event.time,
            "namespace": event.namespace,
            "data": event.data,
        }
        rows.append(
            dict(
                id=delivery_id,
                hook_id=hook_id,
                type=event.type.value,
                subject=event.subject[:160],
                body=body,
                state=PENDING,
                created_at=now,
                next_attempt_at=now,
                expires_at=now + max_age,
                attempts=0,
                finished_at=None,
            )
        )
    session.execute(INSERT_DELIVERY, rows)
    wake_on_commit(session)
    return [row["id"] for row in rows]


def wake_on_commit(session: Session) -> None:
    """This transaction made deliveries due: wake the delivery loop once it commits."""
    copy = _copy(session)
    if copy is not None:
        session.info[ENQUEUED] = copy


def committed(session: Session) -> None:
    """After a commit (``Database.after_commit``): wake the delivery loop once what the
    transaction enqueued is there to be read."""
    copy = session.info.pop(ENQUEUED, None)
    if copy is not None:
        copy.wake()


# --- the events of an execution ------------------------------------------------------------


def execution_event(session: Session, execution: Any, type_: HookEventType, **data: Any) -> None:
    """Enqueue ``type_`` about ``execution`` (an ``ExecutionModel``, or the row a
    submission inserted), when some hook may want it."""
    if wants(session, type_):
        enqueue(
            session,
            HookEvent(
                type_, execution.id, execution.namespace, _body(execution, **data), workflow=execution.workflow_name
            ),
        )


def _body(execution: Any, **data: Any) -> dict[str, Any]:
    return {
        "execution_id": execution.id,
        "workflow": execution.workflow_name,
        "version": execution.workflow_version,
        "state": execution.state,
        "attempt": execution.attempt,
        "worker": execution.worker_name,
        "schedule": execution.schedule,
        **data,
    }


def execution_ended(session: Session, execution: Any) -> None:
    """The event of an execution's terminal state (``lifecycle.finish``)."""
    type_ = ENDED.get(execution.state)
    if type_ is not None:
        execution_event(session, execution, type_, error=(execution.error or None) and execution.error[:2000])


def unschedulable_overdue(session: Session, reasons: dict[str, str], now: float) -> None:
    """``execution.unschedulable`` for each of these still-unschedulable executions (id ->
    why) that has been so for the threshold, once per wait (since ``pending_since``) and
    hook, in the round's transaction. Since when: the ``since`` its latest
    WORKFLOW_UNSCHEDULABLE event carries (``record_waiting`` keeps it across a changed
    reason), so a restart or another replica's round reads the same clock."""
    copy = _copy(session)
    type_ = HookEventType.EXECUTION_UNSCHEDULABLE
    if (
        not reasons
        or copy is None
        or not copy.wants(type_)
        or now - copy.overdue_checked_at < min(OVERDUE_CHECK, copy.unschedulable_after / 4)
    ):
        return
    copy.overdue_checked_at = now
    since: dict[str, tuple[float, float]] = {}  # id -> (unschedulable since, this wait since)
    for row in session.execute(
        select(
            ExecutionEventModel.execution_id,
            ExecutionEventModel.value,
            ExecutionEventModel.time,
            ExecutionModel.pending_since,
            ExecutionModel.scheduled_at,
        )
        .join(ExecutionModel, ExecutionModel.id == ExecutionEventModel.execution_id)
        .where(
            ExecutionEventModel.execution_id.in_(list(reasons)),
            ExecutionEventModel.type == EventType.WORKFLOW_UNSCHEDULABLE.value,
        )
        .order_by(ExecutionEventModel.seq)
    ):
        since[row.execution_id] = ((row.value or {}).get("since", row.time), row.pending_since or row.scheduled_at)
    overdue = {key: when for key, when in since.items() if now - when[0] >= copy.unschedulable_after}
    hooks = [hook.id for hook in copy.hooks if type_ in hook.events]
    if not overdue or not hooks:
        return
    sent = set(
        session.execute(
            select(HookDeliveryModel.hook_id, HookDeliveryModel.subject, HookDeliveryModel.created_at).where(
                HookDeliveryModel.hook_id.in_(hooks),
                HookDeliveryModel.subject.in_(list(overdue)),
                HookDeliveryModel.type == type_.value,
            )
        ).all()
    )
    told = {(hook, subject) for hook, subject, at in sent if at >= overdue[subject][1]}
    for execution in session.scalars(select(ExecutionModel).where(ExecutionModel.id.in_(list(overdue)))):
        first = overdue[execution.id][0]
        event = HookEvent(
            type_,
            execution.id,
            execution.namespace,
            _body(execution, reason=reasons[execution.id], since=first, waited=round(now - first, 3)),
            workflow=execution.workflow_name,
        )
        wanting = [hook.id for hook in copy.hooks if hook.wants(event) and (hook.id, execution.id) not in told]
        if wanting:
            deliver_to(session, event, wanting)


def fleet_event(session: Session, type_: HookEventType, worker: str, **data: Any) -> None:
    """Enqueue a worker's event (no namespace), when some hook may want it."""
    if wants(session, type_):
        enqueue(session, HookEvent(type_, f"worker:{worker}", None, {"worker": worker, **data}))


def worker_left(session: Session, worker: str | None) -> None:
    """An execution left ``worker``: if it is draining and now holds nothing, it is drained."""
    if worker is None or not wants(session, HookEventType.WORKER_DRAINED):
        return
    draining = session.scalar(select(WorkerModel.draining).where(WorkerModel.name == worker))
    held = session.scalar(
        select(func.count()).where(ExecutionModel.worker_name == worker, ExecutionModel.state.in_(HOLDING_STATES))
    )
    if draining and not held:
        fleet_event(session, HookEventType.WORKER_DRAINED, worker)


async def fleet_event_alone(context: dict, run: Callable, type_: HookEventType, worker: str, **data: Any) -> None:
    """A fleet event whose change lives only in memory (a worker judged stale): in a
    transaction of its own, only when some hook wants it. ``context``: the database's
    ``context``; ``run``: its ``run``."""
    copy = context.get(SLOT)
    if copy is not None and copy.wants(type_):
        await run(lambda s: fleet_event(s, type_, worker, **data))
