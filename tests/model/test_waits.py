"""Durable waits on the local runner (``Workflow.run`` plays the server's part in
memory): sleep, pause/resume, call, the workflow timeout, and their validation."""

from __future__ import annotations

import pytest

from flux import ChildWorkflowError, call, pause, sleep, task, workflow
from flux.domain.events import ExecutionState
from flux.domain.waits import child_id
from flux.registration import StaticError, read_source

S = ExecutionState


def _log(execution) -> list[tuple[str, str | None]]:
    return [(event["type"], event["task_id"]) for event in execution.events]


def test_sleep_pause_and_call_replay_their_results_without_rerunning_completed_tasks(monkeypatch):
    monkeypatch.setenv("FLUX_DURABLE_SLEEP_THRESHOLD", "0.2")
    ran: list[str] = []

    @task
    def step(label):
        ran.append(label)
        return label

    @workflow
    async def double(ctx):
        return await step(ctx.input * 2)

    @workflow
    async def flow(ctx):
        first = await step("first")
        await sleep(0.01)  # in place
        await sleep(0.3)  # durable: the attempt ends, a later one replays to here
        answer = await pause("approval", {"first": first})
        child = await call(double, 21)
        return [first, answer, child]

    paused = flow.run()
    assert paused.state is S.PAUSED and paused.output is None
    assert paused.wait == {"kind": "pause", "id": "pause:approval:1", "name": "approval", "payload": {"first": "first"}}
    assert ran == ["first"]

    done = paused.resume({"ok": True})
    assert done.state is S.COMPLETED and done.output == ["first", {"ok": True}, 42]
    assert ran == ["first", 42]  # 'first' was replayed by every later attempt, never re-run
    log = _log(done)
    assert log.count(("WAIT_COMPLETED", "sleep:1")) == 1 and ("WORKFLOW_SUSPENDED", "sleep:1") not in log
    for wait in ("sleep:2", "pause:approval:1", "call:1"):
        assert log.index(("WORKFLOW_SUSPENDED", wait)) < log.index(("WAIT_COMPLETED", wait))
    assert [kind for kind, _ in log].count("WORKFLOW_STARTED") == 4  # one attempt per durable wait, plus the first
    with pytest.raises(RuntimeError, match="not PAUSED"):
        done.resume()


def test_a_failed_child_raises_in_the_parent_and_a_paused_run_resumes_to_none():
    @workflow
    async def broken(ctx):
        raise ValueError("no")

    @workflow
    async def parent(ctx):
        try:
            await call(broken)
        except ChildWorkflowError as exc:
            return [exc.state, str(exc), await pause("ack")]

    done = parent.run().resume()
    assert done.state is S.COMPLETED
    assert done.output[0] == "FAILED" and "child workflow 'broken' ended FAILED: ValueError: no" in done.output[1]
    assert done.output[2] is None


def test_the_workflow_timeout_spans_attempts_and_ends_timed_out(monkeypatch):
    monkeypatch.setenv("FLUX_DURABLE_SLEEP_THRESHOLD", "0.1")

    @workflow.with_options(timeout=1.0)
    async def slow(ctx):
        await sleep(0.7)  # durable: a second attempt
        await sleep(0.7)  # each attempt alone is within the timeout; the two together are not

    ended = slow.run()
    assert ended.state is S.TIMED_OUT
    assert [event["type"] for event in ended.events] == [
        "WORKFLOW_STARTED",
        "WORKFLOW_SUSPENDED",
        "WAIT_COMPLETED",
        "WORKFLOW_STARTED",
        "WORKFLOW_SUSPENDED",
        "WORKFLOW_TIMED_OUT",
    ]
    assert ended.events[-1]["time"] < ended.events[-2]["value"]["until"]  # before the second sleep was due


def test_options_and_waits_are_validated_naming_what_is_wrong():
    for bad in (0, -1, "1h", True, float("inf")):
        with pytest.raises(ValueError, match="workflow 'w': timeout must be a number of seconds > 0"):
            workflow.with_options(name="w", timeout=bad)(_noop)
    assert workflow.with_options(timeout=90)(_noop).metadata()["timeout"] == 90.0
    assert "timeout" not in workflow(_noop).metadata()

    reading = read_source(
        "from flux import workflow\n@workflow.with_options(timeout=3600)\nasync def w(ctx): pass\n", "x.py"
    )
    assert reading.workflows[0].options.timeout == 3600.0
    with pytest.raises(StaticError, match="x.py:2: workflow 'w': timeout must be"):
        read_source("from flux import workflow\n@workflow.with_options(timeout=-5)\nasync def w(ctx): pass\n", "x.py")

    @task
    async def sleeps_inside():
        await sleep(1)

    @workflow
    async def misuse(ctx):
        which = ctx.input
        if which == "task":
            return await sleeps_inside()
        if which == "name":
            return await pause("not a name!")
        return await sleep(-1)

    assert "is awaited in the workflow's body, not inside a task" in misuse.run("task").failure["error"]
    assert "pause name 'not a name!'" in misuse.run("name").failure["error"]
    assert "sleep: must be more than 0 seconds" in misuse.run("negative").failure["error"]


def test_the_new_states_are_cli_filters_and_timed_out_is_terminal():
    from flux.cli.executions import STATES

    assert {"SLEEPING", "PAUSED", "AWAITING_CHILD", "TIMED_OUT"} <= set(STATES)
    assert S.TIMED_OUT.is_terminal and not S.PAUSED.is_terminal


def test_a_childs_id_derives_from_its_parent_and_the_call():
    assert child_id("a" * 32, "call:1") == child_id("a" * 32, "call:1") != child_id("a" * 32, "call:2")
    assert len(child_id("a" * 32, "call:1")) == 32


async def _noop(ctx):
    return None
