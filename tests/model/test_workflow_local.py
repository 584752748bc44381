"""The programming model without a server: decorators, validation, events, replay."""

from __future__ import annotations

import asyncio

import pytest

from flux import InvalidResourceRequest, ResourceRequest, TaskFailedError, parallel, task, workflow
from flux.domain.events import EventType, ExecutionState
from flux.model.runtime import ExecutionContext, run_workflow


def types(execution) -> list[str]:
    return [event["type"] for event in execution.events]


@task
async def double(n: int) -> int:
    return n * 2


@task
def sync_add(a: int, b: int) -> int:
    return a + b


@workflow
async def pipeline(ctx):
    doubled = await double(ctx.input)
    return await sync_add(doubled, 1)


def test_local_run_returns_output_and_event_log():
    execution = pipeline.run(5)
    assert execution.state is ExecutionState.COMPLETED and execution.output == 11
    assert types(execution) == [
        "WORKFLOW_STARTED",
        "TASK_STARTED",
        "TASK_COMPLETED",
        "TASK_STARTED",
        "TASK_COMPLETED",
        "WORKFLOW_COMPLETED",
    ]
    assert [e["task_id"] for e in execution.events if e["type"] == "TASK_COMPLETED"] == ["double:1", "sync_add:1"]


def test_task_ids_follow_call_order_under_parallel():
    @workflow
    async def fan_out(ctx):
        return await parallel(*(double(n) for n in range(4)))

    execution = fan_out.run()
    assert execution.output == [0, 2, 4, 6]
    completed = {e["task_id"]: e["value"] for e in execution.events if e["type"] == "TASK_COMPLETED"}
    assert completed == {"double:1": 0, "double:2": 2, "double:3": 4, "double:4": 6}


def test_completed_tasks_are_replayed_not_rerun():
    calls = []

    @task
    async def side_effect(n):
        calls.append(n)
        return n + 100

    @workflow
    async def resumable(ctx):
        a = await side_effect(1)
        b = await side_effect(2)
        return [a, b]

    events: list[dict] = []
    ctx = ExecutionContext("e1", "resumable", completed_tasks={"side_effect:1": 101}, emit=events.append)
    outcome, value = asyncio.run(run_workflow(resumable, ctx))
    assert value == [101, 102]
    assert calls == [2]  # the first call came from the log
    assert [e["task_id"] for e in events if e["type"] == "TASK_STARTED"] == ["side_effect:2"]


def test_retries_with_backoff_record_each_failure():
    attempts = []

    @task.with_options(retry_max_attempts=2, retry_delay=0.01, retry_backoff=2)
    async def flaky():
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionError("boom")
        return "ok"

    @workflow
    async def retrying(ctx):
        return await flaky()

    execution = retrying.run()
    assert execution.output == "ok"
    failures = [e["value"] for e in execution.events if e["type"] == "TASK_FAILED"]
    assert [f["will_retry"] for f in failures] == [True, True]
    assert failures[0]["error"] == "ConnectionError: boom"


def test_task_failing_every_attempt_fails_the_workflow():
    @task.with_options(retry_max_attempts=1, retry_delay=0)
    async def broken():
        raise ValueError("bad")

    @workflow
    async def failing(ctx):
        return await broken()

    execution = failing.run()
    assert execution.state is ExecutionState.FAILED
    assert "failed after 2 attempt(s): ValueError: bad" in execution.failure["error"]


def test_workflow_can_handle_a_failed_task():
    @task
    async def broken():
        raise ValueError("bad")

    @workflow
    async def tolerant(ctx):
        try:
            await broken()
        except TaskFailedError:
            return "handled"

    assert tolerant.run().output == "handled"


def test_task_timeout_is_a_failure():
    @task.with_options(timeout=0.05)
    async def slow():
        await asyncio.sleep(5)

    @workflow
    async def timed(ctx):
        return await slow()

    execution = timed.run()
    assert execution.state is ExecutionState.FAILED
    assert [e["value"]["error"] for e in execution.events if e["type"] == "TASK_FAILED"] == ["timed out"]


