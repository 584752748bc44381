"""The client SDK: a thin, typed-by-convention wrapper over the HTTP API.

Every failure surfaces as ``FluxClientError`` carrying the server's one-line reason,
which is what the CLI prints.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from flux.loader import WorkflowLoadError, load_workflows

DEFAULT_SERVER_URL = "http://127.0.0.1:8000"


class FluxClientError(Exception):
    pass


def _reason(response: httpx.Response) -> str:
    """The server's ``detail`` (every error body has one; see docs/security.md)."""
    try:
        detail = response.json()["detail"]
    except (ValueError, TypeError, KeyError):
        return f"HTTP {response.status_code}: {response.text[:200]}"
    return f"HTTP {response.status_code}: {detail}"


def _seg(value: str) -> str:
    """One URL path segment: a name with '?', '#' or '/' must not become another URL."""
    return quote(str(value), safe="")


def read_workflow_file(path: str | Path) -> dict:
    """Import a workflow file locally and build the registration payload."""
    path = Path(path)
    try:
        source = path.read_text()
    except OSError as exc:
        raise FluxClientError(f"cannot read {path}: {exc.strerror}") from None
    try:
        found = load_workflows(source, str(path))
    except WorkflowLoadError as exc:
        raise FluxClientError(str(exc)) from None
    if not found:
        raise FluxClientError(f"{path} defines no @workflow")
    return {
        "source": source,
        "filename": path.name,
        "workflows": [wf.metadata() for wf in found.values()],
    }


class FluxClient:
    def __init__(self, server_url: str | None = None, timeout: float = 30.0, api_token: str | None = None):
        self.server_url = server_url or os.environ.get("FLUX_SERVER_URL", DEFAULT_SERVER_URL)
        token = api_token or os.environ.get("FLUX_API_TOKEN")
        headers = {"Authorization": f"Bearer {token}"} if token else None
        self._http = httpx.Client(base_url=self.server_url, timeout=timeout, headers=headers)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "FluxClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise FluxClientError(f"cannot reach the Flux server at {self.server_url}: {exc}") from None
        if response.status_code >= 400:
            raise FluxClientError(_reason(response))
        return response.json()

    # workflows
    def register_file(self, path: str | Path) -> list[dict]:
        return self._request("POST", "/workflows", json=read_workflow_file(path))

    def list_workflows(self) -> list[dict]:
        return self._request("GET", "/workflows")

    def show_workflow(self, name: str, version: int | None = None) -> dict:
        params = {"version": version} if version else None
        return self._request("GET", f"/workflows/{_seg(name)}", params=params)

    def run(self, name: str, input: Any = None, wait: float | None = None, version: int | None = None) -> dict:
        """Start workflow ``name``; ``version`` pins one (default: the newest when it first starts)."""
        body = {"input": input} if version is None else {"input": input, "version": version}
        execution = self._request("POST", f"/workflows/{_seg(name)}/run", json=body)
        if wait:
            execution = self.wait(execution["id"], wait)
        return execution

    # executions
    def execution(self, execution_id: str) -> dict:
        return self._request("GET", f"/executions/{_seg(execution_id)}")

    def wait(self, execution_id: str, timeout: float) -> dict:
        """Block until the execution ends (or ``timeout`` seconds pass); returns its latest state."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            step = max(0.0, min(remaining, 60.0))
            execution = self._request(
                "GET", f"/executions/{_seg(execution_id)}", params={"wait": step}, timeout=step + 30
            )
            if execution["state"] in ("COMPLETED", "FAILED", "CANCELLED") or remaining <= 0:
                return execution

    def placement(self, execution_id: str) -> dict:
        return self._request("GET", f"/executions/{_seg(execution_id)}/placement")

    def events(self, execution_id: str) -> list[dict]:
        return self._request("GET", f"/executions/{_seg(execution_id)}/events")

    def list_executions(self, state: str | None = None, workflow: str | None = None, limit: int = 50) -> list[dict]:
        params = {k: v for k, v in {"state": state, "workflow": workflow, "limit": limit}.items() if v}
        return self._request("GET", "/executions", params=params)

    def cancel(self, execution_id: str) -> dict:
        return self._request("POST", f"/executions/{_seg(execution_id)}/cancel")

    # workers
    def list_workers(self) -> list[dict]:
        return self._request("GET", "/workers")

    def show_worker(self, name: str) -> dict:
        return self._request("GET", f"/workers/{_seg(name)}")

    def drain_worker(self, name: str, wait: float | None = None, poll: float = 0.5) -> dict:
        """Stop giving NAME new work; with ``wait``, return once it runs nothing (DRAINED
        or OFFLINE), or raise after that many seconds."""
        worker = self._request("POST", f"/workers/{_seg(name)}/drain")
        deadline = time.monotonic() + (wait or 0)
        while wait is not None and worker["state"] not in ("DRAINED", "OFFLINE"):
            if time.monotonic() >= deadline:
                raise FluxClientError(f"worker {name} still runs {worker['running']} execution(s) after {wait:g}s")
            time.sleep(poll)
            worker = self.show_worker(name)
        return worker

    def undrain_worker(self, name: str) -> dict:
        return self._request("POST", f"/workers/{_seg(name)}/undrain")
