"""Waiting gangs in the scaling pass (issue 53.5, ``flux.server.autoscale.gangs``): a
gang's workers are added to its pool's decision beside ``autoscale.plan``'s, all at
once and within the pool's maximum; the idle workers a gang counts on are not drained
while it waits for the rest; a gang no pool can hold starts nothing and every pool's
decision says why."""

from __future__ import annotations

from flux.domain.gang import Gang
from flux.domain.resources import Resources
from flux.scheduling import autoscale
from flux.scheduling.autoscale import POOL_LABEL, Member, MemberState, PoolTemplate
from flux.scheduling.demand import Demand
from flux.scheduling.gangs import GangDemand
from flux.scheduling.snapshot import WorkerView
from flux.server.autoscale.gangs import pools_say, with_gangs

RACKED = PoolTemplate("racked", labels={"rack": "r1"}, resources=Resources(cpu=1.0), slots=1, maximum=4, idle_timeout=3)


def _gang(size: int = 3, execution_id: str = "g1") -> GangDemand:
    return GangDemand(Demand(execution_id, None, None), Gang(size=size, topology="rack"))


def _live(name: str, pool: PoolTemplate = RACKED) -> WorkerView:
    return WorkerView(name=name, labels={**pool.labels, POOL_LABEL: pool.name}, max_concurrent_executions=pool.slots)


def _idle(name: str, pool: str = "racked", idle_for: float = 10.0) -> Member:
    return Member(name, pool, MemberState.RUNNING, 0, idle_for)


def _decide(templates, gangs, fleet=(), members=(), waiting=()):
    plan = autoscale.plan(templates, list(waiting), list(fleet), list(members))
    return plan, with_gangs(plan, templates, gangs, list(fleet), list(members))


def test_a_gang_asks_its_pool_for_all_its_workers_at_once():
    _, plan = _decide([RACKED], [_gang()])
    decision = plan.decisions["racked"]
    assert (decision.desired, decision.start, decision.stop) == (3, 3, ())
    assert "gang g1: 3 workers of pool racked in rack r1 (1 member a worker) for a gang of 3" in decision.reason


def test_the_idle_workers_a_waiting_gang_counts_on_are_not_drained():
    """Two of three registered and idle past the timeout, the third starting: without
    the gang, plan drains both; with it they stay and nothing more is asked."""
    members = [_idle("racked-a"), _idle("racked-b"), Member("racked-c", "racked", MemberState.STARTING)]
    fleet = [_live("racked-a"), _live("racked-b")]
    alone, plan = _decide([RACKED], [_gang()], fleet, members)
    assert set(alone.decisions["racked"].stop) == {"racked-a", "racked-b"}
    decision = plan.decisions["racked"]
    assert (decision.desired, decision.start, decision.stop) == (3, 0, ())
    assert "gang g1 of 3 waits for the live and starting workers of pool racked in rack r1" in decision.reason
    assert "2 idle kept for waiting gangs" in decision.reason and "draining" not in decision.reason


def test_only_as_many_idle_workers_as_the_gang_needs_are_kept():
    members = [_idle(f"racked-{i}", idle_for=10.0 + i) for i in range(4)]
    alone, plan = _decide([RACKED], [_gang()], [_live(m.name) for m in members], members)
    assert len(alone.decisions["racked"].stop) == 4
    decision = plan.decisions["racked"]
    assert (decision.desired, decision.start, len(decision.stop)) == (3, 0, 1)
    assert "; 1 idle past 3s: draining" in decision.reason and "3 idle kept for waiting gangs" in decision.reason
    assert decision.stop == ("racked-3",)  # the longest idle of the four, as the plan chose


def test_a_pool_without_the_topology_label_starts_nothing_and_says_why():
    plain = PoolTemplate("plain", resources=Resources(cpu=1.0), slots=1, maximum=4)
    _, plan = _decide([plain], [_gang()])
    decision = plan.decisions["plain"]
    assert (decision.desired, decision.start) == (0, 0)
    assert "gang g1: no pool can hold the gang of 3: pool plain's workers carry no label rack" in decision.reason


def test_a_pool_whose_max_is_below_the_gang_starts_nothing():
    small = PoolTemplate("small", labels={"rack": "r1"}, resources=Resources(cpu=1.0), slots=1, maximum=2)
    _, plan = _decide([small], [_gang()])
    decision = plan.decisions["small"]
    assert (decision.desired, decision.start) == (0, 0)
    assert "pool small would need 3 more workers, its maximum 2 leaves 2" in decision.reason


def test_single_executions_and_a_gang_share_the_maximum():
    """Two singles take two new workers first; the gang of 3 does not fit in what is left."""
    singles = [Demand(f"s{i}", None, None) for i in range(2)]
    _, plan = _decide([RACKED], [_gang()], waiting=singles)
    decision = plan.decisions["racked"]
    assert (decision.desired, decision.start) == (2, 2)
    assert "its maximum 4 leaves 2" in decision.reason


def test_two_gangs_in_one_pass_never_exceed_the_maximum():
    _, plan = _decide([RACKED], [_gang(3, "g1"), _gang(3, "g2")])
    decision = plan.decisions["racked"]
    assert (decision.desired, decision.start) == (3, 3)
    assert "gang g2: no pool can hold the gang of 3" in decision.reason


def test_without_gangs_the_plan_is_unchanged():
    members = [_idle("racked-a")]
    plan, same = _decide([RACKED], [], [_live("racked-a")], members)
    assert same == plan


def test_explain_says_what_the_pools_do_for_a_waiting_gang():
    plain = PoolTemplate("plain", resources=Resources(cpu=1.0), slots=1, maximum=4)
    assert pools_say(_gang(), [], [], []) is None
    assert pools_say(_gang(), [plain, RACKED], [], []) == "pool racked is to start 3 workers for it in rack r1"
    starting = [Member(f"racked-{i}", "racked", MemberState.STARTING) for i in range(2)]
    fleet = [_live("racked-a")]
    assert pools_say(_gang(), [RACKED], fleet, [_idle("racked-a"), *starting]) == (
        "2 workers of pool racked are starting in rack r1"
    )
    assert pools_say(_gang(), [plain], [], []) == (
        "no pool can hold the gang of 3: pool plain's workers carry no label rack"
    )
