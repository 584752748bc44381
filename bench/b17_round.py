"""B17 (issue 34) placement cost: a dispatch round's pure part under contention.

10,000 waiting executions across 100 namespaces and 5 priorities (B5's ~20 constraint
signatures) on 1,000 synthetic workers (B5's fleet), whose running executions are
holders spread over the namespaces and priorities; a fifth of the namespaces have a
quota and some a weight of 2. A round is what ``Dispatcher._place`` does after its
reads: the queue in pages of ``ROUND_SIZE`` as ``_pending`` pages it (highest priority
first, each namespace's n-th with the others' n-th), ``order`` with fair share, then
``place`` with a ``Contention`` (quotas, preemption), page after page while slots
remain. The baseline is the same round without priorities or quotas: one priority,
submission order, ``place(..., contention=None)``. The clock is ``time.process_time``
(CPU: the machine is shared) around the round, on a fresh copy of the fleet; the
ledgers and the fair share are built inside it, as the server builds them each round.
"""

from __future__ import annotations

import copy
import dataclasses
import random
import time
from collections import Counter
from typing import Callable

from bench import b5_matching
from bench.common import Figure, p99
from flux.domain.allotment import Allotment
from flux.domain.quotas import Quota
from flux.domain.resources import Resources
from flux.scheduling.contention import Contention
from flux.scheduling.demand import Demand
from flux.scheduling.fairshare import FairShare, capacity_of
from flux.scheduling.holders import Holder
from flux.scheduling.ordering import order
from flux.scheduling.placement import place
from flux.scheduling.pool import FreePool
from flux.scheduling.quotas import QuotaLedger
from flux.server.queue import PAGE_SIZE as ROUND_SIZE

PRIORITIES = (1000, 100, 0, -100, -1000)
AIM_MS, AIM_RATIO = 50.0, 2.0


def scenario(demands: int, workers: int, namespaces: int, full: bool, seed: int = 17):
    """``full``: every slot but one on every 20th worker is held (the queue waits because the
    fleet is full, as it does when contended); else B5's fleet (1.25x the queue's slots, a
    quarter of them held at most)."""
    rng = random.Random(seed)
    fleet = b5_matching.make_fleet(workers, demands, random.Random(workers))
    if full:
        for i, worker in enumerate(fleet):
            worker.running = worker.max_concurrent_executions - (i % 20 == 0)
    names = [f"ns{i:03d}" for i in range(namespaces)]
    queue = [
        dataclasses.replace(d, namespace=rng.choice(names), priority=rng.choice(PRIORITIES), scheduled_at=float(i))
        for i, d in enumerate(b5_matching.make_demands(demands, rng))
    ]
    holders = [
        Holder(f"h{w.name}-{n}", w.name, rng.choice(names), rng.choice(PRIORITIES),
               allotment=Allotment(Resources(cpu=1.0)), claimed_at=float(n))
        for w in fleet for n in range(w.running)
    ]
    quotas = {name: Quota(Resources(cpu=64.0, memory=256 * b5_matching.GI), executions=60) for name in names[::5]}
    weights = {name: 2.0 for name in names[::7]}
    return fleet, queue, holders, quotas, weights


def pages(queue: list[Demand]) -> list[list[Demand]]:
    """The queue as ``Dispatcher._pending`` pages it."""
    rank: Counter[tuple[str, int]] = Counter()
    ranked = []
    for d in sorted(queue, key=lambda d: d.scheduled_at):
        rank[(d.namespace, d.priority)] += 1
        ranked.append((-d.priority, rank[(d.namespace, d.priority)], d.scheduled_at, d))
    ranked.sort(key=lambda r: r[:3])
    return [sorted((r[3] for r in ranked[i:i + ROUND_SIZE]), key=lambda d: (-d.priority, d.scheduled_at))
            for i in range(0, len(ranked), ROUND_SIZE)]


def contended_round(fleet, queue, holders, quotas, weights, rooms: bool = True) -> Callable[[FreePool], int]:
    """``rooms=False``: the floor is the top priority, so nothing looks for room (to show what that search costs)."""
    split = pages(queue)

    def run(pool: FreePool) -> int:
        floor = min([h.priority for h in holders] + [d.priority for d in queue]) if rooms else max(PRIORITIES)
        contention = Contention(holders, QuotaLedger(quotas, holders), floor)
        online = list(pool.views.values())
        fair = FairShare(capacity_of((w.total for w in online), sum(w.max_concurrent_executions for w in online)), weights, holders)
        placed = 0
        for page in split:
            placed += len(place(order(page, fair), pool, contention))
            if len(page) < ROUND_SIZE or pool.best() is None:
                break
        return placed

    return run


def plain_round(queue) -> Callable[[FreePool], int]:
    flat = sorted((dataclasses.replace(d, priority=0) for d in queue), key=lambda d: d.scheduled_at)
    split = [flat[i:i + ROUND_SIZE] for i in range(0, len(flat), ROUND_SIZE)]

    def run(pool: FreePool) -> int:
        placed = 0
        for page in split:
            placed += len(place(page, pool))
            if len(page) < ROUND_SIZE or pool.best() is None:
                break
        return placed

    return run


def timed(run: Callable[[FreePool], int], fleet, repeats: int) -> tuple[list[float], int]:
    times, placed = [], 0
    for _ in range(repeats):
        pool = FreePool(copy.deepcopy(fleet))
        started = time.process_time()
        placed = run(pool)
        times.append((time.process_time() - started) * 1000)
    return times, placed


def figures(quick: bool) -> list[Figure]:
    demands, workers, repeats = (2_000, 200, 3) if quick else (10_000, 1_000, 7)
    return [figure for full in (False, True) for figure in _figures(demands, workers, repeats, full)]


def _figures(demands: int, workers: int, repeats: int, full: bool) -> list[Figure]:
    fleet, queue, holders, quotas, weights = scenario(demands, workers, namespaces=100, full=full)
    timed(plain_round(queue), fleet, 1)  # warms the parse caches
    contended, placed_c = timed(contended_round(fleet, queue, holders, quotas, weights), fleet, repeats)
    no_rooms, _ = timed(contended_round(fleet, queue, holders, quotas, weights, rooms=False), fleet, repeats)
    plain, placed_p = timed(plain_round(queue), fleet, repeats)
    name = f"B17.round.{demands}x{workers}.{'full_fleet' if full else 'free_fleet'}"
    out = [
        Figure.of(f"{name}.contended_ms", contended, "ms cpu", with_p99=True, aim=f"p99 <= {AIM_MS:g} ms",
                  check=lambda m, h: p99(contended) <= AIM_MS,
                  note=f"{placed_c} placed; 100 namespaces, 5 priorities, {len(quotas)} quotas, {len(holders)} holders"),
        Figure.of(f"{name}.contended_without_rooms_ms", no_rooms, "ms cpu", with_p99=True,
                  note="the same, but nothing looks for room (no preemption search): what the rest costs"),
        Figure.of(f"{name}.plain_ms", plain, "ms cpu", with_p99=True, note=f"{placed_p} placed; one priority, no contention"),
    ]
    ratio = out[0].p99 / out[2].p99 if out[2].p99 else float("nan")
    out.append(Figure(f"{name}.p99_ratio", ratio, None, "x", 1, f"<= {AIM_RATIO:g}x", ratio <= AIM_RATIO))
    return out


if __name__ == "__main__":
    import sys

    for figure in figures("--quick" in sys.argv):
        print(figure.line())
