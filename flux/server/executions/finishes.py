"""What a transaction finished and dispatched, handed to the metrics once it commits.

``lifecycle.finish`` is called from every path that ends an execution (a worker's
terminal event, a cancel, a crash past its attempts, a timeout, ``pending_timeout``);
each leaves a ``Finished`` in its session, and ``Database.after_commit`` gives the
list to ``ServerMetrics.observe_finished`` only once the transaction committed: a
rolled-back or retried transaction observes nothing.
"""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy.orm import Session

#: The key of ``session.info`` that holds the transaction's ``Finished`` records.
KEY = "flux_finished"


class Finished(NamedTuple):
    namespace: str
    workflow: str
    state: str
    #: Seconds from its first start to its end; None when it never started (cancelled while queued).
    ran: float | None


def record(session: Session, finished: Finished) -> None:
    session.info.setdefault(KEY, []).append(finished)


def taken(session: Session) -> list[Finished]:
    """The records of the transaction that just ended, removed from its session."""
    return session.info.pop(KEY, [])
