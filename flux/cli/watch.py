"""Following an execution as it runs: ``flux workflow run --wait`` and ``flux
execution events|logs --follow``.

Items come from follower threads (``FluxClient.follow_events`` / ``follow_logs``,
each on a client of its own) through one queue, so the main thread can give up at
``--timeout`` whatever a stream is blocked on. All of it goes to stderr: stdout
carries the final record alone.

On a terminal the state is one live line (state, tasks done and running, attempt,
elapsed, the latest PROGRESS value); elsewhere one plain line per change.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Iterable

import click

from flux.cli.core import EXIT_CANCELLED, EXIT_FAILED, EXIT_RUNNING
from flux.cli.output import err_console
from flux.client import FluxClient
from flux.domain.waits import STATE_OF, WaitKind, note

if TYPE_CHECKING:
    from rich.text import Text  # rich is imported when something is drawn

EXIT_CODES = {"COMPLETED": 0, "FAILED": EXIT_FAILED, "TIMED_OUT": EXIT_FAILED, "CANCELLED": EXIT_CANCELLED}
COLOURS = {
    "COMPLETED": "green",
    "FAILED": "red",
    "TIMED_OUT": "red",
    "CANCELLED": "yellow",
    "CANCELLING": "yellow",
    "RUNNING": "cyan",
    "PAUSED": "magenta",
}
#: Seconds the log stream may lag behind the end of the execution before the wait ends.
LOG_GRACE = 5.0


def exit_code(state: str) -> int:
    """0 COMPLETED, 1 FAILED or TIMED_OUT, 3 CANCELLED, 4 not ended yet."""
    return EXIT_CODES.get(state, EXIT_RUNNING)


def compact(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), default=str)


#: Cells of the bar a fraction of progress draws.
BAR = 10


def progress_text(value: Any) -> str:
    """A PROGRESS value for people: a fraction (a float from 0 to 1) as a bar and a
    percentage, other numbers to four significant digits, anything else as compact JSON.
    A value reads as the workflow reported it: ``1.0`` is 100 %, ``1`` a count (the
    server keeps a float a float on SQLite too: ``flux/server/jsonvalue.py``)."""
    if isinstance(value, float) and 0.0 <= value <= 1.0:
        filled = round(value * BAR)
        return f"{'█' * filled}{'░' * (BAR - filled)} {value * 100:.0f}%"
    return compact(_rounded(value))


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return float(f"{value:.4g}")
    if isinstance(value, dict):
        return {key: _rounded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_rounded(item) for item in value]
    return value


def stamp(epoch: float | None) -> str:
    return datetime.fromtimestamp(epoch).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] if epoch else "-"


def log_line(line: dict) -> str:
    """``time [stream] task_id: message`` (``[log LEVEL logger]`` for logging records)."""
    stream = " ".join(str(part) for part in (line.get("stream") or "-", line.get("level"), line.get("logger")) if part)
    return f"{stamp(line.get('time'))} [{stream}] {line.get('task_id') or '-'}: {line.get('message', '')}"


#: What an event's value carries that a line leaves to ``flux execution show`` (a traceback).
LONG_KEYS = ("failure", "traceback")


def brief(value: Any) -> Any:
    """An event's value without its traceback (``--format json`` keeps it)."""
    return {key: item for key, item in value.items() if key not in LONG_KEYS} if isinstance(value, dict) else value


def event_line(event: dict) -> str:
    parts = [stamp(event.get("time")), f"#{event['seq']}", event["type"]]
    if event.get("task_id"):
        parts.append(event["task_id"])
    if event.get("value") is not None:
        parts.append(compact(brief(event["value"])))
    return " ".join(parts)


