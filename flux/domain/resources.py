"""Resources as data: one namespace of dimension name -> quantity.

What a worker has, what is left of it, what a request asks for and what an
allotment holds are all one kind of value, as Ray's resource dicts and the
Kubernetes ResourceList are: a mapping from a dimension's name to a quantity. The
well-known dimensions have fixed names and units (``cpu`` in cores, ``memory`` and
``disk`` in bytes, ``gpu`` in cards); any other name is a custom resource counted
in the user's own unit. A dimension absent from a value is zero of it.

The value is immutable and hashable, so views and allotments can share it; the
arithmetic is element-wise over the union of names.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Union

Quantity = Union[int, float]

CPU = "cpu"
MEMORY = "memory"
DISK = "disk"
GPU = "gpu"
#: The dimensions with a fixed meaning; every other name is a custom resource.
WELL_KNOWN = (CPU, MEMORY, DISK, GPU)
#: The well-known dimensions counted in bytes.
BYTES = frozenset((MEMORY, DISK))


_new, _init, _update = dict.__new__, dict.__init__, dict.update


def _immutable(self: "Resources", *args: object, **kwargs: object) -> None:
    raise TypeError("Resources is immutable: build a new value (+, -, updated, only, without)")


class Resources(dict[str, Quantity]):
    """An immutable mapping of dimension name to quantity (``Resources(cpu=2, memory=2**30)``).

    A ``dict`` whose changing methods refuse: reading it (``[name]``, ``get``, ``in``,
    iteration) costs what a dict's does, which dispatch's per-worker checks need, and
    it is JSON as it is."""

    __slots__ = ()

    def __init__(self, values: Mapping[str, Quantity] | Iterable[tuple[str, Quantity]] = (), /, **more: Quantity):
        merged = dict(values)
        merged.update(more)
        _init(self, {name: amount for name, amount in merged.items() if amount is not None})

    @classmethod
    def _of(cls, values: Mapping[str, Quantity]) -> "Resources":
        """``values`` as they are (no None to drop): for the arithmetic here."""
        made = _new(cls)
        _init(made, values)
        return made

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _immutable  # type: ignore[assignment]

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(self.items()))

    def __reduce__(self) -> tuple:
        return (Resources, (dict(self),))

    def __copy__(self) -> "Resources":
        return self

    def __deepcopy__(self, memo: dict) -> "Resources":
        return self

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={amount!r}" for name, amount in sorted(self.items()))
        return f"Resources({inner})"

    def amount(self, name: str) -> Quantity:
        """The quantity of ``name``: zero when absent (``get(name, 0)``)."""
        return self.get(name, 0)

    def __add__(self, other: Mapping[str, Quantity]) -> "Resources":  # type: ignore[override]
        return Resources._of({name: self.get(name, 0) + other.get(name, 0) for name in self.keys() | other.keys()})

    def __sub__(self, other: Mapping[str, Quantity]) -> "Resources":
        return Resources._of({name: self.get(name, 0) - other.get(name, 0) for name in self.keys() | other.keys()})

    def updated(self, changes: Mapping[str, Quantity]) -> "Resources":
        """This value with the dimensions of ``changes`` set to their quantities there."""
        if not changes:
            return self
        made = _new(Resources)
        _init(made, self)
        _update(made, changes)
        return made

    def covers(self, request: Mapping[str, Quantity]) -> bool:
        """Whether every asked dimension is available in at least the asked quantity."""
        return all(self.get(name, 0) >= wanted for name, wanted in request.items())

    def without(self, names: Iterable[str]) -> "Resources":
        """The part of this value outside ``names``."""
        left = set(names)
        return Resources._of({name: amount for name, amount in self.items() if name not in left})

    @property
    def custom(self) -> dict[str, Quantity]:
        """The custom resources: every dimension that is not well known."""
        return {name: amount for name, amount in self.items() if name not in WELL_KNOWN}

    def to_dict(self) -> dict[str, Quantity]:
        return dict(self)
