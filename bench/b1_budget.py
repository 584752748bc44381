"""B1's latency budget: each step of one execution, with its own stamps (issue 40).

A server and one subprocess-runner worker run under ``bench.stamps``; trivial
executions go one at a time (as in B1), so every stamp between a run's POST and the
client's wake belongs to that run. For each step the budget gives the median time
since the POST and the median gap from the step before it. ``transactions``,
``statements`` and ``requests`` count, per execution, the write units the server ran,
the SQL statements it sent and the HTTP requests it answered (heartbeats left out);
``server_cpu`` and ``worker_cpu`` are CPU per execution: figures that load on the
machine moves far less than wall time. The stamps cost a few microseconds each (about
60 an execution), so these offsets run a little above B1's own figures, which are
taken without them.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from bench.common import BenchCluster, Figure, tree_cpu, write_workflow
from bench.workflows import SOURCE, TRIVIAL
from flux.client import FluxClient

WARMUP = 3


@dataclass(frozen=True)
class Step:
    name: str
    label: str  # a stamp's label, or "event:TYPE" (the event's own time, stamped where it happened)
    last: bool = False  # the last such stamp in the window, not the first


STEPS = (
    Step("server has the POST /run", "http> run"),
    Step("submit on the writer thread", "db[ run"),
    Step("submit committed, back on the loop", "db= run"),
    Step("dispatch kicked", "kick"),
    Step("round on the writer thread", "db[ Dispatcher._round"),
    Step("claim committed, back on the loop", "db= Dispatcher._round"),
    Step("worker's long poll woken", "notify worker"),
    Step("delivery on the writer thread", "db[ _deliver"),
    Step("delivery committed", "db= _deliver"),
    Step("claim reply sent", "http< claim"),
    Step("worker has the job", "job"),
    Step("hand-over to the runner", "handover"),
    Step("child: WORKFLOW_STARTED", "event:WORKFLOW_STARTED"),
    Step("first checkpoint sent", "call> checkpoint"),
    Step("first checkpoint committed", "db= checkpoint"),
    Step("child: WORKFLOW_COMPLETED", "event:WORKFLOW_COMPLETED"),
    Step("last checkpoint sent", "call> checkpoint", last=True),
    Step("last checkpoint committed", "db= checkpoint", last=True),
    Step("client's wait woken", "notify execution", last=True),
    Step("client has COMPLETED", "client:wake"),
)


def _read(path: Path) -> list[tuple[float, str]]:
    stamps = []
    for line in path.read_text().splitlines():
        at, _, label = line.partition(" ")
        stamps.append((float(at), label))
    stamps.sort()
    return stamps


def _find(window: list[tuple[float, str]], step: Step, events: dict[str, float], wake: float) -> float | None:
    if step.label == "client:wake":
        return wake
    if step.label.startswith("event:"):
        return events.get(step.label[len("event:") :])
    hits = [at for at, label in window if label == step.label]
    return (hits[-1] if step.last else hits[0]) if hits else None


def budget(home: Path, database_url: str | None, count: int) -> list[Figure]:
    """Run ``count`` stamped executions on a cluster of their own and cut their time into steps."""
    stamps = home / "stamps.txt"
    cluster = BenchCluster(home, database_url=database_url, stamps=stamps)
    offsets: dict[str, list[float]] = {step.name: [] for step in STEPS}
    gaps: dict[str, list[float]] = {step.name: [] for step in STEPS}
    runs: list[tuple[float, float, str]] = []
    try:
        cluster.start_server(timeout=60)
        cluster.start_worker(
            "b1-budget", runner="subprocess", max_concurrent_executions=4, heartbeat_interval=5.0, timeout=60
        )
        meters = {"server": cluster.server.pid, "worker": cluster.workers["b1-budget"].pid}
        with FluxClient(cluster.server_url) as client:
            client.register_file(write_workflow(home, SOURCE, "bench_workflows"))
            for i in range(WARMUP + count):
                if i == WARMUP:
                    cpu0 = {name: tree_cpu(pid) for name, pid in meters.items()}
                posted = time.time()
                execution = client.run(TRIVIAL, i, wait=60)  # the run's own request waits for the end
                if i >= WARMUP:
                    runs.append((posted, time.time(), execution["id"]))
            cpu = {name: (tree_cpu(pid) - cpu0[name]) * 1000 / count for name, pid in meters.items()}
            events = {run[2]: {e["type"]: e["time"] for e in client.events(run[2])} for run in runs}
    finally:
        cluster.close()
    every = _read(stamps)
    transactions, requests, statements = [], [], []
    for posted, wake, execution_id in runs:
        window = [(at, label) for at, label in every if posted <= at <= wake]
        transactions.append(sum(1 for _, label in window if label.startswith("db[ ")))
        statements.append(sum(1 for _, label in window if label.startswith("sql ")))
        requests.append(sum(1 for _, label in window if label.startswith("http> ") and label != "http> heartbeat"))
        previous = posted
        for step in STEPS:
            at = _find(window, step, events[execution_id], wake)
            if at is None:
                continue
            offsets[step.name].append((at - posted) * 1000)
            gaps[step.name].append((at - previous) * 1000)
            previous = at
    figures = []
    for number, step in enumerate(STEPS, 1):
        gap = statistics.median(gaps[step.name]) if gaps[step.name] else float("nan")
        figures.append(
            Figure.of(
                f"B1.budget.{number:02d} {step.name}",
                offsets[step.name],
                "ms",
                note=f"median gap from the step before: {gap:.2f} ms",
            )
        )
    for name, ms in cpu.items():
        figures.append(
            Figure.of(
                f"B1.budget.{name}_cpu",
                [ms],
                "ms CPU/exec",
                note=f"the {name} process{' and its children' if name == 'worker' else ''}, per execution",
            )
        )
    figures.append(
        Figure.of(
            "B1.budget.transactions",
            transactions,
            "per execution",
            note="server units of work (Database.run) between POST and the client's wake",
        )
    )
    figures.append(
        Figure.of(
            "B1.budget.statements",
            statements,
            "per execution",
            note="SQL statements the server sent between POST and the client's wake",
        )
    )
    figures.append(
        Figure.of(
            "B1.budget.requests",
            requests,
            "per execution",
            note="HTTP requests the server answered between POST and the client's wake (no heartbeats)",
        )
    )
    return figures


def table(figures: list[Figure]) -> str:
    """The budget as a readable block: step, ms since POST, gap from the step before."""
    lines = [f"  {'step':<46} {'since POST':>10} {'gap':>8}"]
    for figure in figures:
        if figure.note and figure.note.startswith("median gap"):
            gap = figure.note.rsplit(": ", 1)[1].split()[0]
            lines.append(f"  {figure.name[len('B1.budget.') :]:<46} {figure.median:>10.2f} {gap:>8}")
    return "\n".join(lines)
