"""The flux-core-style corpus (tests/compat/corpus/, one file per construct): each
workflow run unchanged with ``Workflow.run`` and registered on a real server and
worker, with the state and output flux-core gave it (docs/migrating-from-flux-core.md)."""

from __future__ import annotations

import importlib.util
import json
import runpy
import sys
import warnings
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from flux.client import FluxClient, FluxClientError
from flux.model.fluxcore import MigrationWarning

CORPUS = Path(__file__).parent / "corpus"
BUILTINS = {"pair": [10, 6], "piped": 11, "dice_ok": True, "even": True, "stamped": True, "ident": 36}

#: file, input, resume values (in order), state, output (None: checked by ``FAILED_WITH``).
CASES = [
    ("greet_result", "Ada", [], "COMPLETED", "Good morning, Ada"),
    ("typed_context", {"prices": [3, 4]}, [], "COMPLETED", {"total": 7}),
    ("builtins_tour", 5, [], "COMPLETED", BUILTINS),
    ("pause_review", "tides", ["approved"], "COMPLETED", {"draft": "draft on tides", "verdict": "approved"}),
    ("gated_deploy", "1.2", [None], "COMPLETED", "deployed 1.2"),
    ("mapped_squares", [1, 2, 3], [], "COMPLETED", [1, 4, 9]),
    ("caught_failure", 3, [], "COMPLETED", {"recovered": True, "cause": "ValueError"}),
    ("failing_job", None, [], "FAILED", None),
    ("secret_token", None, [], "COMPLETED", 12),
    ("nightly_digest", None, [], "COMPLETED", "digest sent"),
    ("stored_frame", 4, [], "COMPLETED", {"rows": 4}),
    ("routed_query", "count", [], "COMPLETED", {"rows": ["COUNT"]}),
    ("refund_saga", "A1", [], "FAILED", None),
    ("review_graph", "a brief text", [], "COMPLETED", "short (12)"),
    ("hourly_batches", 3, [], "COMPLETED", [0, 10, 20]),
    ("refund_approval", [20, 500], [{"approved": True}], "COMPLETED", ["refunded 20", "refunded 500"]),
    ("settings_probe", None, [], "COMPLETED", {"has_home": True, "scheme": "http", "missing_named": True}),
    ("raised_error", ["4", "x", "-2"], [], "COMPLETED", [4, "ValueError", "-2 is negative"]),
]
FAILED_WITH = {"failing_job": ("RuntimeError", "disk full"), "refund_saga": ("RuntimeError", "no courier")}


def _module(name: str) -> dict:
    """The corpus file imported as a module of its own (its classes pickle by name)."""
    spec = importlib.util.spec_from_file_location(f"compat_corpus_{name}", CORPUS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MigrationWarning)
        spec.loader.exec_module(module)
    return vars(module)


def _check(name: str, state: str, output, expected_state: str, expected) -> None:
    assert state == expected_state, (name, state, output)
    if name in FAILED_WITH:
        assert (output["type"], output["message"]) == FAILED_WITH[name], output
    else:
        assert output == expected, (name, output)


@pytest.fixture
def local_secret():
    from flux.secret_managers import SecretManager

    SecretManager.current().save("API_TOKEN", "s3cr3t-value")
    yield
    SecretManager.current().remove("API_TOKEN")


@pytest.mark.parametrize(("name", "given", "resumes", "state", "output"), CASES, ids=[case[0] for case in CASES])
def test_each_construct_runs_unchanged_locally(
    name, given, resumes, state, output, local_secret, tmp_path, monkeypatch
):
    monkeypatch.setenv("FLUX_OUTPUT_STORAGE_DIR", str(tmp_path))
    wf = _module(name)[name]
    ctx = wf.run(given)
    for value in resumes:
        assert ctx.is_paused, ctx.to_json()
        ctx = wf.resume(ctx.execution_id, value)
    assert ctx.has_finished and ctx.has_succeeded is (state == "COMPLETED") and ctx.has_failed is (state == "FAILED")
    if ctx.has_failed:  # flux-core's output: the exception; the recorded failure (a server's output) beside it
        assert isinstance(ctx.output, Exception) and ctx.to_dict()["output"] == {
            key: ctx.failure[key] for key in ("type", "message")
        }
    _check(name, ctx.state.value, ctx.failure if ctx.has_failed else ctx.output, state, output)
    assert ctx.to_dict()["state"] == state and ctx.execution_id in ctx.to_json()


def test_run_with_execution_id_resumes_and_an_ended_run_comes_back_as_it_is():
    wf = _module("pause_review")["pause_review"]
    paused = wf.run("tides")
    assert paused.to_dict()["output"] == {"name": "review", "output": {"draft": "draft on tides"}}
    done = wf.run(execution_id=paused.execution_id)
    assert done.output == {"draft": "draft on tides", "verdict": None}
    assert wf.run(execution_id=done.execution_id) is done


