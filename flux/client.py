"""The client SDK: a thin, typed-by-convention wrapper over the HTTP API.

Every failure surfaces as ``FluxClientError`` carrying the server's one-line reason,
which is what the CLI prints; ``FluxConnectionError`` (a subclass) when the server
cannot be reached at all.

Following an execution (``follow_events``, ``follow_logs``) reads the server's
Server-Sent Events stream (docs/logs.md) and resumes after the last item it saw
when the stream breaks; against a server without the stream (404, 405, 406, or an
answer that is not ``text/event-stream``) it falls back to polling with ``after=``.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator
from urllib.parse import quote

import httpx

from flux.bundles.archive import BundleError
from flux.domain.workers import WorkerState

DEFAULT_SERVER_URL = "http://127.0.0.1:8000"
TERMINAL_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT")
HOLDING_STATES = ("CLAIMED", "RUNNING", "CANCELLING")
#: Executions an ambiguous id prefix lists at most.
MAX_CANDIDATES = 10
_FULL_ID = re.compile(r"[0-9a-fA-F]{32}")
_HEX = re.compile(r"[0-9a-fA-F]{1,32}")


class FluxClientError(Exception):
    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class FluxConnectionError(FluxClientError):
    """The server could not be reached (refused, unknown host, timed out)."""


def _reason(response: httpx.Response) -> str:
    """The server's ``detail`` (every error body has one; see docs/security.md)."""
    try:
        detail = response.json()["detail"]
    except (ValueError, TypeError, KeyError):
        return f"HTTP {response.status_code}: {response.text[:200]}"
    return f"HTTP {response.status_code}: {detail}"


def _error(response: httpx.Response) -> FluxClientError:
    return FluxClientError(_reason(response), response.status_code)


@dataclass
class SSEMessage:
    event: str
    data: str
    id: str | None


def parse_sse(lines: Iterable[str]) -> Iterator[SSEMessage]:
    """Server-Sent Events from a stream's lines (the WHATWG event-stream format):
    ``field: value`` lines, a blank line ends a message, ``:`` starts a comment
    (a keep-alive), several ``data`` lines join with newlines, ``id`` persists."""
    event, data, last_id = "", [], None
    for line in lines:
        if not line:
            if data:
                yield SSEMessage(event or "message", "\n".join(data), last_id)
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            event = value
        elif field == "data":
            data.append(value)
        elif field == "id" and "\0" not in value:
            last_id = value
    if data:  # a stream cut off after a message without its blank line: still worth having
        yield SSEMessage(event or "message", "\n".join(data), last_id)


def _is_event_stream(response: httpx.Response) -> bool:
    return response.headers.get("content-type", "").split(";")[0].strip() == "text/event-stream"


class _NoStream(Exception):
    """The server does not stream this (yet): poll instead."""


def _set(params: dict[str, Any]) -> dict[str, Any]:
    """Query parameters that were given (None and empty are left out)."""
    return {k: v for k, v in params.items() if v is not None and v != ""}


def _seg(value: str) -> str:
    """One URL path segment: a name with '?', '#' or '/' must not become another URL."""
    return quote(str(value), safe="")


def split_version(name: str) -> tuple[str, int | None]:
    """``train@3`` -> (``train``, 3); ``train`` -> (``train``, None)."""
    base, sep, version = name.rpartition("@")
    if not sep:
        return name, None
    if not version.isdigit() or int(version) < 1:
        raise FluxClientError(f"{name!r}: a version after '@' is a number >= 1 (train@3)")
    return base, int(version)


def tls_verify(*urls: str) -> bool:
    """What httpx's ``verify`` should be for these server URLs: full verification as
    soon as one is https; for plain http no TLS context is built at all (loading the CA
    bundle costs ~7 MiB and ~20 ms per client, docs/footprint.md)."""
    return any(url.lower().startswith("https:") for url in urls)


