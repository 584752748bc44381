"""One fate for a gang's members (docs/gangs.md): what a member's end does to its gang.

- A member's attempt ends (its worker lost, its process dead, a ceiling, a drain, a
  preemption, a late start): every other member's attempt is ended too, told as a
  preemption with the grace period (``preempted_by`` is the gang: never withdrawn), or
  at once where its worker never got it. The gang's attempt is counted once, by the end
  that started it. When no member holds a worker any more, the gang goes back to the
  queue whole (``requeue``) or, at ``max_attempts``, fails.
- A member's workflow ends: COMPLETED waits for the others and the gang completes with
  rank 0's output once all have; any other end (FAILED, TIMED_OUT, CANCELLED) ends the
  gang so, and the members still going are cancelled.

Transitions of the gang's row that end it are ``lifecycle.finish``'s (which calls this
module, not the other way round): these functions say what to finish.
"""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy.orm import Session

from flux.domain.attempts import AttemptEnd
from flux.domain.events import HOLDING_STATES, EventType, ExecutionState
from flux.domain.policy import ExecutionPolicy
from flux.server import outbox
from flux.server.eventlog import append_event, append_events
from flux.server.executions.gang_members import members
from flux.server.models import ExecutionModel

S = ExecutionState

#: ``session.info`` key: workers to wake and whether dispatch must look, once the transaction commits.
WAKE = "flux.gangs.wake"
#: ``session.info`` key: the gangs whose row changed here (ended, queued again): their
#: waiters (``GET /executions/ID?wait=``, ``flux workflow run --wait``) learn of it once it commits.
CHANGED = "flux.gangs.changed"


class Outcome(NamedTuple):
    """How a gang ends, for ``lifecycle.finish``."""

    gang: ExecutionModel
    state: ExecutionState
    value: object


def release(session: Session, member: ExecutionModel, end: AttemptEnd, cause: str, now: float) -> None:
    """A member's own part of its attempt's end: logged, off its worker, out of the queue
    (SCHEDULED with its gang: never placed alone). Counting is the gang's."""
    worker = member.worker_name
    value = {"attempt": member.attempt, "end": end.value, "cause": cause, "counted": False}
    append_events(
        session,
        member,
        [dict(type=EventType.ATTEMPT_ENDED, name=member.workflow_name, value=value, time=now, worker_name=worker)],
    )
    member.leave_worker()
    member.state = S.SCHEDULED.value
    member.pending_since = now
    outbox.worker_left(session, worker)


def member_left(
    session: Session, member: ExecutionModel, end: AttemptEnd, cause: str, policy: ExecutionPolicy, now: float
) -> Outcome | None:
    """After ``release(member)``: end the gang's attempt everywhere; once no member holds
    a worker, queue the gang again. Returns the gang's end when its attempts are spent."""
    gang = session.get(ExecutionModel, member.gang_id)
    if gang is None or gang.state not in HOLDING_STATES:
        return None
    peers = [p for p in members(session, gang.id) if p.id != member.id]
    if _ending(gang, peers):  # not the first end
        pass
    elif gang.state == S.CLAIMED.value and now >= (gang.claimed_at or now) + gang.gang["start_timeout"]:
        # past the start deadline before all arrived (a member's worker gave up waiting before
        # the server looked): the late start ends it, counted as the server's own look counts it
        _late(session, gang, [p.rank for p in peers if not p.gang_address] or [member.rank], now)
    else:  # the first end
        _ended(session, gang, end.value, f"member {member.rank} ({member.id}): {cause}", end.counts, now)
    return _tear_down(session, gang, peers, policy, now)


def late(session: Session, gang: ExecutionModel, policy: ExecutionPolicy, now: float) -> Outcome | None:
    """Not every member reached the rendezvous within ``start_timeout``: the gang's
    attempt ends (counted: a member that cannot start is a crash), and it is placed again.
    An attempt already ending (a member's end, or an earlier look, while a member's worker
    has not yet let go) is not ended, nor counted, again."""
    peers = members(session, gang.id)
    if _ending(gang, peers):
        return None
    _late(session, gang, [p.rank for p in peers if not p.gang_address], now)
    return _tear_down(session, gang, peers, policy, now)


def _late(session: Session, gang: ExecutionModel, missing: list[int], now: float) -> None:
    """The gang's attempt ends for a late start (counted), naming the members that were missing."""
    timeout = gang.gang["start_timeout"]
    cause = f"member(s) {', '.join(map(str, missing))} did not start within start_timeout ({timeout:g}s)"
    _ended(session, gang, "start_timeout", cause, True, now)


