"""The client SDK: a thin wrapper over the HTTP API.

Every failure surfaces as ``FluxClientError`` carrying the server's one-line reason,
which is what the CLI prints; ``FluxConnectionError`` (a subclass) when the server
cannot be reached at all (``flux.client.errors``). Following an execution's events
and lines is ``flux.client.streams``.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import httpx

from flux.bundles.archive import BundleError
from flux.client.access import AccessMethods
from flux.client.config import DEFAULT_SERVER_URL as DEFAULT_SERVER_URL  # re-exported: flux.client's
from flux.client.config import ClientSettings
from flux.client.errors import FluxClientError, FluxConnectionError, error_from
from flux.client.hooks import HookMethods
from flux.client.streams import Following
from flux.client.urls import given, segment
from flux.domain.events import HOLDING_STATES, TERMINAL_STATES
from flux.domain.gang import Gang
from flux.domain.namespaces import DEFAULT
from flux.domain.workers import WorkerState

#: Executions an ambiguous id prefix lists at most.
MAX_CANDIDATES = 10
#: The most a run waits in its own request (``POST .../run?wait=``); a longer wait goes on
#: with ``GET /executions/{id}?wait=``, which names the execution: a connection lost in
#: a long wait loses a reply that says where to look, never more (docs/client.md).
RUN_WAIT = 10.0
_FULL_ID = re.compile(r"[0-9a-fA-F]{32}")
_HEX = re.compile(r"[0-9a-fA-F]{1,32}")


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


class FluxClient(HookMethods, AccessMethods, Following):
    """A client of one server, acting in one namespace: every call on namespaced things
    goes to ``/namespaces/NAME/...`` (docs/namespaces.md). Server, token and namespace
    come from the arguments, else the environment, else ``flux.toml``, as the CLI's do
    (``flux.client.config``); with no namespace anywhere it acts in its token's only
    namespace (``GET /whoami``, asked once), else ``default``."""

    def __init__(
        self,
        server_url: str | None = None,
        timeout: float = 30.0,
        api_token: str | None = None,
        namespace: str | None = None,
        *,
        api_token_file: str | Path | None = None,
        read_config: bool = True,
    ):
        settings = ClientSettings.resolve(server_url, api_token, namespace, api_token_file, read_config)
        self.server_url = settings.server_url
        self.timeout = timeout
        self._namespace = settings.namespace
        self._token = settings.api_token
        headers = {"Authorization": f"Bearer {self._token}"} if self._token else None
        self._http = httpx.Client(
            base_url=self.server_url, timeout=timeout, headers=headers, verify=tls_verify(self.server_url)
        )

    @property
    def namespace(self) -> str:
        """The namespace it acts in: the one given, else its token's only one, else ``default``."""
        if self._namespace is None:
            self._namespace = self._token_namespace()
        return self._namespace

    def _token_namespace(self) -> str:
        """Without a token (an open server) nothing is asked: the caller may act anywhere."""
        if not self._token:
            return DEFAULT
        return self.whoami().get("namespace") or DEFAULT

    def copy(self) -> "FluxClient":
        """Another client to the same server with the same token and namespace (one per thread)."""
        return FluxClient(self.server_url, self.timeout, self._token, self.namespace, read_config=False)

    def scoped(self, path: str) -> str:
        """The path of a namespaced thing, in this client's namespace."""
        return f"/namespaces/{segment(self.namespace)}{path}"

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
            raise error_from(response)
        return response

    def _unreachable(self, exc: httpx.TransportError) -> FluxConnectionError:
        return FluxConnectionError(
            f"cannot reach the Flux server at {self.server_url}: {exc or exc.__class__.__name__}"
        )

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
        return self._request(
            "POST", self.scoped("/workflows/bundle"), json={"bundle": bundle["sha256"], "requirements": requirements}
        )

    #: The older name, for any path ``register`` takes.
    register_file = register

    def upload_bundle(self, data: bytes) -> dict:
        """Store a bundle's bytes on the server: {sha256, size, files}."""
        return self._request("POST", "/bundles", content=data, headers={"Content-Type": "application/zip"})

    def workflow_versions(self, name: str) -> list[dict]:
        return self._request("GET", self.scoped(f"/workflows/{segment(name)}/versions"))

    def list_workflows(self) -> list[dict]:
        """The newest version of every workflow (all pages)."""
        return list(self._pages(self.scoped("/workflows"), {}))

    def show_workflow(self, name: str, version: int | None = None) -> dict:
        """``name`` may carry its version: ``train@3``."""
        name, pinned = split_version(name)
        version = version or pinned
        params = {"version": version} if version else None
        return self._request("GET", self.scoped(f"/workflows/{segment(name)}"), params=params)

    def run(
        self,
        name: str,
        input: Any = None,
        wait: float | None = None,
        version: int | None = None,
        priority: int | str | None = None,
        gang: Gang | Mapping[str, Any] | None = None,
    ) -> dict:
        """Start workflow ``name`` (or ``name@3``); a version pins one (default: the newest
        when it first starts), and the execution keeps it through every attempt.
        ``priority``: this run's (a class name or an int), else its workflow's. ``gang``:
        run it as this gang, a ``Gang`` or fields changing the workflow's (``{"size": 8}``;
        docs/gangs.md). ``wait``: seconds to wait for its end; the run's own request waits
        (``RUN_WAIT`` at most)."""
        name, pinned = split_version(name)
        version = version or pinned
        wire_gang = gang.to_dict() if isinstance(gang, Gang) else None if gang is None else dict(gang)
        body = {"input": input, **given({"version": version, "priority": priority, "gang": wire_gang})}
        path = self.scoped(f"/workflows/{segment(name)}/run")
        if not wait:
            return self._request("POST", path, json=body)
        deadline, step = time.monotonic() + wait, min(wait, RUN_WAIT)
        execution = self._request("POST", path, json=body, params={"wait": step}, timeout=step + 30)
        remaining = deadline - time.monotonic()
        if execution["state"] in TERMINAL_STATES or remaining <= 0:
            return execution
        return self.wait(execution["id"], remaining)

    # executions
    def execution(self, execution_id: str) -> dict:
        return self._request("GET", self.scoped(f"/executions/{segment(execution_id)}"))

    def resolve_execution(self, prefix: str) -> str:
        """The full id of the one execution whose id starts with ``prefix`` (like git's
        short hashes). A full 32-hex id is used as it is; a string that is no hex
        prefix at all too (the server then says it does not exist)."""
        prefix = prefix.strip()
        if _FULL_ID.fullmatch(prefix):
            return prefix.lower()
        if not _HEX.fullmatch(prefix):
            return prefix
        matches = self._request(
            "GET", self.scoped("/executions"), params={"id_prefix": prefix.lower(), "limit": MAX_CANDIDATES + 1}
        )
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
                "GET", self.scoped(f"/executions/{segment(execution_id)}"), params={"wait": step}, timeout=step + 30
            )
            if execution["state"] in TERMINAL_STATES or remaining <= 0:
                return execution

    def placement(self, execution_id: str) -> dict:
        return self._request("GET", self.scoped(f"/executions/{segment(execution_id)}/placement"))

    def events(self, execution_id: str, after: int = 0) -> list[dict]:
        params = {"after": after} if after else None
        return self._request("GET", self.scoped(f"/executions/{segment(execution_id)}/events"), params=params)

    def logs_page(self, execution_id: str, after: int = 0, limit: int = 1000, **filters: Any) -> dict:
        """One page of captured lines: ``{"lines", "next_after", "truncated"}`` (docs/logs.md).
        ``filters``: task, attempt, stream, level."""
        params = {**given(filters), "after": after, "limit": limit}
        return self._request("GET", self.scoped(f"/executions/{segment(execution_id)}/logs"), params=params)

    def list_executions(
        self,
        state: str | None = None,
        workflow: str | None = None,
        limit: int = 50,
        id_prefix: str | None = None,
        **filters: Any,
    ) -> list[dict]:
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
        members: bool = False,
    ) -> tuple[list[dict], str | None]:
        """One page, newest first, and the cursor of the next (None on the last page).
        ``members``: gang members too (left out by default: their gang lists them)."""
        params = given(
            {
                "state": state,
                "workflow": workflow,
                "worker": worker,
                "schedule": schedule,
                "members": members or None,
                "limit": limit,
                "id_prefix": id_prefix,
                "after": after,
                "include": ",".join(include),
            }
        )
        response = self._response("GET", self.scoped("/executions"), params=params)
        return response.json(), response.headers.get("X-Next-Cursor")

    def iter_executions(
        self,
        state: str | None = None,
        workflow: str | None = None,
        *,
        worker: str | None = None,
        schedule: str | None = None,
        include: Iterable[str] = (),
        page_size: int = 1000,
        after: str | None = None,
        members: bool = False,
    ) -> Iterator[dict]:
        """Every matching execution, newest first, a page at a time (``flux execution list --all``)."""
        params = {
            "state": state,
            "workflow": workflow,
            "worker": worker,
            "schedule": schedule,
            "members": members or None,
            "include": ",".join(include),
            "limit": page_size,
        }
        return self._pages(self.scoped("/executions"), params, after)

    def _pages(self, path: str, params: dict[str, Any], after: str | None = None) -> Iterator[dict]:
        """The items of a list endpoint, following ``X-Next-Cursor`` to the last page."""
        while True:
            response = self._response("GET", path, params=given({**params, "after": after}))
            yield from response.json()
            after = response.headers.get("X-Next-Cursor")
            if after is None:
                return

    def prune_executions(self, older_than: float) -> dict:
        """Delete executions that finished more than ``older_than`` seconds ago, with their events and logs."""
        return self._request("POST", self.scoped("/executions/prune"), json={"older_than": older_than})

    def cancel(self, execution_id: str) -> dict:
        return self._request("POST", self.scoped(f"/executions/{segment(execution_id)}/cancel"))

    def resume(self, execution_id: str, input: Any = None) -> dict:
        """Continue a PAUSED execution: its ``pause()`` returns ``input`` (docs/waits.md)."""
        return self._request("POST", self.scoped(f"/executions/{segment(execution_id)}/resume"), json={"input": input})

    # the task cache and secrets (docs/tasks.md)
    def clear_cache(self, task: str | None = None, expired: bool = False) -> dict:
        """Delete cached task results: all, one task's, or only the expired ones; ``{"deleted": N}``."""
        return self._request(
            "DELETE", self.scoped("/cache"), params=given({"task": task, "expired": "true" if expired else None})
        )

    def set_secret(self, name: str, value: str) -> dict:
        """Create or replace a secret (encrypted at rest); returns its name and times, never the value."""
        return self._request("PUT", self.scoped(f"/secrets/{segment(name)}"), json={"value": value})

    def list_secrets(self) -> list[dict]:
        """Secret names and times (values are never returned)."""
        return self._request("GET", self.scoped("/secrets"))

    def delete_secret(self, name: str) -> None:
        self._response("DELETE", self.scoped(f"/secrets/{segment(name)}"))

    # workers
    def list_workers(self) -> list[dict]:
        """Every registered worker (all pages)."""
        return list(self._pages("/workers", {}))

    def show_worker(self, name: str) -> dict:
        return self._request("GET", f"/workers/{segment(name)}")

    def executions_on(self, worker_name: str) -> list[dict]:
        """The executions a worker holds (claimed, running or being cancelled), newest first."""
        held = [
            execution
            for state in HOLDING_STATES
            for execution in self.list_executions(state, limit=1000, worker=worker_name)
        ]
        return sorted(held, key=lambda e: e["scheduled_at"], reverse=True)

    def drain_worker(self, name: str, wait: float | None = None, poll: float = 0.5) -> dict:
        """Stop giving NAME new work; with ``wait``, return once it runs nothing (DRAINED
        or OFFLINE), or raise after that many seconds."""
        worker = self._request("POST", f"/workers/{segment(name)}/drain")
        deadline = time.monotonic() + (wait or 0)
        while wait is not None and worker["state"] not in (WorkerState.DRAINED, WorkerState.OFFLINE):
            if time.monotonic() >= deadline:
                raise FluxClientError(f"worker {name} still runs {worker['running']} execution(s) after {wait:g}s")
            time.sleep(poll)
            worker = self.show_worker(name)
        return worker

    def undrain_worker(self, name: str) -> dict:
        return self._request("POST", f"/workers/{segment(name)}/undrain")

    # --- schedules (docs/schedules.md) -----------------------------------------------------

    def create_pool(self, name: str, provider: str, **spec: Any) -> dict:
        """A worker pool (docs/autoscaling.md); ``spec``: labels, resources, packages, slots,
        min, max, idle_timeout, options (the provider's)."""
        return self._request("POST", "/pools", json={"name": name, "provider": provider, **spec})

    def apply_pool(self, name: str, provider: str, **spec: Any) -> dict:
        """Create the pool, or replace its template, bounds and provider."""
        return self._request("PUT", f"/pools/{segment(name)}", json={"provider": provider, **spec})

    def list_pools(self) -> list[dict]:
        return self._request("GET", "/pools")

    def show_pool(self, name: str) -> dict:
        return self._request("GET", f"/pools/{segment(name)}")

    def delete_pool(self, name: str) -> dict:
        """Its workers are drained and stopped, then it is gone."""
        return self._request("DELETE", f"/pools/{segment(name)}")

    def desired_workers(self) -> dict[str, int]:
        """Desired workers per pool (what KEDA's metrics-api scaler reads)."""
        return self._request("GET", "/autoscale/desired")["pools"]

    def create_schedule(
        self,
        name: str,
        workflow: str,
        *,
        cron: str | None = None,
        every: float | str | None = None,
        at: float | str | None = None,
        **options: Any,
    ) -> dict:
        """One of ``cron``, ``every`` (seconds or "5m") or ``at`` (ISO 8601); ``options``: version,
        anchor, timezone, input, overlap, catch_up, catch_up_limit, jitter, paused (checked here first)."""
        from flux.domain.schedules import InvalidSchedule, Schedule  # cronsim, zoneinfo: only here

        body = {"name": name, "workflow": workflow, **given({"cron": cron, "every": every, "at": at}), **options}
        try:
            Schedule.parse(
                cron=cron, every=every, at=at, anchor=options.get("anchor"), timezone=options.get("timezone", "UTC")
            )
        except InvalidSchedule as exc:
            raise FluxClientError(str(exc)) from None
        return self._request("POST", self.scoped("/schedules"), json=body)

    def list_schedules(self) -> list[dict]:
        return self._request("GET", self.scoped("/schedules"))

    def show_schedule(self, name: str) -> dict:
        return self._request("GET", self.scoped(f"/schedules/{segment(name)}"))

    def update_schedule(self, name: str, **changes: Any) -> dict:
        """Only the fields given change (as for ``create_schedule``)."""
        return self._request("PATCH", self.scoped(f"/schedules/{segment(name)}"), json=changes)

    def delete_schedule(self, name: str) -> None:
        self._request("DELETE", self.scoped(f"/schedules/{segment(name)}"))

    def pause_schedule(self, name: str) -> dict:
        return self._request("POST", self.scoped(f"/schedules/{segment(name)}/pause"))

    def resume_schedule(self, name: str) -> dict:
        return self._request("POST", self.scoped(f"/schedules/{segment(name)}/resume"))

    def trigger_schedule(self, name: str) -> dict:
        """Run it now; returns the execution."""
        return self._request("POST", self.scoped(f"/schedules/{segment(name)}/trigger"))
