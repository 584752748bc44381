"""B3 replay cost: what resuming an execution with N completed tasks costs, without a server.

The replay path is ``flux.model.runtime.run_workflow`` with an ``ExecutionContext`` whose
``completed_tasks`` already holds every task's result: each task call is answered
from that dict instead of running. Runs of N = 0, 100 and 1000 are interleaved so
machine noise hits them alike; the marginal cost per replayed task is taken per
round, ``(t1000 - t100) / 900``, and summarised like every other figure.

Two further figures price the rest of a resume on the worker side and the server side
(context, no aim): the JSON round trip of the job (worker -> subprocess child) that
carries ``completed_tasks``, and the server's delivery transaction
(``flux.server.executions.deliver``, which loads every TASK_COMPLETED event) on a
SQLite file, rolled back after each call. The claim path is not reachable over HTTP
on its own (``POST /workers/{name}/claim`` needs a registered worker and a dispatch
round), so it is called as a function of a Session instead.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from bench.common import Figure
from flux import task, workflow
from flux.model.runtime import ExecutionContext, run_workflow

SIZES = (0, 100, 1000)


@task
async def step(i):
    return i


@workflow
async def replay_chain(ctx):
    for i in range(ctx.input):
        await step(i)
    return ctx.input


def _history(n: int) -> dict[str, int]:
    return {f"step:{i + 1}": i for i in range(n)}


async def _time_once(n: int, completed: dict[str, int]) -> float:
    events: list[dict] = []
    ctx = ExecutionContext(
        execution_id="bench",
        workflow_name=replay_chain.name,
        input=n,
        completed_tasks=dict(completed),
        emit=events.append,
    )
    t0 = time.perf_counter()
    outcome, _ = await run_workflow(replay_chain, ctx)
    elapsed = time.perf_counter() - t0
    assert outcome.value == "WORKFLOW_COMPLETED", outcome
    return elapsed


async def _measure(rounds: int) -> tuple[dict[int, list[float]], list[float], list[float]]:
    histories = {n: _history(n) for n in SIZES}
    replay: dict[int, list[float]] = {n: [] for n in SIZES}
    fresh: list[float] = []
    for _ in range(5):  # warm-up
        for n in SIZES:
            await _time_once(n, histories[n])
    for _ in range(rounds):
        for n in SIZES:
            replay[n].append(await _time_once(n, histories[n]))
        fresh.append(await _time_once(100, {}))
    marginal = [(t1000 - t100) / 900 for t100, t1000 in zip(replay[100], replay[1000])]
    return replay, marginal, fresh


def _job_roundtrip(rounds: int) -> list[float]:
    """Worker side: the job encoded (SubprocessRunner.run), then decoded in the child (``Job``)."""
    from flux.worker.runners.base import Job

    job = Job(
        id="x" * 32,
        workflow_name="replay_chain",
        workflow_version=1,
        source="x" * 400,
        filename="wf.py",
        input=1000,
        attempt=2,
        completed_tasks=_history(1000),
    )
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        Job.model_validate(json.loads(job.model_dump_json().encode() + b"\n"))
        samples.append(time.perf_counter() - t0)
    return samples


def _server_delivery(rounds: int, n: int) -> list[float]:
    """Server side: deliver() for one claimed execution holding n completed-task events (SQLite)."""
    from sqlalchemy.orm import Session

    from flux.domain.events import EventType
    from flux.server import executions
    from flux.server.database import make_engine, migrate
    from flux.server.models import ExecutionEventModel, ExecutionModel, WorkflowModel

    with tempfile.TemporaryDirectory(prefix="flux-bench-b3-") as home:
        url = f"sqlite:///{Path(home) / 'b3.db'}"
        migrate(url)
        engine = make_engine(url)
        now = time.time()
        with Session(engine) as session, session.begin():
            wf = WorkflowModel(
                name="replay_chain",
                version=1,
                source="pass\n",
                source_digest="0" * 64,
                filename="wf.py",
                requests=None,
                affinity=None,
                created_at=now,
            )
            session.add(wf)
            session.flush()
            ex = ExecutionModel(
                id="e" * 32,
                workflow_id=wf.id,
                workflow_name=wf.name,
                workflow_version=1,
                state="CLAIMED",
                input=n,
                worker_name="w",
                attempt=1,
                delivered=False,
                last_seq=n,
                scheduled_at=now,
                claimed_at=now,
            )
            session.add(ex)
            session.flush()
            session.add_all(
                ExecutionEventModel(
                    execution_id=ex.id,
                    seq=i + 1,
                    type=EventType.TASK_COMPLETED.value,
                    name="step",
                    task_id=f"step:{i + 1}",
                    value=i,
                    time=now,
                    worker_name="w",
                )
                for i in range(n)
            )
        worker = SimpleNamespace(name="w")
        samples = []
        for r in range(rounds + 3):
            with Session(engine) as session:
                t0 = time.perf_counter()
                claimed, _ = executions.deliver(session, worker)
                elapsed = time.perf_counter() - t0
                session.rollback()
            assert len(claimed) == 1 and len(claimed[0].completed_tasks) == n
            if r >= 3:
                samples.append(elapsed)
        engine.dispose()
    return samples


def run(quick: bool) -> list[Figure]:
    rounds = 60 if quick else 300
    replay, marginal, fresh = asyncio.run(_measure(rounds))
    ms = lambda values: [v * 1000 for v in values]  # noqa: E731
    figures = [
        Figure.of("B3.replay.fixed_N0", ms(replay[0]), "ms", note="run_workflow with no tasks: the per-resume floor"),
        Figure.of("B3.replay.N100", ms(replay[100]), "ms"),
        Figure.of("B3.replay.N1000", ms(replay[1000]), "ms"),
        Figure.of(
            "B3.replay.marginal",
            ms(marginal),
            "ms/task",
            aim="< 0.05 ms/task",
            check=lambda m, p: m < 0.05,
            note="(t1000 - t100) / 900, per interleaved round",
        ),
        Figure.of(
            "B3.fresh.N100_per_task",
            [t * 1000 / 100 for t in fresh],
            "ms/task",
            note="the same 100 tasks run for real (no history), for comparison",
        ),
        Figure.of(
            "B3.resume.job_json_N1000",
            ms(_job_roundtrip(rounds)),
            "ms",
            note="worker->child job JSON round trip carrying 1000 completed tasks (subprocess runner)",
        ),
    ]
    server_rounds = 20 if quick else 60
    d100, d1000 = _server_delivery(server_rounds, 100), _server_delivery(server_rounds, 1000)
    figures += [
        Figure.of("B3.server.deliver_N100", ms(d100), "ms", note="executions.deliver() on SQLite, rolled back"),
        Figure.of("B3.server.deliver_N1000", ms(d1000), "ms", note="executions.deliver() on SQLite, rolled back"),
        Figure.of(
            "B3.server.deliver_marginal",
            [(b - a) * 1000 / 900 for a, b in zip(d100, d1000)],
            "ms/task",
            note="server-side history load per completed task (paired rounds)",
        ),
    ]
    return figures
