"""Gang executions on the server (docs/gangs.md): the members, their claim as one unit,
their seats, and the rendezvous that starts them together.

A gang is the row the user started (``gang`` set: its shape; it holds no worker) and
``size`` member rows (``gang_id``, ``rank``), created with it. Members never enter the
queue: the gang's row waits there, as one demand, and a round that places it claims
every member in its own transaction (``claim``), so no reader, and no replica on
PostgreSQL, ever sees part of a gang claimed. To its worker a member is an ordinary
execution (claim, checkpoints, logs, the replay of its own event log) whose job carries
its seat; before user code runs, each member posts its address and waits for its peers
(``arrive``). What follows a member's end is ``flux.server.executions.gang_fate``'s.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from flux.domain.events import HOLDING_STATES, EventType, ExecutionState
from flux.domain.hooks import HookEventType
from flux.protocol.gangs import GangPeer, Rendezvous, RendezvousReply
from flux.scheduling.gangs import GangPlacement
from flux.server import outbox
from flux.server.errors import Conflict, Invalid
from flux.server.eventlog import append_event
from flux.server.executions import gang_waits
from flux.server.executions.checkpoints import fenced_row
from flux.server.executions.claims import Claim, claim_all
from flux.server.executions.gang_members import members
from flux.server.executions.reads import get_row
from flux.server.models import ExecutionModel

S = ExecutionState


def claim(session: Session, placement: GangPlacement, delivered: set[str], now: float) -> list[Any]:
    """Claim a placed gang: its row CLAIMED (a new gang attempt) and every member on its
    worker with its allotment, in the round's transaction. ``delivered``: the workers
    whose claim waits on this replica. Returns the members' rows as read before."""
    gang = session.get(ExecutionModel, placement.execution_id)
    if gang is None or gang.state != S.SCHEDULED.value:
        raise Conflict(f"gang {placement.execution_id} changed meanwhile")
    ids = session.execute(select(ExecutionModel.rank, ExecutionModel.id).where(ExecutionModel.gang_id == gang.id)).all()
    by_rank = dict(ids)
    claims = [
        Claim(by_rank[m.rank], m.worker, m.allotment, placement.reason, m.worker in delivered)
        for m in placement.members
    ]
    rows = claim_all(session, claims, now)
    gang.attempt += 1
    gang.state = S.CLAIMED.value
    gang.claimed_at, gang.ready_at, gang.placement_note = now, None, placement.reason
    gang_waits.placed(session, gang, now)  # flux_gang_wait_seconds, once the round commits
    value = {
        "attempt": gang.attempt,
        "reason": placement.reason,
        "domain": placement.domain,
        "members": [{"rank": m.rank, "worker": m.worker, "execution": by_rank[m.rank]} for m in placement.members],
    }
    append_event(session, gang, EventType.WORKFLOW_CLAIMED, name=gang.workflow_name, value=value, at=now)
    return rows


def gang_of(session: Session, member_id: str) -> str:
    """The gang ``member_id`` is a member of (404: no such execution; 422: not a member)."""
    gang_id = session.scalar(select(ExecutionModel.gang_id).where(ExecutionModel.id == member_id))
    if gang_id is None:
        get_row(session, member_id, payloads=False)  # 404 when there is no such execution
        raise Invalid(f"execution {member_id} is not a member of a gang")
    return gang_id


def arrive(session: Session, worker_name: str, member_id: str, body: Rendezvous) -> tuple[RendezvousReply, bool]:
    """A member has started on its worker: note where its peers reach it, and say
    whether every member of the gang's attempt has arrived (the gang is then RUNNING).
    409 once the attempt is fenced or being ended: the member must not start. Also
    returns whether this look is the member's arrival (its address is new)."""
    member = fenced_row(session, worker_name, member_id, body.attempt)
    if member.gang_id is None:
        raise Invalid(f"execution {member_id} is not a member of a gang")
    if member.state not in HOLDING_STATES or member.state == S.CANCELLING.value or member.preempted_by is not None:
        raise Conflict(f"the attempt of gang {member.gang_id} is ending: member {member.rank} must not start")
    host = f"[{body.address}]" if ":" in body.address else body.address
    address = f"{host}:{body.port}"
    fresh = member.gang_address != address
    if fresh:
        member.gang_address = address
    peers = members(session, member.gang_id)
    gang = session.get(ExecutionModel, member.gang_id)
    # Once the last arrival started the gang's attempt (RUNNING), a member that looks again
    # later is ready whatever its peers do now: some may have finished already.
    started = gang.state == S.RUNNING.value
    if not started and not all(p.gang_address and p.state in HOLDING_STATES and p.preempted_by is None for p in peers):
        return RendezvousReply(ready=False), fresh
    if gang.state == S.CLAIMED.value:
        now = time.time()
        gang.state, gang.started_at = S.RUNNING.value, gang.started_at or now
        append_event(
            session, gang, EventType.WORKFLOW_STARTED, name=gang.workflow_name, value={"attempt": gang.attempt}, at=now
        )
        outbox.execution_event(session, gang, HookEventType.EXECUTION_STARTED)
    master_host, _, master_port = peers[0].gang_address.rpartition(":")
    reply = RendezvousReply(
        ready=True,
        members=[GangPeer(rank=p.rank, worker=p.worker_name, address=p.gang_address) for p in peers],
        master_addr=master_host.strip("[]"),
        master_port=int(master_port),
    )
    return reply, fresh
