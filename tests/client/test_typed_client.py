"""``flux.Client`` and ``flux.AsyncClient`` as application code uses them (issue 38):
typed results, ``run(...).result()`` raising a typed error with the remote traceback
on FAILED, TIMED_OUT and CANCELLED, events and logs as they come. Real server and
worker."""

from __future__ import annotations

import asyncio
import textwrap

import pytest

import flux
from flux.client.models import Event, Execution, LogLine
from flux.domain.events import ExecutionState
from flux.local import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

WORKFLOWS = """
    import asyncio
    from flux import progress, task, workflow

    @task
    async def square(n):
        print(f"squaring {n}", flush=True)
        await progress(0.5)
        return n * n

    @workflow
    async def squares(ctx):
        return await square(ctx.input)

    def charge(amount):
        raise ValueError(f"card declined for {amount}")

    @task
    def pay(amount):
        return charge(amount)

    @workflow
    async def checkout(ctx):
        return await pay(ctx.input)

    @workflow
    async def sleepy(ctx):
        await asyncio.sleep(60)

    @workflow.with_options(timeout=0.5)
    async def hurried(ctx):
        await asyncio.sleep(60)
"""


@pytest.fixture(scope="module")
def url(tmp_path_factory) -> str:
    home = tmp_path_factory.mktemp("typed")
    cluster = LocalCluster(home / "home")
    cluster.start_server()
    cluster.start_worker("w1", max_concurrent_executions=4)
    source = home / "typed_flows.py"
    source.write_text(textwrap.dedent(WORKFLOWS))
    with flux.Client(cluster.server_url) as client:
        client.sdk.register_file(source)
    yield cluster.server_url
    cluster.close()


def test_a_run_gives_its_result_typed_events_and_logs(url):
    with flux.Client(url) as client:
        run = client.run("squares", 7)
        assert run.result(timeout=60) == 49
        execution = run.execution()
        assert (
            isinstance(execution, Execution) and execution.state is ExecutionState.COMPLETED and execution.output == 49
        )
        events = list(run.events(follow=False))
        assert all(isinstance(e, Event) for e in events) and events[-1].type == "WORKFLOW_COMPLETED"
        assert [e.value for e in events if e.type == "PROGRESS"] == [0.5]
        lines = list(run.logs())  # follows until the execution has ended: it has
        assert all(isinstance(line, LogLine) for line in lines) and any(line.message == "squaring 7" for line in lines)
        assert client.get(run.id[:10]).execution().id == run.id  # a prefix will do


def test_a_failure_raises_with_the_remote_traceback(url):
    with flux.Client(url) as client:
        run = client.run("checkout", 12)
        with pytest.raises(flux.ExecutionFailed) as raised:
            run.result(timeout=60)
    error = raised.value
    assert isinstance(error, flux.ExecutionError) and error.execution.state is ExecutionState.FAILED
    assert error.failure.chain[0].type == "ValueError" and error.failure.chain[0].message == "card declined for 12"
    assert 'raise ValueError(f"card declined for {amount}")' in error.remote_traceback
    assert "in charge" in str(error) and "Remote traceback" in str(error)


def test_cancelled_timed_out_and_not_yet_ended_are_told_apart(url):
    with flux.Client(url) as client:
        sleepy = client.run("sleepy")
        with pytest.raises(TimeoutError, match="still"):
            sleepy.result(timeout=0.5)
        sleepy.cancel()
        with pytest.raises(flux.ExecutionCancelled):
            sleepy.result(timeout=60)
        with pytest.raises(flux.ExecutionTimedOut) as raised:
            client.run("hurried").result(timeout=60)
        assert raised.value.failure is None and "timeout" in raised.value.execution.error


def test_the_async_client_runs_and_follows_without_blocking_the_loop(url):
    async def scenario() -> tuple[int, list[str], int]:
        async with flux.AsyncClient(url) as client:
            runs = [await client.run("squares", n) for n in (2, 3)]
            kinds = [event.type async for event in runs[0].events(follow=True)]
            results = await asyncio.gather(*(run.result(timeout=60) for run in runs))
            try:
                await (await client.run("checkout", 1)).result(timeout=60)
            except flux.ExecutionFailed as error:
                failed = error.failure.chain[0].message
            return sum(results), kinds, failed

    total, kinds, failed = asyncio.run(scenario())
    assert total == 13 and kinds[-1] == "WORKFLOW_COMPLETED" and "TASK_STARTED" in kinds
    assert failed == "card declined for 1"
