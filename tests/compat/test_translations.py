"""flux-core's constructs translated to ours, one by one, without a server: the routing
language, in-code schedules, what static registration reads of a flux-core module, the
task graph, and the call forms of ``flux.tasks`` (docs/migrating-from-flux-core.md)."""

from __future__ import annotations

import datetime
import textwrap
import warnings

import pytest

from flux import ExecutionContext, routing, task, workflow
from flux.domain.affinity import NotIn
from flux.domain.fluxcore_schedules import CronSchedule, DeclaredSchedule, IntervalSchedule, cron, interval, once
from flux.domain.schedules import InvalidSchedule, OverlapPolicy
from flux.errors import ExecutionError, ExecutionTimeoutError
from flux.model.fluxcore import MigrationWarning
from flux.registration.static import StaticError, read_source


def test_require_is_an_affinity_and_prefer_least_most_are_score_terms():
    assert routing.require(routing.label("zone") == "a", routing.label("spot") != "true") == {
        "zone": "a",
        "spot": NotIn("true"),
    }
    policy = routing.score(
        routing.prefer(routing.label("gpu") == "a100", weight=5),
        routing.least(routing.load()),
        routing.most(routing.metric("free_gb"), weight=2),
        routing.prefer(routing.label("tier") != "slow"),
    )
    assert [term["kind"] for term in policy.to_dict()["terms"]] == ["label_eq", "load", "metric", "label_eq"]
    assert [term["weight"] for term in policy.to_dict()["terms"]] == [5, -1.0, 2, -1.0]


@pytest.mark.parametrize(
    "construct", ["input", "label_for", "when", "optional", "meta", "resource", "utilization", "sticky", "service"]
)
def test_what_has_no_counterpart_names_itself(construct):
    built = getattr(routing, construct)("x")
    assert isinstance(built, routing.Unmapped) and f"flux.routing.{construct}()" in built.message()


INPUT_ROUTED = """
    from flux import workflow
    from flux.routing import input, label, require, when

    @workflow.with_options(affinity=require(label("tenant") == input("tenant"), when(input("tier") == "gold", label("ssd") == "true")))
    async def tenant_report(ctx):
        return {"tenant": ctx.input["tenant"]}
"""


def test_input_routed_affinity_runs_locally_with_a_warning_and_is_refused_at_registration(tmp_path):
    import runpy

    import flux.model.fluxcore as fluxcore

    fluxcore._warned.clear()
    path = tmp_path / "tenants.py"
    path.write_text(textwrap.dedent(INPUT_ROUTED))
    with pytest.warns(
        MigrationWarning, match=r"flux\.routing input, when: ignored by a local run; registering .* is refused"
    ):
        module = runpy.run_path(str(path))
    assert module["tenant_report"].run({"tenant": "acme"}).output == {"tenant": "acme"}
    with pytest.raises(
        StaticError,
        match=r"tenants\.py:5: workflow 'tenant_report': flux\.routing\.input\(\), flux\.routing\.when\(\): no counterpart",
    ):
        read_source(path.read_text(), "tenants.py")


def test_a_condition_on_a_metric_or_two_on_one_label_is_refused():
    with pytest.raises(ValueError, match="only label"):
        routing.require(routing.metric("gpu_free") == 1)
    with pytest.raises(ValueError, match="two conditions on label 'zone'"):
        routing.require(routing.label("zone") == "a", routing.label("zone") != "b")


def test_schedules_keep_flux_core_shapes_and_become_a_schedule_request():
    daily = cron("0 9 * * MON-FRI", timezone="Europe/Lisbon", overlap="allow")
    assert isinstance(daily, CronSchedule) and daily.cron_expression == "0 9 * * MON-FRI"
    assert daily.to_dict() == {
        "type": "cron",
        "cron_expression": "0 9 * * MON-FRI",
        "timezone": "Europe/Lisbon",
        "overlap": "allow",
    }
    assert daily.request() == {"cron": "0 9 * * MON-FRI", "timezone": "Europe/Lisbon", "overlap": "allow_all"}
    assert DeclaredSchedule.from_request(daily.request()).schedule == daily.schedule
    every = interval(hours=6)
    assert isinstance(every, IntervalSchedule) and every.interval == datetime.timedelta(hours=6)
    assert every.to_dict()["interval_seconds"] == 21600 and every.overlap is OverlapPolicy.SKIP
    after = datetime.datetime(2030, 1, 1, 10, 0, tzinfo=datetime.UTC)
    assert every.next_run_time(after) == datetime.datetime(2030, 1, 1, 12, 0, tzinfo=datetime.UTC)
    assert once(datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)).request()["at"] == 1893456000.0
    with pytest.raises(InvalidSchedule, match="end_time"):
        interval(hours=1, end_time=after)
    with pytest.raises(InvalidSchedule, match="overlap"):
        cron("* * * * *", overlap="sometimes")


