"""OpenTelemetry tracing (docs/tracing.md): one trace per execution across the server,
the worker and the child; nothing at all (not even an import) when it is off."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from waiting import eventually

from flux import tracing

pytest.importorskip("opentelemetry.sdk.trace")

WORKFLOWS = """
    from flux import task, workflow

    @task
    async def step(n):
        return n + 1

    @task.with_options(retry_max_attempts=1, retry_delay=0.01)
    async def flaky(n):
        import flux
        if flux.current_task().retry == 1:
            raise ValueError("first try fails")
        return n

    @workflow
    async def two_steps(ctx):
        return await step(await step(ctx.input))

    @workflow
    async def retried(ctx):
        return await flaky(ctx.input)
"""

CHAIN = ["flux.submit", "flux.dispatch", "flux.claim", "flux.execution", "flux.task"]


def read_spans(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def spans_of(path, execution_id: str, count: int) -> list[dict]:
    """The execution's spans, once ``count`` are written (the worker's ends after the server's reply)."""

    def written():
        mine = [s for s in read_spans(path) if s["attributes"].get("flux.execution_id") == execution_id]
        return mine if len(mine) >= count else None

    return eventually(written, 30, f"fewer than {count} spans of {execution_id} in {path}: {read_spans(path)}")


@pytest.fixture
def traced(make_cluster, workflow_file, tmp_path, monkeypatch):
    """A cluster whose server, worker and children write their spans to one file."""
    path = tmp_path / "spans.jsonl"
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(tracing.ENV, f"file:{path}")
    cluster = make_cluster()
    from flux.client import FluxClient

    client = FluxClient(cluster.server_url)
    client.register_file(workflow_file(WORKFLOWS))
    yield cluster, client, path
    client.close()


@pytest.mark.integration
@pytest.mark.parametrize("runner", ["subprocess", "inprocess"])
def test_one_trace_chains_submit_to_each_task_across_processes(traced, runner):
    cluster, client, path = traced
    cluster.start_worker("w1", runner=runner)
    execution = client.run("two_steps", 1, wait=30)
    assert execution["state"] == "COMPLETED" and execution["output"] == 3

    spans = spans_of(path, execution["id"], 6)
    by_name: dict[str, list[dict]] = {}
    for span in spans:
        by_name.setdefault(span["name"], []).append(span)
    assert {name: len(found) for name, found in by_name.items()} == {
        "flux.submit": 1,
        "flux.dispatch": 1,
        "flux.claim": 1,
        "flux.execution": 1,
        "flux.task": 2,
    }
    assert len({span["trace_id"] for span in spans}) == 1
    ids = {span["span_id"]: span for span in spans}
    for span in by_name["flux.task"]:  # each task's chain of parents climbs to the submission
        chain, current = [], span
        while current is not None:
            chain.append(current["name"])
            current = ids.get(current["parent_id"]) if current["parent_id"] else None
        assert chain == list(reversed(CHAIN))
    assert by_name["flux.submit"][0]["parent_id"] is None
    child = "flux-child" if runner == "subprocess" else "flux-worker"
    assert {name: found[0]["service"] for name, found in by_name.items()} == {
        "flux.submit": "flux-server",
        "flux.dispatch": "flux-server",
        "flux.claim": "flux-server",
        "flux.execution": "flux-worker",
        "flux.task": child,
    }
    assert sorted(s["attributes"]["flux.task_id"] for s in by_name["flux.task"]) == ["step:1", "step:2"]
    assert by_name["flux.claim"][0]["attributes"] == {
        "flux.execution_id": execution["id"],
        "flux.workflow": "two_steps",
        "flux.worker": "w1",
        "flux.attempt": 1,
    }
    assert all(span["status"] != "ERROR" for span in spans)


@pytest.mark.integration
def test_a_failed_task_try_is_an_error_span_and_its_retry_a_new_one(traced):
    cluster, client, path = traced
    cluster.start_worker("w1")
    execution = client.run("retried", 5, wait=30)
    assert execution["output"] == 5
    tasks = [s for s in spans_of(path, execution["id"], 6) if s["name"] == "flux.task"]
    assert sorted((s["attributes"]["flux.retry"], s["status"]) for s in tasks) == [(1, "ERROR"), (2, "UNSET")]


def test_off_means_no_op_and_no_opentelemetry_import(tmp_path):
    """Run in a fresh interpreter: nothing configured, a local run imports no OpenTelemetry."""
    script = textwrap.dedent(
        """
        import sys
        from flux import task, workflow, tracing

        @task
        async def step(n):
            return n + 1

        @workflow
        async def two_steps(ctx):
            return await step(await step(ctx.input))

        assert not tracing.enabled() and tracing.setup("flux-test") is False
        with tracing.span("flux.task", {"a": 1}, parent="00-" + "1" * 32 + "-" + "2" * 16 + "-01") as span:
            assert span is None
        assert tracing.current_traceparent() is None
        assert two_steps.run(1).output == 3
        assert not [m for m in sys.modules if m.startswith("opentelemetry")], "opentelemetry was imported"
        print("ok")
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", tracing.ENV))}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_what_turns_it_on(monkeypatch):
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED", tracing.ENV):
        monkeypatch.delenv(name, raising=False)
    assert not tracing.enabled()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    assert tracing.enabled()
    monkeypatch.setenv(tracing.ENV, "off")
    assert not tracing.enabled()
    monkeypatch.setenv(tracing.ENV, "console")
    assert tracing.enabled()
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert not tracing.enabled()