class FluxClient:
    #: Seconds a follow stream may stay silent before it is reopened (resuming after
    #: the last item), which also notices a server that vanished without closing it.
    stream_idle_timeout = 60.0
    #: Seconds between polls when the server has no stream to offer.
    poll_interval = 0.5
    #: Times in a row a broken stream is reopened before giving up.
    stream_retries = 5

    def __init__(self, server_url: str | None = None, timeout: float = 30.0, api_token: str | None = None):
        self.server_url = server_url or os.environ.get("FLUX_SERVER_URL", DEFAULT_SERVER_URL)
        self.timeout = timeout
        self._token = api_token or os.environ.get("FLUX_API_TOKEN")
        headers = {"Authorization": f"Bearer {self._token}"} if self._token else None
        self._http = httpx.Client(
            base_url=self.server_url, timeout=timeout, headers=headers, verify=tls_verify(self.server_url)
        )

    def copy(self) -> "FluxClient":
        """Another client to the same server with the same token (one per thread)."""
        return FluxClient(self.server_url, self.timeout, self._token)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "FluxClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._response(method, path, **kwargs)
        return response.json() if response.content else None

    def _response(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from None
        if response.status_code >= 400:
            raise _error(response)
        return response

    def _unreachable(self, exc: httpx.TransportError) -> FluxConnectionError:
        return FluxConnectionError(f"cannot reach the Flux server at {self.server_url}: {exc or exc.__class__.__name__}")

    # workflows
    def register(self, path: str | Path, requirements: bool = True) -> list[dict]:
        """Register every @workflow under ``path`` (a .py file, a directory, a .zip or
        .whl): it is bundled, uploaded and read by the server; nothing of it runs here.
        ``requirements=False`` ignores the bundle's requirements.txt / pyproject.toml."""
        try:
            from flux.bundles.build import build_bundle  # pathspec: only for registering (a worker never does)

            data = build_bundle(path)
        except BundleError as exc:
            raise FluxClientError(str(exc)) from None
        except OSError as exc:
            raise FluxClientError(f"cannot read {exc.filename or path}: {exc.strerror}") from None
        bundle = self.upload_bundle(data)
        return self._request("POST", "/workflows/bundle", json={"bundle": bundle["sha256"], "requirements": requirements})

    #: The older name, for any path ``register`` takes.
    register_file = register

    def upload_bundle(self, data: bytes) -> dict:
        """Store a bundle's bytes on the server: {sha256, size, files}."""
        return self._request("POST", "/bundles", content=data, headers={"Content-Type": "application/zip"})

    def workflow_versions(self, name: str) -> list[dict]:
        return self._request("GET", f"/workflows/{_seg(name)}/versions")

    def list_workflows(self) -> list[dict]:
        """The newest version of every workflow (all pages)."""
        return list(self._pages("/workflows", {}))

    def show_workflow(self, name: str, version: int | None = None) -> dict:
        """``name`` may carry its version: ``train@3``."""
        name, pinned = split_version(name)
        version = version or pinned
        params = {"version": version} if version else None
        return self._request("GET", f"/workflows/{_seg(name)}", params=params)

    def run(self, name: str, input: Any = None, wait: float | None = None, version: int | None = None) -> dict:
        """Start workflow ``name`` (or ``name@3``); a version pins one (default: the newest
        when it first starts), and the execution keeps it through every attempt."""
        name, pinned = split_version(name)
        version = version or pinned
        body = {"input": input} if version is None else {"input": input, "version": version}
        execution = self._request("POST", f"/workflows/{_seg(name)}/run", json=body)
        if wait:
            execution = self.wait(execution["id"], wait)
        return execution

    # executions
    def execution(self, execution_id: str) -> dict:
        return self._request("GET", f"/executions/{_seg(execution_id)}")

    def resolve_execution(self, prefix: str) -> str:
        """The full id of the one execution whose id starts with ``prefix`` (like git's
        short hashes). A full 32-hex id is used as it is; a string that is no hex
        prefix at all too (the server then says it does not exist)."""
        prefix = prefix.strip()
        if _FULL_ID.fullmatch(prefix):
            return prefix.lower()
        if not _HEX.fullmatch(prefix):
            return prefix
        matches = self._request("GET", "/executions", params={"id_prefix": prefix.lower(), "limit": MAX_CANDIDATES + 1})
        if not matches:
            raise FluxClientError(f"no execution matches {prefix!r}")
        if len(matches) == 1:
            return matches[0]["id"]
        shown = matches[:MAX_CANDIDATES]
        more = f" (the newest {MAX_CANDIDATES} shown)" if len(matches) > MAX_CANDIDATES else ""
        lines = [f"  {m['id']}  {m['workflow_name']}  {m['state']}" for m in shown]
        raise FluxClientError(
            f"{prefix!r} matches {'more than ' if more else ''}{len(shown)} executions{more}; "
            "type more of the id:\n" + "\n".join(lines)
        )

    def wait(self, execution_id: str, timeout: float) -> dict:
        """Block until the execution ends (or ``timeout`` seconds pass); returns its latest state."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            step = max(0.0, min(remaining, 60.0))
            execution = self._request(
                "GET", f"/executions/{_seg(execution_id)}", params={"wait": step}, timeout=step + 30
            )
            if execution["state"] in TERMINAL_STATES or remaining <= 0:
                return execution

    def placement(self, execution_id: str) -> dict:
        return self._request("GET", f"/executions/{_seg(execution_id)}/placement")

    def events(self, execution_id: str, after: int = 0) -> list[dict]:
        params = {"after": after} if after else None
        return self._request("GET", f"/executions/{_seg(execution_id)}/events", params=params)

    def logs_page(self, execution_id: str, after: int = 0, limit: int = 1000, **filters: Any) -> dict:
        """One page of captured lines: ``{"lines", "next_after", "truncated"}`` (docs/logs.md).
        ``filters``: task, attempt, stream, level."""
        params = {**_set(filters), "after": after, "limit": limit}
        return self._request("GET", f"/executions/{_seg(execution_id)}/logs", params=params)

    def logs(self, execution_id: str, after: int = 0, **filters: Any) -> Iterator[dict]:
        """Every captured line so far, page after page."""
        while True:
            lines, after = self._logs_after(execution_id, after, filters)
            if not lines:
                return
            yield from lines

    def follow_events(self, execution_id: str, after: int = 0) -> Iterator[dict]:
        """The execution's events as they are recorded, until it has ended and every
        event was sent (``GET /executions/{id}/events?follow=true``)."""
        yield from self._follow(
            execution_id, "events", "event", {}, after, lambda seq: self._events_after(execution_id, seq)
        )

    def follow_logs(self, execution_id: str, after: int = 0, **filters: Any) -> Iterator[dict]:
        """The execution's captured lines as they arrive, until it has ended and every
        line was sent (``GET /executions/{id}/logs?follow=true``); ``filters`` as ``logs``."""
        yield from self._follow(
            execution_id, "logs", "log", _set(filters), after, lambda seq: self._logs_after(execution_id, seq, filters)
        )

    def _events_after(self, execution_id: str, after: int) -> tuple[list[dict], int]:
        events = self.events(execution_id, after)
        return events, (events[-1]["seq"] if events else after)

    def _logs_after(self, execution_id: str, after: int, filters: dict) -> tuple[list[dict], int]:
        page = self.logs_page(execution_id, after, **filters)
        lines = page.get("lines") or []
        return lines, page.get("next_after") or (lines[-1]["seq"] if lines else after)

    def _follow(
        self, execution_id: str, what: str, event: str, params: dict, after: int,
        page: Callable[[int], tuple[list[dict], int]],
    ) -> Iterator[dict]:
        seen = [after]  # the last seq yielded, kept by _stream as it goes
        try:
            yield from self._stream(f"/executions/{_seg(execution_id)}/{what}", event, params, seen)
            return
        except _NoStream:
            pass
        yield from self._poll(execution_id, page, seen[0])

    def _stream(self, path: str, event: str, params: dict, seen: list[int]) -> Iterator[dict]:
        """One SSE stream, reopened after the last item when it breaks; returns at ``end``."""
        broken, streamed = 0, False
        while True:
            headers = {"Accept": "text/event-stream"}
            if seen[0]:
                headers["Last-Event-ID"] = str(seen[0])
            timeout = httpx.Timeout(self.timeout, read=self.stream_idle_timeout)
            query = {**params, "follow": "true", "after": seen[0]}
            try:
                with self._http.stream("GET", path, params=query, headers=headers, timeout=timeout) as response:
                    if response.status_code in (404, 405, 406) or (
                        response.status_code < 400 and not _is_event_stream(response)
                    ):
                        raise _NoStream()
                    if response.status_code >= 400:
                        response.read()
                        raise _error(response)
                    streamed = True
                    for message in parse_sse(response.iter_lines()):
                        if message.event == "end":
                            return
                        if message.event == event:
                            item = json.loads(message.data)
                            seen[0] = item.get("seq") or int(message.id or seen[0])
                            broken = 0
                            yield item
            except (httpx.ReadTimeout, httpx.RemoteProtocolError, httpx.ReadError) as exc:
                failure: Exception = exc
            except httpx.TransportError as exc:
                if not streamed:  # never reached it: say so at once
                    raise self._unreachable(exc) from None
                failure = exc  # a server restarting, or a replica going away: try again
            else:
                failure = EOFError("the stream ended before its end event")
            broken += 1
            if broken > self.stream_retries:
                raise FluxConnectionError(f"the stream from {self.server_url}{path} keeps breaking: {failure}")
            time.sleep(min(0.2 * 2**broken, 5.0))

    def _poll(self, execution_id: str, page: Callable[[int], tuple[list[dict], int]], after: int) -> Iterator[dict]:
        """Page with ``after=`` until the execution has ended. Its state is read before
        the pages, so that a terminal state is only believed once its events are in."""
        execution = self.execution(execution_id)
        while True:
            while True:
                items, after = page(after)
                if not items:
                    break
                yield from items
            if execution["state"] in TERMINAL_STATES:
                return
            # a long poll: returns at once when the execution ends, else after poll_interval
            execution = self._request(
                "GET", f"/executions/{_seg(execution_id)}", params={"wait": self.poll_interval},
                timeout=self.poll_interval + self.timeout,
            )

    def list_executions(self, state: str | None = None, workflow: str | None = None, limit: int = 50,
                        id_prefix: str | None = None, **filters: Any) -> list[dict]:
        """The newest ``limit`` executions (one page); ``filters``: those of ``list_executions_page``."""
        return self.list_executions_page(state, workflow, limit, id_prefix, **filters)[0]

    def list_executions_page(
        self,
        state: str | None = None,
        workflow: str | None = None,
        limit: int = 50,
        id_prefix: str | None = None,
        *,
        worker: str | None = None,
        schedule: str | None = None,
        after: str | None = None,
        include: Iterable[str] = (),
    ) -> tuple[list[dict], str | None]:
        """One page, newest first, and the cursor of the next (None on the last page)."""
        params = _set({"state": state, "workflow": workflow, "worker": worker, "schedule": schedule, "limit": limit,
                       "id_prefix": id_prefix, "after": after, "include": ",".join(include)})
        response = self._response("GET", "/executions", params=params)
        return response.json(), response.headers.get("X-Next-Cursor")

    def iter_executions(self, state: str | None = None, workflow: str | None = None, *, worker: str | None = None,
                        schedule: str | None = None, include: Iterable[str] = (), page_size: int = 1000, after: str | None = None) -> Iterator[dict]:
        """Every matching execution, newest first, a page at a time (``flux execution list --all``)."""
        params = {"state": state, "workflow": workflow, "worker": worker, "schedule": schedule, "include": ",".join(include), "limit": page_size}
        return self._pages("/executions", params, after)

    def _pages(self, path: str, params: dict[str, Any], after: str | None = None) -> Iterator[dict]:
        """The items of a list endpoint, following ``X-Next-Cursor`` to the last page."""
        while True:
            response = self._response("GET", path, params=_set({**params, "after": after}))
            yield from response.json()
            after = response.headers.get("X-Next-Cursor")
            if after is None:
                return

    def prune_executions(self, older_than: float) -> dict:
        """Delete executions that finished more than ``older_than`` seconds ago, with their events and logs."""
        return self._request("POST", "/executions/prune", json={"older_than": older_than})

    def cancel(self, execution_id: str) -> dict:
        return self._request("POST", f"/executions/{_seg(execution_id)}/cancel")

    def resume(self, execution_id: str, input: Any = None) -> dict:
        """Continue a PAUSED execution: its ``pause()`` returns ``input`` (docs/waits.md)."""
        return self._request("POST", f"/executions/{_seg(execution_id)}/resume", json={"input": input})

    # the task cache and secrets (docs/tasks.md)
    def clear_cache(self, task: str | None = None, expired: bool = False) -> dict:
        """Delete cached task results: all, one task's, or only the expired ones; ``{"deleted": N}``."""
        return self._request("DELETE", "/cache", params=_set({"task": task, "expired": "true" if expired else None}))

    def set_secret(self, name: str, value: str) -> dict:
        """Create or replace a secret (encrypted at rest); returns its name and times, never the value."""
        return self._request("PUT", f"/secrets/{_seg(name)}", json={"value": value})

    def list_secrets(self) -> list[dict]:
        """Secret names and times (values are never returned)."""
        return self._request("GET", "/secrets")

    def delete_secret(self, name: str) -> None:
        self._response("DELETE", f"/secrets/{_seg(name)}")

    # workers
    def list_workers(self) -> list[dict]:
        """Every registered worker (all pages)."""
        return list(self._pages("/workers", {}))

    def show_worker(self, name: str) -> dict:
        return self._request("GET", f"/workers/{_seg(name)}")

    def executions_on(self, worker_name: str) -> list[dict]:
        """The executions a worker holds (claimed, running or being cancelled), newest first."""
        held = [execution for state in HOLDING_STATES for execution in self.list_executions(state, limit=1000, worker=worker_name)]
        return sorted(held, key=lambda e: e["scheduled_at"], reverse=True)

    def drain_worker(self, name: str, wait: float | None = None, poll: float = 0.5) -> dict:
        """Stop giving NAME new work; with ``wait``, return once it runs nothing (DRAINED
        or OFFLINE), or raise after that many seconds."""
        worker = self._request("POST", f"/workers/{_seg(name)}/drain")
        deadline = time.monotonic() + (wait or 0)
        while wait is not None and worker["state"] not in (WorkerState.DRAINED, WorkerState.OFFLINE):
            if time.monotonic() >= deadline:
                raise FluxClientError(f"worker {name} still runs {worker['running']} execution(s) after {wait:g}s")
            time.sleep(poll)
            worker = self.show_worker(name)
        return worker

    def undrain_worker(self, name: str) -> dict:
        return self._request("POST", f"/workers/{_seg(name)}/undrain")

    # --- schedules (docs/schedules.md) -----------------------------------------------------

    def create_schedule(self, name: str, workflow: str, *, cron: str | None = None, every: float | str | None = None,
                        at: float | str | None = None, **options: Any) -> dict:
        """One of ``cron``, ``every`` (seconds or "5m") or ``at`` (ISO 8601); ``options``: version,
        anchor, timezone, input, overlap, catch_up, catch_up_limit, jitter, paused (checked here first)."""
        from flux.domain.schedules import InvalidSchedule, Schedule  # cronsim, zoneinfo: only here

        body = {"name": name, "workflow": workflow, **_set({"cron": cron, "every": every, "at": at}), **options}
        try:
            Schedule.parse(cron=cron, every=every, at=at, anchor=options.get("anchor"), timezone=options.get("timezone", "UTC"))
        except InvalidSchedule as exc:
            raise FluxClientError(str(exc)) from None
        return self._request("POST", "/schedules", json=body)

    def list_schedules(self) -> list[dict]:
        return self._request("GET", "/schedules")

    def show_schedule(self, name: str) -> dict:
        return self._request("GET", f"/schedules/{_seg(name)}")

    def update_schedule(self, name: str, **changes: Any) -> dict:
        """Only the fields given change (as for ``create_schedule``)."""
        return self._request("PATCH", f"/schedules/{_seg(name)}", json=changes)

    def delete_schedule(self, name: str) -> None:
        self._request("DELETE", f"/schedules/{_seg(name)}")

    def pause_schedule(self, name: str) -> dict:
        return self._request("POST", f"/schedules/{_seg(name)}/pause")

    def resume_schedule(self, name: str) -> dict:
        return self._request("POST", f"/schedules/{_seg(name)}/resume")

    def trigger_schedule(self, name: str) -> dict:
        """Run it now; returns the execution."""
        return self._request("POST", f"/schedules/{_seg(name)}/trigger")