def test_results_must_be_json_serialisable():
    @task
    async def opaque():
        return object()

    @workflow
    async def bad_result(ctx):
        return await opaque()

    local = bad_result.run()  # a local run reads back what it pickled itself (flux.model.codecs)
    assert local.state is ExecutionState.COMPLETED and type(local.output) is object
    assert local.events[-1]["value"]["$codec"] == "pickle" and local.events[-1]["value"]["type"] == "object"
    outcome, failure = asyncio.run(run_workflow(bad_result, ExecutionContext("e1", "bad_result")))  # a worker's
    assert outcome is EventType.WORKFLOW_FAILED and "must be JSON-serialisable" in failure["error"]
    assert "no enabled codec takes it (enable pickle on the worker with FLUX_CODECS=pickle" in failure["error"]


def test_cancellation_is_recorded():
    @task
    async def forever():
        await asyncio.sleep(60)

    @workflow
    async def long(ctx):
        return await forever()

    async def cancel_soon():
        events: list[dict] = []
        job = asyncio.create_task(run_workflow(long, ExecutionContext("e", "long", emit=events.append)))
        await asyncio.sleep(0.05)
        job.cancel()
        return await job, events

    (outcome, _), events = asyncio.run(cancel_soon())
    assert outcome.value == "WORKFLOW_CANCELLED" and events[-1]["type"] == "WORKFLOW_CANCELLED"


def test_task_called_outside_a_workflow_is_a_plain_call():
    assert asyncio.run(double(4)) == 8


def test_spec_public_api_decorates_as_written():
    @workflow.with_options(
        requests=ResourceRequest(cpu=4, memory="8Gi", gpu=1, packages=["torch>=2.0"]),
        affinity={"region": "us-east-1"},
    )
    async def train(ctx): ...

    assert train.metadata() == {
        "name": "train",
        "requests": {"cpu": 4.0, "memory": 8 * 1024**3, "gpu": 1, "packages": ["torch>=2.0"]},
        "affinity": {"region": "us-east-1"},
    }


@pytest.mark.parametrize(
    "options, message",
    [
        ({"requests": {"memory": "8Gb"}}, "memory"),
        ({"requests": "cpu=4"}, "requests must be a ResourceRequest"),
        ({"affinity": ["region"]}, "affinity must be a mapping"),
        ({"affinity": {"region": None}}, "affinity['region']"),
        ({"name": "has space"}, "workflow name"),
    ],
)
def test_invalid_workflow_options_fail_at_decoration_naming_the_field(options, message):
    with pytest.raises((ValueError, InvalidResourceRequest)) as error:

        @workflow.with_options(**options)
        async def wf(ctx): ...

    assert message in str(error.value)


def test_workflow_must_be_async():
    with pytest.raises(TypeError, match="async def"):

        @workflow
        def not_async(ctx): ...


@pytest.mark.parametrize(
    "options, field",
    [
        ({"retry_max_attempts": -1}, "retry_max_attempts"),
        ({"retry_delay": -1}, "retry_delay"),
        ({"retry_backoff": 0.5}, "retry_backoff"),
        ({"timeout": 0}, "timeout"),
    ],
)
def test_invalid_task_options_fail_at_decoration(options, field):
    with pytest.raises(ValueError, match=field):

        @task.with_options(**options)
        async def t(): ...


def test_parallel_failure_cancels_siblings_and_nothing_follows_the_terminal_event():
    finished = []

    @task
    async def fails_fast():
        raise ValueError("first")

    @task
    async def slow_sibling():
        await asyncio.sleep(0.2)
        finished.append(True)
        return "late"

    @workflow
    async def fan(ctx):
        return await parallel(fails_fast(), slow_sibling())

    execution = fan.run()
    assert execution.state is ExecutionState.FAILED
    assert execution.events[-1]["type"] == "WORKFLOW_FAILED" and not finished


def test_stray_tasks_cannot_write_after_the_workflow_ends():
    @task
    async def straggler():
        await asyncio.sleep(0.05)
        return 1

    @workflow
    async def leaves_a_task_behind(ctx):
        ctx.stray = asyncio.ensure_future(straggler())
        return "done"

    async def run_and_linger():
        execution = await leaves_a_task_behind.run_async()
        await asyncio.sleep(0.2)  # the straggler finishes after the workflow
        return execution

    execution = asyncio.run(run_and_linger())
    assert execution.events[-1]["type"] == "WORKFLOW_COMPLETED"
    assert [e["type"] for e in execution.events].count("TASK_COMPLETED") == 0
