"""Pools' demand from shapes (flux.scheduling.autoscale): bin packing onto templates,
bounds, idle timeouts, and never a worker for work no template fits."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from flux.domain.resource_request import ResourceRequest
from flux.domain.resources import Resources
from flux.scheduling.autoscale import Member, MemberState, PoolTemplate, fits, plan, template_view
from flux.scheduling.demand import Demand

GiB = 1024**3
CPU8 = PoolTemplate("cpu8", resources=Resources(cpu=8, memory=32 * GiB), slots=4, maximum=20)
GPU = PoolTemplate(
    "gpu", labels={"accel": "a100"}, resources=Resources(cpu=16, memory=64 * GiB), gpus=2, slots=8, maximum=3
)


def demand(n: int, **request) -> Demand:
    affinity = request.pop("affinity", None)
    return Demand(f"e{n}", ResourceRequest(**request) if request else None, affinity)


def test_bin_packs_by_cpu_and_slots():
    # 10 x cpu=3: two per cpu=8 worker -> 5 workers; 10 x cpu=1: four per worker (slots) -> 3
    assert plan([CPU8], [demand(i, cpu=3) for i in range(10)], [], []).decisions["cpu8"].desired == 5
    assert plan([CPU8], [demand(i, cpu=1) for i in range(10)], [], []).decisions["cpu8"].desired == 3


def test_first_fit_decreasing_fills_gaps():
    # 2 x cpu=5 and 2 x cpu=3: FFD pairs each 5 with a 3 -> 2 workers
    waiting = [demand(0, cpu=3), demand(1, cpu=5), demand(2, cpu=3), demand(3, cpu=5)]
    assert plan([CPU8], waiting, [], []).decisions["cpu8"].desired == 2


def test_work_no_template_fits_starts_nothing():
    result = plan([CPU8, GPU], [demand(0, cpu=64), demand(1, affinity={"zone": "mars"})], [], [])
    assert result.unfit == 2
    assert all(d.desired == 0 and d.start == 0 for d in result.decisions.values())


def test_goes_to_the_pool_whose_template_fits():
    result = plan([CPU8, GPU], [demand(0, gpu=1), demand(1, cpu=1, affinity={"accel": "a100"})], [], [])
    assert result.decisions["gpu"].start == 1 and result.decisions["cpu8"].start == 0


def test_existing_and_starting_room_is_used_first():
    idle = template_view(CPU8, "cpu8-a")
    assert (
        plan([CPU8], [demand(0, cpu=1)], [idle], [Member("cpu8-a", "cpu8", MemberState.RUNNING)])
        .decisions["cpu8"]
        .start
        == 0
    )
    starting = [Member("cpu8-b", "cpu8", MemberState.STARTING)]
    decision = plan([CPU8], [demand(i, cpu=1) for i in range(4)], [], starting).decisions["cpu8"]
    assert (decision.start, decision.desired, decision.waiting) == (0, 1, 4)


def test_idle_past_timeout_stops_down_to_minimum():
    pool = PoolTemplate("p", resources=Resources(cpu=2), minimum=1, maximum=5, idle_timeout=60)
    members = [Member(f"w{i}", "p", MemberState.RUNNING, idle_for=100 + i) for i in range(3)]
    decision = plan([pool], [], [], members).decisions["p"]
    assert decision.desired == 1 and decision.stop == ("w2", "w1")
    busy = [Member("w0", "p", MemberState.RUNNING, running=1, idle_for=0), *members[1:2]]
    assert plan([pool], [], [], busy).decisions["p"].stop == ("w1",)
    assert plan([pool], [], [], [Member("w0", "p", MemberState.RUNNING, idle_for=10)]).decisions["p"].stop == ()


shapes = st.builds(
    lambda cpu, gpu, custom: {k: v for k, v in {"cpu": cpu, "gpu": gpu, "resources": custom}.items() if v},
    st.sampled_from([None, 0.5, 1, 2, 4, 8, 16]),
    st.sampled_from([None, 1, 2, 3]),
    st.sampled_from([None, {"accel": 1}, {"accel": 3}]),
)
templates = st.builds(
    lambda name, cpu, gpus, accel, slots, lo, hi: PoolTemplate(
        name,
        resources=Resources(cpu=cpu, **({"accel": accel} if accel else {})),
        gpus=gpus,
        slots=slots,
        minimum=lo,
        maximum=lo + hi,
    ),
    st.sampled_from(["a", "b", "c"]),
    st.sampled_from([1, 2, 8]),
    st.integers(0, 2),
    st.integers(0, 2),
    st.integers(1, 4),
    st.integers(0, 2),
    st.integers(0, 6),
)


#: A member of one of the pools (by index) in one of the states a pass sees.
member_kinds = st.tuples(
    st.integers(0, 2), st.sampled_from(["starting", "busy", "idle", "expired", "stopping"]), st.integers(0, 50)
)


def member(pools: list[PoolTemplate], i: int, index: int, kind: str, extra: int) -> Member:
    """A starting, busy, idle (within the timeout), idle past it, or stopping worker."""
    pool = pools[index % len(pools)]
    name = f"{pool.name}-{kind}-{i}"
    if kind == "starting":
        return Member(name, pool.name, MemberState.STARTING)
    if kind == "stopping":
        return Member(name, pool.name, MemberState.STOPPING)
    if kind == "busy":  # busy for a long time: its idle time is not what counts
        return Member(name, pool.name, MemberState.RUNNING, running=1 + extra % 3, idle_for=pool.idle_timeout + extra)
    idle_for = extra if kind == "idle" else pool.idle_timeout + extra  # 0-50 s against 300 s, or past it
    return Member(name, pool.name, MemberState.RUNNING, idle_for=idle_for)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(templates, min_size=1, max_size=3, unique_by=lambda t: t.name),
    st.lists(shapes, max_size=30),
    st.lists(member_kinds, max_size=8),
)
def test_properties(pools, requests, kinds):
    waiting = [Demand(f"e{i}", ResourceRequest(**r) if r else None, None) for i, r in enumerate(requests)]
    members = [member(pools, i, *kind) for i, kind in enumerate(kinds)]
    result = plan(pools, waiting, [], members)
    fitting = [d for d in waiting if any(fits(t, d) for t in pools)]
    assert result.unfit == len(waiting) - len(fitting)
    for pool in pools:
        decision = result.decisions[pool.name]
        mine = [m for m in members if m.pool == pool.name]
        assert pool.minimum <= decision.desired <= pool.maximum
        current = sum(1 for m in mine if m.state != MemberState.STOPPING)
        assert current + decision.start <= max(pool.maximum, current)  # never beyond max
        # only a worker idle past the timeout is stopped (never a busy, a recently idle, a
        # starting or an already stopping one), longest idle first, never below the minimum
        expired = {m.name: m.idle_for for m in mine if m.state == MemberState.RUNNING and m.running == 0}
        expired = {name: idle for name, idle in expired.items() if idle >= pool.idle_timeout}
        assert set(decision.stop) <= expired.keys()
        kept = [idle for name, idle in expired.items() if name not in decision.stop]
        assert all(expired[name] >= max(kept, default=0) for name in decision.stop)
        assert current - len(decision.stop) >= min(pool.minimum, current)
        assert not (decision.stop and decision.start)
        if not waiting and pool.minimum <= current - len(expired) and current <= pool.maximum:
            assert set(decision.stop) == expired.keys()  # no work: every one of them goes
        # never more new workers than executions that only a new worker of this pool fits
        assert decision.start <= max(pool.minimum, sum(1 for d in fitting if fits(pool, d)))
    # every waiting execution a template fits is either given room or counted as capped
    assert sum(d.waiting for d in result.decisions.values()) + result.capped == len(fitting)
    if not fitting:
        assert all(d.start <= t.minimum for t, d in ((t, result.decisions[t.name]) for t in pools))


@settings(max_examples=100, deadline=None)
@given(templates, shapes)
def test_room_on_an_idle_worker_of_the_pool_starts_nothing(pool, shape):
    """An execution the template fits goes to an idle worker of the pool: no new one beyond the minimum."""
    demand = Demand("e0", ResourceRequest(**shape) if shape else None, None)
    idle = template_view(pool, f"{pool.name}-live")
    decision = plan([pool], [demand], [idle], [Member(idle.name, pool.name, MemberState.RUNNING)]).decisions[pool.name]
    assert decision.waiting == 0
    assert decision.start == (max(0, min(pool.minimum, pool.maximum) - 1))
