"""``Pipeline``: the filters placement checks, in order, as one frozen value.

Like the plugin set a Kubernetes scheduler profile hands its framework, the pipeline
is built once (``default_pipeline``) and passed to what places and explains
(``place``, ``FreePool``, ``verdict``, ``infeasibility``, ``with_allotments``, the
autoscaler's plan), never a module-level list that registration mutates: a test or an
embedding that wants another dimension builds its own (``with_filter``) and passes it,
and every other caller keeps the pipeline it was given.

The countable custom resources are always last, the catch-all for ``resources={...}``:
the pipeline builds that filter itself, told the dimensions the others own, so a
filter added with a ``dimension`` of its own (a probed ``Capacity``) takes its
dimension over from it and one removed gives it back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping

from flux.domain.resource_request import ResourceRequest
from flux.scheduling.filters.affinity import AFFINITY
from flux.scheduling.filters.base import Filter, Reason
from flux.scheduling.filters.capacity import PROBED
from flux.scheduling.filters.custom import CustomResources
from flux.scheduling.filters.gpu import GPUS
from flux.scheduling.filters.packages import PACKAGES
from flux.scheduling.snapshot import WorkerView


@dataclass(frozen=True, eq=False)
class Pipeline:
    """Every filter in checking order: ``dimensions`` as given, then the custom resources."""

    #: The filters ahead of the custom resources, in checking order.
    dimensions: tuple[Filter, ...]
    #: The catch-all for the ``resources`` names that none of ``dimensions`` owns.
    custom: CustomResources = field(init=False)
    #: ``dimensions`` and then ``custom``: what placement walks.
    filters: tuple[Filter, ...] = field(init=False)

    def __post_init__(self) -> None:
        owned = frozenset(f.dimension for f in self.dimensions if f.dimension is not None)
        custom = CustomResources(owned)
        object.__setattr__(self, "custom", custom)
        object.__setattr__(self, "filters", (*self.dimensions, custom))

    def __iter__(self) -> Iterator[Filter]:
        return iter(self.filters)

    def with_filter(self, new: Filter, *, before: str = CustomResources.name) -> Pipeline:
        """This pipeline with ``new`` ahead of the filter named ``before`` (by default the
        custom resources, which stay last)."""
        names = [f.name for f in self.filters]
        if new.name in names:
            raise ValueError(f"a filter named {new.name!r} is already registered")
        if before not in names:
            raise ValueError(f"no filter named {before!r} to register {new.name!r} before")
        at = names.index(before)
        return Pipeline((*self.dimensions[:at], new, *self.dimensions[at:]))

    def without(self, old: Filter) -> Pipeline:
        """This pipeline without ``old`` (a dimension it owned goes back to the custom resources)."""
        if old not in self.dimensions:
            raise ValueError(f"{old!r} is not in the pipeline")
        return Pipeline(tuple(f for f in self.dimensions if f is not old))

    def active(self, request: ResourceRequest | None, affinity: Mapping[str, Any] | None) -> tuple[Filter, ...]:
        """The filters that constrain this execution, in order: none for unconstrained work."""
        return tuple(f for f in self.filters if f.applies(request, affinity))

    def check(
        self, request: ResourceRequest | None, affinity: Mapping[str, Any] | None, worker: WorkerView
    ) -> Reason | None:
        """Why ``worker`` is not eligible (the first failing dimension), or ``None`` when it is."""
        return first_failure(self.active(request, affinity), request, affinity, worker)


def first_failure(
    filters: Iterable[Filter], request: ResourceRequest | None, affinity: Mapping[str, Any] | None, worker: WorkerView
) -> Reason | None:
    """The first of ``filters`` that ``worker`` fails, or ``None`` when it passes them all."""
    for f in filters:
        reason = f.check(request, affinity, worker)
        if reason is not None:
            return reason
    return None


def default_pipeline() -> Pipeline:
    """Affinity first (a dict lookup, the cheapest way to rule a worker out), then the
    request in the spec's order: the probed quantities, gpu, packages, custom resources."""
    return Pipeline((AFFINITY, *PROBED, GPUS, PACKAGES))
