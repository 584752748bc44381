"""B5 matching at scale: the pure placement core with 10, 100 and 1000 workers.

``flux.scheduling.placement.place`` is given 10,000 queued demands (about 20 distinct
constraint signatures, a fifth of them unconstrained) and a fleet of ``WorkerView``s
with varied cpu, memory, disk, GPUs, packages and labels. Fleet capacity is set to
1.25x the queue (slots per worker = ceil(1.25 * demands / workers)) so that every
fleet size places the whole satisfiable part of the queue, and the per-claim cost
compares like with like. Demands are built before the clock starts (the dispatcher's
``demand_from_row`` parse is cached by request text anyway); the clock is
``time.process_time`` around one ``place`` call, on a fresh copy of the fleet.
"""

from __future__ import annotations

import copy
import math
import random
import time

from bench.common import Figure
from flux.domain.resource_request import ResourceRequest
from flux.domain.resources import Resources
from flux.scheduling.demand import Demand
from flux.scheduling.placement import place
from flux.scheduling.snapshot import GPU, WorkerView

GI = 1024**3
REGIONS = ("us-east-1", "us-west-2", "eu-west-1")
TIERS = ("cpu", "highmem", "gpu")
ZONES = ("a", "b", "c")

#: (weight, requests, affinity): ~20 signatures, from unconstrained to narrow.
SIGNATURES: list[tuple[int, dict | None, dict | None]] = [
    (20, None, None),
    (6, {"cpu": 1}, None),
    (6, {"cpu": 4}, None),
    (5, {"cpu": 8, "memory": "16Gi"}, None),
    (4, {"memory": "64Gi"}, {"tier": "highmem"}),
    (5, None, {"region": "us-east-1"}),
    (4, None, {"region": "eu-west-1", "zone": "b"}),
    (4, {"cpu": 2, "memory": "4Gi"}, {"region": "us-west-2"}),
    (5, {"gpu": 1}, {"tier": "gpu"}),
    (3, {"gpu": 4, "memory": "128Gi"}, {"tier": "gpu"}),
    (4, {"packages": ["numpy>=1.20"]}, None),
    (4, {"packages": ["torch>=2.0"], "gpu": 1}, None),
    (3, {"packages": ["pandas>=2,<3", "numpy>=1.24"]}, {"region": "us-east-1"}),
    (4, {"disk": "100Gi"}, None),
    (3, {"disk": "500Gi", "cpu": 16}, None),
    (3, {"cpu": "500m", "memory": "512Mi"}, {"zone": "c"}),
    (3, {"cpu": 32, "memory": "200Gi"}, {"tier": "highmem", "region": "eu-west-1"}),
    (3, {"gpu": 8}, {"tier": "gpu", "region": "us-west-2"}),
    (2, {"packages": ["scipy>=1.11"]}, {"zone": "a"}),
    (2, {"cpu": 2}, {"team": "research"}),  # no worker has this label: never placed
]

PACKAGE_SETS = (
    {"numpy": "1.26.4", "pandas": "2.2.1"},
    {"numpy": "1.19.5"},
    {"numpy": "1.26.4", "torch": "2.1.0", "scipy": "1.11.4"},
    {"torch": "1.13.1", "numpy": "1.24.0"},
    {},
)


def make_fleet(n: int, demands: int, rng: random.Random) -> list[WorkerView]:
    slots = math.ceil(1.25 * demands / n)
    fleet = []
    for i in range(n):
        tier = TIERS[i % 3] if n >= 3 else rng.choice(TIERS)
        cpu_total = float(rng.choice((2, 4, 8, 16, 32, 64)))
        memory_total = rng.choice((4, 16, 64, 128, 256, 512)) * GI
        disk_total = rng.choice((50, 200, 1000)) * GI
        gpus = ()
        if tier == "gpu":
            gpus = tuple(
                GPU(g, f"GPU-{i}-{g}", "H100", 80 * GI, rng.choice((0, 40, 80)) * GI)
                for g in range(rng.choice((1, 2, 4, 8)))
            )
        fleet.append(
            WorkerView(
                name=f"w{i:04d}",
                labels={"region": REGIONS[i % 3], "zone": ZONES[(i // 3) % 3], "tier": tier},
                total=Resources(cpu=cpu_total, memory=memory_total, disk=disk_total),
                available=Resources(
                    cpu=cpu_total * rng.uniform(0.3, 1.0),
                    memory=int(memory_total * rng.uniform(0.3, 1.0)),
                    disk=int(disk_total * rng.uniform(0.2, 1.0)),
                ),
                gpus=gpus,
                packages=dict(PACKAGE_SETS[i % len(PACKAGE_SETS)]),
                max_concurrent_executions=slots,
                running=rng.randint(0, slots // 4),
                registered_seq=i,
            )
        )
    return fleet


def make_demands(count: int, rng: random.Random) -> list[Demand]:
    parsed = [(w, ResourceRequest.from_dict(r) if r else None, a) for w, r, a in SIGNATURES]
    weights = [w for w, _, _ in parsed]
    return [
        Demand(f"e{i:06d}", request, affinity)
        for i, (_, request, affinity) in enumerate(rng.choices(parsed, weights=weights, k=count))
    ]


def run(quick: bool) -> list[Figure]:
    count = 10_000
    sizes = (10, 100, 1000)
    repeats = {10: 3, 100: 3, 1000: 2} if quick else {10: 9, 100: 7, 1000: 5}
    rng = random.Random(7)
    demands = make_demands(count, rng)
    figures, per_claim_median = [], {}
    for n in sizes:
        fleet = make_fleet(n, count, random.Random(n))
        per_claim, rates, placed_counts = [], [], []
        warmup = 1 if n == sizes[0] else 0  # fills the requirement-parsing caches once
        for r in range(warmup + repeats[n]):
            workers = copy.deepcopy(fleet)
            t0 = time.process_time()
            assignments = place(demands, workers)
            cpu = time.process_time() - t0
            if r < warmup:
                continue
            per_claim.append(cpu / count * 1e6)
            rates.append(len(assignments) / cpu if cpu > 0 else float("inf"))
            placed_counts.append(len(assignments))
        per_claim_median[n] = sorted(per_claim)[len(per_claim) // 2]
        note = f"{count} demands, {len(SIGNATURES)} signatures, {placed_counts[0]} placed per run, n = repeats"
        figures += [
            Figure.of(f"B5.workers{n}.cpu_per_demand", per_claim, "us", note=note),
            Figure.of(f"B5.workers{n}.placements_per_s", rates, "placements/s", note="CPU time"),
        ]
    ratio = Figure.of(
        "B5.cost_ratio_1000_vs_10",
        [per_claim_median[1000] / per_claim_median[10]],
        "x",
        aim="within 2x",
        check=lambda m, p: m <= 2.0,
        note="median per-demand CPU at 1000 workers / at 10 workers",
    )
    return figures + [ratio]
