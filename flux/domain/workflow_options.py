"""A workflow's options as one frozen value, read by everything downstream of the decorator.

``@workflow.with_options(...)`` and static registration (``flux.registration``) build it
with ``WorkflowOptions.of``, the one place the rules live: each option's check names the
workflow and the option (``ValueError``; a bad ``requests`` raises ``InvalidResourceRequest``).
The server stores it as a version's ``options`` document (``stored``) beside the columns
dispatch queries, and reads it back with ``from_json``.

Adding an option: its field here, its check in ``_CHECKS`` (and its JSON form in ``_JSON``
when it is not plain JSON), its behaviour where it acts, and a test.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Callable, Mapping

from flux.domain.affinity import normalise_affinity
from flux.domain.attempts import check_max_attempts
from flux.domain.concurrency import Concurrency, check_concurrency, check_limit
from flux.domain.durations import parse_duration
from flux.domain.fluxcore_schedules import DeclaredSchedule
from flux.domain.gang import DEFAULT_MAX_SIZE, Gang, InvalidGang
from flux.domain.names import check_name
from flux.domain.namespaces import check_namespace
from flux.domain.numbers import is_number
from flux.domain.priority import check_priority
from flux.domain.resource_request import ResourceRequest, request_or_none
from flux.domain.routing import RoutingPolicy, check_routing
from flux.domain.waits import check_timeout

#: Options that direct registration rather than describe a version: ``namespace`` is checked
#: against the namespace it is registered into, ``schedule`` becomes a server schedule.
DIRECTIVES = ("namespace", "schedule")


@dataclass(frozen=True)
class WorkflowOptions:
    """A workflow's validated options (build it with ``of``; the constructor trusts its values)."""

    name: str
    requests: ResourceRequest | None = None
    #: Hard label constraints, in their JSON form (``normalise_affinity``).
    affinity: dict | None = None
    #: ``score(...)``: ranks the eligible workers (soft).
    routing: RoutingPolicy | None = None
    #: Seconds in SCHEDULED before the execution fails; None: it waits forever.
    pending_timeout: float | None = None
    #: Attempts that may end in a crash before it fails; None: the server's default.
    max_attempts: int | None = None
    #: Seconds from submission, across attempts and waits, before it ends TIMED_OUT.
    timeout: float | None = None
    #: A priority class's name or an int (docs/contention.md); ``None``: the server's default class.
    priority: int | str | None = None
    #: False: never chosen as a victim of preemption.
    preemptible: bool = True
    #: Seconds of an attempt in which it is chosen as a victim only when nothing else would do.
    min_runtime: float | None = None
    #: At most ``limit`` executions with the rendered key hold a worker at once.
    concurrency: Concurrency | None = None
    #: At most this many executions of this workflow hold a worker at once.
    max_concurrency: int | None = None
    #: The namespace the workflow belongs in: registering it into another is refused.
    namespace: str | None = None
    #: A schedule declared in code: registration creates (or updates) the server schedule ``<name>``.
    schedule: DeclaredSchedule | None = None
    #: Run as ``size`` members placed together (docs/gangs.md); ``requests`` is per member.
    gang: Gang | None = None

    @classmethod
    def of(cls, name: str, **options: Any) -> WorkflowOptions:
        """Validate ``options`` (raw decorator arguments or their JSON forms); the error names
        the workflow and the option, ``TypeError`` an option that does not exist."""
        name = check_name(name)
        owner = f"workflow {name!r}"
        for key in options:
            if key not in _CHECKS:
                raise TypeError(f"{owner}: unknown workflow option {key!r}; known: {', '.join(names())}")
        return cls(name, **{key: _CHECKS[key](value, owner) for key, value in options.items()})

    def to_json(self) -> dict[str, Any]:
        """Its JSON form: the name and each option set away from its default, so an option
        added later leaves every document written before it as it was."""
        document: dict[str, Any] = {"name": self.name}
        for option in fields(self)[1:]:
            value = getattr(self, option.name)
            if value != option.default:
                document[option.name] = _JSON[option.name][0](value) if option.name in _JSON else value
        return document

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> WorkflowOptions:
        """The value of a document ``to_json`` wrote (trusted: it was validated when written)."""
        values = {key: _JSON[key][1](value) if key in _JSON else value for key, value in document.items()}
        return cls(**values)

    def stored(self) -> dict[str, Any]:
        """A version's ``options`` document: ``to_json`` without the ``DIRECTIVES``, which
        registration acts on and no version keeps (changing them makes no new version)."""
        return {key: value for key, value in self.to_json().items() if key not in DIRECTIVES}

    def metadata(self) -> dict:
        """What a client reads from the decorator for ``POST /workflows``: the JSON form,
        ``requests`` and ``affinity`` always present."""
        return {"name": self.name, "requests": None, "affinity": None, **self.to_json()}

    def contention(self) -> dict:
        """The options that decide who gets a contended worker, only those set
        (stored as the workflow's ``contention``; docs/contention.md)."""
        document = self.to_json()
        return {key: document[key] for key in CONTENTION if key in document}