FLUX_CORE_MODULE = """
    from flux import ExecutionContext, cron, task, workflow
    from flux.output_storage import LocalFileStorage
    from flux.routing import label, least, load, prefer, require, score

    storage = LocalFileStorage()

    @task.with_options(requires_approval=lambda amount: amount > 100, output_storage=storage, metadata=True)
    async def pay(amount, metadata=None):
        return amount

    @workflow.with_options(namespace="billing", schedule=cron("0 2 * * *"), runner="inprocess", output_storage=storage,
                           affinity=require(label("zone") == "a"), routing=score(prefer(label("gpu") == "x"), least(load())))
    async def nightly(ctx: ExecutionContext[int]):
        return await pay(ctx.input)
"""


def test_static_registration_reads_a_flux_core_module_without_running_it():
    found = read_source(textwrap.dedent(FLUX_CORE_MODULE), "billing.py").workflows[0].options
    assert (found.namespace, found.affinity) == ("billing", {"zone": "a"})
    assert found.schedule.request() == {"cron": "0 2 * * *", "timezone": "UTC", "overlap": "skip"}
    assert found.metadata()["routing"]["terms"][1] == {"kind": "load", "weight": -1.0}


def test_static_registration_refuses_a_flux_core_option_without_counterpart_by_name():
    source = "from flux import workflow\n@workflow.with_options(hooks=[])\nasync def w(ctx):\n    return 1\n"
    with pytest.raises(StaticError, match="w.py:2: unknown workflow option 'hooks'"):
        read_source(source, "w.py")


@task
async def fetch(n: int):
    return n


@task
async def small(n: int):
    return f"small {n}"


@task
async def large(n: int):
    return f"large {n}"


def test_a_graph_runs_the_nodes_whose_edge_conditions_hold():
    from flux.tasks import Graph

    @workflow
    async def branching(ctx: ExecutionContext[int]):
        graph = (
            Graph("sizes")
            .add_node("fetch", fetch)
            .add_node("small", small)
            .add_node("large", large)
            .add_edge("fetch", "small", condition=lambda n: n < 10)
            .add_edge("fetch", "large", condition=lambda n: n >= 10)
            .start_with("fetch")
            .end_with("small")
        )
        return await graph(ctx.input)

    assert branching.run(3).output == "small 3"
    assert branching.run(30).output is None  # END's upstream did not run
    with pytest.raises(ValueError, match="cycle"):
        Graph("loop").add_node("a", fetch).add_node("b", fetch).add_edge("a", "b").add_edge("b", "a").start_with(
            "a"
        ).end_with("b").validate()


def test_flux_tasks_call_forms():
    from flux.tasks import parallel, pause, randrange

    @task.with_options(name="square_{n}")
    async def square(n: int):
        return n * n

    @workflow
    async def forms(ctx: ExecutionContext):
        squares = await parallel(*(square(n) for n in range(4)), max_concurrent=2)
        picked = await randrange(10, 20, 5)
        note = await pause({"free": "form name"})
        return {
            "squares": squares,
            "picked": picked in (10, 15),
            "note": note,
            "when": datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC),
        }

    run = forms.run()
    assert run.wait["name"] == "pause" and run.wait["payload"] == {"free": "form name"}
    done = forms.resume(run.execution_id, "ok")
    when = datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)  # a datetime, as flux-core gave it (codec std)
    assert done.output == {"squares": [0, 1, 4, 9], "picked": True, "note": "ok", "when": when}
    assert {event["name"] for event in done.events if event["type"] == "TASK_COMPLETED"} == {
        "square_0",
        "square_1",
        "square_2",
        "square_3",
    }


