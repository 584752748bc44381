"""Concurrency limits by key: at most ``limit`` executions with the same key (in one
namespace) hold a worker at once (pure, no I/O).

An execution holds a worker while CLAIMED, RUNNING or CANCELLING; one that sleeps,
waits on a pause or a child, or is queued holds nothing, so it does not count. The
ledger starts from what holds and counts the round's placements as they are made;
replicas place one at a time, so two never exceed a limit together.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable

from flux.scheduling.demand import Demand
from flux.scheduling.filters.base import Reason
from flux.scheduling.holders import Holder

NAME = "concurrency"
PHRASE = "concurrency limit"


class KeyLedger:
    def __init__(self, holders: Iterable[Holder]):
        self.held: Counter[tuple[str, str]] = Counter()
        for holder in holders:
            for key in holder.keys:
                self.held[(holder.namespace, key)] += 1

    def refusal(self, demand: Demand) -> Reason | None:
        for key, limit in demand.keys:
            holding = self.held[(demand.namespace, key)]
            if holding >= limit:
                return Reason(
                    NAME, PHRASE, f"held by concurrency key {key!r}: at its limit, {holding}/{limit} hold a worker"
                )
        return None

    def take(self, demand: Demand) -> None:
        for key, _ in demand.keys:
            self.held[(demand.namespace, key)] += 1
