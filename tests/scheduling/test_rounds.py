"""A dispatch round's budget (flux/scheduling/rounds.py), what each namespace holds kept across
rounds (holders.Holdings), and the server's copy of the namespaces' rules (docs/contention.md)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from flux.domain.allotment import Allotment
from flux.domain.resource_request import ResourceRequest
from flux.domain.resources import Resources
from flux.scheduling import rounds
from flux.scheduling.contention import Contention
from flux.scheduling.demand import Demand
from flux.scheduling.holders import Holder, Holdings
from flux.scheduling.pool import FreePool
from flux.scheduling.snapshot import WorkerView
from flux.server import topics
from flux.server.namespaces import RulesCache

BIG = ResourceRequest(cpu=64.0)


def pool(workers: int = 4, slots: int = 10) -> FreePool:
    return FreePool(
        [
            WorkerView(name=f"w{i}", labels={}, total=Resources(cpu=8.0), max_concurrent_executions=slots)
            for i in range(workers)
        ]
    )


def demands(count: int, start: int = 0, request: ResourceRequest | None = None) -> list[Demand]:
    return [Demand(f"e{i:03d}", request, None, scheduled_at=float(i)) for i in range(start, start + count)]


def test_a_round_stops_at_its_budget_and_the_next_round_goes_on_in_queue_order():
    workers, queue = pool(), demands(30)
    first = rounds.run([queue], workers, Contention(), budget=12)
    assert first.spent and [p.execution_id for p in first.placements] == [d.execution_id for d in queue[:12]]
    assert first.examined == {d.execution_id for d in queue[:12]}  # the rest was not reached: no note for it
    placed = {p.execution_id for p in first.placements}
    second = rounds.run([[d for d in queue if d.execution_id not in placed]], workers, Contention(), budget=12)
    assert [p.execution_id for p in second.placements] == [d.execution_id for d in queue[12:24]]


def test_what_fits_nowhere_costs_no_budget_and_never_blocks_the_work_behind_it():
    queue = demands(50, request=BIG) + demands(5, start=50)  # 50 that fit no worker, then 5 that fit
    outcome = rounds.run([queue[:30], queue[30:]], pool(), Contention(), budget=3)
    assert [p.execution_id for p in outcome.placements] == ["e050", "e051", "e052"] and outcome.spent


def test_a_round_without_free_slots_reads_no_further_page():
    asked = []

    def pages():
        for page in (demands(4), demands(4, start=4)):
            asked.append(page[0].execution_id)
            yield page

    outcome = rounds.run(pages(), pool(workers=1, slots=2), Contention())
    assert len(outcome.placements) == 2 and not outcome.spent and asked == ["e000"]


def holder(i: int, namespace: str, priority: int, cpu: float) -> Holder:
    return Holder(f"h{i}", "w0", namespace, priority, allotment=Allotment(Resources(cpu=cpu)))


HOLDERS = st.lists(
    st.builds(
        holder,
        st.integers(0, 10_000),
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from([-100, 0, 100]),
        st.sampled_from([0.5, 1.0, 2.0]),
    ),
    max_size=30,
    unique_by=lambda h: h.execution_id,
)


@settings(max_examples=100, deadline=None)
@given(before=HOLDERS, after=HOLDERS)
def test_held_kept_across_rounds_equals_held_summed_afresh(before, after):
    kept = Holdings.of(before)
    kept.update([h for h in after if h not in before], [h for h in before if h not in after])
    fresh = Holdings.of(after)
    assert kept.priorities == fresh.priorities and kept.lowest == fresh.lowest
    assert {ns: {k: round(v, 9) for k, v in sums.items()} for ns, sums in kept.quantities.items()} == {
        ns: {k: round(v, 9) for k, v in sums.items()} for ns, sums in fresh.quantities.items()
    }


class Reads:
    """A session stand-in for ``rules``: counts the reads (no database needed for a cache's logic)."""

    def __init__(self, on_read=None):
        self.count, self.on_read = 0, on_read

    def execute(self, _statement):
        self.count += 1
        if self.on_read:
            self.on_read()
        return []


def test_rules_are_read_again_only_after_a_change_is_notified_even_one_notified_during_a_read():
    cache, session = RulesCache(), Reads()
    cache.get(session), cache.get(session)
    assert session.count == 1
    cache.on_notify(topics.EXECUTIONS)
    cache.get(session)
    assert session.count == 1
    cache.on_notify(topics.NAMESPACES)
    cache.get(session)
    assert session.count == 2
    racing = Reads(on_read=lambda: cache.on_notify(topics.NAMESPACES))  # a change lands while a round reads
    cache.on_notify(topics.NAMESPACES)
    cache.get(racing)
    cache.get(racing)
    assert racing.count == 2
