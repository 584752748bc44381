"""Failed runs as flux-core's code reads them (issue 54), one corpus file per shape of
flux-core's examples that fail (``dataframe_with_pause``, ``resource_requests``,
``tasks/task_timeout``, ``tasks/task_rollback``'s failure) in tests/compat/corpus/failures/:
each run as flux-core users run it (``python file.py``, a real process), printing what
flux-core 0.87.5 printed for it; then on a real server and worker, whose log records the
failure as a local run's ``failure`` holds it (docs/migrating-from-flux-core.md, "failure output")."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from flux.client import FluxClient

ROOT = Path(__file__).resolve().parents[2]
FAILURES = Path(__file__).parent / "corpus" / "failures"
HAS_PANDAS = subprocess.run([sys.executable, "-c", "import pandas"], capture_output=True).returncode == 0

#: Each engine names a timed-out call by its own task id (flux-core ``name_<digest>``, ours
#: ``name:n``), as each run has its own execution id: masked in both.
TASK_ID = re.compile(r"(Task \S+ \()[^)\s]+(\) timed out)")
NOT_REQUESTS = "'ExecutionContext' object has no attribute 'requests'"

#: What each program printed on flux-core 0.87.5 (Python 3.12), the task id masked.
PRINTED = {
    "unstarted_frame": [
        "state: FAILED",
        "output type: AttributeError",
        "output: 'NoneType' object has no attribute 'get'",
        "printed output: {'type': 'AttributeError', 'message': \"'NoneType' object has no attribute 'get'\"}",
    ],
    "requests_chain": [
        f"prepared: FAILED {{'type': 'AttributeError', 'message': \"{NOT_REQUESTS}\"}}",
        f"fitted: FAILED given {{'type': 'AttributeError', 'message': \"{NOT_REQUESTS}\"}}",
        "output types: AttributeError, AttributeError",
    ],
    "nested_timeout": [
        "report_timeout: FAILED {'type': 'ExecutionTimeoutError', "
        "'message': 'Task fetch_report (<task id>) timed out (1s).'}",
        "output type: ExecutionTimeoutError, has_failed: True",
        "report_nested_timeout: FAILED {'type': 'ExecutionTimeoutError', "
        "'message': 'Task fetch_report (<task id>) timed out (1s).'}",
        "output type: ExecutionTimeoutError, has_failed: True",
    ],
    "failed_charge": [
        "state: FAILED, has_failed: True",
        "output type: ExecutionError, an ExecutionError: True",
        "inner: ValueError: amount 250 over the limit",
        "printed output: {'type': 'ValueError', 'message': 'amount 250 over the limit'}",
    ],
}
#: How a program stopped on flux-core: its exit status and its error's last line.
STOPPED = {"requests_chain": (1, "TypeError: 'AttributeError' object is not a mapping")}


def _run(name: str, tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-W", "ignore", str(FAILURES / f"{name}.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT), "FLUX_OUTPUT_STORAGE_DIR": str(tmp_path / "outputs")},
    )


@pytest.mark.parametrize("name", sorted(PRINTED))
def test_each_program_prints_and_stops_as_it_did_on_flux_core(name, tmp_path):
    if name == "unstarted_frame" and not HAS_PANDAS:
        pytest.skip("pandas is not installed: unstarted_frame.py's tasks return DataFrames")
    done = _run(name, tmp_path)
    status, last = STOPPED.get(name, (0, None))
    assert done.returncode == status, done.stderr
    if last is not None:
        assert done.stderr.strip().splitlines()[-1] == last
    assert [TASK_ID.sub(r"\1<task id>\2", line) for line in done.stdout.splitlines()] == PRINTED[name]


def test_the_failures_on_a_real_server_and_worker_are_the_recorded_ones(make_cluster):
    """On a server the failure is recorded (WORKFLOW_FAILED's value) with flux-core's type and
    message (the innermost exception's), the same a local run's ``to_json()`` prints."""
    cluster = make_cluster()
    cluster.start_worker("failures")
    timed_out = {"type": "ExecutionTimeoutError", "message": "Task fetch_report (fetch_report:1) timed out (1s)."}
    cases = {
        "failed_charge": (250, {"type": "ValueError", "message": "amount 250 over the limit"}),
        "report_timeout": (None, timed_out),
        "report_nested_timeout": (None, timed_out),
    }
    if HAS_PANDAS:
        cases["unstarted_frame"] = (
            None,
            {"type": "AttributeError", "message": "'NoneType' object has no attribute 'get'"},
        )
    with FluxClient(cluster.server_url) as client:
        client.register(FAILURES)
        started = {name: client.run(name, given)["id"] for name, (given, _) in cases.items()}
        for name, (_, shown) in cases.items():
            execution = client.wait(started[name], 60)
            assert execution["state"] == "FAILED", (name, execution)
            output = next(e["value"] for e in client.events(execution["id"]) if e["type"] == "WORKFLOW_FAILED")
            assert {key: output.get(key) for key in shown} == shown, (name, output)
            assert "traceback" in output and output["error"], (name, output)
