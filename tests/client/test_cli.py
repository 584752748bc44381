"""The ``flux`` command line against a real server: what a newcomer types and reads."""

from __future__ import annotations

import json

import pytest
from shared import HELLO, error_line, flux


def test_cli_register_run_inspect(cluster, workflow_file):
    url = cluster.server_url
    cluster.start_worker("cli-worker", labels={"zone": "a"})
    registered = json.loads(
        flux("workflow", "register", str(workflow_file(HELLO)), "--format", "json", server_url=url).stdout
    )
    assert registered[0]["name"] == "hello" and registered[0]["version"] == 1
    assert "hello" in flux("workflow", "list", server_url=url).stdout

    execution = json.loads(
        flux("workflow", "run", "hello", '"CLI"', "--wait", "--format", "json", server_url=url).stdout
    )
    assert execution["state"] == "COMPLETED" and execution["output"] == "Hello, CLI"

    shown = flux("execution", "show", execution["id"], server_url=url).stdout
    assert "COMPLETED" in shown and "Hello, CLI" in shown
    events = json.loads(flux("execution", "events", execution["id"], "--format", "json", server_url=url).stdout)
    assert events[-1]["type"] == "WORKFLOW_COMPLETED"
    workers = json.loads(flux("worker", "list", "--format", "json", server_url=url).stdout)
    assert [(w["name"], w["labels"]) for w in workers] == [("cli-worker", {"zone": "a"})]
    assert "cpu " in flux("worker", "show", "cli-worker", server_url=url).stdout


def test_cli_cancel(cluster, workflow_file):
    url = cluster.server_url
    flux("workflow", "register", str(workflow_file(HELLO)), server_url=url)
    execution = json.loads(flux("workflow", "run", "hello", '"x"', "--format", "json", server_url=url).stdout)
    cancelled = json.loads(flux("execution", "cancel", execution["id"], "--format", "json", server_url=url).stdout)
    assert cancelled["state"] == "CANCELLED"


@pytest.mark.parametrize(
    "args, expected",
    [
        (("workflow", "run", "missing", "1"), "Error: HTTP 404: workflow 'missing' is not registered"),
        (("workflow", "run", "hello", "{bad json"), "Error: INPUT is not valid JSON"),
        (("execution", "show", "nope"), "Error: HTTP 404: execution 'nope' not found"),
    ],
)
def test_cli_bad_input_is_one_clear_line(cluster, args, expected):
    assert error_line(flux(*args, server_url=cluster.server_url, check=False)).startswith(expected)


def test_cli_workflow_file_without_a_workflow_leaves_nothing_behind(cluster, workflow_file):
    """Registration reads the source, never imports it: a missing import is no error here,
    a module without a @workflow is (docs/bundles.md)."""
    broken = workflow_file("import not_a_real_module_xyz\n", "broken.py")
    line = error_line(flux("workflow", "register", str(broken), server_url=cluster.server_url, check=False))
    assert "HTTP 422: broken.py: no @workflow found" in line
    assert json.loads(flux("workflow", "list", "--format", "json", server_url=cluster.server_url).stdout) == []


def test_cli_unreachable_server_is_one_clear_line():
    line = error_line(flux("workflow", "list", server_url="http://127.0.0.1:9", check=False))
    assert "cannot reach the Flux server at http://127.0.0.1:9" in line


def test_bootstrap_token_is_created_once_and_printed(tmp_path):
    first = flux("server", "bootstrap-token", home=tmp_path).stdout.strip()
    assert first == flux("server", "bootstrap-token", home=tmp_path).stdout.strip()
    assert (tmp_path / "bootstrap-token").stat().st_mode & 0o777 == 0o600


def test_worker_with_wrong_bootstrap_token_cannot_register(cluster):
    process = cluster.start_worker("rogue", extra_args=("--bootstrap-token", "wrong"), wait=False)
    assert process.wait(timeout=60) != 0
    assert cluster.log("worker-rogue").strip() == (
        "Error: the server refused registration: invalid bootstrap token (on the server's host, "
        "'flux server bootstrap-token' prints the running server's, whatever its --home)"
    )


def test_readme_demo_command_runs_the_main_job():
    result = flux("demo")
    assert "output: 'Hello, Flux'" in result.stdout
    assert "WORKFLOW_COMPLETED" in result.stdout
