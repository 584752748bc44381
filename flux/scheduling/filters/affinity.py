"""Label affinity: checked first, because a dict lookup is the cheapest way to rule a worker out."""

from __future__ import annotations

from typing import Any, Mapping

from flux.domain.affinity import label_mismatch
from flux.domain.resource_request import ResourceRequest
from flux.scheduling.filters.base import Check, Filter, Reason


class Affinity(Filter):
    name = "affinity"
    phrase = "didn't match affinity"
    static = True

    def applies(self, request: ResourceRequest | None, affinity: Mapping[str, Any] | None) -> bool:
        return bool(affinity)

    def bind(self, request: ResourceRequest | None, affinity: Mapping[str, Any] | None) -> Check:
        return lambda worker: check_affinity(affinity, worker.labels)


AFFINITY = Affinity()


def check_affinity(affinity: Mapping[str, Any] | None, labels: Mapping[str, str]) -> Reason | None:
    """The first affinity entry the worker's labels fail, or ``None`` when all hold.

    ``affinity`` is the JSON form (``flux.domain.affinity``): a string value means the
    label must equal it (as strings); an operator dict (``{"op": "In", "values": [...]}``,
    ``Exists``, ``Gt``...) or operator object applies that operator. Entries are
    checked in the mapping's order. Messages carry the values, e.g.
    ``label cuda=11, wanted > 12``.
    """
    for key, wanted in (affinity or {}).items():
        if isinstance(wanted, str):
            # Equality, the common case, inline: a dict lookup and a compare.
            label = labels.get(key)
            if label is not None and (label == wanted or str(label) == wanted):
                continue
        message = label_mismatch(key, wanted, labels)
        if message is not None:
            return AFFINITY.reason(message)
    return None
