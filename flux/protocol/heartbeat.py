"""A worker's heartbeat: liveness, what it runs, and a sample only when it moved
(``flux.domain.samples``); the reply names what to cancel and abandon."""

from __future__ import annotations

from pydantic import BaseModel, Field

from flux.domain.workers import WorkerState
from flux.protocol.base import Strict
from flux.protocol.claims import PreemptionNotice, PreemptionWithdrawal
from flux.protocol.registration import PACED, ResourcesInfo


class Heartbeat(Strict):
    running: list[str] = []
    resources: ResourcesInfo | None = Field(
        default=None,
        description="A fresh sample, sent when it moved materially (flux.domain.samples); omitted: unchanged",
    )
    metrics: dict[str, float] | None = Field(
        default=None, description="Live metrics for routing policies; omitted: unchanged"
    )
    draining: bool = Field(default=False, description="The worker is stopping (SIGTERM): place nothing more on it")


class HeartbeatReply(BaseModel):
    state: WorkerState
    cancel: list[str]
    abandon: list[str] = Field(
        default=[], description="Executions it reports running that are no longer its own: kill them"
    )
    preempt: list[PreemptionNotice] = Field(default=[], description="Running attempts to end after a grace period")
    withdrawn: list[PreemptionWithdrawal] = Field(
        default=[], description="Preemptions called off: those attempts go on"
    )
    heartbeat_interval: float | None = Field(default=None, description=PACED)
