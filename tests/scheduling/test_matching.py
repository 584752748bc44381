"""Matching, as specified in worker-resources.md ("Matching semantics"): affinity first,
then every requested dimension as a ``worker >= request`` threshold (the filter
pipeline); the first eligible worker in least-loaded order wins, and unconstrained
work skips the per-worker check."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flux.domain.resource_request import ResourceRequest, request_or_none
from flux.domain.resources import Resources
from flux.model.workflow import workflow
from flux.scheduling import filters
from flux.scheduling.demand import Demand
from flux.scheduling.filters import Reason, check
from flux.scheduling.filters.affinity import check_affinity
from flux.scheduling.filters.gpu import usable_gpus
from flux.scheduling.placement import place
from flux.scheduling.ranking import candidate_key
from flux.scheduling.snapshot import GPU, WorkerView, resampled, worker_view

Gi = 1024**3


def gpu(index: int = 0, free: int = 8 * Gi) -> GPU:
    return GPU(index=index, uuid=f"GPU-{index}", name="NVIDIA H100", memory_total=80 * Gi, memory_available=free)


def worker(name: str = "w", available=None, **overrides) -> WorkerView:
    """cpu 8, memory 32 GiB, disk 500 GiB, all available but what ``available`` says."""
    total = Resources(cpu=8.0, memory=32 * Gi, disk=500 * Gi)
    fields = dict(labels={}, total=total, available=total.updated(available or {}))
    return WorkerView(name=name, **{**fields, **overrides})


def check_resources(request, w: WorkerView) -> Reason | None:
    """The pipeline without affinity: the resource dimensions only."""
    return check(request, None, w)


def candidate_order(workers) -> list[WorkerView]:
    """Workers with a free slot, least loaded first."""
    return sorted((w for w in workers if w.free_slots > 0), key=candidate_key)


def chosen(request, affinity, workers) -> WorkerView | None:
    """The worker ``place`` gives one execution, or ``None``."""
    by_name = {w.name: w for w in workers}
    placed = place([Demand("e", request, affinity)], workers)
    return by_name[placed[0].worker_name] if placed else None


def reason(kind: str, message: str) -> Reason:
    """The typed reason a filter gives, with its summary phrase."""
    phrases = {"affinity": "didn't match affinity", "packages": "missing or mismatched package"}
    return Reason(kind, phrases.get(kind, f"Insufficient {kind}"), message)


# --- thresholds: at, just below and just above each boundary -------------------------


@pytest.mark.parametrize(("available", "ok"), [(4.0, True), (3.999, False), (4.001, True)])
def test_spec_cpu_threshold_is_greater_or_equal(available, ok):
    mismatch = check_resources(ResourceRequest(cpu=4), worker(available={"cpu": available}))
    assert (mismatch is None) == ok
    if not ok:
        assert mismatch == reason("cpu", f"cpu_available {available} < requested 4")


@pytest.mark.parametrize(("available", "ok"), [(8 * Gi, True), (8 * Gi - 1, False), (8 * Gi + 1, True)])
def test_spec_memory_threshold_is_greater_or_equal_in_bytes(available, ok):
    mismatch = check_resources(ResourceRequest(memory="8Gi"), worker(available={"memory": available}))
    assert (mismatch is None) == ok
    if not ok:
        assert mismatch.filter == "memory"
        assert mismatch.message == f"memory_available {8 * Gi - 1} < requested {8 * Gi}"


def test_memory_mismatch_is_readable():
    mismatch = check_resources(ResourceRequest(memory="8Gi"), worker(available={"memory": 4 * Gi}))
    assert mismatch == reason("memory", "memory_available 4.0Gi < requested 8Gi")


@pytest.mark.parametrize(("free", "ok"), [(10**10, True), (10**10 - 1, False), (10**10 + 1, True)])
def test_spec_disk_threshold_is_greater_or_equal(free, ok):
    mismatch = check_resources(ResourceRequest(disk=10_000_000_000), worker(available={"disk": free}))
    assert (mismatch is None) == ok
    if not ok:
        assert mismatch.filter == "disk"


@pytest.mark.parametrize(("gpus", "ok"), [(2, True), (1, False), (3, True)])
def test_spec_gpu_threshold_counts_gpus(gpus, ok):
    mismatch = check_resources(ResourceRequest(gpu=2), worker(gpus=[gpu(i) for i in range(gpus)]))
    assert (mismatch is None) == ok
    if not ok:
        assert mismatch == reason("gpu", "gpus with free memory 1 < requested 2")


def test_spec_gpu_without_free_memory_does_not_count():
    full = worker(gpus=[gpu(0, free=0), gpu(1, free=0)])
    assert usable_gpus(full) == 0
    assert check_resources(ResourceRequest(gpu=1), full) == reason("gpu", "gpus with free memory 0 < requested 1")
    assert check_resources(ResourceRequest(gpu=1), replace(full, gpus=(gpu(0, free=0), gpu(1, free=1)))) is None


def test_spec_worker_without_gpus_fails_gpu_request_saying_so():
    assert check_resources(ResourceRequest(gpu=1), worker()) == reason("gpu", "has no GPUs (requested 1)")


@pytest.mark.parametrize(
    ("requirement", "installed", "ok"),
    [
        ("torch>=2.0", "2.0", True),
        ("torch>=2.0", "2.0.0", True),
        ("torch>=2.0", "1.13.1", False),
        ("torch>=2.0", "2.0.1", True),
        ("torch>=2.0", "2.1.0+cu121", True),
        ("torch>=2.0", "2.1.0rc1", True),
        ("torch==2.1.0", "2.1.0", True),
        ("torch==2.1.0", "2.1.0+cu121", True),
        ("torch==2.1.0", "2.1.1", False),
        ("torch==2.1.0", "2.0.9", False),
        ("numpy==1.26.*", "1.26.0", True),
        ("numpy==1.26.*", "1.26.4", True),
        ("numpy==1.26.*", "1.25.2", False),
        ("numpy==1.26.*", "1.27.0", False),
        ("pandas>=2,<3", "2.0.0", True),
        ("pandas>=2,<3", "2.2.3", True),
        ("pandas>=2,<3", "1.5.3", False),
        ("pandas>=2,<3", "3.0.0", False),
        ("requests~=2.31", "2.31", True),
        ("requests~=2.31", "2.32.3", True),
        ("requests~=2.31", "2.30.0", False),
        ("requests~=2.31", "3.0", False),
        ("torch>=2.10", "2.9.0", False),
        ("torch>=2.9", "2.10.0", True),
    ],
)
def test_spec_package_constraints_compare_versions_numerically(requirement, installed, ok):
    name = requirement.split("=")[0].split(">")[0].split("~")[0]
    mismatch = check_resources(ResourceRequest(packages=[requirement]), worker(packages={name: installed}))
    assert (mismatch is None) == ok
    if not ok:
        assert mismatch.filter == "packages"
        assert f"package {name} {installed} does not satisfy" in mismatch.message


def test_spec_package_mismatch_message_names_installed_version_and_constraint():
    mismatch = check_resources(ResourceRequest(packages=["torch>=2.0"]), worker(packages={"torch": "1.13.1"}))
    assert mismatch == reason("packages", "package torch 1.13.1 does not satisfy >=2.0")


def test_spec_missing_package_fails():
    mismatch = check_resources(ResourceRequest(packages=["torch>=2.0"]), worker(packages={"numpy": "1.26.4"}))
    assert mismatch == reason("packages", "package torch not installed")


def test_spec_package_without_constraint_only_needs_to_be_present():
    request = ResourceRequest(packages=["transformers"])
    assert check_resources(request, worker(packages={"transformers": "0.0.1"})) is None
    assert check_resources(request, worker()).filter == "packages"


def test_package_names_match_after_canonicalisation():
    request = ResourceRequest(packages=["Scikit_Learn>=1.3"])
    assert check_resources(request, worker(packages={"scikit-learn": "1.5.0"})) is None
    assert worker(packages={"Typing_Extensions": "4.12"}).packages == {"typing-extensions": "4.12"}


def test_unparseable_installed_version_fails_that_package():
    mismatch = check_resources(ResourceRequest(packages=["torch>=2.0"]), worker(packages={"torch": "custom-build"}))
    assert mismatch.filter == "packages" and "'custom-build'" in mismatch.message


def test_spec_every_package_must_be_satisfied():
    request = ResourceRequest(packages=["torch>=2.0", "transformers"])
    assert check_resources(request, worker(packages={"torch": "2.3.0"})) == reason(
        "packages", "package transformers not installed"
    )
    assert check_resources(request, worker(packages={"torch": "2.3.0", "transformers": "4.44.0"})) is None


def test_resources_report_the_first_failing_dimension_in_spec_order():
    poor = worker(available={"cpu": 1.0, "memory": 1, "disk": 1})
    request = ResourceRequest(cpu=2, memory="1Gi", disk="1Gi", gpu=1, packages=["torch"])
    kinds = []
    for fix in (
        {"available": {"cpu": 2.0}},
        {"available": {"memory": Gi}},
        {"available": {"disk": Gi}},
        {"gpus": (gpu(),)},
        {"packages": {"torch": "2.0"}},
    ):
        kinds.append(check_resources(request, poor).filter)
        if "available" in fix:
            fix = {"available": poor.available.updated(fix["available"])}
        poor = replace(poor, **fix)
    assert kinds == ["cpu", "memory", "disk", "gpu", "packages"]
    assert check_resources(request, poor) is None


def test_no_request_or_empty_request_matches_any_worker():
    empty = worker(available={"cpu": 0.0, "memory": 0, "disk": 0})
    assert check_resources(None, empty) is None
    assert check_resources(ResourceRequest(), empty) is None


# --- affinity ------------------------------------------------------------------------


def test_spec_affinity_matches_equal_labels():
    assert check_affinity({"region": "us-east-1"}, {"region": "us-east-1", "gpu": "true"}) is None
    assert check_affinity(None, {}) is None
    assert check_affinity({}, {}) is None


def test_spec_affinity_rejects_a_different_label_value():
    assert check_affinity({"region": "us-east-1"}, {"region": "eu-west-1"}) == reason(
        "affinity", "label region=eu-west-1, wanted us-east-1"
    )


def test_spec_affinity_rejects_a_missing_label():
    assert check_affinity({"region": "us-east-1"}, {"license": "matlab"}) == reason(
        "affinity", "label region missing, wanted us-east-1"
    )


def test_spec_affinity_needs_every_label():
    labels = {"license": "matlab", "region": "us-east-1"}
    assert check_affinity({"license": "matlab", "region": "us-east-1"}, labels) is None
    assert check_affinity({"license": "matlab", "region": "eu-west-1"}, labels).filter == "affinity"


def test_affinity_compares_labels_as_strings():
    assert check_affinity({"gpu_index": 0}, {"gpu_index": "0"}) is None


def test_spec_affinity_is_checked_before_resources():
    poor_and_elsewhere = worker(labels={"region": "eu-west-1"}, available={"cpu": 0.5})
    mismatch = check(ResourceRequest(cpu=4), {"region": "us-east-1"}, poor_and_elsewhere)
    assert mismatch.filter == "affinity"
    assert check(ResourceRequest(cpu=4), {"region": "eu-west-1"}, poor_and_elsewhere).filter == "cpu"
    assert check(ResourceRequest(cpu=0.5), {"region": "eu-west-1"}, poor_and_elsewhere) is None


# --- choosing a worker ----------------------------------------------------------------


def test_spec_default_choice_is_least_loaded():
    busy = worker("busy", max_concurrent_executions=4, running=3, registered_seq=0)
    idle = worker("idle", max_concurrent_executions=4, running=0, registered_seq=1)
    half = worker("half", max_concurrent_executions=2, running=1, registered_seq=2)
    assert [w.name for w in candidate_order([busy, idle, half])] == ["idle", "half", "busy"]
    assert chosen(None, None, [busy, idle, half]) is idle


def test_load_is_relative_to_slots_not_a_running_count():
    big = worker("big", max_concurrent_executions=10, running=2, registered_seq=1)
    small = worker("small", max_concurrent_executions=2, running=1, registered_seq=0)
    assert [w.name for w in candidate_order([small, big])] == ["big", "small"]


def test_full_workers_are_not_candidates():
    full = worker("full", max_concurrent_executions=2, running=2)
    drained = worker("drained", max_concurrent_executions=0)
    assert candidate_order([full, drained]) == []
    assert chosen(None, None, [full, drained]) is None
    assert chosen(ResourceRequest(cpu=1), None, [full]) is None


def test_equal_load_breaks_ties_by_fewer_running_then_registration_order():
    a = worker("a", max_concurrent_executions=4, running=2, registered_seq=5)
    b = worker("b", max_concurrent_executions=2, running=1, registered_seq=9)
    c = worker("c", max_concurrent_executions=2, running=1, registered_seq=3)
    assert [w.name for w in candidate_order([a, b, c])] == ["c", "b", "a"]


def test_spec_first_satisfying_worker_in_order_wins():
    idle_small = worker("idle-small", available={"cpu": 2.0}, max_concurrent_executions=4, running=0, registered_seq=0)
    busier_big = worker("busier-big", available={"cpu": 16.0}, max_concurrent_executions=4, running=1, registered_seq=1)
    busiest_big = worker(
        "busiest-big", available={"cpu": 16.0}, max_concurrent_executions=4, running=2, registered_seq=2
    )
    workers = [busiest_big, idle_small, busier_big]
    assert chosen(ResourceRequest(cpu=8), None, workers) is busier_big
    assert chosen(ResourceRequest(cpu=1), None, workers) is idle_small


def test_spec_unmatched_request_selects_no_worker():
    assert chosen(ResourceRequest(gpu=1), None, [worker("a"), worker("b")]) is None
    assert chosen(None, {"region": "mars"}, [worker("a")]) is None


def test_spec_unconstrained_work_takes_the_fast_path(monkeypatch):
    def no_per_candidate_check(*args):
        raise AssertionError("fast path must not check candidates")

    for f in filters.PIPELINE:
        monkeypatch.setattr(f, "applies", no_per_candidate_check)
        monkeypatch.setattr(f, "check", no_per_candidate_check)
    assert chosen(None, None, [worker("a", running=1, max_concurrent_executions=2), worker("b")]).name == "b"
    assert chosen(ResourceRequest(), {}, [worker("a")]).name == "a"


def test_is_unconstrained_means_no_request_and_no_affinity():
    assert Demand("e", None, None).unconstrained
    assert Demand("e", ResourceRequest(), {}).unconstrained
    assert Demand("e", ResourceRequest(), None).request is None  # an empty request is no request
    assert not Demand("e", ResourceRequest(cpu=1), None).unconstrained
    assert not Demand("e", None, {"region": "us-east-1"}).unconstrained
    assert filters.active(None, None) == filters.active(ResourceRequest(), {}) == ()


def test_an_empty_request_is_no_request():
    assert request_or_none(None) is request_or_none({}) is request_or_none(ResourceRequest()) is None
    assert request_or_none({"cpu": "500m"}) == ResourceRequest(cpu=0.5)

    @workflow.with_options(requests={})
    async def plain(ctx): ...

    assert plain.requests is None and plain.metadata()["requests"] is None


def test_a_view_is_built_from_plain_data_by_field_name():
    sample = dict(
        total={"cpu": 8.0, "memory": 32 * Gi, "disk": 500 * Gi},
        available={"cpu": 6.0, "memory": 16 * Gi, "disk": 100 * Gi},
        metrics={"q": 3.0, "bad": float("nan")},
        gpus=[dict(index=0, uuid="GPU-0", name="H100", memory_total=80 * Gi, memory_available=8 * Gi, utilization=0.5)],
    )
    labels = {"zone": "a"}
    view = worker_view(
        name="w", labels=labels, packages={"Typing_Extensions": "4.12"}, max_concurrent_executions=2, **sample
    )
    assert view.gpus == (GPU(0, "GPU-0", "H100", 80 * Gi, 8 * Gi, 0.5),)
    assert (view.metrics, view.packages, view.free_slots) == ({"q": 3.0}, {"typing-extensions": "4.12"}, 2)
    assert view.labels == labels and view.labels is not labels
    moved = resampled(view, **{**sample, "available": {**sample["available"], "cpu": 1.0}, "gpus": []})
    assert (moved.available["cpu"], moved.gpus, moved.packages) == (1.0, (), view.packages)
    assert view.available["cpu"] == 6.0 and isinstance(view.total, Resources)


def test_worker_view_derived_properties():
    w = worker(max_concurrent_executions=4, running=1, gpus=[gpu(0), gpu(1, free=0)])
    assert (w.free_slots, w.load, usable_gpus(w)) == (3, 0.25, 1)
    assert worker(max_concurrent_executions=2, running=5).free_slots == 0


# --- properties ------------------------------------------------------------------------

versions = st.tuples(st.integers(0, 30), st.integers(0, 30)).map(lambda v: f"{v[0]}.{v[1]}")
package_names = st.sampled_from(["torch", "numpy", "pandas", "transformers"])


@st.composite
def matching_pairs(draw):
    """A worker and a request it satisfies (request values drawn at or below the worker's)."""
    installed = draw(st.dictionaries(package_names, versions))
    w = worker(
        available={
            "cpu": draw(st.floats(0.1, 128)),
            "memory": draw(st.integers(1, 2**40)),
            "disk": draw(st.integers(1, 2**42)),
        },
        gpus=[gpu(i, free=draw(st.integers(0, 80 * Gi))) for i in range(draw(st.integers(0, 4)))],
        packages=installed,
    )

    packages = [f"{name}>={version}" for name, version in installed.items() if draw(st.booleans())]
    request = ResourceRequest(
        cpu=draw(st.none() | st.floats(0.001, w.available["cpu"])),
        memory=draw(st.none() | st.integers(1, w.available["memory"])),
        disk=draw(st.none() | st.integers(1, w.available["disk"])),
        gpu=draw(st.none() | st.integers(1, usable_gpus(w))) if usable_gpus(w) else None,
        packages=packages,
    )
    assert check_resources(request, w) is None
    return w, request


@st.composite
def grown(draw, w: WorkerView) -> WorkerView:
    """``w`` with one resource increased."""
    growth = draw(st.sampled_from(["cpu", "memory", "disk", "gpu", "package", "new package"]))
    if growth in ("cpu", "memory", "disk"):
        more = draw(st.floats(0.001, 64)) if growth == "cpu" else draw(st.integers(1, 2**40))
        return replace(w, available=w.available.updated({growth: w.available[growth] + more}))
    if growth == "gpu":
        return replace(w, gpus=(*w.gpus, gpu(len(w.gpus), free=draw(st.integers(1, 80 * Gi)))))
    if growth == "package" and w.packages:
        name = draw(st.sampled_from(sorted(w.packages)))
        major, minor = map(int, w.packages[name].split("."))
        return replace(w, packages={**w.packages, name: f"{major + draw(st.integers(0, 3))}.{minor + 1}"})
    return replace(w, packages={**w.packages, "extra-package": "1.0"})


@given(st.data())
def test_property_a_matching_worker_keeps_matching_when_resources_grow(data):
    w, request = data.draw(matching_pairs())
    for _ in range(data.draw(st.integers(1, 5))):
        w = data.draw(grown(w))
        assert check_resources(request, w) is None


@st.composite
def fleets(draw):
    return [
        worker(
            f"w{i}",
            max_concurrent_executions=(slots := draw(st.integers(0, 4))),
            running=draw(st.integers(0, slots + 1)),
            registered_seq=draw(st.integers(0, 3)),
            available={"cpu": draw(st.floats(0, 16))},
        )
        for i in range(draw(st.integers(0, 6)))
    ]


@given(fleets(), st.sampled_from([None, ResourceRequest()]), st.sampled_from([None, {}]))
def test_property_b_fast_path_agrees_with_checking_every_candidate(workers, request, affinity):
    slow = next((w for w in candidate_order(workers) if check(request, affinity, w) is None), None)
    assert chosen(request, affinity, workers) is slow