def test_a_failure_carries_flux_core_type_and_message_of_the_innermost_task():
    @task.with_options(timeout=0.05)
    async def slow():
        import asyncio

        await asyncio.sleep(5)

    @task
    async def outer():
        await slow()

    @workflow
    async def nested(ctx: ExecutionContext):
        await outer()

    run = nested.run()
    assert isinstance(run.output, ExecutionTimeoutError)  # flux-core's output: the exception itself
    assert str(run.output) == "Task slow (slow:1) timed out (0.05s)."  # flux-core's words, our call id
    assert run.failure["type"] == "ExecutionTimeoutError" and run.failure["message"] == str(run.output)
    assert run.failure["error"].startswith("TaskFailedError") and "traceback" in run.failure


def test_a_failed_task_is_flux_core_execution_error_around_what_its_body_raised():
    @task
    async def charge():
        raise ValueError("card declined")

    @workflow
    async def checkout(ctx: ExecutionContext):
        await charge()

    run = checkout.run()
    assert type(run.output).__name__ == "ExecutionError" and isinstance(run.output, ExecutionError)
    assert isinstance(run.output.inner_exception, ValueError) and str(run.output.inner_exception) == "card declined"
    assert run.to_dict()["output"] == {"type": "ValueError", "message": "card declined"}
    with pytest.raises(TypeError):
        {**run.output}  # flux-core code spreading a failed run's output stops as it did there


def test_what_the_workflow_body_raised_is_the_output_as_it_was_raised():
    @workflow
    async def reads_input(ctx: ExecutionContext):
        return ctx.input.get("path")

    run = reads_input.run()
    assert type(run.output) is AttributeError and run.has_failed
    assert run.failure["type"] == "AttributeError" and "NoneType" in run.failure["message"]


def test_start_resuming_and_the_context_manager_resume_a_local_run():
    from flux.context_managers import ContextManager
    from flux.tasks import pause

    @workflow
    async def waits(ctx: ExecutionContext):
        return await pause("value")

    run = waits.run()
    assert run.events[-1].type == "WORKFLOW_SUSPENDED"  # events read as attributes too
    ContextManager.create().save(run.start_resuming({"x": 1}))
    assert waits.run(execution_id=run.execution_id).output == {"x": 1}
    assert ContextManager.create().get(run.execution_id).has_succeeded


def test_runner_and_durability_are_accepted_with_a_migration_warning():
    import flux.model.fluxcore as fluxcore

    fluxcore._warned.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        @workflow.with_options(runner="docker", durability="transient")
        async def hop(ctx):
            return 1

    messages = [str(w.message) for w in caught if issubclass(w.category, MigrationWarning)]
    assert any("runner=" in m for m in messages) and any("durability" in m for m in messages)
    assert hop.run().output == 1
    with pytest.raises(ValueError, match="runner must be one of"):
        workflow.with_options(runner="kubernetes")


def test_flux_core_import_paths_leave_flux_task_and_workflow_the_decorators():
    import subprocess
    import sys

    code = (
        "from flux.task import task\nfrom flux.workflow import workflow\nimport flux, flux.tasks, flux.domain.schedule\n"
        "from flux.domain import ExecutionContext\nfrom flux.domain.execution_context import ExecutionContext as Same\n"
        "assert flux.task is task and flux.workflow is workflow and type(task).__name__ == '_TaskDecorator'\n"
        "assert ExecutionContext is Same and ExecutionContext[str] is ExecutionContext"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_stored_output_is_referenced_in_flux_cores_shape(tmp_path):
    from flux.output_storage import LocalFileStorage

    storage = LocalFileStorage(tmp_path)
    frame, plain = storage.store("frames_e1", {1, 2}), storage.store("plain_e1", [1, 2])
    assert frame == {"storage_type": "local_file", "reference_id": "frames_e1", "metadata": {"serializer": "pkl"}}
    assert plain["metadata"] == {"serializer": "json"}
    assert (storage.retrieve(frame), storage.retrieve(plain)) == ({1, 2}, [1, 2])
    legacy = {"storage_type": "local_file", "reference_id": "plain_e1", "serializer": "json"}
    assert storage.retrieve(legacy) == [1, 2]
