"""Executions on the server: ``lifecycle`` makes every change of state (the state
machine, with its events and fencing), ``reads`` answers questions without changing
anything. The names below are the package's API."""

from flux.server.executions.lifecycle import (
    INSERT_EXECUTION,
    cancel,
    checkpoint,
    claim,
    deliver,
    end_attempt,
    expire_pending,
    fenced_row,
    finish,
    finished_event,
    submit,
)
from flux.server.executions.reads import events, get, get_row, held_by, info, job_for, list_executions

__all__ = [
    "INSERT_EXECUTION", "cancel", "checkpoint", "claim", "deliver", "end_attempt", "events", "expire_pending", "fenced_row",
    "finish", "finished_event", "get", "get_row", "held_by", "info", "job_for", "list_executions", "submit",
]
