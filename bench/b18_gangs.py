"""B18 gangs (issue 53): a placement round's pure part with 200 waiting gangs of size 8
beside 2,000 single executions, on 1,000 synthetic GPU workers, against the same round
without the gangs.

The fleet is 50 racks of 20 workers (``rack``, and five ``zone`` values across them),
each with 8 GPUs, 64 cores and 4 slots; a third of the workers already hold some cards.
The singles ask a GPU, two, some cores or nothing (four shapes). The gangs are four
kinds of eight members: whole 8-GPU workers in one rack, eight 1-GPU members a worker,
two-GPU members four a worker packed into few zones, and 4-core CPU members. The round
with gangs is ``flux.scheduling.gang_round.GangRound`` placing every gang (the gangs are
the higher priority, so they come first in queue order; those that fit nowhere hold room,
``MAX_HOLDS`` of them), then ``place`` for the singles on the same pool; the round
without is ``place`` for the singles alone. Both place the whole queue (no round budget).
The clock is ``time.process_time`` (CPU: the machine is shared) around the round, on a
fresh copy of the fleet, the collector paused as ``timeit`` pauses it.

    python -m bench.b18_gangs --quick
"""

from __future__ import annotations

import copy
import gc
import random
import statistics
import time
from typing import Callable

from bench.common import Figure, p99
from flux.domain.gang import Gang
from flux.domain.resource_request import ResourceRequest
from flux.domain.resources import Resources
from flux.scheduling import rounds
from flux.scheduling.demand import Demand
from flux.scheduling.gangs import GangDemand
from flux.scheduling.pool import FreePool
from flux.scheduling.snapshot import GPU, WorkerView

GI = 1024**3
AIM_RATIO = 2.0
#: Both rounds place the whole queue (the server's rounds stop at ``rounds.BUDGET``).
NO_BUDGET = 10**9
RACK = 20
SINGLES = (None, ResourceRequest(gpu=1), ResourceRequest(gpu=2, cpu=8), ResourceRequest(cpu=4))
#: (request per member, gang): four kinds of eight members.
GANGS = (
    (ResourceRequest(gpu=8, cpu=32), Gang(size=8, topology="rack")),
    (ResourceRequest(gpu=1), Gang(size=8, topology="rack", per_worker=8)),
    (ResourceRequest(gpu=2), Gang(size=8, topology="rack", prefer="zone", per_worker=4)),
    (ResourceRequest(cpu=4), Gang(size=8, topology="rack", per_worker=2)),
)


def make_fleet(workers: int, rng: random.Random) -> list[WorkerView]:
    fleet = []
    for i in range(workers):
        busy = rng.choice((0, 0, 0, 2, 4, 8)) if i % 3 == 0 else 0
        fleet.append(
            WorkerView(
                name=f"w{i:04d}",
                labels={"rack": f"r{i // RACK:02d}", "zone": f"z{(i // RACK) % 5}"},
                total=Resources(cpu=64.0, memory=512 * GI),
                available=Resources(cpu=64.0 - busy * 4, memory=512 * GI),
                gpus=tuple(GPU(g, f"GPU-{i}-{g}", "H100", 80 * GI, 80 * GI) for g in range(8)),
                gpu_allotted={g: 1 for g in range(busy)},
                max_concurrent_executions=4,
                running=1 if busy else 0,
                registered_seq=i,
                allocation="reserve",
            )
        )
    return fleet


def make_queue(singles: int, gangs: int, rng: random.Random) -> tuple[list[Demand], list[GangDemand]]:
    single = [Demand(f"e{i:05d}", rng.choice(SINGLES), None, scheduled_at=float(i)) for i in range(singles)]
    ganged = []
    for i in range(gangs):
        request, gang = GANGS[i % len(GANGS)]
        ganged.append(GangDemand(Demand(f"g{i:04d}", request, None, priority=100, scheduled_at=float(i)), gang))
    return single, ganged


def with_gangs(singles: list[Demand], gangs: list[GangDemand]) -> Callable[[FreePool], tuple[int, int]]:
    """The server's round (``rounds.run``): one queue, the gangs at their turn in it."""
    page = [gd.demand for gd in gangs] + singles
    shapes = {gd.execution_id: gd.gang for gd in gangs}

    def run(pool: FreePool) -> tuple[int, int]:
        outcome = rounds.run([page], pool, budget=NO_BUDGET, gangs=shapes)
        return len(outcome.gangs), len(outcome.placements)

    return run


def without_gangs(singles: list[Demand]) -> Callable[[FreePool], tuple[int, int]]:
    return lambda pool: (0, len(rounds.run([singles], pool, budget=NO_BUDGET).placements))


def timed(run: Callable[[FreePool], tuple[int, int]], fleet, repeats: int) -> tuple[list[float], tuple[int, int]]:
    times, placed = [], (0, 0)
    for _ in range(repeats):
        pool = FreePool(copy.deepcopy(fleet))
        gc.collect()
        gc.disable()
        started = time.process_time()
        placed = run(pool)
        times.append((time.process_time() - started) * 1000)
        gc.enable()
    return times, placed


def figures(quick: bool) -> list[Figure]:
    repeats = 5 if quick else 21
    rng = random.Random(53)
    fleet = make_fleet(1_000, rng)
    singles, gangs = make_queue(2_000, 200, rng)
    timed(without_gangs(singles), fleet, 1)  # warms the caches (parsed requests, allotments) of each
    timed(with_gangs(singles, gangs), fleet, 1)
    plain, (_, placed_plain) = timed(without_gangs(singles), fleet, repeats)
    ganged, (placed_gangs, placed_singles) = timed(with_gangs(singles, gangs), fleet, repeats)
    name = "B18.gangs.200x8_beside_2000x1000"
    out = [
        Figure.of(
            f"{name}.round_with_gangs_ms",
            ganged,
            "ms cpu",
            with_p99=True,
            note=f"{placed_gangs} gangs and {placed_singles} singles placed; 4 gang kinds, 4 single shapes",
        ),
        Figure.of(f"{name}.round_without_gangs_ms", plain, "ms cpu", with_p99=True, note=f"{placed_plain} placed"),
    ]
    ratio = p99(ganged) / p99(plain) if p99(plain) else float("nan")
    out.append(Figure(f"{name}.p99_ratio", ratio, None, "x", 1, f"<= {AIM_RATIO:g}x", ratio <= AIM_RATIO))
    out.append(Figure(f"{name}.median_ratio", statistics.median(ganged) / statistics.median(plain), None, "x", 1))
    return out


if __name__ == "__main__":
    import sys

    for figure in figures("--quick" in sys.argv):
        print(figure.line())
