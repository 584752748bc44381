"""Fallback, rollback (saga), deterministic builtins, pipeline/map, the task cache and
secrets on the local runner: results, events, replay, and validation at decoration time."""

from __future__ import annotations

import asyncio
import datetime
import json
import uuid

import pytest

from flux import TaskFailedError, choice, now, pipeline, randint, random, task, uuid4, workflow
from flux import map as flux_map
from flux.domain.events import ExecutionState
from flux.model import caching
from flux.model.runtime import ExecutionContext, run_workflow
from flux.registration import StaticError, read_source


def of(events: list[dict], type_: str) -> list[str]:
    return [e["task_id"] for e in events if e["type"] == type_]


def replay(flow, events: list[dict], **context) -> tuple[list[dict], object]:
    """Run ``flow`` again as a later attempt would, from what ``events`` recorded."""
    completed = {e["task_id"]: e["value"] for e in events if e["type"] == "TASK_COMPLETED"}
    recorded = {e["task_id"]: e["value"] for e in events if e["type"] == "VALUE_RECORDED"}
    ended = {e["task_id"] for e in events if e["type"] in ("ROLLBACK_COMPLETED", "ROLLBACK_FAILED")}
    again: list[dict] = []
    ctx = ExecutionContext(
        "x",
        flow.name,
        attempt=2,
        completed_tasks=completed,
        recorded=recorded,
        rolled_back=ended,
        emit=again.append,
        **context,
    )
    outcome = asyncio.run(run_workflow(flow, ctx))
    return again, outcome


def test_a_fallback_result_is_the_task_result_and_is_replayed_not_rerun():
    ran = []

    def rescue(x):
        ran.append(("rescue", x))
        return f"cached {x}"

    @task.with_options(fallback=rescue, retry_max_attempts=1, retry_delay=0)
    async def flaky(x):
        ran.append(("flaky", x))
        raise RuntimeError("down")

    @workflow
    async def shop(ctx):
        return await flaky(1)

    run = shop.run()
    assert run.output == "cached 1" and ran == [("flaky", 1), ("flaky", 1), ("rescue", 1)]
    assert [e["type"] for e in run.events if e["task_id"]] == [
        "TASK_STARTED",
        "TASK_FAILED",
        "TASK_STARTED",
        "TASK_FAILED",
        "TASK_FALLBACK",
        "TASK_COMPLETED",
    ]
    events, (outcome, output) = replay(shop, run.events)
    assert output == "cached 1" and len(ran) == 3 and of(events, "TASK_STARTED") == []


def test_a_failing_fallback_fails_the_task_with_its_error():
    @task.with_options(fallback=lambda: 1 / 0)
    async def broken():
        raise RuntimeError("down")

    @workflow
    async def flow(ctx):
        try:
            await broken()
        except TaskFailedError as exc:
            return str(exc)

    assert "its fallback failed: ZeroDivisionError" in flow.run().output


def test_rollbacks_run_when_the_workflow_fails_newest_first_and_a_failing_one_stops_none():
    undone = []

    def cancel(name, result):
        if name == "b":
            raise RuntimeError("cannot cancel b")
        undone.append((name, result))

    @task.with_options(rollback=cancel)
    async def book(name):
        return f"booking-{name}"

    @task
    async def pay():
        raise RuntimeError("declined")

    @workflow
    async def trip(ctx):
        await book("a")
        await book("b")
        await book("c")
        await pay()

    run = trip.run()
    assert run.state is ExecutionState.FAILED and "declined" in run.failure["error"]
    assert undone == [("c", "booking-c"), ("a", "booking-a")]
    assert of(run.events, "ROLLBACK_STARTED") == ["book:3", "book:2", "book:1"]
    assert of(run.events, "ROLLBACK_FAILED") == ["book:2"] and of(run.events, "ROLLBACK_COMPLETED") == [
        "book:3",
        "book:1",
    ]
    assert run.events[-1]["type"] == "WORKFLOW_FAILED"

    # a replay after a crash mid-rollback: c's ended (not run again), a's did not
    crashed = run.events[
        : run.events.index(next(e for e in run.events if e["type"] == "ROLLBACK_STARTED" and e["task_id"] == "book:1"))
    ]
    undone.clear()
    events, (outcome, _) = replay(trip, crashed)
    assert undone == [("a", "booking-a")] and of(events, "ROLLBACK_STARTED") == ["book:1"]
    assert of(events, "TASK_STARTED") == ["pay:1"]  # the failed task runs again; the completed ones never


def test_no_rollback_when_the_workflow_completes_or_for_a_task_that_did_not_complete():
    undone = []

    @task.with_options(rollback=lambda: undone.append("x"))
    async def step():
        raise RuntimeError("half done")

    @workflow
    async def flow(ctx):
        if ctx.input:
            await step()
        return "ok"

    assert flow.run(False).output == "ok" and flow.run(True).state is ExecutionState.FAILED
    assert undone == []


