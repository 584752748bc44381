"""What blocks first leads the explanation (pure): the order of the binding constraints,
the summary each gives, and "no pool can start a worker for it"."""

from __future__ import annotations

import itertools

from flux.domain.allotment import Allotment
from flux.domain.quotas import Quota
from flux.domain.resource_request import ResourceRequest
from flux.domain.resources import Resources
from flux.scheduling.autoscale import PoolTemplate
from flux.scheduling.binding import GANG, ORDER, POOLS, ROOM, WORKERS, Blocker, binding, explain, no_pool
from flux.scheduling.concurrency import KeyLedger
from flux.scheduling.demand import Demand
from flux.scheduling.explain import Verdict
from flux.scheduling.filters import Reason
from flux.scheduling.holders import Holder
from flux.scheduling.quotas import QuotaLedger

GiB = 1024**3
QUOTA = Reason("quota", "namespace quota", "held by namespace ml's quota: gpu 8/8 in use, this asks 1 more")
KEY = Reason(
    "concurrency", "concurrency limit", "held by concurrency key 'customer:a': at its limit, 1/1 hold a worker"
)
ROOM_HELD = Reason(ROOM, "waiting for room", "room is held for it on worker w1 until e9 end")
TOPOLOGY = Reason(GANG, "gang topology", "4 members need 4 workers in one rack; 2 racks have 3")
NO_POOL = Reason(POOLS, "no pool fits", "no pool can start a worker for it (pool cpu: cpu_available 4 < requested 64)")
FREE = [Verdict("w1", None), Verdict("w2", None)]
BUSY = [Verdict("w1", Reason("slots", "all slots busy", "all 1 slots busy"))]


def test_the_order_is_quota_key_room_gang_pool_worker_and_a_new_kind_is_one_entry():
    assert [kind for kind, _ in ORDER] == [
        Blocker.QUOTA,
        Blocker.CONCURRENCY,
        Blocker.PRIORITY_ROOM,
        Blocker.GANG_TOPOLOGY,  # the seam: nothing says it until gangs exist
        Blocker.NO_POOL,
        Blocker.NO_WORKER,
    ]
    reasons = [QUOTA, KEY, ROOM_HELD, TOPOLOGY, NO_POOL]
    for shuffled in itertools.permutations(reasons):  # whatever order they are said in
        assert binding(shuffled).kind == Blocker.QUOTA
    assert binding([NO_POOL, ROOM_HELD, KEY]).kind == Blocker.CONCURRENCY
    assert binding([NO_POOL, TOPOLOGY, ROOM_HELD]).kind == Blocker.PRIORITY_ROOM
    assert binding([NO_POOL, TOPOLOGY]).kind == Blocker.GANG_TOPOLOGY
    assert (
        binding([None, Reason("cpu", "Insufficient cpu", "cpu_available 1 < requested 2")]) is None
    )  # no kind: never leads


def test_an_execution_held_only_by_its_quota_leads_with_the_quota_not_the_free_workers():
    explained = explain(FREE, [QUOTA])
    assert explained.summary == (
        "held by namespace ml's quota: gpu 8/8 in use, this asks 1 more; 2/2 workers are available."
    )
    assert explained.binding.kind == Blocker.QUOTA and explained.binding.message == QUOTA.message


def test_nothing_binds_when_a_worker_is_free_and_the_tally_leads_when_none_is():
    assert explain(FREE) == explain(FREE, [None])
    assert explain(FREE).binding is None and explain(FREE).summary == "2/2 workers are available."
    busy = explain(BUSY)
    assert busy.summary == "0/1 workers are available: 1 all slots busy."
    assert (
        busy.binding.kind == Blocker.NO_WORKER and busy.binding.message == "0/1 workers are available: 1 all slots busy"
    )
    assert explain([], [NO_POOL]).summary == f"{NO_POOL.message}; 0/0 workers are available: no workers are registered."
    assert explain(BUSY, [ROOM_HELD]).summary.startswith("room is held for it on worker w1")


def test_the_ledgers_refusals_say_what_holds_with_their_numbers():
    eight = Holder("r", "w1", namespace="ml", allotment=Allotment(gpus=tuple(range(8))))
    quotas = QuotaLedger({"ml": Quota(Resources(gpu=8), executions=5)}, [eight])
    asks = Demand("e", ResourceRequest(gpu=1), None, namespace="ml")
    assert binding([quotas.refusal(asks)]) == binding([QUOTA])
    full = QuotaLedger({"ml": Quota(executions=1)}, [Holder("r", "w1", namespace="ml")])
    assert full.refusal(asks).message == "held by namespace ml's quota: executions 1/1 hold a worker"
    keys = KeyLedger([Holder("r", "w1", keys=("customer:a",))])
    refused = keys.refusal(Demand("e", None, None, keys=(("customer:a", 1),)))
    assert binding([refused]).kind == Blocker.CONCURRENCY and refused.message == KEY.message


def test_no_pool_names_each_template_that_cannot_fit_with_its_numbers():
    cpu64 = Demand("e", ResourceRequest(cpu=64), None)
    small = PoolTemplate("cpu", resources=Resources(cpu=4, memory=8 * GiB))
    unfit = no_pool([small], cpu64)
    assert unfit == NO_POOL
    assert binding([unfit, Reason(WORKERS, "no worker", "0/0 workers are available")]).kind == Blocker.NO_POOL
    assert no_pool([], cpu64) is None  # no pools: nothing to say about them
    assert no_pool([small, PoolTemplate("big", resources=Resources(cpu=96))], cpu64) is None  # one fits
    capped = no_pool([PoolTemplate("big", resources=Resources(cpu=96), maximum=0)], cpu64)
    assert capped.message == "no pool can start a worker for it (pool big: its maximum is 0)"
    many = no_pool([PoolTemplate(f"p{i}", resources=Resources(cpu=4)) for i in range(5)], cpu64)
    assert many.message.count("pool p") == 3 and many.message.endswith("; 2 more)")
