"""What a waiting gang asks of the worker pools (issue 53.5): all the workers it lacks
at once, in one topology domain, and nothing from a pool that cannot hold it within its
maximum or whose workers carry no topology label."""

from __future__ import annotations

from flux.domain.gang import Gang
from flux.domain.resource_request import ResourceRequest
from flux.domain.resources import Resources
from flux.scheduling.autoscale import PoolTemplate
from flux.scheduling.demand import Demand
from flux.scheduling.gang_autoscale import gang_scale
from flux.scheduling.gangs import GangDemand
from flux.scheduling.snapshot import GPU, WorkerView

GiB = 1024**3
RACKED = PoolTemplate("h100", labels={"rack": "r9"}, resources=Resources(cpu=64.0), gpus=8, slots=8, maximum=6)
UNRACKED = PoolTemplate("spot", resources=Resources(cpu=64.0), gpus=8, slots=8, maximum=100)


def _gang(size: int, gpu: int = 8, per_worker: int = 1) -> GangDemand:
    return GangDemand(
        Demand("g", ResourceRequest(gpu=gpu), None), Gang(size=size, topology="rack", per_worker=per_worker)
    )


def _live(name: str, rack: str) -> WorkerView:
    return WorkerView(
        name=name,
        labels={"rack": rack},
        gpus=tuple(GPU(i, f"{name}-{i}", "H100", 80 * GiB, 80 * GiB) for i in range(8)),
        max_concurrent_executions=8,
    )


def test_all_the_workers_at_once_in_the_templates_rack():
    scale = gang_scale(_gang(4), [UNRACKED, RACKED], [], {"h100": 0})
    assert (scale.pool, scale.domain, scale.start) == ("h100", "r9", 4)
    assert scale.reason == "4 workers of pool h100 in rack r9 (1 member a worker) for a gang of 4"


def test_what_the_rack_holds_now_and_what_is_starting_is_not_asked_again():
    assert gang_scale(_gang(4), [RACKED], [_live("w1", "r9"), _live("w2", "r1")], {"h100": 1}).start == 3
    assert gang_scale(_gang(4), [RACKED], [], {"h100": 2}, starting={"h100": 2}).start == 2


def test_members_per_worker_make_fewer_workers():
    assert gang_scale(_gang(16, gpu=1, per_worker=8), [RACKED], [], {}).start == 2


def test_no_worker_for_a_gang_no_pool_holds_within_its_max():
    scale = gang_scale(_gang(8), [UNRACKED, RACKED], [], {"h100": 1})
    assert (scale.pool, scale.start) == (None, 0)
    assert scale.reason == (
        "no pool can hold the gang of 8: pool spot's workers carry no label rack; "
        "pool h100 would need 8 more workers, its maximum 6 leaves 5"
    )
    small = PoolTemplate("small", labels={"rack": "r2"}, gpus=4, maximum=10)
    assert "a worker of pool small holds no member" in gang_scale(_gang(2), [small], [], {}).reason
