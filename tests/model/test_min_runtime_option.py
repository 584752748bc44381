"""``min_runtime`` (docs/contention.md): validated where the other options are (the decorator,
static registration with its file and line, the API with a 422 naming it) and carried to the
server with them, onto each execution."""

from __future__ import annotations

import httpx
import pytest

from flux import workflow
from flux.client import FluxClient
from flux.registration import StaticError, read_source

SOURCE = "from flux import workflow\n@workflow.with_options(min_runtime={value})\nasync def w(ctx): pass\n"


async def _noop(ctx):
    return None


def test_the_decorator_takes_seconds_or_a_duration_and_names_the_option_on_a_bad_value():
    assert workflow.with_options(name="w", min_runtime="10m")(_noop).metadata()["min_runtime"] == 600.0
    assert workflow.with_options(name="w", min_runtime=90)(_noop).options.contention() == {"min_runtime": 90.0}
    assert "min_runtime" not in workflow(_noop).metadata()
    for bad in (0, -1, "ten minutes", True):
        with pytest.raises(ValueError, match="workflow 'w': min_runtime"):
            workflow.with_options(name="w", min_runtime=bad)(_noop)


def test_static_registration_reads_it_and_names_file_and_line_on_a_bad_value():
    assert read_source(SOURCE.format(value='"1h"'), "x.py").workflows[0].options.min_runtime == 3600.0
    with pytest.raises(StaticError, match="x.py:2: workflow 'w': min_runtime"):
        read_source(SOURCE.format(value='"soon"'), "x.py")


def test_the_api_refuses_a_bad_value_with_a_422_and_carries_a_good_one_to_each_execution(cluster):
    source = SOURCE.format(value='"10m"')
    bad = httpx.post(
        f"{cluster.server_url}/workflows", json={"source": source, "workflows": [{"name": "w", "min_runtime": "x"}]}
    )
    assert bad.status_code == 422 and "min_runtime" in bad.text
    with FluxClient(cluster.server_url) as client:
        good = httpx.post(
            f"{cluster.server_url}/workflows",
            json={"source": source, "workflows": [{"name": "w", "min_runtime": "10m"}]},
        )
        assert good.status_code == 201 and good.json()[0]["contention"] == {"min_runtime": 600.0}
        assert client.run("w", None)["min_runtime"] == 600.0
