"""How long each gang waited to be placed whole, handed to the metrics once it commits
(``flux_gang_wait_seconds``, docs/gangs.md).

A gang's wait runs from its submission, or from its requeue after an attempt ended
(its row's ``pending_since``), to the placement of every member: in the dispatch
round's transaction. ``gangs.claim`` leaves a ``Placed`` in the session (``placed``), and
``taken`` gives them to ``ServerMetrics.observe_finished`` after the commit, as
``finishes`` does for ends: a rolled-back or retried round observes nothing.
"""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy.orm import Session

from flux.server.models import ExecutionModel

#: The key of ``session.info`` that holds the transaction's ``Placed`` records.
KEY = "flux_gangs_placed"


class Placed(NamedTuple):
    namespace: str
    workflow: str
    #: Seconds from its submission or requeue to the placement of all its members.
    waited: float


def placed(session: Session, gang: ExecutionModel, now: float) -> None:
    """``gang`` was placed whole in this transaction (``gangs.claim``): its wait, for after the commit."""
    waited = max(now - (gang.pending_since or gang.scheduled_at or now), 0.0)
    session.info.setdefault(KEY, []).append(Placed(gang.namespace, gang.workflow_name, waited))


def taken(session: Session) -> list[Placed]:
    """The placements of the transaction that just ended, removed from its session."""
    return session.info.pop(KEY, [])
