"""Priorities: how important an execution is, by number or by a named class.

As a Kubernetes PriorityClass: a class is a name for an integer (higher is more
important) and says whether work of that class may preempt lower-priority work
(``Preemption.LOWER``, the default) or only waits (``Preemption.NEVER``). A workflow or a
run names a class or gives the integer itself; the server resolves it at submission
against its classes (``flux start server --priority-class NAME=VALUE[:never]``) and
stores the integer on the execution, so changing a class later never reorders work
already queued.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Iterable, Mapping

from flux.domain.names import check_name

#: Priorities are integers in this range (a Kubernetes PriorityClass's is about +-1e9 too).
MIN_PRIORITY, MAX_PRIORITY = -1_000_000_000, 1_000_000_000
#: What an execution gets when neither its run nor its workflow names a priority.
DEFAULT_CLASS = "default"


class Preemption(StrEnum):
    """What a waiting execution of a class may do to running lower-priority work."""

    #: Preempt it (Kubernetes' ``PreemptLowerPriority``).
    LOWER = "lower"
    #: Never preempt: wait for room like anything else, still ahead of lower priorities.
    NEVER = "never"


@dataclass(frozen=True)
class PriorityClass:
    name: str
    value: int
    preemption: Preemption = Preemption.LOWER

    def __str__(self) -> str:
        suffix = ":never" if self.preemption is Preemption.NEVER else ""
        return f"{self.name}={self.value}{suffix}"


#: The server's classes unless ``--priority-class`` changes them.
DEFAULT_CLASSES = (
    PriorityClass("critical", 1000),
    PriorityClass("high", 100),
    PriorityClass(DEFAULT_CLASS, 0),
    PriorityClass("low", -100),
    PriorityClass("batch", -1000),
)


def _check_value(value: object, owner: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not MIN_PRIORITY <= value <= MAX_PRIORITY:
        raise ValueError(
            f"{owner}: priority must be a class name or an int from {MIN_PRIORITY} to {MAX_PRIORITY}, got {value!r}"
        )
    return value


def check_priority(value: object, owner: str) -> int | str | None:
    """``None``, an int in range, or a class name (resolved by the server): ``ValueError`` names the owner."""
    if value is None or isinstance(value, int) and not isinstance(value, bool):
        return None if value is None else _check_value(value, owner)
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("+-").isdigit():
            return _check_value(int(text), owner)
        try:
            return check_name(text, "priority class")
        except ValueError as exc:
            raise ValueError(f"{owner}: {exc}") from None
    raise ValueError(f"{owner}: priority must be a class name or an int, got {value!r}")


def parse_class(text: str) -> PriorityClass:
    """``NAME=VALUE``, ``NAME=VALUE:never`` or ``NAME=VALUE,preemption=never`` (``--priority-class``);
    ``ValueError`` says what is wrong."""
    name, sep, rest = text.partition("=")
    value, _, policy = rest.replace(",preemption=", ":").partition(":")
    if not sep or not value.strip():
        raise ValueError(f"priority class {text!r}: expected NAME=VALUE or NAME=VALUE:never")
    owner = f"priority class {name.strip()!r}"
    check_name(name.strip(), "priority class")
    try:
        number = int(value.strip())
    except ValueError:
        raise ValueError(f"{owner}: {value.strip()!r} is not an integer") from None
    try:
        preemption = Preemption(policy.strip() or Preemption.LOWER)
    except ValueError:
        raise ValueError(f"{owner}: preemption must be 'never' (or left out), got {policy!r}") from None
    return PriorityClass(name.strip(), _check_value(number, owner), preemption)


@dataclass(frozen=True)
class Resolved:
    """A priority as the server stores it on an execution."""

    value: int
    #: The class it was given by, or whose value it equals; ``None`` for an unnamed integer.
    name: str | None
    preemption: Preemption


class UnknownPriorityClass(ValueError):
    pass


class PriorityClasses:
    """The server's classes, by name; later definitions of a name replace earlier ones."""

    def __init__(self, classes: Iterable[PriorityClass] = DEFAULT_CLASSES):
        self.by_name: Mapping[str, PriorityClass] = {c.name: c for c in classes}
        self._by_value = {c.value: c for c in reversed(list(self.by_name.values()))}

    def with_overrides(self, extra: Iterable[PriorityClass]) -> "PriorityClasses":
        return PriorityClasses([*self.by_name.values(), *extra])

    def resolve(self, priority: int | str | None) -> Resolved:
        """The stored form of a run's or workflow's priority; ``None`` is the default class."""
        if priority is None:
            priority = DEFAULT_CLASS if DEFAULT_CLASS in self.by_name else 0
        if isinstance(priority, str) and not priority.lstrip("+-").isdigit():
            found = self.by_name.get(priority)
            if found is None:
                known = ", ".join(
                    f"{c.name} ({c.value})" for c in sorted(self.by_name.values(), key=lambda c: -c.value)
                )
                raise UnknownPriorityClass(f"unknown priority class {priority!r}; the server's classes are {known}")
            return Resolved(found.value, found.name, found.preemption)
        value = int(priority)
        named = self._by_value.get(value)
        return Resolved(value, named.name if named else None, named.preemption if named else Preemption.LOWER)