class Tracker:
    """What a watcher knows of one execution, from its record and then its events."""

    def __init__(self, execution: dict):
        self.id = execution["id"]
        self.workflow = execution["workflow_name"]
        self.state = execution["state"]
        self.attempt = execution.get("attempt") or 0
        self.worker = execution.get("worker_name")
        self.done: set[str] = set()
        self.running: set[str] = set()
        self.progress: str | None = None
        self.started = time.monotonic()

    def _state(self, state: str, how: str = "", loud: bool = False) -> tuple[str, bool] | None:
        """A change of state; None when it is no change (the first SCHEDULED)."""
        if state == self.state and not how:
            return None
        self.state = state
        return f"{state}{f' {how}' if how else ''}", loud

    def apply(self, event: dict) -> tuple[str, bool] | None:
        """Take one event in; the line it is worth (and whether it matters even beside
        a live line), or None."""
        kind, task, value = event["type"], event.get("task_id"), event.get("value")
        value_of = value if isinstance(value, dict) else {}
        if kind == "WORKFLOW_SCHEDULED":
            return self._state("SCHEDULED")
        if kind == "WORKFLOW_CLAIMED":
            self.worker = event.get("worker_name") or self.worker
            return self._state("CLAIMED", f"by {self.worker}")
        if kind == "ATTEMPT_STARTED":
            self.attempt = value_of.get("attempt", self.attempt)
            return (f"attempt {self.attempt} on {self.worker}", True) if self.attempt > 1 else None
        if kind == "WORKFLOW_STARTED":
            return self._state("RUNNING", f"on {self.worker}, attempt {self.attempt}")
        if kind in ("WORKFLOW_PENDING", "WORKFLOW_UNSCHEDULABLE"):
            why = value_of.get("summary") or value_of.get("reason") or compact(value)
            return f"{'pending' if kind == 'WORKFLOW_PENDING' else 'unschedulable'}: {why}", True
        if kind == "WORKFLOW_RESCHEDULED":
            self.running.clear()
            return self._state("SCHEDULED", f"again: {value_of.get('reason', '')}".rstrip(": "), loud=True)
        if kind == "WORKFLOW_SUSPENDED" and value_of.get("kind") in set(WaitKind):  # docs/waits.md
            self.running.clear()
            return self._state(STATE_OF[WaitKind(value_of["kind"])].value, note(value_of), loud=True)
        if kind == "WAIT_COMPLETED":
            return f"{task} is over", False
        if kind == "ATTEMPT_ENDED" and value_of.get("end") not in ("finished", "suspended"):
            self.running.clear()
            return (
                f"attempt {value_of.get('attempt', self.attempt)} ended: "
                f"{value_of.get('end')}: {value_of.get('cause')}",
                True,
            )
        if kind == "TASK_STARTED":
            self.running.add(task)
            return None
        if kind == "TASK_COMPLETED":
            self.running.discard(task)
            self.done.add(task)
            return f"task {task} completed ({len(self.done)} done)", False
        if kind == "TASK_FAILED":
            self.running.discard(task)
            retry = " (will retry)" if value_of.get("will_retry") else ""
            return f"task {task} failed{retry}: {value_of.get('error', compact(value))}", True
        if kind == "PROGRESS":
            self.progress = f"{task + ' ' if task else ''}{progress_text(value)}"
            return f"progress {self.progress}", False
        if kind == "WORKFLOW_CANCEL_REQUESTED":
            return self._state("CANCELLING")
        if kind in ("WORKFLOW_COMPLETED", "WORKFLOW_FAILED", "WORKFLOW_CANCELLED", "WORKFLOW_TIMED_OUT"):
            error = value_of.get("error") if kind in ("WORKFLOW_FAILED", "WORKFLOW_TIMED_OUT") else None
            return self._state(
                kind.removeprefix("WORKFLOW_"), f"after {self.elapsed()}" + (f": {error}" if error else "")
            )
        return None

    def elapsed(self) -> str:
        seconds = time.monotonic() - self.started
        if seconds < 60:
            return f"{seconds:.1f}s"
        return f"{int(seconds) // 60}m{int(seconds) % 60:02d}s"

    def status(self) -> Text:
        from rich.text import Text

        text = Text(no_wrap=True, overflow="ellipsis")  # one line: the least telling parts last, cut first
        text.append(f"{self.workflow} {self.id[:8]} ")
        text.append(self.state, style=f"bold {COLOURS.get(self.state, '')}".strip())
        if self.progress:
            text.append(f" {self.progress}")
        text.append(f"  {self.elapsed()}  tasks {len(self.done)} done, {len(self.running)} running")
        if self.attempt:
            text.append(f"  attempt {self.attempt}")
        return text


class PlainView:
    """One line per change, for logs and pipes."""

    def __init__(self, tracker: Tracker):
        self.tracker = tracker

    def __enter__(self) -> "PlainView":
        t = self.tracker
        self.note(f"execution {t.id} ({t.workflow}): {t.state}")
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def note(self, line: str) -> None:
        click.echo(line, err=True)

    def event(self, event: dict) -> None:
        said = self.tracker.apply(event)
        if said:
            self.note(said[0])


