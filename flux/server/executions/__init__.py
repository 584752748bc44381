"""Executions on the server: ``lifecycle`` makes every change of state (the state
machine, with its events and fencing), ``reads`` answers questions without changing
anything. The names below are the package's API."""

from flux.server.executions.checkpoints import Ended, checkpoint, fenced_row
from flux.server.executions.claims import Claim, claim_all, deliver, undeliver
from flux.server.executions.history import ExecutionFilter, Page, page, parse_include
from flux.server.executions.lifecycle import (
    cancel,
    end_attempt,
    end_late_gangs,
    expire_pending,
    finish,
    finished_event,
)
from flux.server.executions.reads import (
    WITHOUT_PAYLOADS,
    events,
    finished,
    get,
    get_row,
    held_by,
    info,
    job_for,
    state_of,
)
from flux.server.executions.submission import INSERT_EXECUTION, submit
from flux.server.executions.timeouts import expire_deadlines, first_deadline
from flux.server.executions.waits import first_wake, resume, wake_due

__all__ = [
    "INSERT_EXECUTION",
    "WITHOUT_PAYLOADS",
    "Claim",
    "Ended",
    "ExecutionFilter",
    "Page",
    "cancel",
    "checkpoint",
    "claim_all",
    "deliver",
    "end_attempt",
    "end_late_gangs",
    "undeliver",
    "events",
    "expire_deadlines",
    "expire_pending",
    "fenced_row",
    "finished",
    "first_deadline",
    "first_wake",
    "finish",
    "finished_event",
    "get",
    "get_row",
    "held_by",
    "info",
    "job_for",
    "page",
    "parse_include",
    "resume",
    "state_of",
    "submit",
    "wake_due",
]
