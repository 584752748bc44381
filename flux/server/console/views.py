"""How values read on a page: times (relative, absolute on hover), sizes, usage bars,
and input/output shown size-capped with likely secrets masked. Jinja2 filters."""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup, escape

from flux.domain.durations import format_duration
from flux.domain.numbers import human_size
from flux.domain.resource_request import ResourceRequest
from flux.domain.workers import WorkerState

#: Input or output longer than this (as indented JSON) is cut on the page.
MAX_SHOWN = 64 * 1024
#: Keys whose values are masked, as Airflow and Prefect mask "sensitive" fields.
SECRET_KEY = re.compile(
    r"pass(word|wd)?|secret|token|api[_-]?key|credential|private[_-]?key|authori[sz]ation|cookie", re.I
)
MASK = "•••• (redacted)"


def ago(ts: float | None, now: float | None = None) -> str:
    if ts is None:
        return "—"
    delta = (now or time.time()) - ts
    future, delta = delta < 0, abs(delta)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if delta >= size:
            text = f"{int(delta // size)}{unit}"
            break
    else:
        text = f"{int(delta)}s"
    return f"in {text}" if future else f"{text} ago"


def traceback_html(text: str) -> Markup:
    """A traceback with its parts marked for the stylesheet: where (``File ...``), the
    source line under it, what was raised, the notes between links."""
    lines = []
    for line in text.splitlines():
        kind = (
            "tb-where"
            if line.startswith("  File ")
            else "tb-code"
            if line.startswith("    ")
            else "tb-note"
            if line.startswith(("Traceback", "The above", "During handling", "(")) or not line
            else "tb-raised"
        )
        lines.append(f'<span class="{kind}">{escape(line)}</span>')
    return Markup("\n".join(lines))


def local_time(text: str | None) -> str:
    """An ISO 8601 time with its offset (a schedule's due times) as people read it: ``2026-12-06 18:00 +01:00``."""
    if not text:
        return ""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return text
    offset = moment.strftime("%z")
    return moment.strftime("%Y-%m-%d %H:%M") + (f" {offset[:3]}:{offset[3:]}" if offset else "")


def absolute(ts: float | None) -> str:
    if ts is None:
        return ""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def clock(ts: float | None) -> str:
    """The time of day to the millisecond, UTC (a log line's)."""
    return datetime.fromtimestamp(ts, UTC).strftime("%H:%M:%S.%f")[:-3] if ts else ""


def iso(ts: float | None) -> str:
    return "" if ts is None else datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def size(value: float | None) -> str:
    return "—" if value is None else human_size(value)


def request_parts(requests: dict | None) -> list[str]:
    """A workflow's requests as the CLI shows them ("cpu=1", "memory=256Mi"), one chip each."""
    return ResourceRequest.from_dict(requests).parts() if requests else []


def redact(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: MASK if isinstance(k, str) and SECRET_KEY.search(k) else redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def shown(value: Any) -> dict:
    """``{"text", "cut"}``: the value as indented JSON, masked, at most ``MAX_SHOWN`` bytes
    (``cut``: how many more there were)."""
    text = json.dumps(redact(value), indent=2, ensure_ascii=False, default=str)
    data = text.encode()
    if len(data) <= MAX_SHOWN:
        return {"text": text, "cut": 0}
    return {"text": data[:MAX_SHOWN].decode("utf-8", "ignore"), "cut": len(data) - MAX_SHOWN}


def short(value: Any, limit: int = 160) -> str:
    """One line of an event's value for the timeline."""
    if value is None:
        return ""
    text = json.dumps(redact(value), ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def usage(worker: dict) -> list[dict]:
    """The bars of a worker's fleet row: cpu, memory, disk, any other probed dimension, each GPU's memory."""
    res = worker.get("resources")
    if not res:
        return []

    def bar(label: str, total: float, free: float, text) -> dict:  # noqa: ANN001
        used = max(total - free, 0)
        return {"label": label, "pct": round(100 * used / total) if total else 0, "text": text(used, total)}

    busy = res["cpu_percent"]  # the sample's reading, as `flux worker show`; cpu_available is the affinity mask
    bars = [
        {"label": "cpu", "pct": round(busy), "text": f"{busy:.0f}% busy of {res['cpu_total']:g} cores"},
        bar("memory", res["memory_total"], res["memory_available"], lambda u, t: f"{size(u)} / {size(t)}"),
        bar("disk", res["disk_total"], res["disk_free"], lambda u, t: f"{size(u)} / {size(t)}"),
    ]
    available = res.get("available") or {}
    for name, total in sorted((res.get("capacity") or {}).items()):  # other probed dimensions
        bars.append(bar(name, total, available.get(name, 0), lambda u, t: f"{u:g} / {t:g}"))
    for gpu in res.get("gpus") or []:
        label = f"gpu{gpu['index']}"
        bars.append(
            bar(
                label,
                gpu["memory_total"],
                gpu["memory_available"],
                lambda u, t, g=gpu: (
                    f"{g.get('mig_profile') or g['name']}: {size(u)} / {size(t)}, "
                    f"{g.get('utilization', 0):.0f}% busy"
                    + (f", UNHEALTHY: {g['unhealthy']}" if g.get("unhealthy") else "")
                ),
            )
        )
    return bars


def drain_action(state: str) -> str | None:
    """The fleet row's button: ``drain`` a live worker, ``undrain`` a draining one, none for one gone."""
    if state == WorkerState.OFFLINE:
        return None
    return "undrain" if state in (WorkerState.DRAINING, WorkerState.DRAINED) else "drain"


def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(Path(__file__).parent / "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        request_parts=request_parts,
        ago=ago,
        absolute=absolute,
        iso=iso,
        duration=duration,
        size=size,
        shown=shown,
        short=short,
        usage=usage,
        drain_action=drain_action,
        local_time=local_time,
        traceback_html=traceback_html,
        every=format_duration,
        clock=clock,
    )
    return env
