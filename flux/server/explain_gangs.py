"""``GET /executions/{id}/placement`` of a gang (docs/gangs.md): why it waits, domain by
domain, or where its members went.

A waiting gang's shortfall is computed at the request, from the dispatcher's views of
the fleet (the ones ``explain.placement`` judges every worker on), with
``flux.scheduling.gang_explain``: the line and the per-domain lines are the ones a
dispatch round would give (its ``GangShortfall.reason`` is the gang row's
``placement_note``), so the CLI, the console and the API show one truth. What a round
holds for gangs ahead in the queue is not in the views: a gang that fits the fleet now
but waits behind another's held room gets no shortfall, and its summary is the round's
(``held``). Costs one board over the fleet per request, as a round's first look at a
kind of gang does.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from flux.domain.gang import Gang
from flux.domain.workflow_options import gang_from_json
from flux.scheduling.binding import GANG
from flux.scheduling.demand import Demand
from flux.scheduling.filters import Reason
from flux.scheduling.gang_explain import GangShortfall, explain_gang
from flux.scheduling.gangs import GangDemand
from flux.scheduling.snapshot import WorkerView
from flux.server.autoscale import gangs as pool_gangs
from flux.server.executions.gang_reads import members_info
from flux.server.models import ExecutionModel
from flux.server.schemas import GangExplanation


def shape(execution: ExecutionModel) -> Gang:
    """The gang's shape as its row keeps it (the server's cap was checked at submission)."""
    return gang_from_json(execution.gang)


def shortfall(execution: ExecutionModel, demand: Demand, workers: list[WorkerView]) -> GangShortfall | None:
    """Why the gang fits nowhere in the fleet as it is now, or None when it fits."""
    return explain_gang(GangDemand(demand, shape(execution)), workers, demand.namespace)


def pools_note(session: Session, execution: ExecutionModel, demand: Demand, workers: list[WorkerView]) -> str | None:
    """What the worker pools say of the waiting gang (the scaling pass's verdict), or None."""
    return pool_gangs.explain_note(session, GangDemand(demand, shape(execution)), workers)


def holds(held: Reason | None, short: GangShortfall | None) -> list[Reason | None]:
    """What holds a waiting gang: the last round's hold unless it was the gang's own
    shortfall (then today's replaces it: the fleet may have changed since)."""
    kept = held if held is None or held.filter != GANG else None
    return [kept, short.reason if short is not None else None]


def placed(execution: ExecutionModel, claimed: dict[str, Any] | None) -> str:
    """The summary of a gang that was placed (its latest WORKFLOW_CLAIMED)."""
    if not claimed:
        return f"{execution.state} without dispatch"
    return f"gang placed in {shape(execution).topology} {claimed.get('domain')}: {claimed.get('reason')}"


def member(execution: ExecutionModel) -> str:
    """The summary of a member between its gang's attempts: it is never placed alone."""
    return (
        f"{execution.state}: rank {execution.rank} of gang {execution.gang_id}, placed only with its gang "
        f"(flux execution explain {execution.gang_id[:12]})"
    )


def explanation(
    session: Session, execution: ExecutionModel, short: GangShortfall | None, claimed: dict[str, Any] | None
) -> GangExplanation:
    gang = shape(execution)
    return GangExplanation(
        size=gang.size,
        topology=gang.topology,
        shortfall=short.message if short is not None else None,
        domains=short.lines() if short is not None else [],
        domain=(claimed or {}).get("domain") if execution.state != "SCHEDULED" else None,
        members=members_info(session, execution.id),
    )
