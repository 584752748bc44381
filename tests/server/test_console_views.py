"""The console's pure parts: an execution's tasks in time (retries, attempts), and how
values read (times, sizes, input and output capped and masked)."""

from __future__ import annotations

from flux.server.console.gantt import gantt, members_gantt
from flux.server.console.paging import Filters
from flux.server.console.views import MASK, MAX_SHOWN, ago, shown, size, usage


def event(type_, at, task_id=None, value=None):  # noqa: ANN001
    return {"type": type_, "time": at, "task_id": task_id, "name": task_id and task_id.split(":")[0], "value": value}


def test_the_gantt_has_a_bar_per_try_within_each_attempt():
    chart = gantt(
        [
            event("ATTEMPT_STARTED", 0, value={"attempt": 1}),
            event("TASK_STARTED", 1, "fetch:1", {"attempt": 1}),
            event("TASK_FAILED", 2, "fetch:1", {"attempt": 1, "error": "boom", "will_retry": True}),
            event("TASK_STARTED", 3, "fetch:1", {"attempt": 2}),
            event("TASK_COMPLETED", 5, "fetch:1", 42),
            event("TASK_STARTED", 5, "store:2", {"attempt": 1}),
            event("ATTEMPT_ENDED", 6, value={"attempt": 1, "end": "worker_lost"}),
            event("ATTEMPT_STARTED", 7, value={"attempt": 2}),
            event("TASK_STARTED", 8, "store:2", {"attempt": 1}),
        ],
        now=11,
    )
    rows = [(b.task_id, b.attempt, b.retry, b.outcome) for b in chart.bars]
    assert rows == [
        ("fetch:1", 1, 1, "failed"),
        ("fetch:1", 1, 2, "completed"),
        ("store:2", 1, 1, "interrupted"),
        ("store:2", 2, 1, "running"),
    ]
    assert chart.bars[0].error == "boom"
    assert (chart.start, chart.end) == (1, 11)
    assert chart.bars[0].left == 0 and chart.bars[-1].left == 70 and chart.bars[-1].width == 30
    assert [a for a, _ in chart.attempts] == [1, 2]
    assert gantt([], now=1).bars == []


def test_a_gangs_chart_has_a_row_per_started_member():
    members = [
        {
            "rank": 0,
            "id": "m0",
            "worker_name": "a1",
            "attempt": 1,
            "state": "COMPLETED",
            "started_at": 2,
            "finished_at": 6,
        },
        {
            "rank": 1,
            "id": "m1",
            "worker_name": "a2",
            "attempt": 1,
            "state": "RUNNING",
            "started_at": 4,
            "finished_at": None,
        },
        {"rank": 2, "id": "m2", "worker_name": None, "attempt": 1, "state": "SCHEDULED", "started_at": 3},
        {"rank": 3, "id": "m3", "worker_name": "a3", "attempt": 1, "state": "CLAIMED", "started_at": None},
    ]
    chart = members_gantt(members, now=12)
    assert [(b.task_id, b.name, b.outcome) for b in chart.bars] == [
        ("m0", "rank 0 on a1", "completed"),
        ("m1", "rank 1 on a2", "running"),
    ]
    assert (chart.start, chart.end) == (2, 12) and chart.bars[1].left == 20 and chart.bars[1].width == 80
    assert members_gantt([], now=1).bars == []


def test_values_read_as_people_expect():
    assert ago(100, now=190) == "1m ago" and ago(100, now=105) == "5s ago" and ago(200, now=100) == "in 1m"
    assert size(1536) == "1.5 KiB" and size(512) == "512 B"
    masked = shown({"user": "ada", "db": {"password": "x", "API_KEY": "y"}, "tokens": ["a"]})
    assert "ada" in masked["text"] and '"x"' not in masked["text"] and '"y"' not in masked["text"]
    assert MASK in masked["text"] and masked["cut"] == 0
    big = shown("x" * (MAX_SHOWN * 2))
    assert len(big["text"].encode()) <= MAX_SHOWN and big["cut"] > MAX_SHOWN


def test_filters_are_urls():
    filters = Filters.of({"state": "running", "workflow": "etl", "since": "1h", "bogus": "1"})
    assert filters.state == "RUNNING" and filters.since == "1h"
    assert filters.url(after="25") == "/ui/executions?state=RUNNING&workflow=etl&since=1h&after=25"
    assert Filters.of({"since": "forever", "state": "nope"}) == Filters()


def test_a_fleet_row_has_a_bar_for_each_probed_dimension_the_worker_publishes():
    res = {
        "cpu_total": 8.0,
        "cpu_available": 8.0,
        "cpu_percent": 25.4,
        "memory_total": 100,
        "memory_available": 50,
        "disk_total": 10,
        "disk_free": 10,
        "capacity": {"scratch": 200},
        "available": {"scratch": 50},
        "gpus": [],
    }
    bars = usage({"resources": res})
    assert [(b["label"], b["pct"]) for b in bars] == [("cpu", 25), ("memory", 50), ("disk", 0), ("scratch", 75)]
    assert bars[-1]["text"] == "150 / 200"
    assert bars[0]["text"] == "25% busy of 8 cores"  # the sample's reading; cpu_available is the affinity mask


def test_a_traceback_is_marked_for_the_stylesheet_and_escaped():
    from flux.server.console.views import traceback_html

    html = str(
        traceback_html(
            'Traceback (most recent call last):\n  File "a.py", line 3, in f\n'
            '    raise ValueError("<x>")\nValueError: <x>'
        )
    )
    assert '<span class="tb-where">  File &#34;a.py&#34;, line 3, in f</span>' in html
    assert '<span class="tb-code">    raise ValueError(&#34;&lt;x&gt;&#34;)</span>' in html
    assert '<span class="tb-raised">ValueError: &lt;x&gt;</span>' in html and "<x>" not in html