def _ending(gang: ExecutionModel, peers: list[ExecutionModel]) -> bool:
    """The gang's attempt is already ending: a member went back to wait, or was told to stop for it."""
    return any(p.state == S.SCHEDULED.value or p.preempted_by == gang.id for p in peers)


def _ended(session: Session, gang: ExecutionModel, end: str, why: str, counted: bool, now: float) -> None:
    """The gang's attempt ended, in its log (once, by what started it) and its count."""
    value = {"attempt": gang.attempt, "end": end, "cause": why, "counted": counted}
    append_event(session, gang, EventType.ATTEMPT_ENDED, name=gang.workflow_name, value=value, at=now)
    gang.crashes += 1 if counted else 0
    gang.placement_note = f"the gang's attempt {gang.attempt} ended: {why}"


def _tear_down(
    session: Session, gang: ExecutionModel, peers: list[ExecutionModel], policy: ExecutionPolicy, now: float
) -> Outcome | None:
    """End every member's attempt that goes on: at once where its worker never got it,
    else told as a preemption with the grace period. None left: the gang is queued again."""
    for peer in peers:
        if peer.state not in HOLDING_STATES or peer.state == S.CANCELLING.value or peer.preempted_by == gang.id:
            continue
        if peer.state == S.CLAIMED.value and not peer.delivered:
            release(session, peer, AttemptEnd.PREEMPTED, "its gang's attempt ended", now)
            continue
        wake(session, peer.worker_name)
        peer.preempted_by, peer.preempt_deadline = gang.id, now + policy.preemption_grace
        value = {"by": gang.id, "worker": peer.worker_name, "reason": gang.placement_note}
        append_event(session, peer, EventType.PREEMPTED, name=peer.workflow_name, value=value, at=now)
    if any(p.state in HOLDING_STATES for p in peers):
        return None
    return requeue(session, gang, policy, now)


def requeue(session: Session, gang: ExecutionModel, policy: ExecutionPolicy, now: float) -> Outcome | None:
    """No member holds a worker: the gang waits in the queue again, whole (after the
    backoff of a counted end), or fails once its attempts are spent."""
    if gang.state == S.CANCELLING.value:
        return Outcome(gang, S.CANCELLED, {"reason": "cancelled"})
    if gang.crashes >= gang.max_attempts:
        error = f"{gang.placement_note} ({gang.crashes} of {gang.max_attempts} attempts crashed)"
        return Outcome(gang, S.FAILED, {"error": error, "attempts": gang.attempt})
    delay = policy.delay(gang.crashes) if gang.crashes else 0.0
    value = {"reason": gang.placement_note, "retry_in": delay}
    append_event(session, gang, EventType.WORKFLOW_RESCHEDULED, name=gang.workflow_name, value=value, at=now)
    gang.state, gang.pending_since = S.SCHEDULED.value, now
    gang.ready_at = now + delay if delay else None
    gang.started_at = None
    wake(session)  # and dispatch looks
    changed(session, gang)
    return None


def member_finished(session: Session, member: ExecutionModel) -> Outcome | None:
    """After ``finish(member)``: the gang's end, when this member's decides it."""
    gang = session.get(ExecutionModel, member.gang_id)
    if gang is None or S(gang.state).is_terminal:
        return None
    state = S(member.state)
    if state is S.COMPLETED:
        peers = members(session, gang.id)
        if all(p.state == S.COMPLETED.value for p in peers):
            return Outcome(gang, S.COMPLETED, peers[0].output)
        return None
    if state is S.CANCELLED and gang.state == S.CANCELLING.value:
        if all(S(p.state).is_terminal for p in members(session, gang.id)):
            return Outcome(gang, S.CANCELLED, {"reason": "cancelled"})
        return None
    error = f"member {member.rank} ({member.id}) {state.value.lower()}: {member.error or ''}".rstrip(": ")
    return Outcome(gang, state, {"error": error})


def still_open(session: Session, gang: ExecutionModel) -> list[ExecutionModel]:
    """The members of an ended gang that have not ended: cancelled with it."""
    return [m for m in members(session, gang.id) if not S(m.state).is_terminal and m.state != S.CANCELLING.value]


def wake(session: Session, *workers: str | None) -> None:
    """Wake these workers' claims once the transaction commits (they have notices)."""
    woken = session.info.setdefault(WAKE, set())
    woken.update(w for w in workers if w is not None)


def changed(session: Session, gang: ExecutionModel) -> None:
    """Wake whoever waits on this gang once the transaction commits: a member's request
    changed it, and that request wakes only the member's own waiters."""
    session.info.setdefault(CHANGED, set()).add(gang.id)
