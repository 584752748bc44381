"""Hostile schedules (issue 31): times outside the accepted domain are a 422, and a
schedule stored outside it by an older version is paused with a reason instead of
jamming the server. Real server processes, except the firing pass on its own."""

from __future__ import annotations

import signal
import sqlite3
import time

import httpx
import pytest
from shared import assert_error, flux
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from flux.domain.policy import ExecutionPolicy
from flux.server.models import Base, ScheduleModel
from flux.server.schedules.firing import fire_due

NAP = """
    from flux import workflow

    @workflow
    async def nap(ctx):
        return ctx.input
"""

OUT_OF_RANGE = [
    ({"every": 1e-9}, "every"),
    ({"every": "250ms"}, "every"),
    ({"every": 1e20}, "every"),
    ({"at": 1e300}, "at"),
    ({"at": -1e18}, "at"),
    ({"at": "0001-01-01T00:00:00+14:00"}, "at"),
    ({"every": 60, "anchor": 1e300}, "anchor"),
    ({"every": 60, "anchor": -1e18}, "anchor"),
]


@pytest.mark.integration
def test_schedule_times_outside_the_domain_are_a_422_naming_the_field(cluster, client, workflow_file):
    client.register_file(workflow_file(NAP))
    client.create_schedule("ok", "nap", every="1h")
    with httpx.Client(base_url=cluster.server_url, timeout=10) as http:
        for fields, field in OUT_OF_RANGE:
            body = assert_error(
                http.post("/schedules", json={"name": "bad", "workflow": "nap", **fields}), 422, "validation_error"
            )
            assert f"{field}:" in body["detail"], (fields, body)
            patched = http.patch("/schedules/ok", json=fields)  # a field rule (every) or a domain rule (at, anchor)
            body = assert_error(patched, 422, "validation_error" if field == "every" else "invalid")
            assert f"{field}:" in body["detail"], (fields, body)
        assert [s["name"] for s in http.get("/schedules").json()] == ["ok"]  # nothing stored, nothing changed
        assert http.get("/schedules/ok").json()["every"] == 3600
    refused = flux("schedule", "create", "s", "nap", "--every", "1e-9", server_url=cluster.server_url, check=False)
    assert refused.returncode == 2 and "every: must be between 1 second and" in refused.stderr


@pytest.mark.integration
@pytest.mark.timeout(90)
def test_a_stored_schedule_that_cannot_advance_is_paused_with_a_reason_at_start(cluster, client, workflow_file):
    client.register_file(workflow_file(NAP))
    client.create_schedule("tiny", "nap", every="1m")
    client.create_schedule("far", "nap", every="1m")
    client.create_schedule("fine", "nap", every="1h")
    cluster.stop_server()
    now = time.time()
    with sqlite3.connect(cluster.home / "flux.db") as db:  # as an older version stored them
        db.execute(
            "UPDATE schedules SET every = 1e-9, next_due = ?, next_fire_at = ? WHERE name = 'tiny'", (now - 5, now - 5)
        )
        db.execute("UPDATE schedules SET anchor = 1e300 WHERE name = 'far'")
    cluster.start_server()
    with httpx.Client(base_url=cluster.server_url, timeout=10) as http:
        tiny = http.get("/schedules/tiny").json()
        assert tiny["paused"] and "every: must be between 1 second and" in tiny["paused_reason"]
        assert tiny["next_fire_times"] == []
        far = http.get("/schedules/far").json()
        assert (
            far["paused"]
            and far["paused_reason"].startswith("anchor: 1e+300 is not a time")
            and far["anchor"] == "1e+300"
        )
        fine = http.get("/schedules/fine").json()
        assert not fine["paused"] and fine["paused_reason"] is None and len(fine["next_fire_times"]) == 5
        assert http.get("/workflows").status_code == 200  # the server answers
        body = assert_error(http.post("/schedules/tiny/resume"), 422, "invalid")
        assert "change its timing first" in body["detail"]
        assert http.patch("/schedules/tiny", json={"every": "1s"}).status_code == 200
        resumed = http.post("/schedules/tiny/resume").json()
        assert not resumed["paused"] and resumed["paused_reason"] is None
    shown = flux("schedule", "show", "far", server_url=cluster.server_url).stdout
    assert "anchor: 1e+300 is not a time" in shown
    cluster.server.send_signal(signal.SIGTERM)
    assert cluster.server.wait(timeout=60) == 0  # SIGTERM stops it: a clean exit, no SIGKILL needed
    cluster.server = None


def test_the_firing_pass_pauses_a_schedule_that_cannot_advance(tmp_path):
    engine = create_engine(f"sqlite:///{tmp_path / 'pass.db'}")
    Base.metadata.create_all(engine)
    now = time.time()
    with Session(engine) as session:
        session.add(
            ScheduleModel(
                name="tiny",
                workflow_name="nap",
                every=1e-9,
                anchor=0.0,
                timezone="UTC",
                overlap="skip",
                catch_up="latest",
                catch_up_limit=100,
                jitter=0.0,
                paused=False,
                next_due=now - 5,
                next_fire_at=now - 5,
                created_at=now,
                updated_at=now,
            )
        )
        session.flush()
        done = fire_due(session, now, ExecutionPolicy())
        row = session.query(ScheduleModel).one()
        assert row.paused and "every: must be between 1 second and" in row.paused_reason
        assert done.lateness == [] and done.next_at is None and not done.more
    engine.dispose()
