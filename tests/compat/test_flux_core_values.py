"""flux-core's values and reads (issue 54), one corpus file per construct in
tests/compat/corpus/values/: each run as flux-core users run it (``python file.py``),
printing what flux-core 0.87.5 printed for it, then registered on a real server and
worker; ``flux migrate check`` on the same files names only what differs on a server."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from flux.cli import main
from flux.client import FluxClient
from flux.model import codecs

ROOT = Path(__file__).resolve().parents[2]
VALUES = Path(__file__).parent / "corpus" / "values"
HAS_PANDAS = subprocess.run([sys.executable, "-c", "import pandas"], capture_output=True).returncode == 0
NO_PANDAS = "pandas is not installed: frame_report.py's tasks return DataFrames"

#: What each program printed on flux-core 0.87.5 (an object's address masked).
PRINTED = {
    "cancel_before_start": ["state: CANCELLED", "output: None", "started later: ['label-0', 'label-1']"],
    "array_stats": ["state: COMPLETED", "output: {'sensor': 'probe-7', 'count': 4, 'total': 12.0}"],
    "frame_report": ["state: COMPLETED", "output: {'cities': ['c4', 'c3'], 'visits': 7}"],
    "pause_offer": [
        "paused: True",
        "offered: {'item': 'lamp', 'price': 40}",
        "pause name: offer_review",
        "output: {'offer': {'item': 'lamp', 'price': 40}, 'answer': 'accepted'}",
    ],
    "elapsed_span": ["type: timedelta", "output: 2 days, 12:00:00", "hours: 60.0"],
    "stored_reference": [
        "type: OutputStorageReference",
        "storage: local_file",
        "value: {'sku-0': 0, 'sku-1': 3, 'sku-2': 6}",
    ],
    "schedule_print": [
        "output: collected ledger",
        "schedule: <flux.domain.schedule.CronSchedule object at 0x>",
        "type: cron",
    ],
    "run_fields": [
        "keys: ['workflow_id', 'workflow_namespace', 'workflow_name', 'execution_id', 'input', 'output', 'state', "
        "'current_worker']",
        "namespace: default",
        "worker: ''",
        "output: HEY",
    ],
    "resumed_worker": ["paused worker: ''", "resumed worker: 'local'", "output: DRAFT ON TIDES"],
    "failed_fields": [
        "state: FAILED",
        "output: {'type': 'ValueError', 'message': \"invalid literal for int() with base 10: 'eighty'\"}",
    ],
}


def _printed(name: str, tmp_path: Path) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-W", "ignore", str(VALUES / f"{name}.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT), "FLUX_OUTPUT_STORAGE_DIR": str(tmp_path / "outputs")},
    )
    assert done.returncode == 0, done.stderr
    return [re.sub(r"0x[0-9a-f]+", "0x", line) for line in done.stdout.splitlines()]


@pytest.mark.parametrize("name", sorted(PRINTED))
def test_each_program_prints_what_it_printed_on_flux_core(name, tmp_path):
    if name == "frame_report" and not HAS_PANDAS:
        pytest.skip(NO_PANDAS)
    assert _printed(name, tmp_path) == PRINTED[name]


def test_a_result_json_lacks_is_recorded_as_its_codec_s_envelope_and_refused_where_not_enabled():
    from flux.model.runtime import to_json_value

    recorded = to_json_value({"span": __import__("datetime").timedelta(hours=1), "n": 2}, "r", chain=True)
    assert recorded == {"span": {"$codec": "std", "type": "datetime.timedelta", "data": 3600.0}, "n": 2}
    assert codecs.decode(recorded)["span"].total_seconds() == 3600 and codecs.decode({"n": 2}) == {"n": 2}
    with pytest.raises(TypeError, match=r"object is not JSON serializable.*FLUX_CODECS=pickle"):
        to_json_value(object(), "r", chain=True)  # no local run, no FLUX_CODECS: a worker that did not opt in
    pickled = {"$codec": "pickle", "type": "object", "data": "gARLAS4="}
    with pytest.raises(TypeError, match="codec 'pickle', which is not enabled here"):
        codecs.decode(pickled)


def test_the_corpus_on_a_real_server_and_worker_ends_with_the_same_state_and_output(make_cluster, tmp_path):
    """The worker opted in to pickle (``FLUX_CODECS=pickle``); the server stores each envelope
    as JSON and never decodes it, so what the API shows of a timedelta is its envelope."""
    cluster = make_cluster()
    cluster.start_worker("values", env={codecs.ENV: "pickle", "FLUX_OUTPUT_STORAGE_DIR": str(tmp_path / "out")})
    cases = {
        "cancel_before_start": (2, "COMPLETED", ["label-0", "label-1"]),
        "array_stats": (4, "COMPLETED", {"sensor": "probe-7", "count": 4, "total": 12.0}),
        "elapsed_span": (1, "COMPLETED", {"$codec": "std", "type": "datetime.timedelta", "data": 216000.0}),
        "schedule_print": ("ledger", "COMPLETED", "collected ledger"),
        "run_fields": ("hey", "COMPLETED", "HEY"),
    }
    if HAS_PANDAS:
        cases["frame_report"] = (5, "COMPLETED", {"cities": ["c4", "c3"], "visits": 7})
    with FluxClient(cluster.server_url) as client:
        client.register(VALUES)
        started = {name: client.run(name, given)["id"] for name, (given, _, _) in cases.items()}
        offer = client.run("pause_offer", "lamp")["id"]
        stored = client.run("stored_reference", 3)["id"]
        for name, (_, state, output) in cases.items():
            execution = client.wait(started[name], 60)
            assert (execution["state"], execution.get("output")) == (state, output), (name, execution)
        _wait_paused(client, offer)
        client.resume(offer, "accepted")
        assert client.wait(offer, 60)["output"] == {"offer": {"item": "lamp", "price": 40}, "answer": "accepted"}
        reference = client.wait(stored, 60)["output"]
        assert reference["storage_type"] == "local_file" and reference["metadata"] == {"serializer": "json"}
        events = client.events(started["array_stats"])
        pickled = [e["value"] for e in events if e["type"] == "TASK_COMPLETED"]
        assert [v["$codec"] for v in pickled] == ["pickle", "numpy"]  # the codec named in the event
        assert pickled[1]["data"] == {"dtype": "<f8", "shape": [4], "values": [0.0, 2.0, 4.0, 6.0]}  # readable


def test_migrate_check_names_only_server_differences_on_this_corpus():
    result = CliRunner().invoke(main, ["migrate", "check", "--format", "json", str(VALUES)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["counts"]["changes meaning"] == 0 and report["counts"]["refused"] == 0
    found = {(Path(f["file"]).name, f["construct"]): f["verdict"] for f in report["findings"]}
    assert found[("cancel_before_start.py", "ExecutionContext(...)")] == "runs"
    assert found[("array_stats.py", "results of numpy")] == "differs on a server"
    assert found[("frame_report.py", "results of pandas")] == "differs on a server"
    assert found[("schedule_print.py", "with_options(schedule=...)")] == "differs on a server"
    assert found[("stored_reference.py", "with_options(output_storage=...)")] == "differs on a server"
    text = CliRunner().invoke(main, ["migrate", "check", str(VALUES)]).output
    assert "differs on a server:" not in text and "0 changes meaning" in text  # quieter: counted, listed with --all


def test_migrate_check_still_names_what_differs_for_a_local_run(tmp_path):
    (tmp_path / "legacy.py").write_text(
        "from flux import ExecutionContext\n"
        "from flux.task import task\n"
        "@task.with_options(rollback=undo, secret_requests=['K'])\n"
        "async def charge(): ...\n"
        "ctx = ExecutionContext(workflow_id='w', workflow_namespace='default', workflow_name='w', state='RUNNING')\n"
    )
    result = CliRunner().invoke(main, ["migrate", "check", str(tmp_path)])
    assert "legacy.py:3: with_options(rollback=...)" in result.output
    assert "legacy.py:3: with_options(secret_requests=...)" in result.output
    assert "legacy.py:5: ExecutionContext(...): a local run not yet started; state not taken over" in result.output


def _wait_paused(client: FluxClient, execution_id: str) -> None:
    from waiting import eventually

    eventually(lambda: client.execution(execution_id)["state"] == "PAUSED", 30, f"{execution_id} never paused")
