"""Quotas: a namespace never holds more than its quota (pure, no I/O).

The ledger starts from what the namespace's executions hold (their allotments,
which carry what their requests declared, in both allocation modes) and counts each
placement of the round as it is made, so one round cannot overshoot either. A
quota's dimension is compared with what the waiting execution asks of it; the GPU
count is the number of cards allotted. Replicas place one at a time (dispatch's
advisory lock) and read what is held in the same transaction, so two replicas
never exceed a quota together.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from flux.domain.quotas import Quota
from flux.domain.resource_request import format_bytes
from flux.domain.resources import BYTES, Resources
from flux.scheduling.demand import Demand
from flux.scheduling.filters.base import Reason
from flux.scheduling.holders import SLOTS, Holder, Holdings

NAME = "quota"
PHRASE = "namespace quota"


def _shown(name: str, amount: float) -> str:
    return format_bytes(int(amount)) if name in BYTES else f"{amount:g}"


class QuotaLedger:
    def __init__(self, quotas: Mapping[str, Quota], holders: Iterable[Holder] | Holdings):
        self.quotas = {namespace: quota for namespace, quota in quotas.items() if quota}
        held = (
            holders if isinstance(holders, Holdings) else Holdings.of(h for h in holders if h.namespace in self.quotas)
        )
        #: What each namespace with a quota holds (plain sums: a round adds to them per placement).
        self.held: dict[str, dict[str, float]] = {}
        self.count: dict[str, int] = {}
        #: Why each namespace at its quota's count of executions waits (found once a round).
        self._full: dict[str, Reason] = {}
        for namespace in self.quotas:
            sums = held.quantities.get(namespace)
            if sums is not None:
                self.held[namespace] = {name: amount for name, amount in sums.items() if name != SLOTS}
                self.count[namespace] = int(sums[SLOTS])

    def __bool__(self) -> bool:
        return bool(self.quotas)

    def _add(self, namespace: str, quantities: Resources) -> None:
        sums = self.held.setdefault(namespace, {})
        for name, amount in quantities.items():
            sums[name] = sums.get(name, 0) + amount
        self.count[namespace] = self.count.get(namespace, 0) + 1

    def refusal(self, demand: Demand) -> Reason | None:
        """Why placing ``demand`` now would take its namespace over its quota, or None."""
        quota = self.quotas.get(demand.namespace)
        if quota is None:
            return None
        full = self._full.get(demand.namespace)
        if full is not None:  # what a namespace holds only grows in a round: it stays at its count
            return full
        count = self.count.get(demand.namespace, 0)
        if quota.executions is not None and count + 1 > quota.executions:
            self._full[demand.namespace] = full = Reason(
                NAME,
                PHRASE,
                f"held by namespace {demand.namespace}'s quota: executions {count}/{quota.executions} hold a worker",
            )
            return full
        asked = demand.request.quantities if demand.request is not None else Resources()
        held = self.held.get(demand.namespace, {})
        for name, limit in quota.limits.items():
            wanted = asked.get(name, 0)
            if wanted and held.get(name, 0) + wanted > limit:
                return Reason(
                    NAME,
                    PHRASE,
                    f"held by namespace {demand.namespace}'s quota: {name} {_shown(name, held.get(name, 0))}"
                    f"/{_shown(name, limit)} in use, this asks {_shown(name, wanted)} more",
                )
        return None

    def take(self, demand: Demand, quantities: Resources) -> None:
        """A placement of the round counts against its namespace's quota."""
        if demand.namespace in self.quotas:
            self._add(demand.namespace, quantities)
