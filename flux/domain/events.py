"""Execution states and event types: the vocabulary of the append-only event log.

The log is the source of truth for an execution. States are derived from it by the
server (see ``flux.server.executions``) and kept on the execution row only so that
dispatch can query them cheaply.
"""

from __future__ import annotations

import time
from enum import StrEnum
from typing import Any


class ExecutionState(StrEnum):
    SCHEDULED = "SCHEDULED"
    CLAIMED = "CLAIMED"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLING = "CANCELLING"
    CANCELLED = "CANCELLED"
    #: A durable ``sleep()`` ended its attempt; placed again at ``ready_at`` (docs/waits.md).
    SLEEPING = "SLEEPING"
    #: ``pause(name)`` ended its attempt; ``flux execution resume`` continues it.
    PAUSED = "PAUSED"
    #: ``call(workflow, input)`` ended its attempt; its child's end continues it.
    AWAITING_CHILD = "AWAITING_CHILD"
    #: Its workflow's ``timeout`` passed (from submission, across attempts).
    TIMED_OUT = "TIMED_OUT"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATES


TERMINAL_STATES = frozenset(
    {ExecutionState.COMPLETED, ExecutionState.FAILED, ExecutionState.CANCELLED, ExecutionState.TIMED_OUT}
)
#: States in which an execution occupies a slot on its worker.
HOLDING_STATES = (ExecutionState.CLAIMED.value, ExecutionState.RUNNING.value, ExecutionState.CANCELLING.value)
#: States in which an execution waits on the server, holding no worker (docs/waits.md).
WAITING_STATES = (ExecutionState.SLEEPING.value, ExecutionState.PAUSED.value, ExecutionState.AWAITING_CHILD.value)


#: Caps of one event a worker reports, the events table's columns: its type, and its task
#: id (a task's name, ':' and its call number, or a wait's: ``pause:NAME:N``); its name is
#: a workflow's or a task's, at most ``flux.domain.names.NAME_MAX``. Longer is 422.
EVENT_TYPE_MAX = 32
TASK_ID_MAX = 160
#: Events in one checkpoint request (more is 422): the worker sends a longer batch of
#: an attempt's events in several requests, in order.
MAX_CHECKPOINT_EVENTS = 1000


class EventType(StrEnum):
    WORKFLOW_SCHEDULED = "WORKFLOW_SCHEDULED"
    WORKFLOW_CLAIMED = "WORKFLOW_CLAIMED"
    WORKFLOW_STARTED = "WORKFLOW_STARTED"
    WORKFLOW_RESCHEDULED = "WORKFLOW_RESCHEDULED"
    #: Dispatch could not place it; the value's summary says why (recorded when it changes).
    WORKFLOW_PENDING = "WORKFLOW_PENDING"
    #: No registered worker could ever satisfy it, even idle (it keeps waiting).
    WORKFLOW_UNSCHEDULABLE = "WORKFLOW_UNSCHEDULABLE"
    WORKFLOW_CANCEL_REQUESTED = "WORKFLOW_CANCEL_REQUESTED"
    WORKFLOW_COMPLETED = "WORKFLOW_COMPLETED"
    WORKFLOW_FAILED = "WORKFLOW_FAILED"
    WORKFLOW_CANCELLED = "WORKFLOW_CANCELLED"
    TASK_STARTED = "TASK_STARTED"
    TASK_COMPLETED = "TASK_COMPLETED"
    TASK_FAILED = "TASK_FAILED"
    #: ``ctx.progress(value)`` / ``flux.progress(value)``: any JSON value, shown live.
    PROGRESS = "PROGRESS"
    #: An attempt began: the execution was given to a worker under this fencing token.
    ATTEMPT_STARTED = "ATTEMPT_STARTED"
    #: An attempt ended; the value says how (``flux.domain.attempts.AttemptEnd``) and why.
    ATTEMPT_ENDED = "ATTEMPT_ENDED"
    #: A task failed after its retries and its ``fallback`` runs; its result is the task's.
    TASK_FALLBACK = "TASK_FALLBACK"
    #: A ``cache=True`` task's result was taken from the cache (``{"key"}``); TASK_COMPLETED follows.
    TASK_CACHE_HIT = "TASK_CACHE_HIT"
    #: The server stores the task's TASK_COMPLETED result under ``{"key", "ttl"}`` (docs/tasks.md).
    TASK_CACHE_STORED = "TASK_CACHE_STORED"
    #: The workflow failed: compensation of a completed task (``task_id``) begins (saga).
    ROLLBACK_STARTED = "ROLLBACK_STARTED"
    ROLLBACK_COMPLETED = "ROLLBACK_COMPLETED"
    #: A rollback raised; recorded, and the other rollbacks still run.
    ROLLBACK_FAILED = "ROLLBACK_FAILED"
    #: A deterministic builtin's value (``now``, ``uuid4``, ``randint``, ``choice``,
    #: ``random``) under its call id (``now:1``): a replay returns it instead of a new one.
    VALUE_RECORDED = "VALUE_RECORDED"
    #: A durable wait (``sleep``, ``pause``, ``call``) ended the attempt; the value says
    #: which: ``{kind, until?, name?, payload?, workflow?, input?}``; ``task_id`` is its id.
    WORKFLOW_SUSPENDED = "WORKFLOW_SUSPENDED"
    #: A wait is over (``task_id``: its id): the sleep's end, the resume input, the
    #: child's ``{child, state, output | error}``; replayed like a task's result.
    WAIT_COMPLETED = "WAIT_COMPLETED"
    #: The workflow's ``timeout`` passed: the execution ends TIMED_OUT.
    WORKFLOW_TIMED_OUT = "WORKFLOW_TIMED_OUT"
    #: A preemption (docs/contention.md), in both logs: on the victim, whose attempt ends
    #: after the grace period, naming the preemptor (``{"by", "worker", "grace", "deadline"}``);
    #: on the preemptor, naming the victims that make it room (``{"victims", "worker", "deadline"}``).
    PREEMPTED = "PREEMPTED"
    #: A preemption called off before its grace period ended, in the victim's log: its
    #: preemptor no longer needs the room (``{"by", "worker", "reason"}``); nothing of the
    #: attempt ends.
    PREEMPTION_WITHDRAWN = "PREEMPTION_WITHDRAWN"