def test_a_rejected_approval_fails_the_task_without_running_it():
    wf = _module("gated_deploy")["gated_deploy"]
    ctx = wf.resume(wf.run("1.3").execution_id, {"approved": False, "reason": "freeze"})
    assert ctx.has_failed and type(ctx.output).__name__ == "ApprovalRejected" and "freeze" in str(ctx.output)
    assert ctx.failure["type"] == "ApprovalRejected"
    assert not any(event["type"] == "TASK_STARTED" for event in ctx.events)


def test_rollback_warns_that_it_is_a_saga_here():
    import flux.model.fluxcore as fluxcore

    fluxcore._warned.discard("task rollback=")
    with pytest.warns(MigrationWarning, match=r"rollback=.*saga.*migrating-from-flux-core\.md"):
        runpy.run_path(str(CORPUS / "refund_saga.py"))


def test_run_with_a_resume_payload_warns_that_the_pause_returns_it():
    import flux.model.fluxcore as fluxcore

    fluxcore._warned.discard("run(execution_id=, resume_payload=)")
    wf = _module("pause_review")["pause_review"]
    paused = wf.run("tides")
    with pytest.warns(MigrationWarning, match=r"resume_payload=\).*returned None"):
        done = wf.run(execution_id=paused.execution_id, resume_payload="approved")
    assert done.output == {"draft": "draft on tides", "verdict": "approved"}


def test_a_failed_run_reads_as_on_flux_core_without_a_warning():
    ctx = _module("failing_job")["failing_job"].run()
    with warnings.catch_warnings():
        warnings.simplefilter("error", MigrationWarning)
        assert ctx.has_failed and json.loads(ctx.to_json())["output"] == {
            "type": "RuntimeError",
            "message": "disk full",
        }
    assert type(ctx.output) is RuntimeError and str(ctx.output) == "disk full"  # as its body raised it
    assert ctx.failure["type"] == "RuntimeError" and "traceback" in ctx.failure


def test_the_agent_layer_is_refused_by_name():
    with pytest.raises(ImportError, match="flux.tasks.ai"):
        import flux.tasks.ai  # noqa: F401


def test_the_corpus_registered_on_a_real_server_runs_with_the_same_state_and_output(
    make_cluster, tmp_path, monkeypatch
):
    monkeypatch.setenv("FLUX_OUTPUT_STORAGE_DIR", str(tmp_path / "outputs"))
    key_file = tmp_path / "secrets.key"
    key_file.write_text(Fernet.generate_key().decode())
    cluster = make_cluster(server_args=("--secrets-key-file", str(key_file)))
    cluster.start_worker("compat", labels={"role": "cpu"})
    with FluxClient(cluster.server_url) as client:
        client.set_secret("API_TOKEN", "s3cr3t-value")
        infos = {info["name"]: info for info in client.register(_flat_corpus(tmp_path))}
        assert {case[0] for case in CASES} <= set(infos)
        assert any("task 'charge' rollback=: a saga compensation" in note for note in infos["refund_saga"]["warnings"])
        assert any("secret_requests=: secret values are masked" in note for note in infos["secret_token"]["warnings"])
        started = {name: client.run(name, given)["id"] for name, given, *_ in CASES}
        for name, _, resumes, state, output in CASES:
            for value in resumes:
                _wait_paused(client, started[name])
                client.resume(started[name], value)
            execution = client.wait(started[name], 60)
            _check(name, execution["state"], _outcome(client, execution), state, output)
        schedule = client.show_schedule("nightly_digest")
        assert schedule["workflow"] == "nightly_digest" and schedule["cron"] == "30 2 * * *"
        assert client.show_schedule("hourly_batches")["every"] == 3600
        with pytest.raises(FluxClientError, match="declares namespace='billing'.*-n billing"):
            client.register(CORPUS / "billing")
        client.create_namespace("billing")
    with FluxClient(cluster.server_url, namespace="billing") as billing:
        assert [info["name"] for info in billing.register(CORPUS / "billing")] == ["billing_invoice"]


def _outcome(client: FluxClient, execution: dict):
    """The output, or a failure's value (its ``type`` and ``message``) from WORKFLOW_FAILED."""
    if execution["state"] != "FAILED":
        return execution.get("output")
    return next(e["value"] for e in client.events(execution["id"]) if e["type"] == "WORKFLOW_FAILED")


def _flat_corpus(tmp_path: Path) -> Path:
    """The corpus without its namespaced folder (registered apart, into its namespace)."""
    flat = tmp_path / "corpus"
    flat.mkdir()
    for path in CORPUS.glob("*.py"):
        (flat / path.name).write_text(path.read_text())
    return flat


def _wait_paused(client: FluxClient, execution_id: str) -> None:
    from waiting import eventually

    eventually(lambda: client.execution(execution_id)["state"] == "PAUSED", 30, f"{execution_id} never paused")