def test_builtins_are_recorded_once_and_replayed_with_the_same_values():
    @task
    async def inside():
        return await randint(1, 10**9)  # inside a task: fresh, not recorded (the result is)

    @workflow
    async def flow(ctx):
        values = [await now(), await uuid4(), await randint(1, 6), await choice(["x", "y", object]), await random()]
        return [str(v) if not isinstance(v, (int, float)) else v for v in values] + [await inside()]

    run = flow.run()
    assert of(run.events, "VALUE_RECORDED") == ["now:1", "uuid4:1", "randint:1", "choice:1", "random:1"]
    stamp, ticket, die, picked, fraction, _ = run.output
    assert datetime.datetime.fromisoformat(stamp).tzinfo is not None and uuid.UUID(ticket)
    assert 1 <= die <= 6 and picked in ("x", "y", str(object)) and 0 <= fraction < 1
    events, (outcome, output) = replay(flow, run.events)
    assert output == run.output and of(events, "VALUE_RECORDED") == []


def test_builtins_outside_a_workflow_and_their_validation():
    assert isinstance(asyncio.run(now()), datetime.datetime)
    with pytest.raises(ValueError, match="randint needs integers a <= b"):
        randint(3, 1)
    with pytest.raises(IndexError, match="empty sequence"):
        choice([])


def test_pipeline_and_map_use_task_ids_in_call_order():
    running, most = 0, 0

    @task
    async def inc(x):
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.01)
        running -= 1
        return x + 1

    @workflow
    async def flow(ctx):
        return [await pipeline(inc, inc, inc, input=0), await flux_map(inc, range(6), concurrency=2)]

    run = flow.run()
    assert run.output == [3, [1, 2, 3, 4, 5, 6]] and most == 2
    assert of(run.events, "TASK_COMPLETED")[:3] == ["inc:1", "inc:2", "inc:3"]
    events, (_, output) = replay(flow, run.events)
    assert output == run.output and of(events, "TASK_STARTED") == []


def test_map_and_pipeline_validate_their_arguments():
    with pytest.raises(ValueError, match="concurrency must be an int >= 1"):
        asyncio.run(flux_map(lambda x: x, [1], concurrency=0))
    with pytest.raises(ValueError, match="pipeline needs input="):
        asyncio.run(pipeline(lambda x: x))
    import flux

    assert "map" not in flux.__all__ and flux.map is flux_map  # a star import keeps the builtin


def test_cached_results_are_reused_across_executions_until_their_ttl():
    ran = []

    @task.with_options(cache=True, cache_ttl=60)
    async def square(n):
        ran.append(n)
        return n * n

    @workflow
    async def flow(ctx):
        return [await square(ctx.input), await square(ctx.input + 1)]

    caching.LOCAL.clear()
    first, second = flow.run(3), flow.run(3)
    assert first.output == second.output == [9, 16] and ran == [3, 4]
    assert of(first.events, "TASK_CACHE_STORED") == ["square:1", "square:2"]
    assert of(second.events, "TASK_CACHE_HIT") == ["square:1", "square:2"] and of(second.events, "TASK_STARTED") == []
    for key, (value, expires) in caching.LOCAL.items():
        caching.LOCAL[key] = (value, 0.0)  # expired
    assert flow.run(3).output == [9, 16] and ran == [3, 4, 3, 4]


def test_the_cache_key_is_stable_and_changes_with_the_arguments_and_the_code():
    @task.with_options(cache=True)
    async def f(a, b=1):
        return a + b

    key = caching.key_for(f, (1,), {"b": 2})
    assert key == caching.key_for(f, (1,), {"b": 2}) and len(key) == 64
    assert key != caching.key_for(f, (2,), {"b": 2})

    @task.with_options(cache=True, name="f")
    async def g(a, b=1):
        return a - b

    assert caching.key_for(g, (1,), {"b": 2}) != key
    with pytest.raises(TypeError, match="task 'f' has cache=True: its arguments must be JSON"):
        caching.key_for(f, (object(),), {})


