"""``flux worker ...``: inspect and drain workers."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import click

from flux.cli.core import FiniteRange, Output, client_command, renders
from flux.cli.output import ago, console, labels_text, render_rows
from flux.client import FluxClient
from flux.domain.devices import PREFIX as GPU_LABELS
from flux.domain.numbers import human_size
from flux.domain.workers import WorkerState

if TYPE_CHECKING:
    from rich.text import Text  # rich is imported when something is drawn

STATE_COLOURS = {
    WorkerState.ONLINE: "green",
    WorkerState.DRAINING: "yellow",
    WorkerState.DRAINED: "yellow",
    WorkerState.OFFLINE: "red",
}


@click.group("worker")
def worker_group() -> None:
    """Inspect and drain workers."""


def served(worker: dict) -> str:
    """The namespaces it takes work of: 'all', or the ones it is restricted to."""
    return ", ".join(worker.get("namespaces") or ()) or "all"


COLUMNS = ["name", "state", "slots", "cpu", "memory", "gpus", "labels", "namespaces", "heartbeat"]
#: Never cut, like the name: short figures that read wrong when wrapped ("98% of / 2").
WHOLE = ("name", "cpu", "memory")
#: Left out where no worker has any (namespaces, GPUs), and in this order when the terminal
#: is too narrow for them (``worker show NAME`` has them all).
OPTIONAL = ("heartbeat", "labels", "namespaces", "gpus")


def devices(worker: dict) -> list[dict]:
    """The GPU devices it offers: each card, and a card split into MIG slices as its slices."""
    return [gpu for gpu in (worker.get("resources") or {}).get("gpus") or [] if not gpu.get("mig")]


def list_row(worker: dict) -> dict:
    """A worker as one row of ``flux worker list``: its use from its last sample (memory
    used/total). Its ``flux.gpu/*`` labels are left to ``worker show``: the gpus column counts them."""
    res = worker.get("resources") or {}
    labels = {k: v for k, v in (worker.get("labels") or {}).items() if not k.startswith(GPU_LABELS)}
    return {
        "name": worker["name"],
        "state": worker["state"],
        "slots": f"{worker['running']}/{worker['max_concurrent_executions']}",
        "cpu": cpu_text(res) if res else "-",
        "memory": f"{gib(res['memory_total'] - res['memory_available'])}/{gib(res['memory_total'])} Gi" if res else "-",
        "gpus": str(len(devices(worker)) or "-"),
        "labels": labels_text(labels),
        "namespaces": served(worker),
        "heartbeat": ago(worker.get("last_heartbeat_at"), suffix=""),
    }


def gib(n: float) -> str:
    return f"{n / 2**30:.1f}"


def _render_list(workers: list[dict]) -> None:
    rows = [list_row(worker) for worker in workers]
    if not any(worker.get("namespaces") for worker in workers):
        rows = [{**row, "namespaces": "-"} for row in rows]  # every worker serves every namespace: no column
    render_rows(COLUMNS, rows, whole=WHOLE, optional=OPTIONAL)


def cpu_text(res: dict) -> str:
    """How busy its cores are (the sample's cpu_percent), of how many: ``35% of 4``. The
    affinity mask (``cpu_available``) is what it may use, not what is free."""
    return f"{res['cpu_percent']:.0f}% of {res['cpu_total']:g}"


@worker_group.command("list")
@client_command
@renders(_render_list)
def worker_list(client: FluxClient) -> list[dict]:
    """List registered workers."""
    return client.list_workers()


def size(n: float | None) -> str:
    return "-" if n is None else human_size(n)


def gpu_summary(worker: dict) -> str:
    """The ``gpu`` line: its devices by model (``2 x NVIDIA H200``), or none and where to
    read why (the worker logs what it offers, and why no GPU, when it registers)."""
    found = devices(worker)
    if not found:
        return "none (the worker's log says why: its 'offers' line at registration)"
    return ", ".join(f"{count} x {name}" for name, count in Counter(gpu["name"] for gpu in found).items())


def gpu_rows(gpus: list[dict], allotments: list[dict]) -> list[tuple[str, str]]:
    """One row per device: model, memory used of total, utilisation, health, and what holds it."""
    rows = []
    for gpu in gpus:
        what = "MIG slice " + gpu["mig_profile"] if gpu.get("parent") else gpu["name"]
        used = gpu["memory_total"] - gpu["memory_available"]
        line = f"{what}, {size(used)} of {size(gpu['memory_total'])} used, {gpu.get('utilization', 0):.0f}% busy"
        line += ", split into MIG slices" if gpu.get("mig") else ""
        line += f", UNHEALTHY: {gpu['unhealthy']}" if gpu.get("unhealthy") else ", healthy"
        held = [a for a in allotments if a.get("uuid", gpu["uuid"]) == gpu["uuid"] and a["index"] == gpu["index"]]
        if held:
            line += "; allotted " + ", ".join(
                f"{'whole' if a['fraction'] >= 1 and not a.get('memory') else format(a['fraction'], 'g')}"
                f"{' + ' + size(a['memory']) if a.get('memory') else ''} to {a['execution_id'][:12]}"
                for a in held
            )
        rows.append((f"gpu {gpu['index']}", line))
    return rows


def summary_rows(worker: dict, running: list[dict], packages: bool) -> list[tuple[str, str | Text]]:
    """What one wants to know of a worker at a glance (the full record: --format json)."""
    from rich.text import Text

    res = worker.get("resources") or {}
    rows: list[tuple[str, str | Text]] = [
        ("state", Text(worker["state"], style=STATE_COLOURS.get(worker["state"], ""))),
        ("labels", labels_text(worker["labels"])),
        ("namespaces", served(worker)),
        ("slots", f"{worker['running']} running of {worker['max_concurrent_executions']}"),
    ]
    if res:
        rows += [
            ("cpu", f"{cpu_text(res)} cores busy"),
            ("memory", f"{size(res['memory_available'])} of {size(res['memory_total'])} available"),
            ("disk", f"{size(res['disk_free'])} of {size(res['disk_total'])} free"),
        ]
        available = res.get("available") or {}
        rows += [
            (name, f"{available.get(name, 0):g} of {total:g} available")
            for name, total in sorted((res.get("capacity") or {}).items())
        ]
    for name, capacity in sorted(worker.get("custom_resources", {}).items()):
        used = sum(((e.get("requests") or {}).get("resources") or {}).get(name, 0) for e in running)
        rows.append((name, f"{used:g} of {capacity:g} in use"))
    rows.append(("gpu", gpu_summary(worker)))
    rows += gpu_rows(res.get("gpus") or [], worker.get("gpu_allotments") or [])
    rows.append(("allocation", worker["allocation"]))
    rows.append(("heartbeat", f"{ago(worker['last_heartbeat_at'])} (registered {ago(worker['registered_at'])})"))
    runtime = worker.get("runtime")
    if runtime:
        rows.append(
            (
                "runtime",
                f"Python {runtime['python_version']}, {runtime['os_name']} {runtime['os_version']} "
                f"{runtime.get('cpu_arch', '')}, host {runtime['hostname']}".replace("  ", " "),
            )
        )
    for i, e in enumerate(running):
        rows.append(("running" if i == 0 else "", f"{e['id']}  {e['workflow_name']}  {e['state']}"))
    if not running:
        rows.append(("running", "nothing"))
    listed = sorted(worker.get("packages") or [], key=lambda p: p["name"].lower())
    if packages:
        for i, p in enumerate(listed):
            rows.append(("packages" if i == 0 else "", f"{p['name']}=={p['version']}"))
    else:
        rows.append(("packages", f"{len(listed)} (--packages lists them)"))
    return rows


def render_worker(worker: dict, running: list[dict], packages: bool) -> None:
    from rich.text import Text

    console.print(Text(f"worker {worker['name']}", style="bold"))
    for key, value in summary_rows(worker, running, packages):
        console.print(Text.assemble((f"{key:<12}", "bold"), value), soft_wrap=True)


@worker_group.command("show")
@click.argument("name")
@click.option("--packages", is_flag=True, help="List the Python packages the worker reported")
@client_command
def worker_show(client: FluxClient, name: str, packages: bool) -> Output:
    """A worker at a glance: state, labels, capacity and use, GPUs, slots, last
    heartbeat, what it runs (--format json: the full record)."""
    return summary(client, client.show_worker(name), packages)


def summary(client: FluxClient, worker: dict, packages: bool = False) -> Output:
    """A worker's record for scripts (--format json), its summary for people."""
    return Output(worker, lambda w: render_worker(w, client.executions_on(w["name"]), packages))


@worker_group.command("drain")
@click.argument("name")
@click.option("--wait", is_flag=True, help="Return once the worker runs nothing (DRAINED)")
@click.option(
    "--timeout", type=FiniteRange(min=0), default=3600.0, show_default=True, help="Seconds to wait with --wait"
)
@client_command
def worker_drain(client: FluxClient, name: str, wait: bool, timeout: float) -> Output:
    """Stop giving NAME new work; it finishes what it runs, then shows DRAINED."""
    worker = client.drain_worker(name, wait=timeout if wait else None)
    if wait:
        click.echo(f"worker {name} is {worker['state']}: it runs nothing", err=True)
    return summary(client, worker)


@worker_group.command("undrain")
@click.argument("name")
@client_command
def worker_undrain(client: FluxClient, name: str) -> Output:
    """Let a drained worker take work again."""
    return summary(client, client.undrain_worker(name))
