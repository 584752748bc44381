"""Quotas and concurrency keys as properties (docs/contention.md): over random fleets and
queues, what a namespace holds after a round (its holders and the round's placements)
never exceeds its quota in any dimension nor in executions, and no concurrency key has
more executions holding a worker than its limit."""

from __future__ import annotations

from collections import Counter

from contention_cases import NAMESPACES, demands, seeded, workers
from hypothesis import given, settings
from hypothesis import strategies as st

from flux.domain.quotas import Quota
from flux.domain.resources import Resources
from flux.scheduling.contention import Contention
from flux.scheduling.ordering import order
from flux.scheduling.placement import place
from flux.scheduling.quotas import QuotaLedger

KEYS = {"customer:a": 1, "customer:b": 2, "model:x": 3}


@st.composite
def quotas(draw) -> dict[str, Quota]:
    found = {}
    for namespace in draw(st.lists(st.sampled_from(NAMESPACES), unique=True, max_size=3)):
        limits = draw(
            st.dictionaries(st.sampled_from(["cpu", "memory", "gpu", "accel"]), st.integers(0, 6), max_size=3)
        )
        if "memory" in limits:
            limits["memory"] *= 1024**3
        executions = draw(st.none() | st.integers(0, 5))
        found[namespace] = Quota(Resources(limits), executions)
    return found


def _used(holders, placements, asked) -> dict[str, tuple[Resources, int]]:
    """Each namespace's holders' allotments and the round's placements' requests, and their count."""
    used: dict[str, tuple[Resources, int]] = {}
    for namespace, quantities in [(h.namespace, h.quantities) for h in holders] + [
        asked[p.execution_id] for p in placements
    ]:
        held, count = used.get(namespace, (Resources(), 0))
        used[namespace] = (held + quantities, count + 1)
    return used


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_a_round_never_takes_a_namespace_over_its_quota(data):
    fleet, limits = data.draw(workers(max_workers=5)), data.draw(quotas())
    seeds = data.draw(demands("h", data.draw(st.integers(0, 10))))
    holders = seeded(fleet, seeds, Contention(quotas=QuotaLedger(limits, [])))  # what holds is within quota too
    queue = data.draw(demands("e", data.draw(st.integers(0, 30))))
    contention = Contention(
        holders, QuotaLedger(limits, holders), floor=min(d.priority for d in [*seeds, *queue]) if queue else 0
    )
    placements = place(order(queue), fleet, contention)
    asked = {d.execution_id: (d.namespace, d.request.quantities if d.request else Resources()) for d in queue}
    for namespace, (held, count) in _used(holders, placements, asked).items():
        quota = limits.get(namespace)
        if not quota:
            continue
        assert quota.executions is None or count <= quota.executions, (namespace, count, quota)
        for name, limit in quota.limits.items():
            assert held.get(name, 0) <= limit, (namespace, name, held, quota)
    for placed in placements:  # what the ledger counted matches what was checked
        assert placed.execution_id not in contention.waiting


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_a_quota_of_zero_executions_makes_everything_wait_with_the_reason_quota(data):
    """Regression: with nothing held yet, ``executions=0`` raised KeyError in the ledger (and so failed the round)."""
    fleet = data.draw(workers(max_workers=3))
    queue = data.draw(demands("e", data.draw(st.integers(1, 10)), namespaces=["ml"]))
    contention = Contention((), QuotaLedger({"ml": Quota(executions=0)}, []))
    assert place(queue, fleet, contention) == []
    assert {reason.filter for reason in contention.waiting.values()} == {"quota"}
    assert set(contention.waiting) == {d.execution_id for d in queue}


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_a_round_never_lets_more_than_a_keys_limit_hold_a_worker(data):
    fleet = data.draw(workers(max_workers=5))
    seeds = data.draw(demands("h", data.draw(st.integers(0, 10)), keys=KEYS))
    holders = seeded(fleet, seeds, Contention())  # the seed round respects the limits as well
    queue = data.draw(demands("e", data.draw(st.integers(0, 30)), keys=KEYS))
    contention = Contention(holders, floor=min(d.priority for d in [*seeds, *queue]) if queue else 0)
    placements = place(order(queue), fleet, contention)
    keys_of = {d.execution_id: (d.namespace, [k for k, _ in d.keys]) for d in queue}
    holding: Counter[tuple[str, str]] = Counter((h.namespace, key) for h in holders for key in h.keys)
    for p in placements:
        namespace, keys = keys_of[p.execution_id]
        holding.update((namespace, key) for key in keys)
    for (namespace, key), count in holding.items():
        assert count <= KEYS[key], (namespace, key, count)
    for d in queue:  # and a refusal names the concurrency limit only when a key is at its limit
        reason = contention.waiting.get(d.execution_id)
        if reason is not None and reason.filter == "concurrency":
            assert any(holding[(d.namespace, key)] >= limit for key, limit in d.keys)
