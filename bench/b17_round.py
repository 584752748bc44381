"""B17 (issue 34) placement cost: a dispatch round's pure part under contention.

10,000 waiting executions across 100 namespaces and 5 priorities (B5's ~20 constraint
signatures) on 1,000 synthetic workers (B5's fleet), whose running executions are
holders spread over the namespaces and priorities; a fifth of the namespaces have a
quota and some a weight of 2. A round is what the server's dispatch round runs after
its reads (the holders grouped by worker as the snapshot reads them): the queue in pages
as ``flux.server.queue.page`` reads them (highest
priority first, then oldest; a full first page adds the 10 oldest of each waiting
namespace it misses), the ledgers as ``Dispatcher._ledgers`` builds them (what each
namespace holds summed once, the quota ledger, fair share), then
``flux.scheduling.rounds.run``: ``order`` with fair share and ``place`` with a
``Contention`` page after page while slots remain, ``rounds.BUDGET`` placements at
most (the next round starts at once). The baseline is the same round without
priorities or quotas: one priority, submission order, ``contention=None``, the same
budget. The contended round is the server's as issue 52 made it: fair share adds each
namespace's past usage decayed to the round's clock with the default half life of 1 h
(``usage.past_shares`` into ``FairShare.past``, as the dispatcher does each round), and victims are chosen by cost
(``Costs``: the work each loses since its last checkpoint, ``min_runtime``, the
cooldown), the holders carrying those. The clock is ``time.process_time`` (CPU: the machine is shared) around the
round, on a fresh copy of the fleet with the static verdicts the previous round left
in the server's pool (``flux.scheduling.registered``; ``contended_first`` is the round
after a registration, without them), the collector paused as ``timeit`` pauses it.
``--whole-queue`` lifts the budget (one round
places everything it can, as before rounds had one).
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import random
import statistics
import time
from typing import Callable

from bench import b5_matching
from bench.common import Figure, p99
from flux.domain.allotment import Allotment
from flux.domain.quotas import Quota
from flux.domain.resources import Resources
from flux.scheduling import rounds
from flux.scheduling.contention import Contention
from flux.scheduling.demand import Demand
from flux.scheduling.fairshare import FairShare
from flux.scheduling.holders import Holder, Holdings
from flux.scheduling.pool import FreePool
from flux.scheduling.preemption import Costs
from flux.scheduling.quotas import QuotaLedger
from flux.server import usage
from flux.server.queue import HEADS, MAX_MISSING, PAGE_SIZE

PRIORITIES = (1000, 100, 0, -100, -1000)
#: The namespaces' accrued usage of the last ``scenario``: (decayed dominant usage, when it was
#: accrued), what the dispatcher keeps between rounds (``Dispatcher._usage``).
past: dict[str, tuple[float, float]] = {}
#: ``--fair-share-half-life`` (the server's default, 1 h): each round decays ``past`` with it.
HALF_LIFE = 3600.0
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
    costs = random.Random(seed + 1)  # what issue 52 added, drawn apart: the rest is the scenario it was
    holders = [
        Holder(
            f"h{w.name}-{n}",
            w.name,
            rng.choice(names),
            rng.choice(PRIORITIES),
            allotment=Allotment(Resources(cpu=1.0)),
            claimed_at=float(n),
            progress_at=costs.choice((0.0, float(n) + costs.random())),  # a completed task, or none yet
            min_runtime=costs.choice((0.0, 0.0, 0.0, 600.0)),
            preempted_at=costs.choice((None, None, None, float(n))),
        )
        for w in fleet
        for n in range(w.running)
    ]
    quotas = {name: Quota(Resources(cpu=64.0, memory=256 * b5_matching.GI), executions=60) for name in names[::5]}
    weights = {name: 2.0 for name in names[::7]}
    #: each namespace's dominant usage as last accrued (every 5 s: up to 5 s before the round's clock)
    past.clear()
    past.update({name: (costs.random() * 0.05, len(holders) - 5 * costs.random()) for name in names})
    return fleet, queue, holders, quotas, weights


def pages(queue: list[Demand]) -> list[list[Demand]]:
    """The queue as ``flux.server.queue.page`` reads it, page after page."""
    ranked = sorted(queue, key=lambda d: (-d.priority, d.scheduled_at, d.execution_id))
    split = [ranked[i : i + PAGE_SIZE] for i in range(0, len(ranked), PAGE_SIZE)]
    if len(split[0]) == PAGE_SIZE:  # a full first page: the heads of the groups it misses
        lowest, present = split[0][-1].priority, {(d.priority, d.namespace) for d in split[0]}
        groups: dict[tuple[int, str], list[Demand]] = {}
        for d in ranked:
            if d.priority >= lowest and (d.priority, d.namespace) not in present:
                groups.setdefault((d.priority, d.namespace), []).append(d)
        missing = sorted(groups, key=lambda g: (-g[0], g[1]))[:MAX_MISSING]
        split[0] = split[0] + [d for g in missing for d in groups[g][:HEADS]]
    seen: set[str] = set()
    out = []
    for page in split:
        fresh = [d for d in page if d.execution_id not in seen]
        seen.update(d.execution_id for d in fresh)
        out.append(sorted(fresh, key=lambda d: (-d.priority, d.scheduled_at, d.execution_id)))
    return out


def contended_round(
    fleet, queue, holders, quotas, weights, rooms: bool = True, budget: int = rounds.BUDGET
) -> Callable[[FreePool], int]:
    """``rooms=False``: the floor is the top priority, so nothing looks for room (to show what that search costs)."""
    split = pages(queue)

    # the server's snapshot keeps what each namespace holds across rounds and adds what a
    # round's reads found new: the last round's placements (``budget`` holders) are added here
    kept, new = holders[:-budget], holders[-budget:]
    grouped: dict[str, list[Holder]] = {}
    for holder in holders:  # as the snapshot groups them while it reads them
        grouped.setdefault(holder.worker, []).append(holder)
    ready: list[Holdings] = []
    lowest = min(d.priority for d in queue)  # the server reads it from its index (queue.lowest_waiting)

    def setup() -> None:
        ready.append(Holdings.of(kept))

    def run(pool: FreePool) -> int:
        held = ready.pop()
        held.update(new)
        floor = min(lowest, held.lowest) if rooms else max(PRIORITIES)
        now = float(len(holders))  # the clock: a cooldown and min_runtime protect some
        contention = Contention(holders, QuotaLedger(quotas, held), floor, grouped=grouped, costs=Costs(now, 300.0))
        shares = usage.past_shares(past, now, HALF_LIFE)  # decayed to now, as ``Dispatcher._contention`` does
        fair = FairShare(pool.capacity(), weights, held, shares)  # the server's pool keeps the sum across rounds
        return len(rounds.run(split, pool, contention, fair, budget).placements)

    run.setup = setup  # type: ignore[attr-defined]
    return run


def plain_round(queue, budget: int = rounds.BUDGET) -> Callable[[FreePool], int]:
    flat = sorted((dataclasses.replace(d, priority=0) for d in queue), key=lambda d: d.scheduled_at)
    split = [flat[i : i + PAGE_SIZE] for i in range(0, len(flat), PAGE_SIZE)]

    def run(pool: FreePool) -> int:
        return len(rounds.run(split, pool, budget=budget).placements)

    return run


def fair_round(queue, holders, weights, budget: int = rounds.BUDGET) -> Callable[[FreePool], int]:
    """The plain round with fair share between the namespaces (one priority, no quota,
    no room search): what priorities and quotas add is the difference to the contended one."""
    flat = sorted((dataclasses.replace(d, priority=0) for d in queue), key=lambda d: d.scheduled_at)
    split = [flat[i : i + PAGE_SIZE] for i in range(0, len(flat), PAGE_SIZE)]
    held = Holdings.of(holders)  # kept by the server's snapshot across rounds

    def run(pool: FreePool) -> int:
        fair = FairShare(pool.capacity(), weights, held)
        return len(rounds.run(split, pool, None, fair, budget).placements)

    return run


def warm_pool(run: Callable[[FreePool], int], fleet) -> FreePool:
    """A pool after one round: what it keeps for the next round while no worker registers
    (the static verdicts, ``flux.scheduling.registered``, and the fleet's capacity)."""
    pool = FreePool(copy.deepcopy(fleet))
    getattr(run, "setup", lambda: None)()
    run(pool)
    return pool


def timed(run: Callable[[FreePool], int], fleet, repeats: int, kept: FreePool | None = None) -> tuple[list[float], int]:
    """``kept``: the pool starts with what that one kept (a steady round); None: with
    nothing (the first round after a worker registered)."""
    times, placed = [], 0
    for _ in range(repeats):
        pool = FreePool(copy.deepcopy(fleet))
        if kept is not None:
            pool.registered = copy.deepcopy(kept.registered)
            pool._capacity = kept._capacity  # valid: the same fleet (the same totals version)
            assert pool._totals_version == kept._totals_version
        getattr(run, "setup", lambda: None)()
        gc.collect()
        gc.disable()  # as timeit does: the bench's copies of fleets are not the server's heap
        started = time.process_time()
        placed = run(pool)
        times.append((time.process_time() - started) * 1000)
        gc.enable()
    return times, placed


def figures(quick: bool, budget: int = rounds.BUDGET) -> list[Figure]:
    demands, workers, repeats = (2_000, 200, 3) if quick else (10_000, 1_000, 7)
    return [figure for full in (False, True) for figure in _figures(demands, workers, repeats, full, budget)]


def _figures(demands: int, workers: int, repeats: int, full: bool, budget: int) -> list[Figure]:
    fleet, queue, holders, quotas, weights = scenario(demands, workers, namespaces=100, full=full)
    timed(plain_round(queue, budget), fleet, 1)  # warms the parse caches
    contended_run = contended_round(fleet, queue, holders, quotas, weights, budget=budget)
    kept = warm_pool(contended_run, fleet)
    contended, placed_c = timed(contended_run, fleet, repeats, kept)
    cold, _ = timed(contended_run, fleet, repeats)
    no_rooms, _ = timed(
        contended_round(fleet, queue, holders, quotas, weights, rooms=False, budget=budget), fleet, repeats, kept
    )
    plain_run = plain_round(queue, budget)
    plain, placed_p = timed(plain_run, fleet, repeats, warm_pool(plain_run, fleet))
    fair_run = fair_round(queue, holders, weights, budget)
    fair, _ = timed(fair_run, fleet, repeats, warm_pool(fair_run, fleet))
    name = f"B17.round.{demands}x{workers}.{'full_fleet' if full else 'free_fleet'}"
    out = [
        Figure.of(
            f"{name}.contended_ms",
            contended,
            "ms cpu",
            with_p99=True,
            aim=f"p99 <= {AIM_MS:g} ms",
            check=lambda m, h: p99(contended) <= AIM_MS,
            note=f"{placed_c} placed; 100 namespaces, 5 priorities, {len(quotas)} quotas, {len(holders)} holders",
        ),
        Figure.of(
            f"{name}.contended_without_rooms_ms",
            no_rooms,
            "ms cpu",
            with_p99=True,
            note="the same, but nothing looks for room (no preemption search): what the rest costs",
        ),
        Figure.of(
            f"{name}.plain_ms", plain, "ms cpu", with_p99=True, note=f"{placed_p} placed; one priority, no contention"
        ),
        Figure.of(
            f"{name}.contended_first_ms",
            cold,
            "ms cpu",
            with_p99=True,
            note="the contended round right after a worker registered: no static verdict kept",
        ),
        Figure.of(
            f"{name}.plain_fair_share_ms",
            fair,
            "ms cpu",
            with_p99=True,
            note="the plain round with fair share between the namespaces (one priority, no quota)",
        ),
    ]
    ratio = out[0].p99 / out[2].p99 if out[2].p99 else float("nan")
    out.append(Figure(f"{name}.p99_ratio", ratio, None, "x", 1, f"<= {AIM_RATIO:g}x", ratio <= AIM_RATIO))
    out.append(Figure(f"{name}.median_ratio", statistics.median(contended) / statistics.median(plain), None, "x", 1))
    out.append(
        Figure(f"{name}.p99_ratio_to_fair_share", out[0].p99 / out[4].p99 if out[4].p99 else float("nan"), None, "x", 1)
    )
    return out


if __name__ == "__main__":
    import sys

    for figure in figures("--quick" in sys.argv, budget=10**9 if "--whole-queue" in sys.argv else rounds.BUDGET):
        print(figure.line())
