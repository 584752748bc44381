"""``FreePool``: a pool kept across rounds, told only of what changed, places exactly
as a fresh round over every view does (same workers, same reasons, same allotments),
its static verdicts (``flux.scheduling.registered``) kept while no worker registers
with other labels, and forgotten when one does."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from flux.domain.resource_request import ResourceRequest
from flux.domain.resources import Resources
from flux.domain.routing import LoadTerm, RoutingPolicy
from flux.scheduling.demand import Demand
from flux.scheduling.placement import place
from flux.scheduling.pool import FreePool
from flux.scheduling.snapshot import WorkerView

STATES = ("ONLINE", "ONLINE", "ONLINE", "STALE", "DRAINING")
DEMANDS = (
    None,
    ResourceRequest(cpu=2),
    ResourceRequest(cpu=9),
)


def view(i: int, running: int, state: str, slots: int, zone: str | None = None) -> WorkerView:
    return WorkerView(
        name=f"w{i}",
        labels={"zone": zone or "ab"[i % 2]},
        total=Resources(cpu=8.0, memory=1, disk=1),
        available=Resources(cpu=float(i % 9), memory=1, disk=1),
        max_concurrent_executions=slots,
        running=running,
        registered_seq=i % 3,
        state=state,
    )


def copy_of(w: WorkerView) -> WorkerView:
    return w.evolve(gpu_allotted=dict(w.gpu_allotted))


changes = st.lists(
    st.tuples(
        st.integers(0, 14), st.integers(0, 3), st.sampled_from(STATES), st.integers(0, 3), st.sampled_from("abc")
    ),
    max_size=8,
)
demands = st.lists(
    st.tuples(st.sampled_from(DEMANDS), st.sampled_from((None, {"zone": "a"}, {"zone": "c"})), st.booleans()),
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(rounds=st.lists(st.tuples(changes, demands), min_size=1, max_size=5))
def test_a_kept_pool_places_as_a_fresh_round(rounds):
    fleet = {f"w{i}": view(i, 0, "ONLINE", 2) for i in range(10)}
    pool = FreePool(list(fleet.values()))
    for number, (changed, wanted) in enumerate(rounds):
        for i, running, state, slots, zone in changed:  # new views, as the snapshot builds them
            if slots == 0 and f"w{i}" in fleet:
                del fleet[f"w{i}"]
                pool.drop(f"w{i}")
            else:
                fleet[f"w{i}"] = new = view(i, running, state, max(slots, 1), zone)
                pool.put(new)
        fresh = [copy_of(w) for w in fleet.values()]
        queue = [
            Demand(f"e{number}.{k}", request, affinity, RoutingPolicy((LoadTerm(-1.0),)) if routed else None)
            for k, (request, affinity, routed) in enumerate(wanted)
        ]
        expected = place(queue, fresh)
        assert place(queue, pool) == expected
        assert {w.name: w.running for w in fresh} == {n: w.running for n, w in fleet.items()}


def test_static_verdicts_are_kept_across_samples_and_forgotten_when_labels_change():
    pool = FreePool([view(i, 0, "ONLINE", 2) for i in range(4)])
    wanted = [Demand("e1", None, {"zone": "a"})]
    assert [p.worker_name for p in place(wanted, pool)] == ["w0"]
    kept = pool.registered.epoch
    pool.put(pool.views["w2"].evolve(running=0, available=Resources(cpu=1.0, memory=1, disk=1)))  # a sample
    assert pool.registered.epoch == kept
    pool.put(view(1, 0, "ONLINE", 2, zone="a"))  # w1 registers again, now in zone a
    assert pool.registered.epoch > kept
    assert [p.worker_name for p in place([Demand("e2", None, {"zone": "a"})], pool)] == ["w1"]
