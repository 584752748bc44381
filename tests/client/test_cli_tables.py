"""Tables at 80 and 120 columns (issue 50.4), read from real output: the CLI as a
subprocess against a real server and worker. No line is wider than the terminal, ids
are unique prefixes of 12 or more, names and label pairs are never broken, columns with
no value are left out, and ``audit list`` keeps its right border."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from flux.client import FluxClient
from flux.local import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

WORKFLOWS = """
    from flux import ResourceRequest, task, workflow

    @task
    async def square(n):
        return n * n

    @workflow
    async def sum_of_squares(ctx):
        return sum([await square(n) for n in ctx.input])

    @workflow.with_options(
        requests=ResourceRequest(cpu=1, memory="256Mi", packages=["packaging>=20"]), affinity={"region": "us-east-1"}
    )
    async def nightly_feature_backfill_v2(ctx):
        return "done"
"""
WORKER = "worker-with-a-long-name"
NAMES = ("sum_of_squares", "nightly_feature_backfill_v2", WORKER)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> LocalCluster:
    home = tmp_path_factory.mktemp("tables")
    cluster = LocalCluster(home / "home")
    cluster.start_server()
    cluster.start_worker(WORKER, labels={"region": "us-east-1", "tier": "gpu-large"})
    source = home / "table_flows.py"
    source.write_text(textwrap.dedent(WORKFLOWS))
    with FluxClient(cluster.server_url) as client:
        client.register_file(source)
        for _ in range(3):
            client.run("sum_of_squares", [1, 2, 3], wait=60)
            client.run("nightly_feature_backfill_v2", None, wait=60)
    yield cluster
    cluster.close()


def flux(fleet: LocalCluster, columns: int, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLUX_")}
    env.update(COLUMNS=str(columns), FLUX_SERVER_URL=fleet.server_url)
    done = subprocess.run([sys.executable, "-m", "flux", *args], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def fits(text: str, columns: int) -> list[str]:
    lines = text.splitlines()
    assert lines and not [line for line in lines if len(line) > columns], text
    assert all(line.rstrip().endswith(("┃", "│", "┓", "┩", "┐", "┘", "┤", "┛")) for line in lines), text  # right border
    return lines


def cells(lines: list[str], column: int) -> list[str]:
    """The text of one column in the table's body rows."""
    return [line.split("│")[column + 1].strip() for line in lines if line.startswith("│")]


def header(lines: list[str]) -> list[str]:
    return [part.strip() for part in lines[1].split("┃")[1:-1]]


@pytest.mark.parametrize("columns", [80, 120])
def test_execution_list_shows_unique_id_prefixes_and_whole_names(fleet, columns):
    lines = fits(flux(fleet, columns, "execution", "list"), columns)
    assert header(lines)[:3] == ["id", "workflow", "state"]
    if columns >= 120:
        assert header(lines) == ["id", "workflow", "state", "worker", "age"]  # at 80, these long names leave no room
    assert "schedule" not in header(lines)  # no execution came from a schedule
    ids = [e["id"] for e in json.loads(flux(fleet, columns, "execution", "list", "--format", "json"))]
    shown = [cell for cell in cells(lines, 0) if cell]
    assert len(shown) == len(ids) and len(set(shown)) == len(shown)  # one line a row: no id wraps
    for prefix, full in zip(shown, ids):
        assert full.startswith(prefix) and len(prefix) >= 12
        assert [other for other in ids if other.startswith(prefix)] == [full]
    assert set(cells(lines, 1)) == {"sum_of_squares", "nightly_feature_backfill_v2"}  # never sum_of_squar/es
    if "worker" in header(lines):
        assert set(cells(lines, 3)) == {WORKER}


@pytest.mark.parametrize("columns", [80, 120])
def test_workflow_and_worker_lists_never_break_names_or_label_pairs(fleet, columns):
    for args in (("workflow", "list"), ("workflow", "versions", "nightly_feature_backfill_v2"), ("worker", "list")):
        text = flux(fleet, columns, *args)
        fits(text, columns)
        words = set(re.split(r"[\s│┃]+", text))
        for name in NAMES:
            assert name in words or name not in text, (args, text)
        if "labels" in text:
            assert {"region=us-east-1", "tier=gpu-large"} <= words, text
        if "requests" in text:
            assert {"cpu=1,", "memory=256Mi,", "packages=[packaging>=20]"} <= words, text
    workers = fits(flux(fleet, columns, "worker", "list"), columns)
    assert cells(workers, 0) == [WORKER]
    assert "namespaces" not in header(workers) and "gpus" not in header(workers)  # no worker has any


@pytest.mark.parametrize("columns", [80, 120])
def test_audit_list_fits_with_its_border(fleet, columns):
    lines = fits(flux(fleet, columns, "audit", "list"), columns)
    assert header(lines)[:5] == ["time", "who", "namespace", "action", "status"]
    assert "anonymous (admin)" in cells(lines, 1) and "run" in cells(lines, 3)
    if columns >= 120:
        assert "POST /workflows/sum_of_squares/run" in cells(lines, header(lines).index("call"))
