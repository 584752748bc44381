"""GPU shares, memory, MIG slices and health in placement (pure; no GPU needed)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flux.domain.allotment import Allotment, DeviceShare
from flux.domain.resource_request import InvalidResourceRequest, ResourceRequest
from flux.domain.resources import Resources
from flux.scheduling.allocation import with_allotments
from flux.scheduling.demand import Demand
from flux.scheduling.explain import verdict
from flux.scheduling.filters import check
from flux.scheduling.placement import place
from flux.scheduling.snapshot import GPU, WorkerView

GiB = 1024**3


def card(i, gib=80, **more) -> GPU:
    return GPU(i, f"GPU-{i}", "NVIDIA H100", gib * GiB, gib * GiB, **more)


def worker(*gpus: GPU, allocation="sample", slots=32, name="w") -> WorkerView:
    return WorkerView(
        name=name,
        labels={},
        total=Resources(cpu=64.0, memory=512 * GiB, disk=GiB),
        gpus=gpus,
        max_concurrent_executions=slots,
        allocation=allocation,
    )


def demand(i, affinity=None, **request) -> Demand:
    return Demand(f"e{i}", ResourceRequest(**request), affinity)


def devices(placement) -> list[tuple[str, float, int | None]]:
    return [(d.uuid, d.fraction, d.memory) for d in placement.allotment.devices]


@pytest.mark.parametrize("gpu", [0.5, 0.25, 1, 2, 2.0, 1e-3])
def test_gpu_is_a_fraction_of_one_card_or_whole_cards(gpu):
    assert ResourceRequest(gpu=gpu).gpu == gpu


@pytest.mark.parametrize("gpu", [1.5, 2.25, 0, -0.5, float("nan"), True, "0.5"])
def test_gpu_neither_a_fraction_nor_whole_is_refused_with_the_reason(gpu):
    with pytest.raises(InvalidResourceRequest, match=r"ResourceRequest\.gpu"):
        ResourceRequest(gpu=gpu)
    if gpu == 1.5:
        with pytest.raises(InvalidResourceRequest, match="neither a whole number of cards nor a fraction of one card"):
            ResourceRequest(gpu=gpu)


def test_gpu_memory_is_a_quantity_per_card_and_round_trips():
    request = ResourceRequest(gpu=0.5, gpu_memory="20Gi")
    assert (request.gpu_memory, request.shares_gpu) == (20 * GiB, True)
    assert ResourceRequest.from_dict(request.to_dict()) == request
    assert request.describe() == "gpu=0.5, gpu_memory=20Gi"
    assert ResourceRequest(gpu_memory="10Gi").shares_gpu and not ResourceRequest(gpu=1, gpu_memory="10Gi").shares_gpu
    with pytest.raises(InvalidResourceRequest, match="gpu_memory"):
        ResourceRequest(gpu=1, gpu_memory="lots")


def test_shares_pack_onto_one_card_and_whole_cards_stay_free():
    placed = place([demand(i, gpu=0.5) for i in range(2)] + [demand(9, gpu=1)], [worker(card(0), card(1))])
    assert [devices(p) for p in placed] == [[("GPU-0", 0.5, None)], [("GPU-0", 0.5, None)], [("GPU-1", 1.0, None)]]
    assert placed[0].allotment.to_json() == {"gpus": [0], "devices": [{"uuid": "GPU-0", "index": 0, "fraction": 0.5}]}


def test_a_whole_card_is_never_given_with_shares_on_it_nor_shared_when_whole():
    asks = [demand(1, gpu=0.5), demand(2, gpu=1), demand(3, gpu=0.5), demand(4, gpu=0.5), demand(5, gpu=1)]
    placed = place(asks, [worker(card(0), card(1))])
    # sample mode: the second gpu=1 shares the whole card (the spec), never the shared one
    assert {p.execution_id: devices(p)[0][0] for p in placed} == {
        "e1": "GPU-0",
        "e2": "GPU-1",
        "e3": "GPU-0",
        "e5": "GPU-1",
    }
    reserved = place(asks, [worker(card(0), card(1), allocation="reserve")])
    assert [p.execution_id for p in reserved] == ["e1", "e2", "e3"]


def test_memory_shares_count_against_the_card_and_best_fit_picks_the_fullest():
    w = worker(card(0, gib=40), card(1, gib=80))
    placed = place(
        [
            demand(1, gpu=0.25, gpu_memory="30Gi"),
            demand(2, gpu=0.25, gpu_memory="30Gi"),
            demand(3, gpu=0.25, gpu_memory="30Gi"),
        ],
        [w],
    )
    assert [devices(p)[0][0] for p in placed] == ["GPU-0", "GPU-1", "GPU-1"]
    assert w.gpu_shared == {0: (0.25, 30 * GiB), 1: (0.5, 60 * GiB)}
    refused = check(ResourceRequest(gpu=0.1, gpu_memory="30Gi"), None, w)
    assert (
        refused.message
        == "no gpu has room for gpu=0.1, gpu_memory=30Gi: gpu0 10Gi of memory left; gpu1 20Gi of memory left"
    )


def test_running_shares_are_applied_to_a_fresh_view_and_old_allotments_still_read():
    old = Allotment.from_json({"gpus": [1]})
    share = Allotment(gpus=(0,), devices=(DeviceShare("GPU-0", 0, 0.75, 8 * GiB),))
    assert Allotment.from_json(share.to_json()) == share and old.devices == ()
    view = with_allotments(worker(card(0), card(1), allocation="reserve"), [old, share])
    assert (view.gpu_allotted, view.gpu_shared) == ({1: 1}, {0: (0.75, 8 * GiB)})
    assert check(ResourceRequest(gpu=1), None, view).message == "unallotted gpus with free memory 0 < requested 1"
    assert check(ResourceRequest(gpu=0.25), None, view) is None
    assert share.quantities == Resources(gpu=0.75)


def test_mig_slices_go_only_to_requests_with_a_profile_affinity():
    parent = card(0, mig=True)
    slices = [
        GPU(2 + i, f"MIG-{i}", "A100 MIG 1g.10gb", 10 * GiB, 10 * GiB, mig_profile="1g.10gb", parent="GPU-0")
        for i in range(2)
    ]
    w = worker(parent, card(1), *slices)
    w.labels = {"flux.gpu/mig": "true", "flux.gpu/mig-profile": "1g.10gb"}  # what the probe publishes
    profile = {"flux.gpu/mig-profile": "1g.10gb"}
    placed = place(
        [
            demand(1, gpu=1),
            demand(2, profile, gpu=1),
            demand(3, profile, gpu=1),
            demand(4, profile, gpu=1),
            demand(5, gpu=1),
        ],
        [w],
    )
    assert {p.execution_id: devices(p) for p in placed} == {
        "e1": [("GPU-1", 1.0, None)],
        "e2": [("MIG-0", 1.0, None)],
        "e3": [("MIG-1", 1.0, None)],
        "e5": [("GPU-1", 1.0, None)],  # sample mode: a whole card is shared once all are allotted, a slice never
    }
    other = check(
        ResourceRequest(gpu=1),
        {"flux.gpu/mig-profile": {"op": "In", "values": ["1g.10gb", "3g.40gb"]}},
        worker(parent, *slices[:1]).evolve(labels=w.labels, gpu_allotted={2: 1}),
    )
    assert other.message == "gpus with free memory 0 < requested 1"


def test_an_unhealthy_card_is_never_allotted_and_explain_says_which_and_why():
    w = worker(card(0, unhealthy="XID 79"), card(1), name="box")
    placed = place([demand(1, gpu=1), demand(2, gpu=0.5), demand(3, gpu=1)], [w.evolve(allocation="reserve")])
    assert [(p.execution_id, devices(p)[0][0]) for p in placed] == [("e1", "GPU-1")]
    assert (
        verdict(ResourceRequest(gpu=2), None, w).message
        == "gpus with free memory 1 < requested 2; gpu0 unhealthy: XID 79"
    )
    assert check(ResourceRequest(gpu=0.5), None, w.evolve(gpus=w.gpus[:1])).message == (
        "no gpu has room for gpu=0.5: gpu0 unhealthy: XID 79"
    )


# --- properties ------------------------------------------------------------------------------

ASKS = st.one_of(
    st.builds(dict, gpu=st.sampled_from([1, 2])),
    st.builds(dict, gpu=st.sampled_from([0.1, 0.25, 0.3, 0.5, 0.75])),
    st.builds(dict, gpu=st.sampled_from([0.25, 0.5]), gpu_memory=st.sampled_from(["10Gi", "20Gi", "40Gi"])),
)


@settings(max_examples=150, deadline=None)
@given(asks=st.lists(ASKS, max_size=24), cards=st.integers(1, 4), allocation=st.sampled_from(["sample", "reserve"]))
def test_shares_never_overfill_a_card_and_whole_cards_are_never_split(asks, cards, allocation):
    w = worker(*(card(i) for i in range(cards)), allocation=allocation)
    placed = place([demand(i, **ask) for i, ask in enumerate(asks)], [w])
    fraction, memory, whole = {}, {}, {}
    for p in placed:
        for d in p.allotment.devices:
            if d.whole:
                whole[d.uuid] = whole.get(d.uuid, 0) + 1
            else:
                fraction[d.uuid] = fraction.get(d.uuid, 0) + d.fraction
                memory[d.uuid] = memory.get(d.uuid, 0) + (d.memory or 0)
    assert all(total <= 1 + 1e-9 for total in fraction.values())
    assert all(total <= 80 * GiB for total in memory.values())
    assert not set(whole) & set(fraction)  # a card is either whole or shared
    if allocation == "reserve":
        assert all(count == 1 for count in whole.values())


@settings(max_examples=150, deadline=None)
@given(shares=st.lists(st.sampled_from([0.1, 0.2, 0.25, 0.5]), max_size=12), cards=st.integers(2, 4))
def test_shares_leave_whole_cards_free_when_they_fit_on_fewer(shares, cards):
    """Best fit opens a new card only when no open card holds the share: at most one open
    card could take any share that did not fit, so the cards used are at most twice the load (+1)."""
    w = worker(*(card(i) for i in range(cards)))
    placed = place([demand(i, gpu=share) for i, share in enumerate(shares)], [w])
    used = {d.uuid for p in placed for d in p.allotment.devices}
    load = sum(shares[int(p.execution_id[1:])] for p in placed)
    assert len(placed) == len(shares) if sum(shares) <= cards / 2 else True
    assert len(used) <= 2 * load + 1
    if sum(shares) <= 1:
        assert len(used) == (1 if shares else 0)


def test_registration_reads_shares_and_refuses_one_and_a_half_cards_without_running_the_module():
    from flux.registration import StaticError, read_source

    header = "from flux import ResourceRequest, Gt, workflow\n"
    good = header + (
        "@workflow.with_options(requests=ResourceRequest.with_gpu(0.5).with_gpu_memory('20Gi'),\n"
        "                       affinity={'flux.gpu/compute-capability': Gt(7.9)})\n"
        "async def half(ctx): ...\n"
    )
    (half,) = read_source(good, "f.py", "f").workflows
    assert half.options.metadata()["requests"] == {"gpu": 0.5, "gpu_memory": 20 * GiB}
    bad = header + "@workflow.with_options(requests=ResourceRequest(gpu=1.5))\nasync def a(ctx): ...\n"
    with pytest.raises(StaticError, match="neither a whole number of cards nor a fraction of one card"):
        read_source(bad, "f.py", "f")


def test_compute_capability_affinity_compares_the_published_label_as_a_number():
    w = worker(card(0, compute_capability="9.0"))
    w.labels = {"flux.gpu/compute-capability": "9.0"}
    assert check(ResourceRequest(gpu=1), {"flux.gpu/compute-capability": {"op": "Gt", "value": 7.9}}, w) is None
    from flux.domain.affinity import normalise_affinity

    assert check(ResourceRequest(gpu=1), normalise_affinity({"flux.gpu/compute-capability": ">=8.0"}, "w"), w) is None
    assert check(ResourceRequest(gpu=1), normalise_affinity({"flux.gpu/compute-capability": ">=9.0"}, "w"), w) is None
    refused = check(ResourceRequest(gpu=1), {"flux.gpu/compute-capability": {"op": "Gt", "value": 9.0}}, w)
    assert refused.message == "label flux.gpu/compute-capability=9.0, wanted > 9"


@settings(max_examples=150, deadline=None)
@given(
    asks=st.lists(ASKS, max_size=30),
    shape=st.lists(st.tuples(st.integers(1, 3), st.integers(1, 6)), min_size=1, max_size=5),
    allocation=st.sampled_from(["sample", "reserve"]),
)
def test_a_share_opens_a_fresh_card_only_when_no_shared_card_in_the_fleet_holds_it(asks, shape, allocation):
    """Packing leaves whole cards free when it can: across workers, a share goes to a card
    already shared whenever one with room is on a worker with a free slot (best fit)."""
    from flux.scheduling.filters.gpu import ask_of, refusal

    fleet = [
        worker(*(card(i) for i in range(cards)), allocation=allocation, slots=slots, name=f"w{n}")
        for n, (cards, slots) in enumerate(shape)
    ]
    for i, ask in enumerate(asks):
        wanted = demand(i, **ask)
        before = {(w.name, i) for w in fleet for i in w.gpu_shared}
        could = wanted.request.shares_gpu and any(
            w.free_slots > 0 and refusal(w, g, ask_of(wanted.request)) is None
            for w in fleet
            for g in w.gpus
            if g.index in w.gpu_shared
        )
        for p in place([wanted], fleet):
            for d in p.allotment.devices:
                if not d.whole and could:
                    assert (p.worker_name, d.index) in before, f"{ask} opened a fresh card while a shared one held it"
