"""The ``flux`` command line as people use it (issue 14): exit codes of ``--wait``,
unique-prefix ids, following logs and events, one-line errors, ``--debug``,
flux.toml's [client] section, ``python -m flux``. Real processes throughout; the
CLI runs as ``python -m flux``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import click
import httpx
import pytest
from shared import HELLO

from flux.client import FluxClient, FluxClientError, parse_sse
from flux.local import LocalCluster

WORKFLOWS = (
    HELLO
    + """
    import asyncio
    import logging

    from flux import progress

    @workflow
    async def boom(ctx):
        raise ValueError("no good")

    @workflow
    async def sleepy(ctx):
        await asyncio.sleep(ctx.input or 60)
        return "woke"

    @task
    async def step(i):
        await progress({"step": i})
        return i

    @task
    async def talk(i):
        print(f"hello from task {i}")
        logging.getLogger("chat").warning("careful %s", i)
        return i

    @workflow
    async def chatty(ctx):
        print("workflow says hi")
        for i in range(ctx.input or 2):
            await step(i)
            await talk(i)
            await asyncio.sleep(0.3)
        return "done"
"""
)

REGISTRATION_REFUSED = (
    "Error: the server refused registration: invalid bootstrap token (on the server's host, "
    "'flux server bootstrap-token' prints the running server's, whatever its --home)"
)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> LocalCluster:
    """One server and worker for the module (the CLI is what is under test, not the fleet)."""
    home = tmp_path_factory.mktemp("habits")
    cluster = LocalCluster(home / "home")
    cluster.start_server()
    cluster.start_worker("w1", max_concurrent_executions=6)
    source = home / "workflows.py"
    source.write_text(textwrap.dedent(WORKFLOWS))
    with FluxClient(cluster.server_url) as client:
        client.register_file(source)
    yield cluster
    cluster.close()


@pytest.fixture
def api(fleet) -> FluxClient:
    with FluxClient(fleet.server_url) as client:
        yield client


def flux(
    *args: str, url: str | None = None, env: dict | None = None, cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FLUX_")}
    if url:
        environ["FLUX_SERVER_URL"] = url
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "flux", *args], capture_output=True, text=True, env=environ, cwd=cwd, timeout=timeout
    )


def one_error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def wait_for_state(client: FluxClient, execution_id: str, states: tuple[str, ...], timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        execution = client.execution(execution_id)
        if execution["state"] in states:
            return execution
        time.sleep(0.1)
    raise AssertionError(f"{execution_id} still {execution['state']}, not {states}")


# --- --wait and its exit codes ------------------------------------------------------------------


def test_wait_exits_0_when_completed_and_prints_progress_lines(fleet):
    result = flux("workflow", "run", "chatty", "2", "--wait", "--format", "json", url=fleet.server_url)
    assert result.returncode == 0, result.stderr
    execution = json.loads(result.stdout)  # stdout: the record alone
    assert execution["state"] == "COMPLETED" and execution["output"] == "done"
    progress = result.stderr  # not a terminal: one plain line per change
    assert progress.splitlines()[0].startswith(f"execution {execution['id']} (chatty): ")
    assert "RUNNING on w1, attempt 1" in progress
    assert 'progress step:1 {"step":0}' in progress
    assert "task talk:2 completed" in progress
    assert progress.splitlines()[-1].startswith("COMPLETED after ")


def test_wait_exits_1_when_failed(fleet):
    result = flux("workflow", "run", "boom", "--wait", url=fleet.server_url)
    assert result.returncode == 1, result.stderr
    assert "FAILED" in result.stdout and "ValueError: no good" in result.stderr


def test_wait_exits_4_when_still_running_at_the_timeout(fleet, api):
    result = flux(
        "workflow", "run", "sleepy", "30", "--wait", "--timeout", "1", "--format", "json", url=fleet.server_url
    )
    assert result.returncode == 4, result.stderr
    execution = json.loads(result.stdout)
    assert execution["state"] in ("SCHEDULED", "CLAIMED", "RUNNING")
    assert f"execution {execution['id']} goes on" in result.stderr
    api.cancel(execution["id"])


def test_wait_exits_3_when_cancelled_meanwhile(fleet, api):
    environ = {
        **{k: v for k, v in os.environ.items() if not k.startswith("FLUX_")},
        "FLUX_SERVER_URL": fleet.server_url,
    }
    waiting = subprocess.Popen(
        [sys.executable, "-m", "flux", "workflow", "run", "sleepy", "60", "--wait", "--format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environ,
    )
    try:
        execution_id = waiting.stderr.readline().split()[1]  # "execution ID (sleepy): SCHEDULED"
        wait_for_state(api, execution_id, ("RUNNING",))
        api.cancel(execution_id)
        out, err = waiting.communicate(timeout=60)
    finally:
        waiting.kill()
    assert waiting.returncode == 3, err
    assert json.loads(out)["state"] == "CANCELLED"


def test_unreachable_server_exits_2_in_one_line_and_debug_shows_the_traceback():
    result = flux("workflow", "run", "hello", '"x"', "--wait", url="http://127.0.0.1:9")
    assert result.returncode == 2
    assert one_error_line(result).startswith("Error: cannot reach the Flux server at http://127.0.0.1:9")
    assert flux("execution", "show", "ab12", url="http://127.0.0.1:9").returncode == 2

    debug = flux("--debug", "workflow", "list", url="http://127.0.0.1:9")
    assert debug.returncode != 0 and "Traceback" in debug.stderr and "FluxConnectionError" in debug.stderr


def test_bad_input_and_missing_files_are_one_line(fleet, tmp_path):
    assert "INPUT is not valid JSON" in one_error_line(flux("workflow", "run", "hello", "{bad", url=fleet.server_url))
    missing = tmp_path / "missing.json"
    line = one_error_line(flux("workflow", "run", "hello", f"@{missing}", url=fleet.server_url))
    assert line == f"Error: cannot read INPUT from {missing}: No such file or directory"
    line = one_error_line(flux("workflow", "register", str(tmp_path / "nope.py"), url=fleet.server_url))
    assert line.startswith("Error: cannot read") and "nope.py" in line
    line = one_error_line(flux("workflow", "list", "--api-token-file", str(tmp_path / "token"), url=fleet.server_url))
    assert line.startswith("Error: cannot read the API token")
    line = one_error_line(flux("worker", "show", "ghost", url=fleet.server_url))
    assert line.startswith("Error: HTTP 404: ")
    (tmp_path / "input.json").write_text('{"name": "file"}')
    result = flux("workflow", "run", "hello", f"@{tmp_path / 'input.json'}", "--format", "json", url=fleet.server_url)
    assert json.loads(result.stdout)["input"] == {"name": "file"}


# --- unique-prefix ids ---------------------------------------------------------------------------


def test_an_execution_id_may_be_any_unique_prefix(fleet, api):
    ids = [api.run("hello", "p")["id"]]
    while len({i[0] for i in ids}) == len(ids):  # until two share their first hex digit
        ids.append(api.run("hello", "p")["id"])
    shared = next(i[0] for i in ids if sum(j[0] == i[0] for j in ids) > 1)
    unique = next(i for i in ids if not any(j != i and j.startswith(i[:12]) for j in ids))

    shown = json.loads(flux("execution", "show", unique[:12], "--format", "json", url=fleet.server_url).stdout)
    assert shown["id"] == unique
    assert api.resolve_execution(unique[:12].upper()) == unique
    assert api.resolve_execution(unique.upper()) == unique  # a full id is used as it is

    ambiguous = flux("execution", "show", shared, url=fleet.server_url)
    assert ambiguous.returncode == 1 and "Traceback" not in ambiguous.stderr
    assert f"'{shared}' matches" in ambiguous.stderr.splitlines()[0]
    for candidate in (i for i in ids if i.startswith(shared)):
        assert f"{candidate}  hello  " in ambiguous.stderr
    with pytest.raises(FluxClientError, match="type more of the id"):
        api.resolve_execution(shared)

    taken = {e["id"][:4] for e in api.list_executions(limit=1000)}
    absent = next(f"{n:04x}" for n in range(65536) if f"{n:04x}" not in taken)
    assert (
        one_error_line(flux("execution", "cancel", absent, url=fleet.server_url))
        == f"Error: no execution matches '{absent}'"
    )
    assert one_error_line(flux("execution", "events", "nope", url=fleet.server_url)).startswith(
        "Error: HTTP 404: execution 'nope' not found"
    )


# --- logs and events -----------------------------------------------------------------------------


def test_logs_and_events_of_an_execution_by_prefix(fleet, api):
    done = api.run("chatty", 2, wait=60)
    prefix = done["id"][:10]
    lines = flux("execution", "logs", prefix, url=fleet.server_url).stdout.splitlines()
    assert [line.split(" ", 2)[2] for line in lines] == [
        "[stdout] -: workflow says hi",
        "[stdout] talk:1: hello from task 0",
        "[log WARNING chat] talk:1: careful 0",
        "[stdout] talk:2: hello from task 1",
        "[log WARNING chat] talk:2: careful 1",
    ]
    only = flux(
        "execution", "logs", prefix, "--task", "talk:2", "--stream", "log", "--format", "json", url=fleet.server_url
    )
    assert [json.loads(line)["message"] for line in only.stdout.splitlines()] == ["careful 1"]
    events = flux("execution", "events", prefix, "--follow", url=fleet.server_url, timeout=30).stdout.splitlines()
    assert "WORKFLOW_COMPLETED" in events[-1] and any('PROGRESS step:2 {"step":1}' in e for e in events)


def test_logs_follow_streams_until_the_execution_ends(fleet, api):
    execution = api.run("chatty", 4)
    result = flux("execution", "logs", execution["id"][:8], "-f", url=fleet.server_url, timeout=60)
    assert result.returncode == 0, result.stderr
    assert api.execution(execution["id"])["state"] == "COMPLETED"  # it returned once the execution ended
    assert result.stdout.splitlines()[-1].endswith("[log WARNING chat] talk:4: careful 3")


def test_run_with_logs_shows_them_on_stderr(fleet):
    result = flux("workflow", "run", "chatty", "1", "--logs", "--format", "json", url=fleet.server_url)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["output"] == "done"
    assert "[stdout] talk:1: hello from task 0" in result.stderr


def test_following_by_polling_gives_what_the_stream_gives(fleet, api):
    """The fallback for a server without the stream, run against a real one."""
    done = api.run("chatty", 1, wait=60)
    streamed = list(api.follow_events(done["id"]))
    polled = list(api._poll(done["id"], lambda seq: api._events_after(done["id"], seq), 0))
    assert streamed == polled == api.events(done["id"])
    assert list(api.follow_logs(done["id"])) == list(api.logs(done["id"]))


def test_sse_parser_reads_fields_comments_multiline_data_and_ids():
    lines = [
        ": ping",
        "id: 1",
        "event: log",
        'data: {"seq": 1,',
        'data: "message": "a"}',
        "",
        "",
        "event: end",
        "data: {}",
        "",
        "retry: 10",
        "data:no space",
        "",
    ]
    messages = list(parse_sse(lines))
    assert [(m.event, m.data, m.id) for m in messages] == [
        ("log", '{"seq": 1,\n"message": "a"}', "1"),
        ("end", "{}", "1"),
        ("message", "no space", "1"),
    ]


def test_sse_parser_over_an_httpx_mock_transport_stream():
    """Only the parser is under test here: the bytes arrive cut at awkward places, CRLF."""
    body = (
        'id: 7\r\nevent: event\r\ndata: {"seq": 7}\r\n\r\n: keep-alive\r\n\r\n'
        'event: end\r\ndata: {"state": "COMPLETED"}\r\n\r\n'
    )
    chunks = [body[i : i + 5].encode() for i in range(0, len(body), 5)]

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=iter(chunks))

    with httpx.Client(transport=httpx.MockTransport(handler)) as http:
        with http.stream("GET", "http://flux.test/executions/x/events?follow=true") as response:
            messages = list(parse_sse(response.iter_lines()))
    assert [(m.event, json.loads(m.data), m.id) for m in messages] == [
        ("event", {"seq": 7}, "7"),
        ("end", {"state": "COMPLETED"}, "7"),
    ]


# --- workers ---------------------------------------------------------------------------------


def test_worker_show_is_concise_packages_on_request_json_in_full(fleet, api):
    running = api.run("sleepy", 60)
    wait_for_state(api, running["id"], ("RUNNING",))
    try:
        concise = flux("worker", "show", "w1", url=fleet.server_url).stdout
        rows = {line[:12].strip(): line[12:] for line in concise.splitlines()[1:] if line[:12].strip()}
        assert concise.splitlines()[0] == "worker w1"
        assert rows["state"] == "ONLINE"
        assert rows["slots"].endswith(" of 6") and "running" in rows["slots"]
        assert {"cpu", "memory", "disk", "heartbeat", "runtime", "running", "packages"} <= set(rows)
        assert rows["heartbeat"].split()[0].endswith("s") and " ago" in rows["heartbeat"]
        assert running["id"] in concise
        assert rows["packages"].endswith("(--packages lists them)")
        assert "httpx==" not in concise

        listed = flux("worker", "show", "w1", "--packages", url=fleet.server_url).stdout
        assert "httpx==" in listed and "click==" in listed

        record = json.loads(flux("worker", "show", "w1", "--format", "json", url=fleet.server_url).stdout)
        assert record["name"] == "w1" and {p["name"] for p in record["packages"]} >= {"httpx", "click"}
        assert "cpu_total" in record["resources"]
    finally:
        api.cancel(running["id"])


def test_start_worker_with_a_wrong_bootstrap_token_says_why_in_one_line(fleet, tmp_path):
    args = (
        "start",
        "worker",
        "rogue",
        "--server-url",
        fleet.server_url,
        "--bootstrap-token",
        "wrong",
        "--gpu-source",
        "none",
        "--runner",
        "inprocess",
    )
    env = {"FLUX_HOME": str(tmp_path)}
    assert one_error_line(flux(*args, env=env, timeout=60)) == REGISTRATION_REFUSED
    debug = flux("--debug", *args, env=env, timeout=60)
    assert debug.returncode != 0 and "Traceback" in debug.stderr and "401 Unauthorized" in debug.stderr


def test_worker_log_format_json_and_log_settings(fleet, tmp_path, monkeypatch):
    fleet.start_worker("wj", runner="inprocess", extra_args=("--log-format", "json"))
    fleet.kill_worker("wj", signal.SIGTERM)  # a clean stop: the server places nothing more on it
    logged = [json.loads(line) for line in fleet.log("worker-wj").splitlines() if line.startswith("{")]
    assert any(line["worker"] == "wj" and "registered" in line["message"] for line in logged)

    from click.testing import CliRunner

    from flux import cli, worker

    seen = {}

    async def capture(self):
        seen["config"] = self.config

    monkeypatch.setattr(worker.Worker, "run", capture)
    args = ["start", "worker", "w", "--bootstrap-token", "t", "--home", str(tmp_path)]
    assert CliRunner().invoke(cli.main, args).exit_code == 0
    assert (seen["config"].max_log_bytes, seen["config"].log_buffer_lines) == (10 * 1024**2, 10_000)
    result = CliRunner().invoke(cli.main, [*args, "--max-log-bytes", "2Mi"], env={"FLUX_LOG_BUFFER_LINES": "50"})
    assert result.exit_code == 0, result.output
    assert (seen["config"].max_log_bytes, seen["config"].log_buffer_lines) == (2 * 1024**2, 50)
    assert CliRunner().invoke(cli.main, [*args, "--log-format", "xml"]).exit_code == 2


# --- settings, help, entry points ----------------------------------------------------------------


def test_client_section_of_flux_toml_sets_every_client_command(fleet, tmp_path):
    (tmp_path / "flux.toml").write_text(f'[client]\nserver_url = "{fleet.server_url}"\nformat = "json"\n')
    listed = flux("workflow", "list", cwd=tmp_path)  # ./flux.toml, no FLUX_SERVER_URL
    assert listed.returncode == 0, listed.stderr
    assert "hello" in {w["name"] for w in json.loads(listed.stdout)}
    assert json.loads(flux("worker", "show", "w1", cwd=tmp_path).stdout)["name"] == "w1"
    assert flux("workflow", "list", "--format", "table", cwd=tmp_path).stdout.startswith("┏")  # the flag wins
    assert (
        flux("workflow", "list", cwd=tmp_path, env={"FLUX_SERVER_URL": "http://127.0.0.1:9"}).returncode == 2
    )  # env too

    (tmp_path / "flux.toml").write_text('[client]\napi_token = "secret"\n')
    line = one_error_line(flux("workflow", "list", cwd=tmp_path))
    assert "[client]: unknown setting(s) api_token (known: api_token_file, format, namespace, server_url)" in line


def test_client_section_api_token_file_and_the_api_token_flag(make_cluster, tmp_path):
    token = tmp_path / "api-token"
    token.write_text("s3cret\n")
    cluster = make_cluster(server_args=("--api-token-file", str(token)))
    url = cluster.server_url
    assert "HTTP 401" in one_error_line(flux("workflow", "list", url=url))
    assert flux("workflow", "list", "--api-token", "s3cret", url=url).returncode == 0
    (tmp_path / "flux.toml").write_text(f'[client]\nserver_url = "{url}"\napi_token_file = "{token}"\n')
    assert flux("workflow", "list", cwd=tmp_path).returncode == 0
    assert flux("--config", str(tmp_path / "flux.toml"), "execution", "list").returncode == 0
    assert flux("workflow", "list", cwd=tmp_path, env={"FLUX_API_TOKEN": "wrong"}).returncode == 1  # env beats the file


def test_every_option_has_help_and_client_envvars_show():
    from flux.cli import main
    from flux.cli.core import walk

    missing = [
        f"flux {' '.join(path)} {param.opts[0]}"
        for path, command in walk(main)
        for param in command.params
        if isinstance(param, click.Option) and not (param.help or "").strip()
    ]
    assert missing == []
    shown = flux("execution", "logs", "--help").stdout
    assert "FLUX_SERVER_URL" in shown and "FLUX_API_TOKEN" in shown and "--api-token-file" in shown


def test_python_dash_m_flux_runs_the_cli():
    for module in ("flux", "flux.cli"):
        result = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0 and result.stdout.startswith("Usage: flux [OPTIONS] COMMAND")
        assert "Exit codes:" in result.stdout
