"""What an operator sees at the command line (issue 38): drain and undrain answer with
the worker's summary, a server whose port is taken says so before touching the
database, the top group's client options, the demo's next steps, progress at 80
columns, tables that fit 80 columns. Real server and worker; the CLI as a subprocess."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flux.cli.demo import NEXT
from flux.cli.watch import Tracker, _goes_on, _StatusLine, progress_text
from flux.client import FluxClient
from flux.local import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = """
    from flux import ResourceRequest, task, workflow

    @task
    async def greet(name):
        return f"Hello, {name}"

    @workflow.with_options(requests=ResourceRequest(cpu=2, memory="512Mi"))
    async def nightly_feature_backfill_v2(ctx):
        return await greet(ctx.input)
"""


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> LocalCluster:
    home = tmp_path_factory.mktemp("operator")
    cluster = LocalCluster(home / "home")
    cluster.start_server()
    cluster.start_worker("w1", labels={"zone": "a"}, max_concurrent_executions=3)
    source = home / "operator_flows.py"
    source.write_text(textwrap.dedent(WORKFLOWS))
    with FluxClient(cluster.server_url) as client:
        client.register_file(source)
    yield cluster
    cluster.close()


def flux(*args: str, url: str | None = None, cwd: Path | None = None, columns: int = 80) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FLUX_")}
    environ["COLUMNS"] = str(columns)
    if url:
        environ["FLUX_SERVER_URL"] = url
    return subprocess.run(
        [sys.executable, "-m", "flux", *args], capture_output=True, text=True, env=environ, cwd=cwd, timeout=120
    )


def fits(text: str, columns: int = 80) -> None:
    wide = [line for line in text.splitlines() if len(line) > columns]
    assert not wide, "\n".join(wide)


def test_drain_and_undrain_answer_with_the_worker_summary(fleet):
    drained = flux("worker", "drain", "w1", url=fleet.server_url)
    assert drained.returncode == 0, drained.stderr
    lines = drained.stdout.splitlines()
    assert lines[0] == "worker w1" and len(lines) < 25, drained.stdout
    assert lines[1].split()[:2] in (["state", "DRAINED"], ["state", "DRAINING"])
    assert '"version"' not in drained.stdout and "(--packages lists them)" in drained.stdout
    undrained = flux("worker", "undrain", "w1", url=fleet.server_url)
    assert undrained.stdout.splitlines()[1].split()[:2] == ["state", "ONLINE"], undrained.stdout
    record = json.loads(flux("worker", "undrain", "w1", "--format", "json", url=fleet.server_url).stdout)
    assert record["name"] == "w1" and "packages" in record  # scripts still get the whole record


def test_a_server_on_a_taken_port_says_so_before_it_migrates_and_exits_5(tmp_path):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        port = taken.getsockname()[1]
        result = flux("start", "server", "--home", str(tmp_path / "home"), "--port", str(port))
    finally:
        taken.close()
    assert result.returncode == 5, result.stderr
    assert (
        result.stderr.strip()
        == f"Error: cannot start: 127.0.0.1:{port} is in use (another Flux server?); stop it or choose --port"
    )
    assert not (tmp_path / "home" / "flux.db").exists() or (tmp_path / "home" / "flux.db").stat().st_size == 0


def test_a_first_start_prints_no_migration_lines(fleet):
    log = fleet.log("server")
    assert "alembic" not in log and "Running upgrade" not in log, log


def test_client_options_may_come_before_the_command(fleet):
    listed = flux("--server-url", fleet.server_url, "workflow", "list", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    assert [w["name"] for w in json.loads(listed.stdout)] == ["nightly_feature_backfill_v2"]
    assert flux("-n", "default", "--server-url", fleet.server_url, "workflow", "list").returncode == 0
    elsewhere = flux("-n", "nowhere", "--server-url", fleet.server_url, "workflow", "list")
    assert elsewhere.returncode != 0 and "nowhere" in elsewhere.stderr, elsewhere.stderr
    own = flux("--server-url", "http://127.0.0.1:9", "workflow", "list", "--server-url", fleet.server_url)
    assert own.returncode == 0, own.stderr  # the command's own flag wins


def test_the_demos_next_steps_work_in_order_and_name_the_console(fleet):
    commands = [line.strip() for line in NEXT.splitlines() if line.strip().startswith("flux workflow")]
    assert [shlex.split(c)[:3] for c in commands] == [["flux", "workflow", "register"], ["flux", "workflow", "run"]]
    for command in commands:
        done = flux(*shlex.split(command)[1:], url=fleet.server_url, cwd=ROOT)
        assert done.returncode == 0, f"{command}: {done.stderr}"
    assert '"Hello, you!"' in done.stdout or "Hello, you" in done.stdout
    assert "/ui" in NEXT


def test_progress_reads_as_a_bar_and_fits_80_columns():
    from rich.console import Console

    assert progress_text(1 / 3) == "███░░░░░░░ 33%"
    assert progress_text({"loss": 0.123456789, "step": 3}) == '{"loss":0.1235,"step":3}'
    assert progress_text(7) == "7" and progress_text("warming up") == "warming up"
    tracker = Tracker(
        {"id": "3f2a1b2c" * 4, "workflow_name": "train_a_rather_big_model", "state": "RUNNING", "attempt": 1}
    )
    tracker.apply({"type": "PROGRESS", "task_id": "epoch:1", "value": 0.4})
    console = Console(width=80, record=True, force_terminal=False)
    console.print(_StatusLine(tracker))  # the live line
    line = console.export_text().rstrip("\n")
    assert len(line) <= 80 and "\n" not in line and "████░░░░░░ 40%" in line, line


def test_a_paused_execution_left_by_timeout_suggests_resume():
    assert "flux execution resume 3f2a1b2c --input JSON" in _goes_on("3f2a1b2c" * 4, "PAUSED")
    assert "flux execution cancel 3f2a1b2c" in _goes_on("3f2a1b2c" * 4, "RUNNING")


# --- tables at 80 columns -------------------------------------------------------------------


def test_workflow_list_fits_80_columns_with_whole_names_and_readable_requests(fleet):
    shown = flux("workflow", "list", url=fleet.server_url).stdout
    fits(shown)
    assert "nightly_feature_backfill_v2" in shown  # not cut
    row = next(line for line in shown.splitlines() if "nightly_feature_backfill_v2" in line)
    assert "cpu=2," in row and "memory=512Mi" in shown
    assert "536870912" not in shown and '{"' not in shown


def test_worker_list_has_use_columns_and_labels_as_key_value(fleet):
    shown = flux("worker", "list", url=fleet.server_url).stdout
    fits(shown)
    header = shown.splitlines()[1]
    assert all(column in header for column in ("slots", "cpu", "memory", "labels"))
    row = next(line for line in shown.splitlines() if "w1" in line)
    assert "0/3" in row and "zone=a" in row and "% of " in row and '{"' not in shown


def test_execution_show_lists_only_what_has_a_value_and_events_have_a_time(fleet):
    with FluxClient(fleet.server_url) as client:
        done = client.run("nightly_feature_backfill_v2", "Ada", wait=60)
    shown = flux("execution", "show", done["id"], url=fleet.server_url).stdout
    fits(shown)
    fields = [
        line.split("│")[1].strip() for line in shown.splitlines() if line.startswith("│") and line.split("│")[1].strip()
    ]
    assert {"id", "state", "output", "worker_name", "finished_at"} <= set(fields)
    assert not {"unschedulable", "placement_note", "schedule", "wait", "parent", "children", "deadline"} & set(fields)
    assert "│ -" not in shown
    events = flux("execution", "events", done["id"], url=fleet.server_url).stdout
    fits(events)
    assert "time" in events.splitlines()[1]
    started = next(line for line in events.splitlines() if "WORKFLOW_STARTED" in line)
    assert any(len(part.strip()) == 12 and part.strip().count(":") == 2 for part in started.split("│"))  # 17:11:07.123


def test_execution_list_fits_80_columns_leaving_out_the_empty_schedule(fleet):
    with FluxClient(fleet.server_url) as client:
        done = client.run("nightly_feature_backfill_v2", "Ada", wait=60)
    shown = flux("execution", "list", url=fleet.server_url).stdout
    fits(shown)
    header = shown.splitlines()[1]
    assert all(column in header for column in ("id", "workflow", "state", "worker", "age")), header
    assert "schedule" not in header  # no run came from a schedule (tests/client/test_cli_tables.py: more)
    assert header.rstrip().endswith("┃") and f"│ {done['id'][:12]} │" in shown  # the last column is not cut off
