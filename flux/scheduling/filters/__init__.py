"""The filter pipeline: every dimension of eligibility, in the order dispatch checks them.

Affinity comes first (a dict lookup, the cheapest way to rule a worker out), then
the resource request as a threshold model where every declared dimension must satisfy
``worker >= request``: the probed quantities (cpu, memory, disk: ``capacity.PROBED``),
gpu, packages, and last the countable custom resources. The first filter that fails
gives the worker's ``Reason``.

An execution is checked only by the filters that ``apply`` to it (``Pipeline.active``),
so unconstrained work - no request, no affinity - has no filter at all and takes the
fast path. The pipeline is a value (``Pipeline``), built once by ``default_pipeline``
(``PIPELINE``) and passed to what places and explains; ``Pipeline.with_filter`` gives
a pipeline with a filter for a new dimension (see docs/architecture-scheduling.md for
a worked example).

A match is not enforcement: it only decides where an execution goes. Nothing here
caps what the execution then uses; that ceiling comes from the runner or the host.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from flux.domain.resource_request import ResourceRequest
from flux.scheduling.filters.base import Check, Consumption, Filter, Reason
from flux.scheduling.filters.pipeline import Pipeline, default_pipeline, first_failure
from flux.scheduling.snapshot import WorkerView

__all__ = [
    "PIPELINE",
    "Check",
    "Consumption",
    "Filter",
    "Pipeline",
    "Reason",
    "active",
    "bound",
    "check",
    "default_pipeline",
    "first_bound_failure",
    "first_failure",
]

#: The pipeline every caller that is given none places and explains with (built once, never changed).
PIPELINE: Pipeline = default_pipeline()
#: ``PIPELINE``'s filters that constrain an execution, and its first failing one: for the
#: callers that place and explain with the default pipeline only.
active = PIPELINE.active
check = PIPELINE.check


def bound(
    filters: Iterable[Filter], request: ResourceRequest | None, affinity: Mapping[str, Any] | None
) -> tuple[Check, ...]:
    """``filters`` bound to one set of constraints (``Filter.bind``), in order."""
    return tuple(f.bind(request, affinity) for f in filters)


def first_bound_failure(checks: Iterable[Check], worker: WorkerView) -> Reason | None:
    """``first_failure`` with bound filters: what placement scans the fleet with."""
    for check in checks:
        reason = check(worker)
        if reason is not None:
            return reason
    return None