#: Events a worker may report through a checkpoint; the others are the server's own.
WORKER_EVENTS = frozenset(
    {
        EventType.WORKFLOW_STARTED,
        EventType.WORKFLOW_COMPLETED,
        EventType.WORKFLOW_FAILED,
        EventType.WORKFLOW_CANCELLED,
        EventType.TASK_STARTED,
        EventType.TASK_COMPLETED,
        EventType.TASK_FAILED,
        EventType.ATTEMPT_ENDED,
        EventType.PROGRESS,
        EventType.TASK_FALLBACK,
        EventType.TASK_CACHE_HIT,
        EventType.TASK_CACHE_STORED,
        EventType.ROLLBACK_STARTED,
        EventType.ROLLBACK_COMPLETED,
        EventType.ROLLBACK_FAILED,
        EventType.VALUE_RECORDED,
        EventType.WORKFLOW_SUSPENDED,
        EventType.WAIT_COMPLETED,
    }
)

#: Rollbacks that ended: a replay does not run them again.
ROLLBACK_ENDED = frozenset({EventType.ROLLBACK_COMPLETED.value, EventType.ROLLBACK_FAILED.value})

#: The state an execution enters when a worker reports this event.
STATE_AFTER = {
    EventType.WORKFLOW_STARTED: ExecutionState.RUNNING,
    EventType.WORKFLOW_COMPLETED: ExecutionState.COMPLETED,
    EventType.WORKFLOW_FAILED: ExecutionState.FAILED,
    EventType.WORKFLOW_CANCELLED: ExecutionState.CANCELLED,
}

#: The events that end an execution's log; nothing a worker sends after one counts.
TERMINAL_EVENTS = frozenset(
    {
        EventType.WORKFLOW_COMPLETED.value,
        EventType.WORKFLOW_FAILED.value,
        EventType.WORKFLOW_CANCELLED.value,
        EventType.WORKFLOW_TIMED_OUT.value,
    }
)
#: The events after which a worker sends nothing more for its attempt.
ATTEMPT_CLOSING_EVENTS = TERMINAL_EVENTS | {EventType.ATTEMPT_ENDED.value, EventType.WORKFLOW_SUSPENDED.value}
#: The events whose ``task_id`` and value a later attempt replays instead of running again.
REPLAYED_EVENTS = (EventType.TASK_COMPLETED.value, EventType.WAIT_COMPLETED.value)


def make_event(type_: EventType, name: str | None = None, task_id: str | None = None, value: Any = None) -> dict:
    """One event as runners emit it and checkpoints carry it."""
    return {"type": type_.value, "name": name, "task_id": task_id, "value": value, "time": time.time()}
