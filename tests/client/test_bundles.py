"""Static registration, bundle building and the worker's bundle cache, in-process
(the real-process scenarios are in test_bundles_e2e.py)."""

from __future__ import annotations

import asyncio
import io
import os
import zipfile

import pytest

from flux.bundles.archive import BundleError, extract, open_bundle
from flux.bundles.build import build_bundle, pack
from flux.registration import StaticError, read_bundle, read_source
from flux.registration.static import FunctionRef
from flux.worker.bundles import BundleCache

HEADER = "from flux import ResourceRequest, In, score, label, load, task, workflow\nimport flux as fx\n"


def test_options_are_read_without_running_the_module_and_validated_like_the_decorator():
    source = HEADER + (
        "import torch  # not installed: never imported\n"
        "GPU = ResourceRequest(gpu=1, memory=8 * 1024**3, packages=['torch>=2'])\n"
        "def undo(x): ...\n"
        "@task.with_options(retry_max_attempts=2, rollback=undo)\n"
        "async def step(x): ...\n"
        "@workflow.with_options(requests=GPU, affinity={'region': In('a', 'b')}, "
        "routing=score((label('zone') == 'a') * 10, load() * -5), pending_timeout=60, max_attempts=5)\n"
        "async def train(ctx): ...\n"
        "@fx.workflow\n"
        "async def other(ctx): ...\n"
    )
    reading = read_source(source, "flows.py", "flows")
    train, other = reading.workflows
    assert train.options.metadata() == {
        "name": "train",
        "requests": {"memory": 8 * 1024**3, "gpu": 1, "packages": ["torch>=2"]},
        "affinity": {"region": {"op": "In", "values": ["a", "b"]}},
        "routing": {
            "terms": [{"kind": "label_eq", "key": "zone", "value": "a", "weight": 10}, {"kind": "load", "weight": -5}]
        },
        "pending_timeout": 60,
        "max_attempts": 5,
    }
    assert (train.line, train.module, other.options.name) == (9, "flows", "other")
    assert reading.tasks[0].options.rollback == FunctionRef("undo")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "@workflow.with_options(requests=make())\nasync def a(ctx): ...\n",
            "f.py:3: 'make' is not a Flux constructor; allowed: literals",
        ),
        (
            "@workflow.with_options(pending_timeout=-1)\nasync def a(ctx): ...\n",
            "f.py:3: workflow 'a': pending_timeout must be a number of seconds > 0",
        ),
        (
            "@workflow.with_options(requests=ResourceRequest(cpu=-1))\nasync def a(ctx): ...\n",
            "f.py:3: ResourceRequest.cpu",
        ),
        ("@workflow\ndef a(ctx): ...\n", "f.py:4: @workflow needs an 'async def'"),
        (
            "@workflow.with_options(bogus=1)\nasync def a(ctx): ...\n",
            "f.py:3: unknown workflow option 'bogus'; allowed: name,",
        ),
        ("@task.with_options(fallback=nowhere)\nasync def a(): ...\n", "f.py:3: must name a function defined earlier"),
        ("@task.with_options(timeout=0)\nasync def a(): ...\n", "f.py:3: task 'a': timeout must be a number > 0"),
        ("@workflow.with_options(max_attempts=10**10**10)\nasync def a(ctx): ...\n", "f.py:3: exponent must be"),
        ("async def a(ctx:\n", "f.py:3: syntax error"),
    ],
)
def test_what_cannot_be_read_is_an_error_naming_file_line_and_what_is_allowed(body, expected):
    with pytest.raises(StaticError) as error:
        read_source(HEADER + body, "f.py")
    assert str(error.value).startswith(expected), str(error.value)