#: The options ``contention()`` groups (the version row's ``contention`` column).
CONTENTION = ("priority", "preemptible", "min_runtime", "concurrency", "max_concurrency")


def names() -> tuple[str, ...]:
    """Every option's name, ``name`` first, in the order of the fields."""
    return tuple(option.name for option in fields(WorkflowOptions))


def _requests(value: Any, owner: str) -> ResourceRequest | None:
    if value is not None and not isinstance(value, (Mapping, ResourceRequest)):
        raise ValueError(f"{owner}: requests must be a ResourceRequest, got {value!r}")
    return request_or_none(value)


def _pending_timeout(value: Any, owner: str) -> float | None:
    if value is not None and (not is_number(value) or value <= 0):
        raise ValueError(f"{owner}: pending_timeout must be a number of seconds > 0, got {value!r}")
    return value


def _preemptible(value: Any, owner: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{owner}: preemptible must be True or False, got {value!r}")
    return value


def _min_runtime(value: Any, owner: str) -> float | None:
    return None if value is None else parse_duration(value, f"{owner}: min_runtime")


def _max_concurrency(value: Any, owner: str) -> int | None:
    return None if value is None else check_limit(value, f"{owner}: max_concurrency")


def _namespace(value: Any, owner: str) -> str | None:
    if value is None:
        return None
    try:
        return check_namespace(value)
    except ValueError as exc:
        raise ValueError(f"{owner}: namespace: {exc}") from None


def _schedule(value: Any, owner: str) -> DeclaredSchedule | None:
    if value is not None and not isinstance(value, DeclaredSchedule):
        raise ValueError(f"{owner}: schedule must be cron(...), interval(...) or once(...), got {value!r}")
    return value


def _gang(value: Any, owner: str) -> Gang | None:
    """A ``Gang``, or its JSON form (a hand-written registration's): its size is checked
    against the server's cap where the server reads it (``flux.server.gang_options``),
    since a server may allow more than ``DEFAULT_MAX_SIZE``."""
    if value is None or isinstance(value, Gang):
        return value
    if not isinstance(value, Mapping):
        raise InvalidGang(f"{owner}: gang must be a Gang(size=..., topology=...), got {value!r}")
    try:
        return gang_from_json(value)
    except InvalidGang as exc:
        raise InvalidGang(f"{owner}: {exc}") from None


def gang_from_json(data: Mapping[str, Any]) -> Gang:
    """A gang from its JSON form with no cap of its own on ``size`` (the cap is the
    server's, checked where the server reads it): a stored document reads back even
    after a server's cap was lowered."""
    size = data.get("size") if isinstance(data, Mapping) else None
    cap = int(size) if is_number(size) and float(size).is_integer() and size > DEFAULT_MAX_SIZE else DEFAULT_MAX_SIZE
    return Gang.from_dict(data, max_size=cap)


#: Each option's check: ``(value, owner) -> the value kept``, raising ``ValueError`` naming it.
_CHECKS: dict[str, Callable[[Any, str], Any]] = {
    "requests": _requests,
    "affinity": normalise_affinity,
    "routing": check_routing,
    "pending_timeout": _pending_timeout,
    "max_attempts": check_max_attempts,
    "timeout": check_timeout,
    "priority": check_priority,
    "preemptible": _preemptible,
    "min_runtime": _min_runtime,
    "concurrency": check_concurrency,
    "max_concurrency": _max_concurrency,
    "namespace": _namespace,
    "schedule": _schedule,
    "gang": _gang,
}

#: The options whose JSON form is not the value itself: (to JSON, from JSON).
_JSON: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    "requests": (ResourceRequest.to_dict, ResourceRequest.from_dict),
    "routing": (RoutingPolicy.to_dict, RoutingPolicy.from_dict),
    "concurrency": (Concurrency.to_json, Concurrency.from_json),
    "schedule": (DeclaredSchedule.request, DeclaredSchedule.from_request),
    "gang": (Gang.to_dict, gang_from_json),
}
