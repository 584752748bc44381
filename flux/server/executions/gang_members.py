"""A gang's member rows (docs/gangs.md): created with the gang, read by rank.

Members are executions of their own (``gang_id``, ``rank``), each with its own log: to
its worker a member is an ordinary execution, and its replay is its own. They copy the
gang's request, priority and keys: each is placed, counted and preempted as the request
says, ``size`` of them. They never enter the queue alone (``flux.server.queue``).
"""

from __future__ import annotations

import uuid
from typing import Any, Mapping

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from flux.domain.events import EventType, ExecutionState
from flux.domain.workflow_options import gang_from_json
from flux.server.eventlog import INSERT_EVENT, numbered
from flux.server.models import ExecutionModel

_INSERT = insert(ExecutionModel.__table__)
#: What a member does not take from its gang's row: it is not a gang, nor scheduled, nor a child.
_NOT_COPIED = {"id", "gang", "schedule", "scheduled_for", "parent_id", "pending_timeout"}


def add_members(session: Session, gang_row: Mapping[str, Any]) -> None:
    """Insert the members of a gang just submitted (``gang_row``: the INSERT's values),
    each with its own id and first event."""
    gang = gang_from_json(gang_row["gang"])
    members = [
        {
            **{k: v for k, v in gang_row.items() if k not in _NOT_COPIED},
            "id": uuid.uuid4().hex,
            "gang": None,
            "gang_id": gang_row["id"],
            "rank": rank,
            "schedule": None,
            "scheduled_for": None,
            "parent_id": None,
            "pending_timeout": None,
        }
        for rank in range(gang.size)
    ]
    session.execute(_INSERT, members)
    session.execute(INSERT_EVENT, [numbered(m["id"], 0, [_scheduled(m)])[0] for m in members])


def _scheduled(member: dict) -> dict:
    """A member's first event: whose member it is, and its rank."""
    value, at = {"gang": member["gang_id"], "rank": member["rank"]}, member["scheduled_at"]
    return dict(type=EventType.WORKFLOW_SCHEDULED, name=member["workflow_name"], value=value, time=at)


def members(session: Session, gang_id: str) -> list[ExecutionModel]:
    """A gang's members by rank."""
    return list(
        session.scalars(select(ExecutionModel).where(ExecutionModel.gang_id == gang_id).order_by(ExecutionModel.rank))
    )


def late(session: Session, now: float) -> tuple[list[ExecutionModel], float]:
    """Gangs whose members have not all arrived within ``start_timeout`` of their
    placement, and when the next one's time is up (inf: none waits)."""
    claimed = session.scalars(
        select(ExecutionModel).where(
            ExecutionModel.state == ExecutionState.CLAIMED.value, ExecutionModel.gang.is_not(None)
        )
    ).all()
    late, due = [], float("inf")
    for gang in claimed:
        deadline = (gang.claimed_at or now) + gang_from_json(gang.gang).start_timeout
        if deadline <= now:
            late.append(gang)
        else:
            due = min(due, deadline)
    return late, due
