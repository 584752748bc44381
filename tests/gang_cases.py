"""Hypothesis strategies and an arithmetic oracle for the gang tests
(tests/scheduling/test_gangs*.py): small labelled fleets, some of their room already held."""

from __future__ import annotations

import copy
import itertools

from hypothesis import strategies as st

from flux.domain.gang import Gang
from flux.domain.resource_request import ResourceRequest
from flux.domain.resources import Resources
from flux.scheduling.demand import Demand
from flux.scheduling.gangs import GangDemand
from flux.scheduling.snapshot import GPU, WorkerView

GiB = 1024**3
RACKS = ("r1", "r2")
ZONES = ("a", "b", "c")
#: What each member asks: nothing, cpu, whole GPUs, a custom resource, both.
REQUESTS = (
    None,
    ResourceRequest(cpu=2),
    ResourceRequest(gpu=1),
    ResourceRequest(gpu=2, cpu=1),
    ResourceRequest(resources={"accel": 1}),
    ResourceRequest(cpu=1, resources={"accel": 2}),
)


@st.composite
def fleets(draw, max_workers: int = 6) -> list[WorkerView]:
    """Workers in racks (some without the label), in zones (some without), part busy."""
    fleet = []
    for i in range(draw(st.integers(1, max_workers))):
        labels = {}
        if draw(st.integers(0, 9)):
            labels["rack"] = draw(st.sampled_from(RACKS))
        if draw(st.integers(0, 4)):
            labels["zone"] = draw(st.sampled_from(ZONES))
        cards = draw(st.integers(0, 4))
        cpu = float(draw(st.sampled_from((2, 4, 8))))
        accel = draw(st.sampled_from((0, 1, 2, 4)))
        slots = draw(st.integers(1, 4))
        fleet.append(
            WorkerView(
                name=f"w{i}",
                labels=labels,
                registered_seq=i,
                total=Resources(cpu=cpu, memory=16 * GiB, **({"accel": accel} if accel else {})),
                available=Resources(
                    cpu=cpu - draw(st.sampled_from((0.0, 1.0, 2.0))) if cpu > 2 else cpu,
                    memory=16 * GiB,
                    **({"accel": accel - draw(st.integers(0, accel))} if accel else {}),
                ),
                gpus=tuple(GPU(g, f"GPU-{i}-{g}", "Fake", 80 * GiB, 80 * GiB) for g in range(cards)),
                gpu_allotted={g: 1 for g in range(cards) if draw(st.integers(0, 5)) == 0},
                max_concurrent_executions=slots,
                running=draw(st.integers(0, slots)) if draw(st.integers(0, 2)) == 0 else 0,
                allocation=draw(st.sampled_from(("sample", "reserve"))),
            )
        )
    return fleet


@st.composite
def gangs(draw, max_size: int = 4) -> GangDemand:
    size = draw(st.integers(2, max_size))
    gang = Gang(
        size=size,
        topology="rack",
        prefer=draw(st.sampled_from((None, "zone"))),
        per_worker=draw(st.integers(1, min(size, 3))),
    )
    return GangDemand(Demand("g", draw(st.sampled_from(REQUESTS)), None), gang)


def free_cards(worker: WorkerView) -> int:
    """Cards a member may have whole: healthy, not allotted, not shared."""
    return sum(1 for g in worker.gpus if not worker.gpu_allotted.get(g.index) and g.index not in worker.gpu_shared)


def holds(worker: WorkerView, gd: GangDemand) -> int:
    """Members ``worker`` holds, by arithmetic alone (the oracle's own rule)."""
    most = min(gd.gang.per_worker, max(worker.max_concurrent_executions - worker.running, 0))
    request = gd.demand.request
    if request is None:
        return most
    for name, amount in request.quantities.items():
        if name == "gpu":
            most = min(most, free_cards(worker) // int(amount))
        else:
            most = min(most, int(worker.available.get(name, 0) // amount))
    return most


def best_spread(fleet: list[WorkerView], gd: GangDemand) -> int | None:
    """By brute force over every count of members per worker: the fewest ``prefer``
    values a full placement of ``gd`` spans, or None when none exists."""
    gang, fewest = gd.gang, None
    for rack in sorted({w.labels["rack"] for w in fleet if "rack" in w.labels}):
        members = [w for w in fleet if w.labels.get("rack") == rack]
        for counts in itertools.product(*(range(holds(w, gd) + 1) for w in members)):
            if sum(counts) != gang.size:
                continue
            used = {w.labels.get(gang.prefer) for w, k in zip(members, counts) if k} if gang.prefer else {None}
            fewest = len(used) if fewest is None else min(fewest, len(used))
    return fewest


def fresh(fleet: list[WorkerView]) -> list[WorkerView]:
    return copy.deepcopy(fleet)
