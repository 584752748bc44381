"""A checkpoint: a numbered batch of one attempt's events (fenced by its attempt)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from flux.domain.events import EVENT_TYPE_MAX, MAX_CHECKPOINT_EVENTS, TASK_ID_MAX
from flux.domain.names import NAME_MAX
from flux.protocol.base import Strict


class EventIn(Strict):
    type: str = Field(max_length=EVENT_TYPE_MAX)
    name: str | None = Field(default=None, max_length=NAME_MAX, description="The workflow's or the task's name")
    task_id: str | None = Field(
        default=None, max_length=TASK_ID_MAX, description="The task call ('fetch:2') or wait ('pause:approval:1')"
    )
    value: Any = None
    time: float


class Checkpoint(Strict):
    attempt: int = Field(ge=1)
    batch: int = Field(
        ge=1, description="1, 2, 3... within the attempt: a re-sent batch is acknowledged, not appended twice"
    )
    events: list[EventIn] = Field(
        min_length=1, max_length=MAX_CHECKPOINT_EVENTS, description="At most 1,000 (the worker splits larger batches)"
    )


class CheckpointReply(BaseModel):
    state: str
    cancel: bool
