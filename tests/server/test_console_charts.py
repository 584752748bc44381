"""The console's server-drawn charts (flux/server/console/charts.py): a workflow's
durations as a histogram and how its runs ended, as inline SVG (no script, no CDN)."""

from __future__ import annotations

from flux.server.console.charts import bins, buckets, duration_histogram, outcomes, success_over_time, ticks


def run(i: int, state: str = "COMPLETED", ran: float | None = 1.0) -> dict:
    started = 100.0 + i
    return {
        "id": f"{i:032x}",
        "state": state,
        "scheduled_at": started - 1,
        "started_at": started,
        "finished_at": started + ran if ran is not None else None,
    }


def test_bins_cover_every_duration_from_shortest_to_longest():
    made = bins([1.0, 2.0, 2.5, 9.0])
    assert sum(b.count for b in made) == 4 and made[0].low == 1.0 and made[-1].high == 9.0
    assert bins([3.0, 3.0])[0].count == 2  # one width of zero: one bin
    assert bins([]) == []


def test_the_histogram_draws_a_bar_per_bin_with_its_count_and_escapes_nothing_unsafe():
    svg = str(duration_histogram([run(i, ran=float(i % 5 + 1)) for i in range(25)]))
    assert svg.startswith('<svg class="chart chart-durations"') and svg.count('<rect class="bar"') == 5
    assert "Durations of the last 25 ended runs" in svg and "<script" not in svg
    assert str(duration_histogram([run(1, "RUNNING", ran=None)])) == ""  # nothing ended: no chart


def test_the_histograms_axis_reads_apart_in_a_unit_that_suits_it():
    assert ticks([1.02, 1.03, 1.04]) == ["1.02 s", "1.03 s", "1.04 s"]  # never 1.0 s ... 1.0 s
    assert ticks([0.05, 0.475, 0.9]) == ["50 ms", "475 ms", "900 ms"]
    assert ticks([3.0, 101.5, 200.0]) == ["0.1 min", "1.7 min", "3.3 min"]  # 3 s is not "0 min"
    close = str(duration_histogram([run(i, ran=1.02 + 0.01 * (i % 3)) for i in range(9)]))
    assert ">1.02 s</text>" in close and ">1.04 s</text>" in close
    alike = str(duration_histogram([run(i, ran=2.0) for i in range(3)]))  # one duration: one value, once
    assert alike.count("</text>") == 1 and ">2.0 s</text>" in alike


def test_outcomes_are_oldest_first_one_column_per_ended_run():
    svg = str(outcomes([run(3, "FAILED"), run(1), run(2, "CANCELLED"), run(4, "RUNNING", ran=None)]))
    assert svg.count("<rect") == 3
    assert svg.index("outcome-completed") < svg.index("outcome-cancelled") < svg.index("outcome-failed")
    assert "1 of the last 3 ended runs completed" in svg


def test_the_fleet_charts_draw_each_series_over_the_kept_points():
    from flux.server.console.charts import fleet_charts
    from flux.server.fleet_trend import FleetSummary, FleetTrend

    trend = FleetTrend(keep=3)
    for i in range(5):  # only the newest three are kept
        summary = FleetSummary(
            workers={"ONLINE": 1},
            slots=4,
            busy=i % 4,
            queued=i,
            unschedulable=0,
            waiting=0,
            running=i % 4,
            oldest_queued_at=None,
            cpu_percent=50.0,
            memory_used=1.0,
            memory_total=4.0,
        )
        trend.add(summary, at=1000.0 + 15 * i)
    points = [p.model_dump() for p in trend.history().points]
    assert [p["queued"] for p in points] == [2, 3, 4]
    slots, use = map(str, fleet_charts(points))
    assert slots.count("<polyline") == 3 and use.count("<polyline") == 2
    assert "the last 30.0 s" in slots and "queued: 4 now" in slots and "memory: 25% now" in use
    # a time axis under each (UTC clock times of the first and last points) and the y's unit
    assert ">00:17:10</text>" in slots and ">00:17:40 UTC</text>" in use
    assert ">4</text>" in slots and ">100%</text>" in use and ">0%</text>" in use
    assert fleet_charts([]) == [] and len(fleet_charts(points[:1])) == 2  # one sample: still a chart
    with_devices = [{**p, "gpus": 2, "gpu_percent": 40.0, "resources": {"fpga": [1.0, 4.0]}} for p in points]
    use = str(fleet_charts(with_devices)[1])
    assert use.count("<polyline") == 4 and "gpu: 40% now" in use and "fpga: 25% now" in use


def test_the_success_rate_is_bucketed_in_time_with_a_width_that_suits_the_span():
    hour = 3600.0
    runs = [
        ended(0.0, "COMPLETED"),
        ended(10.0, "FAILED"),
        ended(10 * hour + 5, "COMPLETED"),
        ended(11 * hour, "RUNNING"),
    ]
    width, made = buckets(runs)
    assert width == hour  # ten hours apart: an hour a bucket (15 minutes would be over 24 of them)
    assert [(b.ended, b.completed) for b in made] == [(2, 1)] + [(0, 0)] * 9 + [(1, 1)]  # empty hours kept: gaps
    assert buckets([ended(0.0, "COMPLETED"), ended(30.0, "CANCELLED")])[0] == 60.0
    svg = str(success_over_time(runs))
    assert (
        svg.startswith('<svg class="chart chart-success"') and "Success rate per hour of the last 3 ended runs" in svg
    )
    assert svg.count("<g>") == 2 and "1 of 2 completed (50%)" in svg and "1 of 1 completed (100%)" in svg
    assert str(success_over_time([ended(0.0, "RUNNING")])) == ""  # nothing ended: no chart


def ended(after: float, state: str) -> dict:
    at = 1_699_999_200.0 + after  # on the hour
    return {
        "id": f"{int(at):032x}",
        "state": state,
        "scheduled_at": at - 1,
        "started_at": at - 1,
        "finished_at": at if state != "RUNNING" else None,
    }
