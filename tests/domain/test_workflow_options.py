"""``WorkflowOptions``: one frozen value for every workflow option, its checks naming the
workflow and the option, and its JSON form (what a version row stores)."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, fields

import pytest

from flux.domain.concurrency import Concurrency
from flux.domain.fluxcore_schedules import cron
from flux.domain.gang import Gang, InvalidGang
from flux.domain.resource_request import InvalidResourceRequest, ResourceRequest
from flux.domain.routing import load, score
from flux.domain.workflow_options import DIRECTIVES, WorkflowOptions, names

EVERY = dict(
    requests=ResourceRequest(cpu=2),
    affinity={"zone": "a"},
    routing=score(load() * -1),
    pending_timeout=30,
    max_attempts=2,
    timeout=60,
    priority=5,
    preemptible=False,
    min_runtime="1m",
    concurrency=Concurrency("c:{input}", 3),
    max_concurrency=7,
    namespace="ml",
    schedule=cron("0 * * * *"),
    gang=Gang(size=4, topology="rack", prefer="zone", start_timeout="5m"),
)


def test_every_field_is_an_option_the_value_checks():
    assert names() == tuple(option.name for option in fields(WorkflowOptions))
    assert set(EVERY) == set(names()) - {"name"}


def test_the_json_form_goes_back_to_the_same_value():
    options = WorkflowOptions.of("train", **EVERY)
    assert WorkflowOptions.from_json(options.to_json()).to_json() == options.to_json()
    assert options.to_json()["min_runtime"] == 60.0 and options.to_json()["routing"] == {
        "terms": [{"kind": "load", "weight": -1.0}]
    }
    with pytest.raises(FrozenInstanceError):
        options.timeout = 1  # type: ignore[misc]


def test_only_options_set_away_from_their_default_are_written():
    assert WorkflowOptions.of("plain").to_json() == {"name": "plain"}
    assert WorkflowOptions.of("p", preemptible=True, requests={}, affinity={}).to_json() == {"name": "p"}
    assert WorkflowOptions.of("p", preemptible=False).to_json() == {"name": "p", "preemptible": False}


def test_a_version_stores_every_option_but_the_directives_of_registration():
    stored = WorkflowOptions.of("train", **EVERY).stored()
    assert set(stored) == set(names()) - set(DIRECTIVES)
    assert WorkflowOptions.of("train", **EVERY).contention() == {
        "priority": 5,
        "preemptible": False,
        "min_runtime": 60.0,
        "concurrency": {"key": "c:{input}", "limit": 3},
        "max_concurrency": 7,
    }


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("pending_timeout", 0, "workflow 'w': pending_timeout must be a number of seconds > 0"),
        ("max_attempts", 0, "workflow 'w': max_attempts"),
        ("timeout", -1, "workflow 'w': timeout"),
        ("priority", 1.5, "workflow 'w': priority"),
        ("preemptible", "no", "workflow 'w': preemptible must be True or False"),
        ("min_runtime", "soon", "min_runtime"),
        ("concurrency", {"limit": 2}, "workflow 'w': concurrency"),
        ("max_concurrency", 0, "workflow 'w': max_concurrency"),
        ("namespace", "bad name", "workflow 'w': namespace"),
        ("schedule", "daily", "workflow 'w': schedule must be cron"),
        ("affinity", ["zone"], "workflow 'w': affinity"),
        ("routing", {"terms": []}, "workflow 'w': routing"),
        ("requests", 3, "workflow 'w': requests must be a ResourceRequest"),
        ("gang", 4, "workflow 'w': gang must be a Gang"),
        ("gang", {"size": 4, "topology": "my rack"}, "workflow 'w': Gang.topology: 'my rack' is not a label key"),
        ("gang", {"size": 4, "topology": "rack", "per_worker": 5}, "workflow 'w': Gang.per_worker: 5 is more"),
        ("gang", {"size": 1, "topology": "rack"}, "workflow 'w': Gang.size: must be at least 2"),
        ("gang", {"size": 4, "topology": "rack", "ranks": 2}, "workflow 'w': Gang got unknown field.* 'ranks'"),
    ],
)
def test_each_check_names_the_workflow_and_the_option(option, value, message):
    with pytest.raises(ValueError, match=message):
        WorkflowOptions.of("w", **{option: value})


def test_a_bad_request_and_an_unknown_option_are_refused():
    with pytest.raises(InvalidResourceRequest):
        WorkflowOptions.of("w", requests={"cpu": -1})
    with pytest.raises(TypeError, match="unknown workflow option 'gpus'; known: name, requests"):
        WorkflowOptions.of("w", gpus=1)
    with pytest.raises(ValueError, match="name"):
        WorkflowOptions.of("")


def test_a_gang_keeps_its_json_form_and_reads_back_past_the_default_cap():
    options = WorkflowOptions.of("train", gang=Gang(size=4, topology="rack", prefer="zone", start_timeout="5m"))
    assert options.to_json()["gang"] == {
        "size": 4,
        "topology": "rack",
        "prefer": "zone",
        "per_worker": 1,
        "start_timeout": 300.0,
    }
    # a server started with a higher cap stored it: its document reads back (the cap is the server's)
    big = WorkflowOptions.of("big", gang={"size": 600, "topology": "rack"})
    assert WorkflowOptions.from_json(big.to_json()).gang == big.gang and big.gang.size == 600
    with pytest.raises(InvalidGang, match="Gang.size: must be a whole number"):
        WorkflowOptions.of("w", gang={"size": "four", "topology": "rack"})
