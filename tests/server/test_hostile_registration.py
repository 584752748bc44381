"""Hostile workflow registrations (issue 31): oversized affinity or routing and
quantities past 2**63-1 bytes are a 422 naming the field, on a real server, and
the server stays quick."""

from __future__ import annotations

import httpx
import pytest
from shared import SOURCE, assert_error

pytestmark = pytest.mark.integration


def register(http: httpx.Client, **options) -> httpx.Response:
    return http.post("/workflows", json={"source": SOURCE, "workflows": [{"name": "x", **options}]})


def test_oversized_affinity_routing_and_quantities_are_a_422_naming_the_field(cluster):
    crowded = {f"label{i}": "v" for i in range(10_000)}
    terms = {"terms": [{"kind": "label_eq", "key": f"k{i}", "value": "v"} for i in range(10_000)]}
    with httpx.Client(base_url=cluster.server_url, timeout=30) as http:
        # refused by its count, whatever the labels hold (b17_hostile tries it against a real server)
        body = assert_error(register(http, affinity=crowded), 422, "invalid")
        assert "workflow 'x': affinity has 10000 entries, at most 64" in body["detail"]
        body = assert_error(
            register(http, affinity={"zone": {"op": "In", "values": [str(i) for i in range(1000)]}}), 422, "invalid"
        )
        assert "affinity['zone']: In values has 1000 entries, at most 64" in body["detail"]
        body = assert_error(register(http, affinity={"zone": "v" * 64}), 422, "invalid")
        assert "has 64 characters, at most 63" in body["detail"]
        body = assert_error(register(http, routing=terms), 422, "invalid")
        assert "workflow 'x': routing has 10000 entries, at most 64" in body["detail"]
        for field in ("memory", "disk"):
            body = assert_error(register(http, requests={field: "99999999999999999999999999Ei"}), 422, "invalid")
            assert f"ResourceRequest.{field}:" in body["detail"] and "2**63-1 bytes" in body["detail"]
        assert_error(register(http, requests={"memory": "8Ei"}), 422, "invalid")
        assert http.get("/workflows/x").status_code == 404  # nothing stored
        assert register(http, requests={"memory": "7Ei"}, affinity={f"k{i}": "v" for i in range(64)}).status_code == 201
