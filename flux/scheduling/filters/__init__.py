"""The filter pipeline: every dimension of eligibility, in the order dispatch checks them.

Affinity comes first (a dict lookup, the cheapest way to rule a worker out), then
the resource request as a threshold model where every declared dimension must satisfy
``worker >= request``: the probed quantities (cpu, memory, disk: ``capacity.PROBED``),
gpu, packages, and last the countable custom resources. The first filter that fails
gives the worker's ``Reason``.

An execution is checked only by the filters that ``apply`` to it (``active``), so
unconstrained work - no request, no affinity - has no filter at all and takes the
fast path. ``add_filter`` adds a filter for a new dimension (see
docs/architecture-scheduling.md for a worked example).

A match is not enforcement: it only decides where an execution goes. Nothing here
caps what the execution then uses; that ceiling comes from the runner or the host.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from flux.domain.resource_request import ResourceRequest
from flux.scheduling.filters.affinity import AFFINITY
from flux.scheduling.filters.base import Check, Consumption, Filter, Reason
from flux.scheduling.filters.capacity import PROBED
from flux.scheduling.filters.custom import CUSTOM
from flux.scheduling.filters.gpu import GPUS
from flux.scheduling.filters.packages import PACKAGES
from flux.scheduling.snapshot import WorkerView

__all__ = [
    "PIPELINE",
    "Check",
    "Consumption",
    "Filter",
    "Reason",
    "active",
    "bound",
    "check",
    "first_bound_failure",
    "first_failure",
    "add_filter",
    "remove_filter",
]

#: Every filter, in checking order. Changed only through ``add_filter`` and ``remove_filter``.
PIPELINE: list[Filter] = [AFFINITY, *PROBED, GPUS, PACKAGES, CUSTOM]


def _owned() -> None:
    """The custom filter leaves alone the dimensions other filters own."""
    CUSTOM.owned = frozenset(f.dimension for f in PIPELINE if f.dimension is not None and f is not CUSTOM)


_owned()


def add_filter(new: Filter, *, before: str = CUSTOM.name) -> None:
    """Add ``new`` to the pipeline ahead of the filter named ``before`` (by default the
    custom resources, which stay last: they are the catch-all for ``resources={...}``)."""
    names = [f.name for f in PIPELINE]
    if new.name in names:
        raise ValueError(f"a filter named {new.name!r} is already registered")
    if before not in names:
        raise ValueError(f"no filter named {before!r} to register {new.name!r} before")
    PIPELINE.insert(names.index(before), new)
    _owned()


def remove_filter(old: Filter) -> None:
    PIPELINE.remove(old)
    _owned()


def active(request: ResourceRequest | None, affinity: Mapping[str, Any] | None) -> tuple[Filter, ...]:
    """The filters that constrain this execution, in pipeline order: none for unconstrained work."""
    return tuple(f for f in PIPELINE if f.applies(request, affinity))


def first_failure(
    filters: Iterable[Filter], request: ResourceRequest | None, affinity: Mapping[str, Any] | None, worker: WorkerView
) -> Reason | None:
    """The first of ``filters`` that ``worker`` fails, or ``None`` when it passes them all."""
    for f in filters:
        reason = f.check(request, affinity, worker)
        if reason is not None:
            return reason
    return None


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


def check(request: ResourceRequest | None, affinity: Mapping[str, Any] | None, worker: WorkerView) -> Reason | None:
    """Why ``worker`` is not eligible (the first failing dimension), or ``None`` when it is."""
    return first_failure(active(request, affinity), request, affinity, worker)