class _StatusLine:
    """The live line, drawn afresh at each refresh (the elapsed time moves on)."""

    FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"  # rich's "dots" spinner

    def __init__(self, tracker: Tracker):
        self.tracker = tracker

    def __rich_console__(self, console: Any, options: Any) -> Iterable[Text]:
        from rich.text import Text

        frame = self.FRAMES[int(time.monotonic() * 12) % len(self.FRAMES)]
        line = Text(f"{frame} ", no_wrap=True, overflow="ellipsis").append_text(self.tracker.status())
        line.truncate(options.max_width, overflow="ellipsis")  # one line at any width: what is cut comes last
        yield line


class LiveView(PlainView):
    """A live status line on a terminal; what matters besides it is printed above it."""

    def __enter__(self) -> "LiveView":
        from rich.live import Live

        self.live = Live(_StatusLine(self.tracker), console=err_console.real, refresh_per_second=8, transient=False)
        self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.update(self.tracker.status(), refresh=True)
        self.live.__exit__(*exc)

    def note(self, line: str) -> None:
        from rich.text import Text

        self.live.console.print(Text(line))

    def event(self, event: dict) -> None:
        said = self.tracker.apply(event)
        if said and said[1]:
            self.note(said[0])
        self.live.refresh()


class Feed:
    """Items from follower threads, each with a client of its own, on one queue:
    ``(kind, item)``, then ``(kind, END)`` or ``(kind, the exception)``."""

    END = object()

    def __init__(self, client: FluxClient):
        self.client = client
        self.queue: queue.Queue = queue.Queue()

    def start(self, kind: str, follow: Callable[[FluxClient], Iterable[dict]]) -> None:
        def run() -> None:
            try:
                with self.client.copy() as own:
                    for item in follow(own):
                        self.queue.put((kind, item))
                self.queue.put((kind, self.END))
            except Exception as exc:  # noqa: BLE001 - handed to the main thread
                self.queue.put((kind, exc))

        threading.Thread(target=run, name=f"flux-follow-{kind}", daemon=True).start()

    def get(self, timeout: float) -> tuple[str, Any] | None:
        try:
            return self.queue.get(timeout=max(timeout, 0.0))
        except queue.Empty:
            return None


def watch(client: FluxClient, execution: dict, timeout: float, logs: bool) -> dict:
    """Show the execution until it ends or ``timeout`` seconds pass; its latest record."""
    tracker = Tracker(execution)
    feed = Feed(client)
    feed.start("event", lambda own: own.follow_events(tracker.id))
    if logs:
        feed.start("log", lambda own: own.follow_logs(tracker.id))
    view = (LiveView if err_console.is_terminal else PlainView)(tracker)
    deadline = time.monotonic() + timeout
    open_feeds = {"event", "log"} if logs else {"event"}
    try:
        with view:
            while open_feeds:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                got = feed.get(remaining)
                if got is None:
                    continue
                kind, item = got
                if item is Feed.END or isinstance(item, Exception):
                    open_feeds.discard(kind)
                    if kind == "event":
                        if isinstance(item, Exception):
                            raise item
                        deadline = min(deadline, time.monotonic() + LOG_GRACE)  # the logs' last lines
                    elif isinstance(item, Exception):
                        view.note(f"Warning: cannot follow the logs: {item}")
                elif kind == "event":
                    view.event(item)
                else:
                    view.note(log_line(item))
    except KeyboardInterrupt:
        click.echo(f"Stopped waiting; {_goes_on(tracker.id, tracker.state)}", err=True)
        raise click.exceptions.Exit(130) from None
    final = client.execution(tracker.id)
    if final["state"] not in EXIT_CODES:
        click.echo(
            f"Still {final['state']} after {timeout:g}s (--timeout); {_goes_on(tracker.id, final['state'])}", err=True
        )
    return final


def _goes_on(execution_id: str, state: str | None = None) -> str:
    """What happens to an execution nobody waits for any more, and the command it likely wants next."""
    if state == "PAUSED":
        return f"execution {execution_id} waits to be resumed ('flux execution resume {execution_id[:8]} --input JSON')"
    return f"execution {execution_id} goes on ('flux execution cancel {execution_id[:8]}' stops it)"


def follow(items: Iterable[dict], line: Callable[[dict], str], fmt: str) -> None:
    """Print items as they come (``--follow``), one line each, or one JSON object each."""
    try:
        for item in items:
            click.echo(json.dumps(item, default=str) if fmt == "json" else line(item))
    except KeyboardInterrupt:
        raise click.exceptions.Exit(130) from None