def test_a_bundle_reads_every_module_and_its_requirements():
    pyproject = (
        '[project]\nname = "p"\ndependencies = ["numpy>=1.26", "rich[jupyter]>=13; python_version>\'3\'", "pandas"]\n'
    )
    flows = (
        HEADER + "@workflow.with_options(requests=ResourceRequest(packages=['numpy==2.0']))\nasync def a(ctx): ...\n"
    )
    bundle = open_bundle(
        pack(
            {
                "pyproject.toml": pyproject.encode(),
                "pkg/__init__.py": b"",
                "pkg/flows.py": flows.encode(),
                "my-scripts/x.py": b"not python at all (",
            }
        )
    )
    reading = read_bundle(bundle)
    assert [w.module for w in reading.workflows] == ["pkg.flows"]
    assert reading.requirements == ["numpy>=1.26", "rich>=13", "pandas"]
    from flux.registration.bundle import stored_request

    assert stored_request(reading.workflows[0], reading).packages == ("numpy==2.0", "rich>=13", "pandas")  # its own win
    assert read_bundle(bundle, requirements=False).requirements == []


def test_a_directory_bundle_honours_ignore_files_refuses_escaping_links_and_is_deterministic(tmp_path):
    root = tmp_path / "project"
    (root / "pkg" / "data").mkdir(parents=True)
    (root / "pkg" / "flows.py").write_text("x = 1\n")
    (root / "pkg" / "data" / "table.json").write_text("{}")
    (root / "pkg" / ".gitignore").write_text("*.log\n")
    (root / "pkg" / "run.log").write_text("noise")
    (root / ".fluxignore").write_text("notebooks/\n")
    (root / "notebooks").mkdir()
    (root / "notebooks" / "n.py").write_text("")
    (root / "pkg" / "__pycache__").mkdir()
    (root / "pkg" / "__pycache__" / "flows.cpython-311.pyc").write_bytes(b"\0")
    os.symlink(root / "pkg" / "flows.py", root / "alias.py")  # inside the tree: followed
    first = build_bundle(root)
    names = sorted(zipfile.ZipFile(io.BytesIO(first)).namelist())
    assert names == ["alias.py", "pkg/.gitignore", "pkg/data/table.json", "pkg/flows.py"]
    os.utime(root / "pkg" / "flows.py", (1, 1))
    assert build_bundle(root) == first  # same content, same bytes: same sha256
    os.symlink(tmp_path, root / "escape")
    with pytest.raises(BundleError, match="leaves the bundle's directory"):
        build_bundle(root)


def test_zip_slip_and_links_are_refused_on_the_server_and_again_on_the_worker(tmp_path):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("ok.py", "")
        archive.writestr("a/../../evil.py", "")
    with pytest.raises(BundleError, match=r"'a/\.\./\.\./evil\.py' is refused"):
        open_bundle(buffer.getvalue())
    with pytest.raises(BundleError, match="zip-slip"):
        extract(buffer.getvalue(), tmp_path / "out")
    assert not (tmp_path / "evil.py").exists()
    link = io.BytesIO()
    with zipfile.ZipFile(link, "w") as archive:
        info = zipfile.ZipInfo("link.py")
        info.external_attr = 0o120777 << 16
        archive.writestr(info, "/etc/passwd")
    with pytest.raises(BundleError, match="symbolic links"):
        open_bundle(link.getvalue())


def test_the_worker_cache_verifies_hashes_and_evicts_the_least_recently_used_unused_bundle(tmp_path):
    bundles = {}
    for n in range(3):
        data = pack({"m.py": f"N = {n}\n".encode() + bytes(1000)})
        bundles[open_bundle(data).sha256] = data
    fetched = []

    async def fetch(path: str) -> bytes:
        fetched.append(path)
        return bundles[path.rsplit("/", 1)[1]]

    async def scenario() -> None:
        cache = BundleCache(tmp_path / "cache", max_bytes=2500, fetch=fetch)
        a, b, c = bundles
        folder = await cache.acquire(a)
        assert (folder / "m.py").read_text().startswith("N = 0")
        await cache.acquire(b)
        cache.release(b)
        await cache.acquire(a)  # warm: no fetch
        cache.release(a)
        assert len(fetched) == 2
        await cache.acquire(c)  # over the budget: b, least recently used and unused, goes
        assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == sorted([a, c])
        bundles["f" * 64] = bundles[a]
        with pytest.raises(BundleError, match="does not match its sha256"):
            await cache.acquire("f" * 64)
        assert "f" * 64 not in cache.in_use

    asyncio.run(scenario())