def test_secrets_reach_only_the_task_that_requested_them_and_are_masked_everywhere():
    seen = {}

    @task.with_options(secret_requests=["DB_URL"])
    def connect(table, secrets):
        seen.update(secrets)
        print("connecting to", secrets["DB_URL"])
        raise ConnectionError(f"cannot reach {secrets['DB_URL']}")

    @workflow
    async def flow(ctx):
        return await connect("users")

    run = flow.run(secrets={"DB_URL": "postgresql://app:hunter2@db/app", "OTHER": "not-asked-for"})
    assert seen == {"DB_URL": "postgresql://app:hunter2@db/app"}
    assert run.state is ExecutionState.FAILED and "cannot reach ***" in run.failure["error"]
    assert "hunter2" not in json.dumps(run.events) + json.dumps(run.failure) + repr(run.output.inner_exception)
    missing = flow.run()
    assert "SecretsUnavailable: secret(s) not set: DB_URL" in missing.failure["error"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"cache": "yes"}, "task 'f': cache must be True or False"),
        ({"cache": True, "cache_ttl": 0}, "task 'f': cache_ttl must be a number of seconds > 0"),
        ({"cache_ttl": 10}, "task 'f': cache_ttl needs cache=True"),
        ({"secret_requests": "DB_URL"}, "task 'f': secret_requests must be a list of secret names"),
        ({"secret_requests": ["bad name"]}, "task 'f': secret_requests: secret name 'bad name' must be"),
        ({"secret_requests": ["A"]}, "task 'f': secret_requests needs a 'secrets' parameter on f()"),
        ({"rollback": "undo"}, "task 'f': rollback must be a function"),
    ],
)
def test_options_are_validated_at_decoration_time_naming_the_option(options, message):
    def f():
        return None

    with pytest.raises(ValueError) as error:
        task.with_options(**options)(f)
    assert str(error.value).startswith(message), str(error.value)


def test_static_registration_reads_and_validates_the_new_options():
    header = "from flux import task, workflow\n"
    source = header + (
        "@task.with_options(cache=True, cache_ttl=3600, secret_requests=['DB_URL'])\n"
        "def load(x, secrets): ...\n"
        "@workflow\nasync def flow(ctx): ...\n"
    )
    options = read_source(source, "f.py").tasks[0].options
    assert (options.cache, options.cache_ttl, options.secret_requests) == (True, 3600, ("DB_URL",))
    with pytest.raises(StaticError, match="f.py:2: task 'load': cache_ttl needs cache=True"):
        read_source(header + "@task.with_options(cache_ttl=5)\ndef load(x): ...\n", "f.py")


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_the_server_stores_cache_entries_on_checkpoint_and_keeps_secrets_encrypted(backend, tmp_path, request):
    """The cache and secret stores on both databases (no server process: their functions)."""
    from types import SimpleNamespace

    from cryptography.fernet import Fernet, MultiFernet
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from flux.server import secrets, task_cache
    from flux.server.database import make_engine, migrate
    from flux.server.errors import NotFound
    from flux.server.service_models import SecretModel

    url = request.getfixturevalue("pg_url") if backend == "postgresql" else f"sqlite:///{tmp_path / 'f.db'}"
    migrate(url)
    engine = make_engine(url)
    request.getfixturevalue("monkeypatch").setenv(secrets.KEY_ENV, Fernet.generate_key().decode())
    keys = secrets.keyring()

    def event(type_, value, at=1.0):
        return SimpleNamespace(type=type_, name="square", task_id="square:1", value=value, time=at)

    execution = SimpleNamespace(id="e" * 32, namespace="default")
    with Session(engine) as session, session.begin():
        batch = [event("TASK_COMPLETED", 81), event("TASK_CACHE_STORED", {"key": "a" * 64, "ttl": 10})]
        assert task_cache.record(session, execution, batch) == 1
        assert (
            task_cache.record(session, execution, [event("TASK_COMPLETED", 82), batch[1]]) == 1
        )  # replaced, not a conflict
        assert task_cache.lookup(session, "a" * 64, now=5.0) == (True, 82)
        assert task_cache.lookup(session, "a" * 64, now=12.0) == (False, None)  # past its ttl
        assert task_cache.clear(session, task="other") == 0 and task_cache.clear(session, task="square") == 1
        secrets.put(session, keys, "DB_URL", "postgresql://u:hunter2@db/x")
        stored = session.scalars(select(SecretModel.encrypted)).one()
        assert "hunter2" not in stored and [s.name for s in secrets.listed(session)] == ["DB_URL"]
        assert secrets.values_for(session, keys, ["DB_URL"]) == {"DB_URL": "postgresql://u:hunter2@db/x"}
        with pytest.raises(NotFound, match=r"not set in namespace 'default': NOPE \(set with: flux secret set NOPE\)"):
            secrets.values_for(session, keys, ["NOPE"])
        secrets.check_key(session, keys)
        with pytest.raises(secrets.SecretsKeyError, match="holds 1 secret"):
            secrets.check_key(session, None)
        with pytest.raises(secrets.SecretsKeyError, match="does not decrypt"):
            secrets.check_key(session, MultiFernet([Fernet(Fernet.generate_key())]))
    engine.dispose()


def test_event_types_are_listed_in_the_openapi_schema(tmp_path):
    from flux.server.app import create_app
    from flux.server.settings import ServerSettings

    schema = json.dumps(create_app(ServerSettings(home=tmp_path)).openapi())
    for name in (
        "TASK_FALLBACK",
        "TASK_CACHE_HIT",
        "TASK_CACHE_STORED",
        "ROLLBACK_STARTED",
        "ROLLBACK_COMPLETED",
        "ROLLBACK_FAILED",
        "VALUE_RECORDED",
    ):
        assert f'"{name}"' in schema
