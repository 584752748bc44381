"""An attempt's captured log lines, shipped in numbered batches (docs/logs.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from flux.domain.events import TASK_ID_MAX
from flux.protocol.base import Strict

#: Where a line came from: the child's stdout or stderr, a ``logging`` record, or Flux's own note.
LogStream = Literal["stdout", "stderr", "log", "flux"]
#: Lines in one batch a worker may post; more is 422 (the worker sends 1,000 at most).
MAX_LOG_LINES = 5000


class LogLineIn(Strict):
    time: float = Field(description="Epoch seconds, taken where the line was written")
    stream: LogStream
    task_id: str | None = Field(
        default=None,
        max_length=TASK_ID_MAX,
        description="The task call ('fetch:2'); null: the workflow body or unknown",
    )
    level: str | None = Field(default=None, description="For 'log' lines: INFO, WARNING, ...; cut to 16 characters")
    logger: str | None = Field(default=None, description="For 'log' lines: the logger's name; cut to 128 characters")
    message: str = Field(description="Longer than 64 KiB (UTF-8): cut, with a note of how much was cut")


class LogBatch(Strict):
    attempt: int = Field(ge=1, description="The attempt that wrote the lines: must be the current one (fencing)")
    batch: int = Field(
        ge=1, description="1, 2, 3... within the attempt: a re-sent batch is acknowledged, not stored twice"
    )
    lines: list[LogLineIn] = Field(default=[], max_length=MAX_LOG_LINES)
    truncated: bool = Field(default=False, description="The worker dropped lines of this attempt (--max-log-bytes)")


class LogBatchReply(BaseModel):
    accepted: int = Field(description="Lines stored; 0 for a batch already accepted")
