"""What a subprocess child prints and logs reaches the runner's log sink (docs/logs.md).

``SubprocessRunner.run`` is driven directly, as the worker drives it, with real
children: Python-level output carries the task that wrote it; bytes written to fds 1
and 2 (a shell, ``subprocess``, ``os.write``) arrive too, with task_id null; the
event stream stays exactly what it was.
"""

from __future__ import annotations

import asyncio
import sys
import textwrap

from flux.worker.logs import LogShipper
from flux.worker.runners.base import Job, Stop
from flux.worker.runners.docker import DockerRunner
from flux.worker.runners.subprocess import SubprocessRunner

SOURCE = textwrap.dedent(
    """
    import logging, os, subprocess, sys
    from flux import task, workflow

    @task
    def sync_step(x):
        print("in sync task", x)
        logging.getLogger("user.sync").warning("warned in %s", "a thread")
        return x

    @task
    async def async_step(x):
        print("in async task", x)
        print("to stderr from a task", file=sys.stderr)
        return x

    @workflow
    async def everything(ctx):
        print("hello from the body")
        sys.stderr.write("body stderr\\n")
        await sync_step(1)
        await async_step(2)
        logging.getLogger("user").info("info is captured")
        logging.getLogger("user").debug("debug is not")
        try:
            1 / 0
        except ZeroDivisionError:
            logging.getLogger("user").exception("it broke")
        os.system("echo from-shell")
        subprocess.run(["echo", "from-subprocess"], check=True)
        os.write(1, b"raw fd1\\n")
        os.write(2, b"raw fd2\\n")
        os.write(1, b'{"type": "WORKFLOW_FAILED", "value": {"error": "forged"}}\\n')  # output, not an event
        sys.stdout.buffer.write(b"binary stdout\\n")
        print("no newline at the end", end="")
        return os.getpid()

    @workflow
    async def ordered(ctx):
        for i in range(ctx.input):
            print(f"py {i}")
            if i % 100 == 0:
                os.write(1, f"fd {i}\\n".encode())
        return os.getpid()

    @workflow
    async def tail(ctx):
        print(f"job {ctx.input} starts")
        logging.getLogger("user").warning("job %s logs once", ctx.input)
        os.write(1, f"job {ctx.input} last bytes".encode())  # a partial line, right at the end
        return os.getpid()

    @workflow
    async def flood(ctx):
        for i in range(ctx.input):
            print(f"py {i}")
        subprocess.run(["seq", "-f", "sh %.0f", "0", str(ctx.input - 1)], check=True)
        return ctx.input

    @workflow
    async def long_lines(ctx):
        print("x" * 150_000)
        os.write(1, b"y" * 150_000)
        return 1

    @workflow
    async def chatty(ctx):
        import asyncio
        for i in range(1000):
            print(f"tick {i}")
            await asyncio.sleep(0.01)

    @workflow
    async def dies(ctx):
        print("before dying")
        os.write(2, b"last words")
        os._exit(3)
    """
)


def job(name: str, value=None, n: int = 0) -> Job:
    return Job(
        id=f"{name}{n}",
        workflow_name=name,
        workflow_version=1,
        source=SOURCE,
        filename="capture_test.py",
        input=value,
        attempt=1,
        completed_tasks={},
    )


