"""B19 GPU shares: placing whole cards, fractions and memory shares on 1,000 workers of 8 cards.

10,000 demands drawn from a mix (whole ``gpu=1``/``gpu=2``, fractions ``gpu=0.125..0.5``,
fractions with ``gpu_memory``) are placed by ``flux.scheduling.placement.place`` on
1,000 synthetic workers with 8 x 80 GiB cards each, under ``allocation = "reserve"``
(whole cards exclusive, the mode GPU fleets run). Two figures:

* cost: CPU time per placement of the mix, against today's ``gpu=N`` placement (the
  same count of whole-card demands on the same fleet), as a ratio (aim: within 2x);
* packing: cards left wholly free after the mix, against an offline best-fit-decreasing
  packing of the same mix over the same cards (whole demands first, each on one worker,
  then the shares by decreasing size into the fullest card that holds them, by fraction
  and by memory); aim: within 5 %. Placement picks the least-loaded worker, then the
  best-fitting card on it; the offline packing may fill any card of the fleet.
"""

from __future__ import annotations

import argparse
import copy
import random
import time
from pathlib import Path

from bench.common import Figure, print_figures
from flux.domain.resource_request import ResourceRequest
from flux.domain.resources import Resources
from flux.scheduling.demand import Demand
from flux.scheduling.placement import place
from flux.scheduling.snapshot import GPU, WorkerView

GI = 1024**3
CARD = 80 * GI
CARDS = 8
#: (weight, request): a quarter whole cards, the rest shares.
MIX: list[tuple[int, dict]] = [
    (20, {"gpu": 1}),
    (5, {"gpu": 2}),
    (15, {"gpu": 0.5}),
    (15, {"gpu": 0.25}),
    (10, {"gpu": 0.125}),
    (10, {"gpu": 0.25, "gpu_memory": "10Gi"}),
    (15, {"gpu": 0.25, "gpu_memory": "30Gi"}),
    (10, {"gpu": 0.5, "gpu_memory": "40Gi"}),
]


def make_fleet(workers: int, slots: int) -> list[WorkerView]:
    return [
        WorkerView(
            name=f"w{i:04d}",
            labels={},
            total=Resources(cpu=64.0, memory=512 * GI, disk=GI),
            gpus=tuple(GPU(g, f"GPU-{i}-{g}", "NVIDIA H100", CARD, CARD) for g in range(CARDS)),
            max_concurrent_executions=slots,
            allocation="reserve",
            registered_seq=i,
        )
        for i in range(workers)
    ]


def make_demands(count: int, rng: random.Random, mix: list[tuple[int, dict]]) -> list[Demand]:
    parsed = [ResourceRequest.from_dict(request) for _, request in mix]
    chosen = rng.choices(parsed, weights=[weight for weight, _ in mix], k=count)
    return [Demand(f"e{i:06d}", request, None) for i, request in enumerate(chosen)]


def timed_place(demands: list[Demand], fleet: list[WorkerView], repeats: int) -> tuple[list[float], list]:
    per_placement, placed = [], []
    for _ in range(repeats):
        workers = copy.deepcopy(fleet)
        t0 = time.process_time()
        placed = place(demands, workers)
        per_placement.append((time.process_time() - t0) / max(len(placed), 1) * 1e6)
    return per_placement, placed


def free_cards(placed: list, fleet: list[WorkerView]) -> int:
    used = {(p.worker_name, d.index) for p in placed for d in p.allotment.devices}
    return len(fleet) * CARDS - len(used)


def best_fit_decreasing(demands: list[Demand], workers: int) -> int:
    """Cards left wholly free by an offline best-fit-decreasing packing of the same demands."""
    free_per_worker = [CARDS] * workers
    whole = sorted((d.request.gpu for d in demands if not d.request.shares_gpu), reverse=True)
    for count in whole:  # each on the worker with the fewest free cards that holds it (best fit)
        fits = [w for w in range(workers) if free_per_worker[w] >= count]
        if fits:
            chosen = min(fits, key=lambda w: free_per_worker[w])
            free_per_worker[chosen] -= count
    free = sum(free_per_worker)
    shares = sorted(
        ((d.request.gpu or 0.0, d.request.gpu_memory or 0) for d in demands if d.request.shares_gpu),
        key=lambda s: max(s[0], s[1] / CARD),
        reverse=True,
    )
    open_cards: list[list[float]] = []  # [fraction used, memory used]
    for fraction, memory in shares:
        fitting = [c for c in open_cards if c[0] + fraction <= 1 + 1e-9 and c[1] + memory <= CARD]
        if fitting:
            card = max(fitting, key=lambda c: (c[0], c[1]))
        elif free > 0:
            free -= 1
            card = [0.0, 0]
            open_cards.append(card)
        else:
            continue
        card[0] += fraction
        card[1] += memory
    return free


def run(count: int, workers: int, repeats: int) -> list[Figure]:
    rng = random.Random(19)
    fleet = make_fleet(workers, slots=max(64, 4 * count // workers))
    mixed = make_demands(count, rng, MIX)
    whole_only = make_demands(count, random.Random(19), [(4, {"gpu": 1}), (1, {"gpu": 2})])
    baseline, _ = timed_place(whole_only, fleet, repeats)
    cost, placed = timed_place(mixed, fleet, repeats)
    ratio = sorted(cost)[len(cost) // 2] / sorted(baseline)[len(baseline) // 2]
    flux_free, offline_free = free_cards(placed, fleet), best_fit_decreasing(mixed, workers)
    note = f"{count} demands on {workers} workers x {CARDS} cards; {len(placed)} placed"
    return [
        Figure.of("B19.gpu_n.cpu_per_placement", baseline, "us", note="today's gpu=N (whole cards only)"),
        Figure.of("B19.mix.cpu_per_placement", cost, "us", note=note),
        Figure.of("B19.cost_ratio_mix_vs_gpu_n", [ratio], "x", aim="within 2x", check=lambda m, p: m <= 2.0),
        Figure.of("B19.free_cards.flux", [flux_free], "cards", note="no allotment at all after the mix"),
        Figure.of("B19.free_cards.best_fit_decreasing", [offline_free], "cards", note="offline, same mix, same cards"),
        Figure.of(
            "B19.packing_efficiency",
            [flux_free / offline_free if offline_free else 1.0],
            "of offline",
            aim="within 5 % (>= 0.95)",
            check=lambda m, p: m >= 0.95,
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 demands on 100 workers, one run each")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    figures = run(1_000, 100, 1) if args.quick else run(10_000, 1_000, 5)
    print_figures(figures, args.json)


if __name__ == "__main__":
    main()
