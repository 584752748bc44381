"""How long each gang waited to be placed whole, handed to the metrics once it commits
(``flux_gang_wait_seconds``, docs/gangs.md).

A gang's wait runs from its submission, or from its requeue after an attempt ended
(its row's ``pending_since``), to the placement of every member: its row going from
SCHEDULED to CLAIMED, in the dispatch round's transaction. Whichever path claims a gang,
that change of its row is the one sure sign, so it is noticed where it happens: a
listener on ``ExecutionModel.state`` (``watch``, installed once by the metrics) leaves
a ``Placed`` in the session, and ``taken`` gives them to
``ServerMetrics.observe_finished`` after the commit, as ``finishes`` does for ends: a
rolled-back or retried round observes nothing. The listener costs one comparison per
state change of any row.
"""

from __future__ import annotations

import time
from typing import NamedTuple

from sqlalchemy import event
from sqlalchemy.orm import Session, object_session

from flux.domain.events import ExecutionState
from flux.server.models import ExecutionModel

#: The key of ``session.info`` that holds the transaction's ``Placed`` records.
KEY = "flux_gangs_placed"
_CLAIMED, _SCHEDULED = ExecutionState.CLAIMED.value, ExecutionState.SCHEDULED.value


class Placed(NamedTuple):
    namespace: str
    workflow: str
    #: Seconds from its submission or requeue to the placement of all its members.
    waited: float


def _state_set(target: ExecutionModel, value: str, old: str, _initiator: object) -> None:
    if value != _CLAIMED or old != _SCHEDULED or target.gang is None:
        return
    session = object_session(target)
    if session is not None:
        waited = max(time.time() - (target.pending_since or target.scheduled_at or time.time()), 0.0)
        session.info.setdefault(KEY, []).append(Placed(target.namespace, target.workflow_name, waited))


def watch() -> None:
    """Notice gang placements from now on (idempotent)."""
    if not event.contains(ExecutionModel.state, "set", _state_set):
        event.listen(ExecutionModel.state, "set", _state_set)


def taken(session: Session) -> list[Placed]:
    """The placements of the transaction that just ended, removed from its session."""
    return session.info.pop(KEY, [])
