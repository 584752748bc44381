"""Charts drawn on the server as inline SVG: no script, no CDN, readable without
JavaScript and in a screenshot. Each takes what a page already read from the API (a
workflow's runs) and returns markup; colours come from the stylesheet's classes, so
they follow the light and dark themes. Per workflow: the durations of its recent runs
as a histogram, how each of them ended, oldest to newest, and its success rate over
time in buckets of a width that suits the span. For the fleet: its
slots, queue and use over the hours the server kept (``GET /fleet/history``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NamedTuple

from markupsafe import Markup, escape

from flux.domain.events import ExecutionState
from flux.server.console.views import duration

WIDTH, HEIGHT, BAR_GAP = 480, 120, 2
#: Bins of the histogram (fewer when there are fewer runs).
BINS = 12
#: Buckets of the success rate over time, at most; their width is the first of
#: ``BUCKET_WIDTHS`` (a minute to a week, in seconds, as the title reads it) that keeps them to this many.
BUCKETS = 24
BUCKET_WIDTHS = {
    60: "minute",
    300: "5 minutes",
    900: "15 minutes",
    3600: "hour",
    6 * 3600: "6 hours",
    86400: "day",
    7 * 86400: "week",
}


#: An axis's unit by its largest value: (unit, seconds in it, below which it is used).
AXIS_UNITS = (("ms", 0.001, 1.0), ("s", 1.0, 120.0), ("min", 60.0, 7200.0), ("h", 3600.0, math.inf))


@dataclass(frozen=True)
class Bin:
    low: float
    high: float
    count: int


def bins(durations: list[float], most: int = BINS) -> list[Bin]:
    """Equal-width bins from the shortest to the longest duration."""
    if not durations:
        return []
    low, high = min(durations), max(durations)
    if high == low:  # every run as long: one bin, not empty ones past it
        return [Bin(low, high, len(durations))]
    count = max(1, min(most, math.ceil(math.sqrt(len(durations)))))
    width = (high - low) / count
    tally = [0] * count
    for value in durations:
        tally[min(int((value - low) / width), count - 1)] += 1
    return [Bin(low + i * width, low + (i + 1) * width, n) for i, n in enumerate(tally)]


def duration_histogram(runs: list[dict]) -> Markup:
    """How long its ended runs ran (first start to end): one bar per bin, its count on hover."""
    durations = [r["finished_at"] - r["started_at"] for r in runs if r.get("started_at") and r.get("finished_at")]
    shown = bins(durations)
    if not shown:
        return Markup("")
    tallest = max(b.count for b in shown)
    step = WIDTH / len(shown)
    bars = []
    for i, b in enumerate(shown):
        height = (HEIGHT - 20) * b.count / tallest
        label = f"{duration(b.low)} to {duration(b.high)}: {b.count} run(s)"
        bars.append(
            f'<rect class="bar" x="{i * step + BAR_GAP:.1f}" y="{HEIGHT - 16 - height:.1f}" '
            f'width="{step - 2 * BAR_GAP:.1f}" '
            f'height="{height:.1f}"><title>{escape(label)}</title></rect>'
        )
    low, high = min(durations), max(durations)
    labels = [duration(low)] if high == low else ticks([low, (low + high) / 2, high])  # one duration: once
    places = [("middle", WIDTH / 2)] if high == low else [("start", 0), ("middle", WIDTH / 2), ("end", WIDTH)]
    axis = "".join(
        f'<text x="{x}" y="{HEIGHT - 2}" text-anchor="{anchor}">{escape(label)}</text>'
        for (anchor, x), label in zip(places, labels)
    )
    return _svg("durations", f"Durations of the last {len(durations)} ended runs", "".join(bars) + axis)


def ticks(values: list[float]) -> list[str]:
    """Durations along an axis, in the unit its largest reads in, with the fewest decimals
    that keep them apart (``1.02 s, 1.03 s, 1.04 s``, never ``1.0 s`` twice) and a
    nonzero one from reading 0."""
    unit, scale = next((u, s) for u, s, below in AXIS_UNITS if max(values) < below)
    for digits in range(4):
        labels = [f"{v / scale:.{digits}f}" for v in values]
        if len(set(labels)) == len(labels) and all(float(t) or not v for t, v in zip(labels, values)):
            break
    return [f"{label} {unit}" for label in labels]


def outcomes(runs: list[dict]) -> Markup:
    """Each ended run, oldest to newest, as a column coloured by how it ended."""
    ended = sorted((r for r in runs if ExecutionState(r["state"]).is_terminal), key=lambda r: r["scheduled_at"])
    if not ended:
        return Markup("")
    step = WIDTH / len(ended)
    cells = "".join(
        f'<rect class="outcome-{r["state"].lower()}" x="{i * step:.1f}" y="0" '
        f'width="{max(step - 1, 1):.1f}" height="{HEIGHT // 4}">'
        f"<title>{escape(r['id'][:12])}: {escape(r['state'])}</title></rect>"
        for i, r in enumerate(ended)
    )
    completed = sum(r["state"] == ExecutionState.COMPLETED for r in ended)
    return _svg("outcomes", f"{completed} of the last {len(ended)} ended runs completed", cells, HEIGHT // 4)


@dataclass(frozen=True)
class Bucket:
    start: float
    ended: int
    completed: int


def buckets(runs: list[dict], most: int = BUCKETS) -> tuple[float, list[Bucket]]:
    """The width, and the ended runs by when they ended (in buckets of it, oldest first,
    empty ones kept: a gap reads as "nothing ended then")."""
    ended = [
        (r.get("finished_at") or r["scheduled_at"], r["state"] == ExecutionState.COMPLETED)
        for r in runs
        if ExecutionState(r["state"]).is_terminal
    ]
    if not ended:
        return 0.0, []
    first, last = min(at for at, _ in ended), max(at for at, _ in ended)
    width = next((w for w in BUCKET_WIDTHS if (last - first) / w < most), max(BUCKET_WIDTHS))
    origin = math.floor(first / width) * width
    tally = [[0, 0] for _ in range(int((last - origin) // width) + 1)]
    for at, completed in ended:
        cell = tally[int((at - origin) // width)]
        cell[0] += 1
        cell[1] += completed
    return float(width), [Bucket(origin + i * width, n, ok) for i, (n, ok) in enumerate(tally)]


def success_over_time(runs: list[dict]) -> Markup:
    """Per bucket of time, a column as tall as the chart: the share that completed in
    green, the rest (failed, timed out, cancelled) in red; its counts on hover."""
    width, shown = buckets(runs)
    if not shown:
        return Markup("")
    step, height = WIDTH / len(shown), HEIGHT - 16
    cells = []
    for i, b in enumerate(shown):
        if not b.ended:
            continue
        rate = b.completed / b.ended
        label = f"{_stamp(b.start)} to {_stamp(b.start + width)} UTC: {b.completed} of {b.ended} completed ({rate:.0%})"
        x, w = i * step + BAR_GAP / 2, max(step - BAR_GAP, 1)
        cells.append(
            f"<g><title>{escape(label)}</title>"
            f'<rect class="outcome-failed" x="{x:.1f}" y="0" width="{w:.1f}" height="{height * (1 - rate):.1f}"></rect>'
            f'<rect class="outcome-completed" x="{x:.1f}" y="{height * (1 - rate):.1f}" '
            f'width="{w:.1f}" height="{height * rate:.1f}"></rect></g>'
        )
    axis = (
        f'<text x="0" y="{HEIGHT - 2}">{escape(_stamp(shown[0].start))}</text>'
        f'<text x="{WIDTH}" y="{HEIGHT - 2}" text-anchor="end">{escape(_stamp(shown[-1].start + width))} UTC</text>'
    )
    ended = sum(b.ended for b in shown)
    return _svg(
        "success", f"Success rate per {BUCKET_WIDTHS[int(width)]} of the last {ended} ended runs", "".join(cells) + axis
    )


def _stamp(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%m-%d %H:%M")


def fleet_charts(points: list[dict]) -> list[Markup]:
    """The fleet over time: slots busy and total with the queue; cpu, memory, GPUs (when
    any) and each probed custom dimension in use, in percent."""
    if not points:
        return []
    drawn = points if len(points) > 1 else points * 2  # one sample: a flat line from it
    span = (
        f"the last {duration(drawn[-1]['time'] - drawn[0]['time'])}" if len(points) > 1 else "since the server started"
    )
    slots = max(max(p["slots"], p["queued"], p["busy"]) for p in drawn) or 1
    use = [
        ("cpu", [p["cpu_percent"] for p in drawn]),
        ("memory", [percent(p["memory_used"], p["memory_total"]) for p in drawn]),
    ]
    if any(p.get("gpus") for p in drawn):
        use.append(("gpu", [p.get("gpu_percent", 0.0) for p in drawn]))
    for name in sorted({name for p in drawn for name in p.get("resources") or {}}):  # custom probed dimensions
        use.append((name, [percent(*(p.get("resources") or {}).get(name, (0.0, 0.0))) for p in drawn]))
    axis = Axis((drawn[0]["time"], drawn[-1]["time"]), "")
    counts = [(name, [p[name] for p in drawn]) for name in ("busy", "slots", "queued")]
    return [
        lines("slots", f"Slots busy, slots and queued executions, {span}", slots, counts, axis),
        lines("use", f"In use (%), {span}", 100.0, use, axis._replace(unit="%")),
    ]


class Axis(NamedTuple):
    """A line chart's axes: the times its x runs between (oldest, newest) and its y's unit."""

    times: tuple[float, float]
    unit: str


def _clock(ts: float, span: float) -> str:
    """A time under a chart, as precise as its span needs (UTC)."""
    shape = "%m-%d %H:%M" if span >= 86400 else "%H:%M" if span >= 600 else "%H:%M:%S"
    return datetime.fromtimestamp(ts, UTC).strftime(shape)


def percent(used: float, total: float) -> float:
    return 100 * used / total if total else 0.0


def lines(kind: str, title: str, top: float, series: list[tuple[str, list[float]]], axis: Axis) -> Markup:
    """Each series a polyline over the same time axis (oldest left, its clock times under
    it, UTC), 0 at the bottom and ``top`` at the top, both in the axis's unit; the legend above."""
    height, roof = HEIGHT - 16, 14  # the plot, between the legend and the time axis
    drawn = []
    for name, values in series:
        step = WIDTH / max(len(values) - 1, 1)
        coords = " ".join(
            f"{i * step:.1f},{height - (height - roof) * min(v, top) / top:.1f}" for i, v in enumerate(values)
        )
        drawn.append(
            f'<polyline class="line line-{name}" points="{coords}">'
            f"<title>{escape(name)}: {values[-1]:g}{axis.unit} now</title></polyline>"
        )
    legend = "".join(
        f'<text class="legend line-{name}" x="{i * 70}" y="10">{escape(name)}</text>'
        for i, (name, _) in enumerate(series)
    )
    (first, last), span = axis.times, axis.times[1] - axis.times[0]
    scale = (
        f'<text x="{WIDTH}" y="10" text-anchor="end">{top:g}{axis.unit}</text>'
        f'<text x="{WIDTH}" y="{height - 2}" text-anchor="end">0{axis.unit}</text>'
        f'<line class="axis" x1="0" y1="{height}" x2="{WIDTH}" y2="{height}"></line>'
        f'<text x="0" y="{HEIGHT - 2}">{escape(_clock(first, span))}</text>'
        f'<text x="{WIDTH}" y="{HEIGHT - 2}" text-anchor="end">{escape(_clock(last, span))} UTC</text>'
    )
    return _svg(kind, title, "".join(drawn) + legend + scale)


def _svg(kind: str, title: str, body: str, height: int = HEIGHT) -> Markup:
    return Markup(
        f'<svg class="chart chart-{kind}" role="img" aria-label="{escape(title)}" viewBox="0 -2 {WIDTH} {height + 4}" '
        f'preserveAspectRatio="none"><title>{escape(title)}</title>{body}</svg>'
    )
