"""B11 bundles (tracker issue 15): registering a 200-module package, and the first run
of a new bundle on a worker (cold bundle cache) against a run of a cached one (warm).

    python -m bench.b11_bundles             # 200 modules, 5 runs each
    python -m bench.b11_bundles --quick     # 50 modules, 2 runs each

One server (SQLite) and one worker, real processes (``flux.local``). The package has
N modules of plain helpers (each imports ``torch``, absent everywhere: registration
never imports) and a ``flows`` module whose workflow imports 20 of them. It prints:

- ``register_s``: ``FluxClient.register(directory)`` (walk and zip on the client,
  upload, static reading of every module and storing on the server), each time with
  one module changed so that every registration is a new bundle and a new version;
- ``cold_run_s`` / ``warm_run_s``: ``scheduled_at`` -> ``finished_at`` of one
  execution, both stamped by the server, for a version the worker has never run
  (fetch, verify, unpack, a child of its own, imports) and for the same version once
  more (cached bundle, warm child).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.common import Figure, print_figures
from flux.client import FluxClient
from flux.local import LocalCluster

HELPER = '''"""Helper module {n}."""
try:
    import torch  # absent: registration never imports it
except ImportError:
    torch = None

TABLE = {{i: i * {n} for i in range(50)}}


def helper_{n}(x):
    return x + {n}


class Model{n}:
    def forward(self, x):
        return helper_{n}(x) * 2
'''

FLOWS = """from flux import ResourceRequest, task, workflow
{imports}

REVISION = {revision}


@task
async def combine(x):
    return sum(f(x) for f in ({calls}))


@workflow.with_options(requests=ResourceRequest(cpu=0.1))
async def b11_flow(ctx):
    return {{"revision": REVISION, "value": await combine(1)}}
"""


def write_package(root: Path, modules: int, revision: int) -> None:
    package = root / "bigpkg"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    for n in range(modules):
        path = package / f"helper_{n:03d}.py"
        if not path.exists():
            path.write_text(HELPER.format(n=n))
    used = range(min(20, modules))
    (package / "flows.py").write_text(
        FLOWS.format(
            imports="\n".join(f"from bigpkg.helper_{n:03d} import helper_{n}" for n in used),
            calls=", ".join(f"helper_{n}" for n in used) + ",",
            revision=revision,
        )
    )


def run_seconds(client: FluxClient, version: int) -> float:
    done = client.run(f"b11_flow@{version}", wait=120)
    if done["state"] != "COMPLETED":
        raise RuntimeError(f"execution {done['id']} ended {done['state']}: {done.get('error')}")
    return done["finished_at"] - done["scheduled_at"]


def run(modules: int, repeats: int) -> list[Figure]:
    register_s, cold, warm = [], [], []
    with tempfile.TemporaryDirectory(prefix="flux-b11-") as home, LocalCluster(Path(home)) as cluster:
        cluster.start_server()
        cluster.start_worker("w1", max_concurrent_executions=1, heartbeat_interval=5.0)
        project = Path(home) / "project"
        with FluxClient(cluster.server_url) as client:
            for revision in range(repeats + 1):  # the first round warms the server and the pool
                write_package(project, modules, revision)
                started = time.perf_counter()
                [registered] = client.register(project)
                elapsed = time.perf_counter() - started
                first, again = run_seconds(client, registered["version"]), run_seconds(client, registered["version"])
                if revision:
                    register_s.append(elapsed)
                    cold.append(first)
                    warm.append(again)
    return [
        Figure.of("B11.register_s", register_s, "s", note=f"{modules + 2} files, one changed each time"),
        Figure.of("B11.cold_run_s", cold, "s", note="a version the worker never ran: fetch, unpack, a new child"),
        Figure.of("B11.warm_run_s", warm, "s", note="the same version again: cached bundle, warm child"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="50 modules, 2 runs each")
    parser.add_argument(
        "--modules", type=int, default=None, help="helper modules in the package [200; 50 with --quick]"
    )
    parser.add_argument("--repeats", type=int, default=None, help="registrations and run pairs [5; 2 with --quick]")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    modules = args.modules or (50 if args.quick else 200)
    repeats = args.repeats or (2 if args.quick else 5)
    figures = run(modules, repeats)
    print_figures(figures, args.json)


if __name__ == "__main__":
    main()
