"""The server's loops do bounded work per transaction and leave the API answering
(issue 31: a firing pass that spun made every call 503). Against a real server: a
thousand executions pass their deadline at the same moment."""

from __future__ import annotations

import time

import httpx
import pytest

from flux.server.timers import BATCH

SOURCE = "from flux import workflow\n\n@workflow\nasync def brief(ctx):\n    return 1\n"


@pytest.mark.timeout(120)
@pytest.mark.slow  # over ~20 s: CI's second step
def test_a_thousand_deadlines_at_once_expire_in_batches_while_the_api_answers(cluster):
    count = 2 * BATCH + 100
    with httpx.Client(base_url=cluster.server_url, timeout=30) as http:
        assert (
            http.post("/workflows", json={"source": SOURCE, "workflows": [{"name": "brief", "timeout": 2}]}).status_code
            == 201
        )
        for _ in range(count):  # no worker: each waits SCHEDULED until its deadline
            assert http.post("/workflows/brief/run", json={"input": None}).status_code == 201
        # every /health answered while they expire (how fast: B17.expiring_deadlines, bench/b17_hostile.py)
        health = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            health.append(http.get("/health").status_code)
            if http.get("/executions", params={"state": "SCHEDULED", "limit": 1}).json() == []:
                break
            time.sleep(0.05)
        timed_out = len(http.get("/executions", params={"state": "TIMED_OUT", "limit": 1000}).json())
        left = http.get("/executions", params={"state": "SCHEDULED", "limit": 1}).json()
    assert left == [], "executions past their deadline are still SCHEDULED"
    assert timed_out == 1000  # a full page: all 1,100 ended TIMED_OUT
    assert health and set(health) == {200}
