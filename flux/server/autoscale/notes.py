"""What ``flux execution explain`` adds about pools: that a worker which could take
this execution is starting, and since when ("a worker of pool gpu-a100 is starting
(requested 12:03:04)", UTC), and the templates that say when none could."""

from __future__ import annotations

import time

from sqlalchemy import select
from sqlalchemy.orm import Session

from flux.scheduling.autoscale import MemberState, PoolTemplate, fits
from flux.scheduling.demand import Demand
from flux.scheduling.filters import Reason
from flux.server.autoscale import store
from flux.server.pool_models import PoolModel, PoolWorkerModel


def starting_for(session: Session, demand: Demand) -> str | None:
    """The note, when a starting worker's pool fits ``demand``; None otherwise."""
    rows = session.execute(
        select(PoolWorkerModel.pool, PoolWorkerModel.requested_at)
        .where(PoolWorkerModel.state == MemberState.STARTING)
        .order_by(PoolWorkerModel.requested_at)
    ).all()
    for pool_name, requested_at in rows:
        pool = session.get(PoolModel, pool_name)
        if pool is not None and fits(store.template(pool), demand):
            since = time.strftime("%H:%M:%S", time.gmtime(requested_at))
            return f"a worker of pool {pool_name} is starting (requested {since})"
    return None


def unplaceable(reason: str | None, pools: list[PoolTemplate], unfit: Reason | None) -> str | None:
    """``reason`` (no registered worker could ever take it), unless a pool can start a worker
    that would (``unfit``: ``no_pool``'s verdict on ``pools``): such work waits for autoscaling,
    not for ever (as Kueue calls a workload inadmissible only when no flavour could hold it)."""
    if reason and pools and unfit is None:
        return None
    return reason


def templates(session: Session) -> list[PoolTemplate]:
    """Every pool's template, by name (what "no pool can start a worker for it" judges;
    a pool being deleted starts nothing, so it is left out)."""
    rows = session.scalars(select(PoolModel).where(PoolModel.deleting.is_(False)).order_by(PoolModel.name))
    return [store.template(row) for row in rows]
