"""``flux demo``: the two-minute tour on the embedded default (SQLite, one local worker)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from flux.client import FluxClient, FluxClientError
from flux.local import LocalCluster

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_demo(console: Console, keep_home: bool = False) -> None:
    if not EXAMPLES.is_dir():
        raise FluxClientError(f"examples folder not found at {EXAMPLES} (install from a checkout: pip install -e .)")
    home = Path(tempfile.mkdtemp(prefix="flux-demo-"))
    try:
        with LocalCluster(home) as cluster:
            console.print(f"[bold]1.[/] Starting a Flux server on {cluster.server_url} (SQLite at {home / 'flux.db'})")
            cluster.start_server()
            console.print("[bold]2.[/] Starting worker [cyan]demo-worker[/] (subprocess runner, resources probed)")
            cluster.start_worker("demo-worker", heartbeat_interval=2.0)
            with FluxClient(cluster.server_url) as client:
                console.print(f"[bold]3.[/] Registering workflows from {EXAMPLES}")
                for path in sorted(EXAMPLES.glob("*.py")):
                    names = ", ".join(w["name"] for w in client.register_file(path))
                    console.print(f"   {path.name}: {names}")
                console.print('[bold]4.[/] Running [cyan]hello_world[/] with input "Flux"')
                execution = client.run("hello_world", "Flux", wait=60)
                console.print(f"   state: [green]{execution['state']}[/]  worker: {execution['worker_name']}")
                console.print(f"   output: [bold]{execution['output']!r}[/]")
                table = Table("seq", "event", "task", title="Event log")
                for event in client.events(execution["id"]):
                    table.add_row(str(event["seq"]), event["type"], event["task_id"] or "")
                console.print(table)
                if execution["state"] != "COMPLETED":
                    raise FluxClientError(f"demo execution ended {execution['state']}: {execution['error']}")
    finally:
        if not keep_home:
            shutil.rmtree(home, ignore_errors=True)
    console.print(NEXT)


#: What to try after the tour: each command works after the ones before it.
NEXT = (
    "\n[bold]Next:[/] run your own server and worker:\n"
    "  flux start server\n"
    "  flux start worker worker-1 --label region=us-east-1\n"
    "  flux workflow register examples/\n"
    "  flux workflow run hello_world '\"you\"' --wait\n"
    "  flux execution show <id>   ·   flux worker show worker-1\n"
    "  The console: http://127.0.0.1:8000/ui   ·   API docs: http://127.0.0.1:8000/docs"
)
