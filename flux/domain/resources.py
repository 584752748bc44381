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

from typing import Iterable, Iterator, Mapping, Union

Quantity = Union[int, float]

CPU = "cpu"
MEMORY = "memory"
DISK = "disk"
GPU = "gpu"
#: The dimensions with a fixed meaning; every other name is a custom resource.
WELL_KNOWN = (CPU, MEMORY, DISK, GPU)


class Resources(Mapping[str, Quantity]):
    """An immutable mapping of dimension name to quantity (``Resources(cpu=2, memory=2**30)``)."""

    __slots__ = ("_values", "_hash")

    def __init__(self, values: Mapping[str, Quantity] | Iterable[tuple[str, Quantity]] = (), /, **more: Quantity):
        merged = dict(values)
        merged.update(more)
        self._values = {name: amount for name, amount in merged.items() if amount is not None}
        self._hash: int | None = None

    def __getitem__(self, name: str) -> Quantity:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._values.items()))
        return self._hash

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={amount!r}" for name, amount in sorted(self._values.items()))
        return f"Resources({inner})"

    def amount(self, name: str) -> Quantity:
        """The quantity of ``name``: zero when absent."""
        return self._values.get(name, 0)

    def __add__(self, other: Mapping[str, Quantity]) -> "Resources":
        return Resources({name: self.amount(name) + other.get(name, 0) for name in self._values.keys() | other.keys()})

    def __sub__(self, other: Mapping[str, Quantity]) -> "Resources":
        return Resources({name: self.amount(name) - other.get(name, 0) for name in self._values.keys() | other.keys()})

    def minimum(self, other: Mapping[str, Quantity]) -> "Resources":
        """Element-wise least of the two, over the names both hold."""
        return Resources({name: min(amount, other[name]) for name, amount in self._values.items() if name in other})

    def covers(self, request: Mapping[str, Quantity]) -> bool:
        """Whether every asked dimension is available in at least the asked quantity."""
        return all(self.amount(name) >= wanted for name, wanted in request.items())

    def short_of(self, request: Mapping[str, Quantity]) -> list[str]:
        """The asked dimensions this value holds less of than asked, in the request's order."""
        return [name for name, wanted in request.items() if self.amount(name) < wanted]

    def only(self, names: Iterable[str]) -> "Resources":
        """The part of this value in ``names``."""
        return Resources({name: self._values[name] for name in names if name in self._values})

    def without(self, names: Iterable[str]) -> "Resources":
        """The part of this value outside ``names``."""
        left = set(names)
        return Resources({name: amount for name, amount in self._values.items() if name not in left})

    @property
    def custom(self) -> dict[str, Quantity]:
        """The custom resources: every dimension that is not well known."""
        return {name: amount for name, amount in self._values.items() if name not in WELL_KNOWN}

    def to_dict(self) -> dict[str, Quantity]:
        return dict(self._values)
