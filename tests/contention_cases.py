"""Hypothesis strategies for contention's property tests (tests/scheduling/test_contention_*.py):
small random fleets, queues and the executions that already hold workers.

Holders are made the way they come to be: a first round places some executions on a
fresh fleet (``seeded``), and each placement becomes a ``Holder`` on the worker it
went to; the views then hold them as the server's snapshot would, so a second round
placed on the same views sees a consistent fleet.
"""

from __future__ import annotations

import copy

from hypothesis import strategies as st

from flux.domain.resource_request import ResourceRequest
from flux.domain.resources import Resources
from flux.scheduling.contention import Contention
from flux.scheduling.demand import Demand
from flux.scheduling.holders import Holder
from flux.scheduling.placement import place
from flux.scheduling.snapshot import GPU, WorkerView

GiB = 1024**3
NAMESPACES = ("default", "ml", "data")
PRIORITIES = (-100, 0, 100)
#: What queued executions ask for: nothing (the fast path), cpu, memory, a GPU, the custom resource.
REQUESTS = (
    None,
    ResourceRequest(cpu=1),
    ResourceRequest(cpu=2, memory="2Gi"),
    ResourceRequest(resources={"accel": 1}),
    ResourceRequest(cpu=1, resources={"accel": 2}),
    ResourceRequest(gpu=1),
)


@st.composite
def workers(draw, max_workers: int = 4, reserve_only: bool = False) -> list[WorkerView]:
    fleet = []
    for i in range(draw(st.integers(1, max_workers))):
        accel = draw(st.sampled_from((0, 1, 2, 4)))
        gpus = draw(st.integers(0, 2))
        fleet.append(
            WorkerView(
                name=f"w{i}",
                labels={},
                registered_seq=i,
                total=Resources(
                    cpu=float(draw(st.sampled_from((2, 4, 8)))),
                    memory=draw(st.sampled_from((4, 16))) * GiB,
                    **({"accel": accel} if accel else {}),
                ),
                gpus=tuple(GPU(g, f"GPU-{i}-{g}", "Fake", 80 * GiB, 80 * GiB) for g in range(gpus)),
                max_concurrent_executions=draw(st.integers(1, 4)),
                allocation="reserve" if reserve_only else draw(st.sampled_from(("sample", "reserve"))),
            )
        )
    return fleet


@st.composite
def demands(
    draw,
    prefix: str,
    count: int,
    namespaces=NAMESPACES,
    priorities=PRIORITIES,
    requests=REQUESTS,
    keys: dict[str, int] | None = None,
) -> list[Demand]:
    """``count`` demands in submission order (``scheduled_at`` grows with the index)."""
    queue = []
    for i in range(count):
        chosen = draw(st.lists(st.sampled_from(sorted(keys)), max_size=2, unique=True)) if keys else []
        queue.append(
            Demand(
                f"{prefix}{i}",
                draw(st.sampled_from(requests)),
                None,
                namespace=draw(st.sampled_from(namespaces)),
                priority=draw(st.sampled_from(priorities)),
                keys=tuple((key, keys[key]) for key in chosen),
                scheduled_at=float(i),
            )
        )
    return queue


def seeded(
    fleet: list[WorkerView], seeds: list[Demand], contention: Contention | None = None, preemptible=lambda d: True
) -> list[Holder]:
    """Place ``seeds`` on ``fleet`` (its views then hold them) and return them as holders
    (claimed in placement order: later ones are younger)."""
    by_id = {d.execution_id: d for d in seeds}
    holders = []
    for n, p in enumerate(place(seeds, fleet, contention)):
        d = by_id[p.execution_id]
        holders.append(
            Holder(
                d.execution_id,
                p.worker_name,
                d.namespace,
                d.priority,
                preemptible(d),
                p.allotment,
                claimed_at=float(n),
                keys=tuple(key for key, _ in d.keys),
            )
        )
    return holders


def fresh(fleet: list[WorkerView]) -> list[WorkerView]:
    """An independent copy of the views (placement changes them in place)."""
    return copy.deepcopy(fleet)
