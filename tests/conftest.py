"""Shared fixtures: real server and worker processes on free ports, stopped after each test."""

from __future__ import annotations

import os
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Callable, Iterator

import psycopg
import pytest

sys.path.insert(0, str(Path(__file__).parent))  # lets tests import fakes.py

from hypothesis import HealthCheck, settings  # noqa: E402
from waiting import eventually  # noqa: E402

from flux.client import FluxClient  # noqa: E402
from flux.local import LocalCluster  # noqa: E402

#: Property tests judge the code, not the machine: a loaded two-core machine (four test
#: processes and their servers) drew inputs slowly enough for Hypothesis' too_slow health
#: check and its per-example deadline to fail tests that were right.
settings.register_profile("flux", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("flux")

POSTGRES_URL = os.environ.get("FLUX_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[Callable[..., LocalCluster]]:
    """Start a server (SQLite file under tmp_path unless database_url is given); workers via .start_worker."""
    clusters: list[LocalCluster] = []

    def make(**kwargs) -> LocalCluster:
        cluster = LocalCluster(tmp_path / f"home{len(clusters)}", **kwargs)
        clusters.append(cluster)
        cluster.start_server()
        return cluster

    yield make
    for cluster in clusters:
        cluster.close()


@pytest.fixture
def cluster(make_cluster) -> LocalCluster:
    return make_cluster()


@pytest.fixture
def client(cluster: LocalCluster) -> Iterator[FluxClient]:
    with FluxClient(cluster.server_url) as flux_client:
        yield flux_client


@pytest.fixture
def workflow_file(tmp_path: Path) -> Callable[[str, str], Path]:
    """Write a workflow module from an indented source string."""

    def write(source: str, name: str = "wf.py") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(source))
        return path

    return write


@pytest.fixture
def marks(tmp_path: Path) -> Path:
    """A folder the test's workflows write marks into (which rank ran, in which attempt)."""
    folder = tmp_path / "marks"
    folder.mkdir()
    return folder


@pytest.fixture
def hand_claimed(cluster, workflow_file):
    """A one-task execution claimed by a worker the test speaks for (``ProtocolWorker``)."""
    from protocol import ONE_TASK, ProtocolWorker

    worker = ProtocolWorker(cluster.server_url, cluster.home, "by-hand", heartbeat_interval=5)
    try:
        worker.register()
        with FluxClient(cluster.server_url) as client:
            client.register_file(workflow_file(ONE_TASK))
            client.run("one_task", 1)
            job = eventually(lambda: worker.claim(wait=2)["executions"], 10, "never claimed")[0]
        yield worker, job
    finally:
        worker.close()


@pytest.fixture
def pg_url():
    """A PostgreSQL database of this test's own, dropped afterwards."""
    name = f"flux_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield POSTGRES_URL.rsplit("/", 1)[0] + f"/{name}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def replicas(tmp_path: Path, pg_url):
    """Two server replicas on one PostgreSQL database, sharing the bootstrap token (same home)."""
    home = tmp_path / "home"
    servers = [
        LocalCluster(home, database_url=pg_url, eviction_grace_period=5, log_dir=tmp_path / f"logs{i}")
        for i in range(2)
    ]
    try:
        for server in servers:
            server.start_server()
        yield servers
    finally:
        for server in servers:
            server.close()
