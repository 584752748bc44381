"""A gang as the server reads it (docs/gangs.md): the workflow's at registration, the
run's at submission, both against the server's cap (``--max-gang-size``), every refusal
a 422 naming ``gang.<field>`` in the documented error shape; and the registration
warning for a gang that may not be preempted and that no topology domain of the
registered fleet could ever hold.

The cap is the server's, not the decorator's: a gang is validated where it is made
(``Gang``, against ``DEFAULT_MAX_SIZE`` or the ``max_size`` its author gave), and the
server checks its own cap each time it reads one, so lowering the cap refuses new runs
of a gang already registered rather than the stored document.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from flux.domain.gang import Gang, InvalidGang
from flux.domain.workflow_options import WorkflowOptions, gang_from_json
from flux.scheduling.autoscale import PoolTemplate
from flux.scheduling.demand import Demand
from flux.scheduling.gang_autoscale import gang_scale
from flux.scheduling.gang_explain import never_fits
from flux.scheduling.gangs import GangDemand
from flux.scheduling.snapshot import WorkerView
from flux.server.errors import InvalidField

#: ``Gang.size: ...``: the field an ``InvalidGang`` names, as its message starts.
_FIELD = re.compile(r"Gang\.(\w+): ")
#: What a gang must name when nothing gives it a default.
REQUIRED = ("size", "topology")


def refusal(exc: InvalidGang, loc: Sequence[str | int], prefix: str = "") -> InvalidField:
    """``exc`` as a 422 at ``loc`` + ``gang`` + the field it names (``gang.size``); ``prefix``
    (a file and workflow) leads the message."""
    text = str(exc)
    found = _FIELD.search(text)
    where = [*loc, "gang", found.group(1)] if found else [*loc, "gang"]
    return InvalidField(where, prefix + (text[found.end() :] if found else text))


def within_cap(gang: Gang, max_size: int) -> Gang:
    """``gang`` when its size is within the server's cap; ``InvalidGang`` naming size if not."""
    if gang.size > max_size:
        gang.with_size(gang.size, max_size)  # raises, in Gang's own words
    return gang


def check_declared(options: WorkflowOptions, max_size: int, loc: Sequence[str | int], prefix: str = "") -> None:
    """A registration's gang against the server's cap (the rest was checked when it was made)."""
    if options.gang is not None:
        try:
            within_cap(options.gang, max_size)
        except InvalidGang as exc:
            raise refusal(exc, loc, prefix) from None


def for_run(
    given: Any, declared: Mapping[str, Any] | None, max_size: int, workflow: str, loc: Sequence[str | int] = ("body",)
) -> dict[str, Any] | None:
    """The gang an execution runs as, in its JSON form (the row's ``gang`` column): the
    run's (``given``: a whole gang, or fields that change the workflow's, ``{"size": 8}``
    resizing it as ``Gang.with_size`` does), else the workflow's (``declared``, its version's
    document); None for a single execution. A 422 naming the field when it is refused."""
    try:
        gang = _resolve(given, declared, max_size, workflow)
    except InvalidGang as exc:
        raise refusal(exc, loc) from None
    return None if gang is None else gang.to_dict()


def _resolve(given: Any, declared: Mapping[str, Any] | None, max_size: int, workflow: str) -> Gang | None:
    if given is None:
        return None if declared is None else within_cap(gang_from_json(declared), max_size)
    if not isinstance(given, Mapping):
        raise InvalidGang(f"expected a mapping of field names such as {{'size': 4}}, got {given!r}")
    if not given:
        raise InvalidGang("Gang.size: required: give at least a size, such as {'size': 4}, or leave gang out")
    if declared is None:
        missing = [field for field in REQUIRED if field not in given]
        if missing:
            raise InvalidGang(
                f"Gang.{missing[0]}: required: workflow {workflow!r} declares no gang, so a run's gang must "
                f"give its {' and '.join(missing)} (topology: the worker label every member shares)"
            )
        return Gang.from_dict(given, max_size=max_size)
    if set(given) == {"size"}:
        return gang_from_json(declared).with_size(given["size"], max_size)
    return Gang.from_dict({**declared, **given}, max_size=max_size)


def never_fits_warning(
    options: WorkflowOptions,
    namespace: str,
    fleet: list[WorkerView],
    pools: list[PoolTemplate],
) -> str | None:
    """Why a gang that may not be preempted could never be placed on the registered fleet
    (``gang_explain.never_fits``), unless a pool could start the workers it needs; None
    for a preemptible gang (it waits, and may be placed by preempting nothing) or one that fits."""
    if options.gang is None or options.preemptible:
        return None
    demand = Demand(execution_id="", request=options.requests, affinity=options.affinity, namespace=namespace)
    gd = GangDemand(demand, options.gang)
    reason = never_fits(gd, fleet)
    if reason and pools and gang_scale(gd, pools, fleet, {}).pool is not None:
        return None  # a pool can start the workers: it waits for autoscaling
    return None if reason is None else f"gang of {options.gang.size} can never be placed as the fleet stands: {reason}"
