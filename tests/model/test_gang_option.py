"""Declaring a gang (issue 53 item 1, docs/gangs.md): ``gang=`` is a workflow option,
checked at decoration and by static registration (file and line), each refusal naming
the field."""

from __future__ import annotations

import pytest

from flux import Gang, ResourceRequest, workflow
from flux.domain.gang import InvalidGang
from flux.registration import StaticError, read_source

SOURCE = (
    "from flux import Gang, ResourceRequest, workflow\n"
    "@workflow.with_options(requests=ResourceRequest(gpu=8), gang={gang})\n"
    "async def train(ctx): pass\n"
)


async def _noop(ctx):
    return None


def test_the_decorator_takes_a_gang_and_keeps_its_json_form():
    train = workflow.with_options(
        name="train",
        requests=ResourceRequest(gpu=8),
        gang=Gang(size=4, topology="rack", prefer="zone", per_worker=1, start_timeout="5m"),
    )(_noop)
    assert train.gang == Gang(size=4, topology="rack", prefer="zone", start_timeout=300)
    assert train.metadata()["gang"] == {
        "size": 4,
        "topology": "rack",
        "prefer": "zone",
        "per_worker": 1,
        "start_timeout": 300.0,
    }
    assert workflow(_noop).gang is None and "gang" not in workflow(_noop).metadata()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Gang(size=1, topology="rack"), "Gang.size: must be at least 2"),
        (lambda: Gang(size=300, topology="rack"), "Gang.size: 300 is more than the server's cap on gang size, 256"),
        (lambda: Gang(size=4, topology="my rack"), "Gang.topology: 'my rack' is not a label key"),
        (lambda: Gang(size=4, topology="rack", prefer="rack"), "Gang.prefer: 'rack' is the topology itself"),
        (lambda: Gang(size=4, topology="rack", per_worker=5), "Gang.per_worker: 5 is more than the gang's size, 4"),
        (lambda: Gang(size=4, topology="rack", start_timeout="soon"), "Gang.start_timeout"),
        (lambda: 4, "workflow 'w': gang must be a Gang"),
    ],
)
def test_bad_input_at_decoration_names_the_field(make, message):
    with pytest.raises(InvalidGang, match=message):
        workflow.with_options(name="w", gang=make())(_noop)


def test_a_server_that_allows_more_takes_a_gang_made_with_its_cap():
    assert workflow.with_options(name="w", gang=Gang(size=600, topology="rack", max_size=1024))(_noop).gang.size == 600


def test_static_registration_reads_the_gang():
    found = read_source(SOURCE.format(gang='Gang(size=4, topology="rack", start_timeout="5m")'), "x.py")
    assert found.workflows[0].options.gang == Gang(size=4, topology="rack", start_timeout=300)
    dict_form = read_source(SOURCE.format(gang='{"size": 2, "topology": "zone"}'), "x.py")
    assert dict_form.workflows[0].options.gang == Gang(size=2, topology="zone")


@pytest.mark.parametrize(
    ("gang", "message"),
    [
        ('Gang(size=4, topology="my rack")', "x.py:2: Gang.topology: 'my rack' is not a label key"),
        ('Gang(size=4, topology="rack", per_worker=5)', "x.py:2: Gang.per_worker: 5 is more than the gang's size"),
        ('Gang(size=999, topology="rack")', "x.py:2: Gang.size: 999 is more than the server's cap"),
        ("3", "x.py:2: workflow 'train': gang must be a Gang"),
    ],
)
def test_static_registration_names_file_line_and_field(gang, message):
    with pytest.raises(StaticError, match=message) as raised:
        read_source(SOURCE.format(gang=gang), "x.py")
    assert raised.value.option == "gang"
