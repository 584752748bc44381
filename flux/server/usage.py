"""Each namespace's decayed usage and the work its preemptions lost, in the
``namespace_usage`` table (docs/contention.md, "Fair share that remembers").

The dispatcher of whichever replica runs accrues what each namespace holds into its
row every ``USAGE_PERIOD`` seconds, from the row's own ``decayed_at`` under a row
lock, so replicas sharing the database never count the same seconds twice and a
restarted server goes on from what the table says. The arithmetic is
``flux.scheduling.usage``'s.
"""

from __future__ import annotations

from typing import Mapping

from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from flux.scheduling import usage as decay
from flux.server.models import ExecutionModel, NamespaceUsageModel

#: Seconds between accruals of what each namespace holds (a rectangle of that width each time).
USAGE_PERIOD = 5.0
#: At most this many seconds are counted as held at one accrual: what a namespace held while
#: no dispatcher ran (a server down, an idle one) is unknown, and is not counted.
MAX_HELD_FOR = 2 * USAGE_PERIOD


def _ensure(session: Session, namespaces: list[str], now: float) -> None:
    """A row for each of ``namespaces`` (another replica may insert one at the same instant)."""
    if not namespaces:
        return
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    rows = [dict(namespace=name, usage={}, decayed_at=now, lost_seconds=0.0) for name in namespaces]
    session.execute(insert(NamespaceUsageModel).values(rows).on_conflict_do_nothing())


def accrue(
    session: Session,
    held: Mapping[str, Mapping[str, float]],
    capacity: Mapping[str, float],
    now: float,
    half_life: float,
) -> dict[str, tuple[float, float]]:
    """Add what each namespace holds (``held`` by namespace and dimension, over the fleet's
    ``capacity``) since its row was last decayed, at most ``MAX_HELD_FOR`` seconds of it. A
    namespace that holds nothing is not written: its row decays when read. Returns each
    namespace's decayed dominant usage (a share of the fleet) and when it was so."""
    holding = {name: sums for name, sums in held.items() if any(v > 0 for v in sums.values())}
    if holding:
        known = set(session.scalars(select(NamespaceUsageModel.namespace)))
        _ensure(session, sorted(set(holding) - known), now)
        rows = session.scalars(
            select(NamespaceUsageModel).where(NamespaceUsageModel.namespace.in_(holding)).with_for_update()
        )
        for row in rows:
            elapsed = now - row.decayed_at
            if elapsed > 0:
                usage = row.usage or {}
                row.usage = decay.accrued(usage, holding[row.namespace], capacity, elapsed, half_life, MAX_HELD_FOR)
                row.decayed_at = now
        session.flush()
    rows = session.execute(
        select(NamespaceUsageModel.namespace, NamespaceUsageModel.usage, NamespaceUsageModel.decayed_at)
    )
    return {row.namespace: (decay.dominant(row.usage or {}, half_life), row.decayed_at) for row in rows}


def past_shares(usage: Mapping[str, tuple[float, float]], now: float, half_life: float) -> dict[str, float]:
    """Each namespace's decayed dominant usage at ``now`` (``FairShare.past``), from ``accrue``'s answer."""
    if half_life <= 0:
        return {}
    return {name: share * 0.5 ** (max(0.0, now - at) / half_life) for name, (share, at) in usage.items() if share > 0}


def shown(session: Session, namespace: str, now: float, half_life: float) -> tuple[dict[str, float], float, float]:
    """``namespace``'s usage by dimension decayed to ``now``, its decayed dominant usage (a
    share of the fleet) and the seconds of work its preemptions lost."""
    row = session.get(NamespaceUsageModel, namespace)
    if row is None:
        return {}, 0.0, 0.0
    usage = decay.decayed(row.usage or {}, now - row.decayed_at, half_life)
    return usage, decay.dominant(usage, half_life), row.lost_seconds or 0.0


def record_lost(session: Session, execution: ExecutionModel, now: float) -> float:
    """An attempt of ``execution`` ended preempted: the work it lost (seconds since its last
    checkpoint: its last completed task, or its claim; nothing if it never started) is added
    to the execution and its namespace, and the cooldown starts. Returns the seconds lost."""
    since = max(execution.progress_at or 0.0, execution.claimed_at or now)
    lost = max(0.0, now - since) if execution.started_at is not None else 0.0  # never started: nothing lost
    execution.preempted_at = now
    execution.preemption_lost_seconds = (execution.preemption_lost_seconds or 0.0) + lost
    _ensure(session, [execution.namespace], now)
    session.execute(
        update(NamespaceUsageModel)
        .where(NamespaceUsageModel.namespace == execution.namespace)
        .values(lost_seconds=NamespaceUsageModel.lost_seconds + lost)
    )
    return lost


def lost_by_namespace(session: Session) -> dict[str, float]:
    """The seconds of work preemptions lost, by namespace (``flux_preemption_lost_seconds_total``)."""
    return dict(session.execute(select(NamespaceUsageModel.namespace, NamespaceUsageModel.lost_seconds)).all())
