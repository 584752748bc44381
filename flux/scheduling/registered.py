"""Eligibility kept across rounds: the verdicts on what a worker registered (pure).

Affinity reads a worker's labels, the package filter its installed packages, the
namespace gate the namespaces it serves: all three change only when the worker
registers again. Checked in every round, against every worker with a free slot for
every set of constraints the round meets, they would be most of its cost (~20 sets
times 1,000 workers a round on a free fleet, B17). ``Registered`` keeps, per set of constraints, each
worker's verdict; it is kept in the ``FreePool`` across rounds and forgotten as a
whole when any worker registers, registers again with other labels, packages or
namespaces, or leaves. A round then checks only what changes between rounds (free
quantities, GPUs, custom resources, slots), and only on the workers that passed.

Verdicts are found lazily: only for the workers with a free slot while they are few
(a full fleet), so the first round after a registration costs no more than a round
did without them; for the whole fleet once most of it is free, after which a set of
constraints costs the workers that pass it, not the fleet.
"""

from __future__ import annotations

from typing import Callable, Hashable

from flux.scheduling.filters import Check, first_bound_failure
from flux.scheduling.ranking import candidate_key
from flux.scheduling.snapshot import WorkerView

#: Sets of constraints remembered at most; past it the oldest is forgotten.
KEPT = 256

#: ``(candidate_key, i, view)``: a worker with a free slot, as placement heaps them.
Entry = tuple


def same_registration(old: WorkerView, new: WorkerView) -> bool:
    """Whether ``new`` passes every static filter exactly as ``old`` did."""
    return (
        (old.labels is new.labels or old.labels == new.labels)
        and (old.packages is new.packages or old.packages == new.packages)
        and old.namespaces == new.namespaces
    )


class _Verdicts:
    """One set of constraints' verdicts, by worker name."""

    def __init__(self, checks: tuple[Check, ...]):
        self.checks = checks
        self.known: dict[str, bool] = {}
        #: Every worker's, once found for the whole fleet: the names that pass, in fleet order.
        self.passed: dict[str, None] | None = None

    def of(self, worker: WorkerView) -> bool:
        if self.passed is not None:
            return worker.name in self.passed
        verdict = self.known.get(worker.name)
        if verdict is None:
            verdict = self.known[worker.name] = first_bound_failure(self.checks, worker) is None
        return verdict

    def complete(self, views: dict[str, WorkerView]) -> dict[str, None]:
        if self.passed is None:
            known, checks = self.known, self.checks
            self.passed = {
                name: None
                for name, worker in views.items()
                if (known[name] if name in known else first_bound_failure(checks, worker) is None)
            }
            self.known = {}
        return self.passed


class Registered:
    def __init__(self) -> None:
        #: Bumped on every change that may change a verdict: what was kept is forgotten.
        self.epoch = 0
        self._verdicts: dict[Hashable, _Verdicts] = {}

    def changed(self) -> None:
        self.epoch += 1
        self._verdicts.clear()

    def _of(self, key: Hashable, checks: tuple[Check, ...]) -> _Verdicts:
        verdicts = self._verdicts.get(key)
        if verdicts is None:
            if len(self._verdicts) >= KEPT:
                del self._verdicts[next(iter(self._verdicts))]
            verdicts = self._verdicts[key] = _Verdicts(checks)
        return verdicts

    def judge(self, key: Hashable, checks: tuple[Check, ...]) -> Callable[[WorkerView], bool]:
        """Whether a worker passes ``checks`` (static ones, bound to the constraints ``key``
        names): asked of many workers in a row, the verdicts are found once."""
        return self._of(key, checks).of

    def free_passing(
        self, key: Hashable, checks: tuple[Check, ...], views: dict[str, WorkerView], free: list[Entry]
    ) -> list[Entry]:
        """Of ``free`` (every ONLINE worker with a free slot, least loaded first), those
        that pass ``checks`` (static ones, bound to the constraints ``key`` names), in
        the same order: from whichever is fewer, the free workers or those that pass."""
        verdicts = self._of(key, checks)
        if verdicts.passed is None and 2 * len(free) < len(views):
            return [entry for entry in free if verdicts.of(entry[2])]
        passed = verdicts.complete(views)
        if len(passed) >= len(free):
            return [entry for entry in free if entry[2].name in passed]
        workers = [views[name] for name in passed]
        entries = [(candidate_key(w), i, w) for i, w in enumerate(workers) if w.free_slots > 0]  # none unless ONLINE
        entries.sort()
        return entries