class Collected:
    """Events and log lines of one run, and the order in which they came."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self.lines: list[dict] = []
        self.arrivals: list[str] = []

    def emit(self, event: dict) -> None:
        self.events.append(event)
        self.arrivals.append(event["type"])

    async def log(self, lines: list[dict]) -> None:
        self.lines.extend(lines)
        self.arrivals.extend("line" for _ in lines)

    def types(self) -> list[str]:
        return [event["type"] for event in self.events]

    def seen(self, stream: str | None = None) -> list[tuple]:
        return [
            (line["stream"], line["task_id"], line["message"])
            for line in self.lines
            if stream in (None, line["stream"])
        ]

    def output(self) -> object:
        return self.events[-1]["value"]


async def run_jobs(*jobs: Job, sink=None, runner: SubprocessRunner | None = None) -> list[Collected]:
    runner = runner or SubprocessRunner(warm_processes=1)
    await runner.start()
    while runner.warm_processes and not runner._pool:  # the warm child is up: every job goes to it
        await asyncio.sleep(0.01)
    results = []
    try:
        for one in jobs:
            collected = Collected()
            await runner.run(one, collected.emit, Stop(), log=sink or collected.log)
            results.append(collected)
    finally:
        await runner.close()
    return results


def test_python_and_fd_output_are_captured_with_their_tasks():
    (run,) = asyncio.run(run_jobs(job("everything")))
    assert run.types() == [
        "WORKFLOW_STARTED",
        "TASK_STARTED",
        "TASK_COMPLETED",
        "TASK_STARTED",
        "TASK_COMPLETED",
        "WORKFLOW_COMPLETED",
    ]
    seen = run.seen()
    for expected in [
        ("stdout", None, "hello from the body"),
        ("stderr", None, "body stderr"),
        ("stdout", "sync_step:1", "in sync task 1"),
        ("log", "sync_step:1", "warned in a thread"),
        ("stdout", "async_step:1", "in async task 2"),
        ("stderr", "async_step:1", "to stderr from a task"),
        ("log", None, "info is captured"),
        ("stdout", None, "from-shell"),
        ("stdout", None, "from-subprocess"),
        ("stdout", None, "raw fd1"),
        ("stderr", None, "raw fd2"),
        ("stdout", None, "binary stdout"),
        ("stdout", None, "no newline at the end"),  # the partial last line, flushed at the end
        ("stdout", None, '{"type": "WORKFLOW_FAILED", "value": {"error": "forged"}}'),
    ]:
        assert expected in seen, expected
    assert not [line for line in seen if "debug is not" in line[2]]
    logs = {line["message"].split("\n")[0]: line for line in run.lines if line["stream"] == "log"}
    assert (logs["warned in a thread"]["level"], logs["warned in a thread"]["logger"]) == ("WARNING", "user.sync")
    broke = logs["it broke"]
    assert broke["level"] == "ERROR" and broke["logger"] == "user"
    assert "Traceback (most recent call last)" in broke["message"] and "ZeroDivisionError" in broke["message"]
    assert all(line["level"] is None and line["logger"] is None for line in run.lines if line["stream"] != "log")
    assert all(isinstance(line["time"], float) for line in run.lines)
    # every line written before the attempt closed came before its closing event
    assert run.arrivals[-1] == "WORKFLOW_COMPLETED"


def test_lines_keep_their_order_within_each_source():
    (run,) = asyncio.run(run_jobs(job("ordered", 3000)))
    assert run.types()[-1] == "WORKFLOW_COMPLETED"
    stdout = [message for _, _, message in run.seen("stdout")]
    assert [m for m in stdout if m.startswith("py ")] == [f"py {i}" for i in range(3000)]
    assert [m for m in stdout if m.startswith("fd ")] == [f"fd {i}" for i in range(0, 3000, 100)]


def test_a_reused_child_keeps_each_jobs_lines_apart():
    first, second, third = asyncio.run(run_jobs(*(job("tail", n, n) for n in range(3))))
    assert first.output() == second.output() == third.output()  # one child served all three
    for n, run in enumerate((first, second, third)):
        messages = [message for _, _, message in run.seen()]
        assert messages.count(f"job {n} starts") == 1
        assert messages.count(f"job {n} logs once") == 1  # one handler, however many jobs
        assert f"job {n} last bytes" in messages
        assert not [m for m in messages if m.startswith("job ") and not m.startswith(f"job {n} ")], messages


def test_the_last_words_of_a_dying_child_come_before_its_end():
    (run,) = asyncio.run(run_jobs(job("dies")))
    assert run.types() == ["WORKFLOW_STARTED", "ATTEMPT_ENDED"]
    assert run.events[-1]["value"]["cause"] == "child process exited with status 3"
    assert ("stdout", None, "before dying") in run.seen() and ("stderr", None, "last words") in run.seen()
    assert run.arrivals[-1] == "ATTEMPT_ENDED"


def test_long_lines_arrive_in_pieces_of_at_most_64_kib():
    (run,) = asyncio.run(run_jobs(job("long_lines")))
    pieces = {letter: [len(m) for _, _, m in run.seen("stdout") if m and set(m) == {letter}] for letter in "xy"}
    assert pieces == {"x": [65536, 65536, 18928], "y": [65536, 65536, 18928]}


def test_a_killed_attempt_reports_nothing_more_but_keeps_what_it_printed():
    async def scenario() -> Collected:
        stop, collected = Stop(), Collected()
        runner = SubprocessRunner(warm_processes=1)
        await runner.start()
        while not runner._pool:  # the warm child is up (imports done): the job starts at once
            await asyncio.sleep(0.01)

        async def kill_once_it_runs() -> None:  # not after a fixed time: a loaded machine starts it late
            while not collected.events or len(collected.seen("stdout")) < 3:
                await asyncio.sleep(0.01)
            stop.kill.set()

        killer = asyncio.ensure_future(kill_once_it_runs())
        try:
            await asyncio.wait_for(runner.run(job("chatty"), collected.emit, stop, log=collected.log), 10)
            while runner._refills:  # the killed child's replacement is up: close() stops it
                await asyncio.sleep(0.01)
        finally:
            killer.cancel()
            await runner.close()
        return collected

    run = asyncio.run(scenario())
    assert run.types() == ["WORKFLOW_STARTED"]
    ticks = [m for _, _, m in run.seen("stdout")]
    assert ticks and ticks == [f"tick {i}" for i in range(len(ticks))]


def test_a_flood_of_lines_arrives_whole_through_a_bounded_buffer():
    """100,000 lines (half printed, half from a subprocess) through a shipper holding at
    most 1,000: the reader waits for the (slow) server instead of buffering."""
    batches: list[dict] = []
    most_pending = 0

    async def flood() -> Collected:
        async def call(path: str, body: dict) -> dict:
            nonlocal most_pending
            most_pending = max(most_pending, len(shipper.pending))
            batches.append(body)
            await asyncio.sleep(0.001)
            return {"accepted": len(body["lines"])}

        shipper = LogShipper(call, "e1", 1, buffer_lines=1000, max_bytes=10 * 1024**2)
        (run,) = await run_jobs(job("flood", 50_000), sink=shipper.put)
        await shipper.close()
        return run

    run = asyncio.run(flood())
    assert run.types() == ["WORKFLOW_STARTED", "WORKFLOW_COMPLETED"] and run.output() == 50_000
    assert most_pending <= 1000
    assert [body["batch"] for body in batches] == list(range(1, len(batches) + 1))
    messages = [line["message"] for body in batches for line in body["lines"]]
    assert len(messages) == 100_000
    assert [m for m in messages if m.startswith("py ")] == [f"py {i}" for i in range(50_000)]
    assert [m for m in messages if m.startswith("sh ")] == [f"sh {i}" for i in range(50_000)]


def test_docker_runner_captures_the_containers_output(tmp_path):
    """A stand-in ``docker`` (no engine here) runs the child as ``docker run`` would: no
    extra fd, so the channel is its stdout and both fds arrive as ``stderr``."""
    docker = tmp_path / "docker"
    docker.write_text(f"""#!/bin/sh
[ "$1" = rm ] && exit 0
exec {sys.executable} -m flux.worker.runners.child
""")
    docker.chmod(0o755)
    (run,) = asyncio.run(run_jobs(job("everything"), runner=DockerRunner("img", docker=str(docker))))
    assert run.types()[-1] == "WORKFLOW_COMPLETED"
    seen = run.seen()
    for expected in [
        ("stdout", None, "hello from the body"),
        ("stdout", "sync_step:1", "in sync task 1"),
        ("log", None, "info is captured"),
        ("stderr", None, "from-shell"),
        ("stderr", None, "raw fd1"),
        ("stderr", None, "raw fd2"),
        ("stdout", None, "no newline at the end"),
    ]:
        assert expected in seen, expected
    assert run.arrivals[-1] == "WORKFLOW_COMPLETED"
