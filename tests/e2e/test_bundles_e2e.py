"""Bundles end to end, with a real server and real workers (docs/bundles.md).

A project of three modules, a JSON data file and a requirements.txt, whose workflow
imports ``fakedep``: a distribution installed only for the worker (a folder on its
PYTHONPATH, with its dist-info so the worker advertises it), never on the client.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path

import httpx
import pytest
from waiting import eventually

from flux.client import FluxClient, FluxClientError
from flux.local import LocalCluster

pytestmark = pytest.mark.integration

FLOWS = """\
import fakedep
import helpers
from flux import ResourceRequest, task, workflow

from .catalog import PRICES

VERSION = {version}


@task
async def wait_for(gate):
    import asyncio, os
    while gate and not os.path.exists(gate):
        await asyncio.sleep(0.05)


@workflow.with_options(requests=ResourceRequest(cpu=0.1))
async def pricing(ctx):
    await wait_for((ctx.input or {{}}).get("gate"))
    return {{"version": VERSION, "total": helpers.double(PRICES["apple"]), "dep": fakedep.NAME}}
"""


def write_project(root: Path, version: int) -> Path:
    (root / "shop").mkdir(parents=True, exist_ok=True)
    (root / "scratch").mkdir(exist_ok=True)
    (root / "requirements.txt").write_text("# the worker needs it\nfakedep>=1.0\n")
    (root / ".gitignore").write_text("secret.txt\n")
    (root / ".fluxignore").write_text("scratch/\n")
    (root / "secret.txt").write_text("not for the server")
    (root / "scratch" / "broken.py").write_text("def nope(:\n")  # ignored, so never read
    (root / "helpers.py").write_text("def double(x):\n    return 2 * x\n")
    (root / "shop" / "__init__.py").write_text("")
    (root / "shop" / "prices.json").write_text(json.dumps({"apple": 3}))
    (root / "shop" / "catalog.py").write_text(
        "import json\nfrom pathlib import Path\n\n"
        "PRICES = json.loads((Path(__file__).parent / 'prices.json').read_text())\n"
    )
    (root / "shop" / "flows.py").write_text(FLOWS.format(version=version))
    return root


def fake_distribution(site: Path, version: str = "1.2") -> Path:
    """``fakedep`` importable and advertised, for whoever has ``site`` on PYTHONPATH."""
    (site / "fakedep").mkdir(parents=True)
    (site / "fakedep" / "__init__.py").write_text("NAME = 'fakedep'\n")
    (site / f"fakedep-{version}.dist-info").mkdir()
    (site / f"fakedep-{version}.dist-info" / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: fakedep\nVersion: {version}\n"
    )
    return site


def test_a_package_registers_without_its_dependencies_runs_and_keeps_its_version(make_cluster, tmp_path):

    with pytest.raises(ImportError):
        __import__("fakedep")  # the client does not have it
    cluster: LocalCluster = make_cluster()
    site = fake_distribution(tmp_path / "site")
    cluster.start_worker("w1", env={"PYTHONPATH": f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"})
    project = write_project(tmp_path / "project", version=1)
    gate = tmp_path / "gate"
    with FluxClient(cluster.server_url) as client:
        [v1] = client.register(project)
        assert (v1["name"], v1["version"], v1["filename"], v1["module"]) == (
            "pricing",
            1,
            "shop/flows.py",
            "shop.flows",
        )
        assert v1["requests"]["packages"] == ["fakedep>=1.0"]  # from requirements.txt
        assert client.register(project)[0]["version"] == 1  # the same content: the same version

        first = client.run("pricing", {"gate": str(gate)})
        eventually(lambda: client.execution(first["id"])["state"] == "RUNNING", timeout=30, message="v1 never started")

        write_project(project, version=2)
        [v2] = client.register(project)
        assert v2["version"] == 2 and v2["bundle"] != v1["bundle"]
        second = client.wait(client.run("pricing")["id"], 30)
        assert second["state"] == "COMPLETED", second
        assert second["output"] == {"version": 2, "total": 6, "dep": "fakedep"} and second["workflow_version"] == 2

        gate.write_text("go")  # the execution started on version 1 finishes on it
        done = client.wait(first["id"], 30)
        assert done["state"] == "COMPLETED" and done["output"]["version"] == 1 and done["workflow_version"] == 1

        old = client.wait(client.run("pricing@1")["id"], 30)  # an old version stays runnable
        assert old["output"]["version"] == 1 and old["workflow_version"] == 1
        assert [v["version"] for v in client.workflow_versions("pricing")] == [1, 2]

        # requirements are placement constraints: a worker without the version is named
        needs = tmp_path / "needs"
        needs.mkdir()
        (needs / "requirements.txt").write_text("fakedep>=9\n")
        (needs / "flow.py").write_text(
            "from flux import workflow\n\n@workflow\nasync def needs_new(ctx):\n    return 1\n"
        )
        [registered] = client.register(needs)
        assert registered["requests"]["packages"] == ["fakedep>=9"]
        waiting = client.run("needs_new")
        placement = eventually(lambda: client.placement(waiting["id"]), timeout=10)
        assert "fakedep" in json.dumps(placement), placement
        [unconstrained] = client.register(needs, requirements=False)
        assert unconstrained["requests"] is None and unconstrained["version"] == 2


def zip_of(entries: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in entries.items():
            archive.writestr(name, text)
    return buffer.getvalue()


def test_bad_bundles_are_refused_with_the_file_and_line(make_cluster, tmp_path):
    cluster: LocalCluster = make_cluster(server_args=("--max-bundle-size", "8Ki"))
    url = cluster.server_url
    with FluxClient(url) as client:
        slip = httpx.post(
            f"{url}/bundles", content=zip_of({"../evil.py": "x = 1"}), headers={"Content-Type": "application/zip"}
        )
        assert slip.status_code == 422 and "'../evil.py'" in slip.json()["detail"], slip.text
        absolute = httpx.post(f"{url}/bundles", content=zip_of({"/etc/evil.py": "x = 1"}))
        assert absolute.status_code == 422 and "/etc/evil.py" in absolute.json()["detail"]
        big = httpx.post(f"{url}/bundles", content=b"PK" + bytes(9000))
        assert big.status_code == 413 and big.json()["code"] == "payload_too_large"

        def refused(entries: dict[str, str]) -> str:
            sha = client.upload_bundle(zip_of(entries))["sha256"]
            answer = httpx.post(f"{url}/workflows/bundle", json={"bundle": sha})
            assert answer.status_code == 422, answer.text
            return answer.json()["detail"]

        header = "from flux import workflow\n"
        assert refused({"flows.py": header + "@workflow\nasync def a(ctx:\n"}).startswith("flows.py:3: syntax error")
        assert refused({"notes.py": "import torch\n"}).startswith("notes.py: no @workflow found")
        twice = refused(
            {
                "a.py": header + "@workflow\nasync def same(ctx): ...\n",
                "b.py": header + "\n@workflow\nasync def same(ctx): ...\n",
            }
        )
        assert twice == "b.py:4: workflow 'same' is defined twice (first at a.py:3)"
        dynamic = refused(
            {
                "d.py": header
                + "import os\n@workflow.with_options(pending_timeout=float(os.environ['T']))\nasync def d(ctx): ...\n"
            }
        )
        assert dynamic.startswith("d.py:3: 'float' is not a Flux constructor; allowed:")
        with pytest.raises(FluxClientError, match="HTTP 422: x.py:2: workflow 'x': pending_timeout must be"):
            path = tmp_path / "x.py"
            path.write_text(header + "@workflow.with_options(pending_timeout=0)\nasync def x(ctx): ...\n")
            client.register(path)
        assert client.list_workflows() == []
        assert httpx.get(f"{url}/bundles/{'0' * 64}").status_code == 401  # workers only
