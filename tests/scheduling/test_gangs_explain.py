"""Why a gang waits (issue 53.6): per topology domain what its workers hold and what
they lack, in words rendered from typed values that carry the numbers."""

from __future__ import annotations

from flux.domain.gang import Gang
from flux.domain.resource_request import ResourceRequest
from flux.domain.resources import Resources
from flux.scheduling.demand import Demand
from flux.scheduling.filters import Reason
from flux.scheduling.gang_explain import DomainRoom, GangShortfall, explain_gang, never_fits
from flux.scheduling.gangs import GangDemand
from flux.scheduling.snapshot import GPU, WorkerView

GiB = 1024**3


def _worker(name: str, rack: str | None, free: int, cards: int = 8, slots: int = 8) -> WorkerView:
    return WorkerView(
        name=name,
        labels={"rack": rack} if rack else {},
        total=Resources(cpu=64.0),
        gpus=tuple(GPU(i, f"{name}-{i}", "H100", 80 * GiB, 80 * GiB) for i in range(cards)),
        gpu_allotted={i: 1 for i in range(free, cards)},
        max_concurrent_executions=slots,
        allocation="reserve",
    )


def _gang(size: int, per_worker: int = 1, gpu: int = 8) -> GangDemand:
    return GangDemand(
        Demand("g", ResourceRequest(gpu=gpu), None), Gang(size=size, topology="rack", per_worker=per_worker)
    )


FLEET = [
    _worker("a1", "r1", 8),
    _worker("a2", "r1", 8),
    _worker("a3", "r1", 8),
    _worker("a4", "r1", 0),
    _worker("b1", "r2", 8),
    _worker("b2", "r2", 8),
    _worker("b3", "r2", 2),
    _worker("x", None, 8),
]


def test_the_issues_line():
    short = explain_gang(_gang(4), FLEET)
    assert short.message == (
        "needs 4 workers with gpu=8 in one rack: rack r1 has 3 that fit, r2 has 2; 1 more must free up in r1"
    )
    assert short.target == DomainRoom("r1", 3, 4, 4, (("Insufficient gpu", 1),))
    assert short.lacking == 1 and short.unlabelled == 1
    assert short.reason == Reason("gang", "gang topology", short.message), "what binding.py leads with"
    assert short.lines() == [
        "rack r1: 4 workers hold 3 now, 4 idle; 1 Insufficient gpu",
        "rack r2: 3 workers hold 2 now, 3 idle; 1 Insufficient gpu",
        "1 worker has no label rack",
    ]


def test_a_gang_that_fits_has_no_shortfall():
    assert explain_gang(_gang(3), FLEET) is None


def test_it_waits_where_it_could_ever_fit_or_says_it_never_will():
    fleet = [*FLEET, _worker("c1", "r3", 8), _worker("c2", "r3", 8), _worker("c3", "r3", 8), _worker("c4", "r3", 0)]
    fleet += [_worker("c5", "r3", 0), _worker("c6", "r3", 0)]
    short = explain_gang(_gang(6), fleet)
    assert short.target.domain == "r3", "r1 and r2 are too small even idle"
    assert short.message.endswith("; 3 more must free up in r3")
    never = explain_gang(_gang(7), fleet)
    assert never.target is None
    assert never.message.endswith("; no rack could ever hold it, even idle (the most one holds is 6)")


def test_members_per_worker_are_counted_as_room():
    short = explain_gang(_gang(30, per_worker=8, gpu=1), FLEET)
    assert short.message == (
        "needs 30 members with gpu=1, up to 8 a worker, in one rack: rack r1 has room for 24, r2 has room for 18; "
        "6 more must free up in r1"
    )


def test_no_domain_at_all_and_many_domains():
    gd = _gang(2)
    assert explain_gang(gd, [_worker("x", None, 8)]).message == (
        "needs 2 workers with gpu=8 in one rack: no worker has the label rack; "
        "no rack could ever hold it, even idle (the most one holds is 0)"
    )
    many = GangShortfall(gd.gang, gd.demand.request, tuple(DomainRoom(f"r{i}", 1, 1, 1) for i in range(7)))
    assert "r0 has 1 that fit, r1 has 1, r2 has 1, r3 has 1, r4 has 1, 2 more hold less" in many.message


def test_a_gang_larger_than_the_fleet_is_told_at_once():
    assert never_fits(_gang(4), FLEET) is None, "r1 holds four idle"
    assert never_fits(_gang(5), FLEET) == (
        "needs 5 workers with gpu=8 in one rack: rack r1 has 4 that fit, r2 has 3; "
        "no rack could ever hold it, even idle (the most one holds is 4)"
    )
