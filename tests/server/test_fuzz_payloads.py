"""Hypothesis fuzzing of the worker protocol's payloads against a real server:
whatever a worker (or an impostor) sends to register, claim or checkpoint, the
answer is never a 5xx, and every refusal has the one error shape."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Iterator

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flux.domain.events import EventType
from flux.local import LocalCluster
from flux.worker import probe

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
WORKFLOW = "from flux import workflow\n\n@workflow\nasync def hello(ctx):\n    return ctx.input\n"

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.text(max_size=20),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


@st.composite
def _mutation(draw: st.DrawFn, base: dict) -> dict:
    payload = json.loads(json.dumps(base))
    for key in draw(st.lists(st.sampled_from(sorted(payload)), max_size=3, unique=True)):
        if draw(st.booleans()):
            payload[key] = draw(json_values)
        else:
            del payload[key]
    payload.update(draw(st.dictionaries(st.text(max_size=8), json_values, max_size=2)))
    return payload


def mutated(base: dict) -> st.SearchStrategy[Any]:
    """``base`` with some fields replaced by anything, some dropped, some added; or any JSON at all."""
    return st.one_of(_mutation(base), json_values)


@dataclass
class Server:
    http: httpx.Client
    bootstrap: str
    session: str
    execution_id: str

    def post(self, path: str, payload: Any, token: str) -> httpx.Response:
        # json.dumps, not httpx's json=: NaN and Infinity go out as the literals a sloppy client sends.
        body = json.dumps(payload).encode()
        return self.http.post(
            path, content=body, headers={"Authorization": f"Bearer {token}", "content-type": "application/json"}
        )


def registration(name: str = "fuzz") -> dict:
    return {"name": name, "heartbeat_interval": 5.0, **probe.get_resources_info({}, 4, gpu_source="none")}


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    with LocalCluster(tmp_path_factory.mktemp("fuzz") / "home", eviction_grace_period=3600) as cluster:
        cluster.start_server()
        bootstrap = (cluster.home / "bootstrap-token").read_text().strip()
        with httpx.Client(base_url=cluster.server_url, timeout=10) as http:
            session = http.post(
                "/workers/register", json=registration(), headers={"Authorization": f"Bearer {bootstrap}"}
            )
            http.post("/workflows", json={"source": WORKFLOW, "workflows": [{"name": "hello"}]}).raise_for_status()
            execution = http.post("/workflows/hello/run", json={"input": 1}).json()["id"]
            token = session.json()["session_token"]
            claimed = http.post(
                "/workers/fuzz/claim", json={"wait": 5}, headers={"Authorization": f"Bearer {token}"}
            ).json()
            assert [e["id"] for e in claimed["executions"]] == [execution]  # checkpoints reach a live execution
            yield Server(http, bootstrap, token, execution)
        assert "Traceback" not in cluster.log("server")


def assert_no_server_error(response: httpx.Response) -> None:
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        body = response.json()
        assert isinstance(body["detail"], str) and isinstance(body["code"], str), body


@FUZZ
@given(payload=mutated(registration("fuzzed")))
def test_register(server: Server, payload):
    assert_no_server_error(server.post("/workers/register", payload, server.bootstrap))


@FUZZ
@given(payload=mutated({"wait": 0}))
def test_claim(server: Server, payload):
    wait = payload.get("wait", 20) if isinstance(payload, dict) else None  # 20: the server's default
    if isinstance(wait, (int, float)) and not isinstance(wait, bool):
        payload["wait"] = min(wait, 0.01)  # a valid long poll would only slow the run
    assert_no_server_error(server.post("/workers/fuzz/claim", payload, server.session))


event = st.fixed_dictionaries(
    {"type": st.sampled_from([t.value for t in EventType]) | st.text(max_size=12), "time": st.floats() | json_values},
    optional={"name": json_values, "task_id": json_values, "value": json_values},
)


@FUZZ
@given(
    payload=st.one_of(
        st.fixed_dictionaries(
            {
                "attempt": st.integers(-1, 3) | json_values,
                "batch": st.integers(-1, 3) | json_values,
                "events": st.lists(event, max_size=4) | json_values,
            }
        ),
        mutated({"attempt": 1, "batch": 1, "events": [{"type": "TASK_STARTED", "time": time.time()}]}),
    )
)
def test_checkpoint(server: Server, payload):
    assert_no_server_error(server.post(f"/executions/{server.execution_id}/checkpoint", payload, server.session))
