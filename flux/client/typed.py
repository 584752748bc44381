"""``flux.Client`` and ``flux.AsyncClient``: the client for application code.

Built on ``FluxClient`` (``flux.client.sdk``, what the CLI uses): the same calls, with
typed results (``flux.client.models``) and a ``Run`` handle whose ``result()`` returns
the output or raises ``ExecutionFailed``, ``ExecutionTimedOut`` or
``ExecutionCancelled`` carrying the execution and, for a failure, the remote
traceback. ``AsyncClient`` runs the same calls on threads (``asyncio.to_thread``), one
client each, so an event loop never blocks on the network (docs/client.md).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Iterator, TypeVar

from flux.client.errors import FluxClientError
from flux.client.models import Event, Execution, LogLine
from flux.client.sdk import FluxClient
from flux.domain.events import ExecutionState
from flux.protocol.failures import Failure

T = TypeVar("T")
#: Seconds one server-side wait lasts before it is asked again (the server's own cap).
WAIT_STEP = 60.0


class ExecutionError(FluxClientError):
    """An execution ended otherwise than COMPLETED; ``execution`` is how it ended."""

    def __init__(self, execution: Execution):
        self.execution = execution
        self.failure: Failure | None = execution.failure
        summary = f"execution {execution.id} ({execution.workflow_name}) {execution.state.value}"
        super().__init__(f"{summary}: {execution.error}" if execution.error else summary)

    @property
    def remote_traceback(self) -> str | None:
        """The traceback where it failed, the user's frames (``failure.rendered(full=True)``: all)."""
        return self.failure.rendered() if self.failure else None

    def __str__(self) -> str:
        text = super().__str__()
        return f"{text}\n\nRemote traceback:\n{self.remote_traceback}" if self.failure else text


class ExecutionFailed(ExecutionError):
    """It ended FAILED: its code raised (``failure``), or the server failed it (crashes, pending timeout)."""


class ExecutionTimedOut(ExecutionError):
    """It ended TIMED_OUT: its workflow's ``timeout`` passed."""


class ExecutionCancelled(ExecutionError):
    """It ended CANCELLED."""


ERRORS = {
    ExecutionState.FAILED: ExecutionFailed,
    ExecutionState.TIMED_OUT: ExecutionTimedOut,
    ExecutionState.CANCELLED: ExecutionCancelled,
}


def outcome(execution: Execution) -> Any:
    """The output of a COMPLETED execution; the matching ``ExecutionError`` otherwise."""
    if execution.state is ExecutionState.COMPLETED:
        return execution.output
    raise ERRORS[execution.state](execution)


def workflow_name(workflow: Any) -> str:
    """A workflow's name: the string given, or a ``@workflow`` object's ``name``."""
    return workflow if isinstance(workflow, str) else workflow.name


class Run:
    """One execution started by ``Client.run``: wait for it, follow it, stop it."""

    def __init__(self, client: "Client", execution: Execution):
        self.client = client
        self.id = execution.id
        self.started = execution

    def execution(self) -> Execution:
        """How it is now."""
        return self.client.execution(self.id)

    def wait(self, timeout: float | None = None) -> Execution:
        """Block until it ends (or ``timeout`` seconds pass); how it is then."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            step = WAIT_STEP if deadline is None else max(0.0, min(deadline - time.monotonic(), WAIT_STEP))
            execution = Execution.model_validate(self.client.sdk.wait(self.id, step))
            if execution.ended or (deadline is not None and time.monotonic() >= deadline):
                return execution

    def result(self, timeout: float | None = None) -> Any:
        """Its output, once it ends COMPLETED; ``ExecutionFailed`` (with the remote
        traceback), ``ExecutionTimedOut`` or ``ExecutionCancelled`` otherwise;
        ``TimeoutError`` if it has not ended after ``timeout`` seconds."""
        execution = self.wait(timeout)
        if not execution.ended:
            raise TimeoutError(f"execution {self.id} is still {execution.state.value} after {timeout:g}s")
        return outcome(execution)

    def events(self, follow: bool = True) -> Iterator[Event]:
        return self.client.events(self.id, follow=follow)

    def logs(self, follow: bool = True, **filters: Any) -> Iterator[LogLine]:
        return self.client.logs(self.id, follow=follow, **filters)

    def cancel(self) -> Execution:
        return self.client.cancel(self.id)


class Client:
    """A server, in one namespace, for application code. What is not given is read as
    the CLI reads it: ``FLUX_SERVER_URL``, ``FLUX_NAMESPACE``, ``FLUX_API_TOKEN_FILE``,
    ``FLUX_API_TOKEN``, then ``flux.toml``'s ``[client]`` (docs/client.md); no namespace
    anywhere: the token's only one, else ``default``. ``sdk`` is the ``FluxClient``
    underneath, for what this does not wrap (schedules, workers, tokens)."""

    def __init__(
        self,
        server_url: str | None = None,
        *,
        namespace: str | None = None,
        api_token: str | None = None,
        api_token_file: str | Path | None = None,
        timeout: float = 30.0,
        sdk: FluxClient | None = None,
    ):
        self.sdk = sdk or FluxClient(
            server_url, timeout=timeout, api_token=api_token, namespace=namespace, api_token_file=api_token_file
        )

    def close(self) -> None:
        self.sdk.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, workflow: Any, input: Any = None, *, version: int | None = None, gang: Any = None) -> Run:
        """Start ``workflow`` (its name, ``name@3``, or a ``@workflow`` object) with ``input``;
        ``gang``: run it as this gang (a ``Gang``, or ``{"size": 8}`` resizing its own; docs/gangs.md)."""
        started = self.sdk.run(workflow_name(workflow), input, version=version, gang=gang)
        return Run(self, Execution.model_validate(started))

    def get(self, execution_id: str) -> Run:
        """A handle on an execution started elsewhere (any unique prefix of its id)."""
        return Run(self, self.execution(execution_id))

    def execution(self, execution_id: str) -> Execution:
        return Execution.model_validate(self.sdk.execution(self.sdk.resolve_execution(execution_id)))

    def executions(
        self, state: ExecutionState | str | None = None, workflow: str | None = None, members: bool = False
    ) -> Iterator[Execution]:
        """Every matching execution, newest first, page after page; ``members``: gang
        members too (by default a gang is its own row, its ``members`` by rank)."""
        state = state.value if isinstance(state, ExecutionState) else state
        return (Execution.model_validate(e) for e in self.sdk.iter_executions(state, workflow, members=members))

    def events(self, execution_id: str, follow: bool = False) -> Iterator[Event]:
        """Its event log; with ``follow``, as events are recorded until it has ended."""
        items = self.sdk.follow_events(execution_id) if follow else self.sdk.events(execution_id)
        return (Event.model_validate(e) for e in items)

    def logs(self, execution_id: str, follow: bool = False, **filters: Any) -> Iterator[LogLine]:
        """Its captured lines (``filters``: task, attempt, stream, level); with ``follow``, as they come."""
        items = self.sdk.follow_logs(execution_id, **filters) if follow else self.sdk.logs(execution_id, **filters)
        return (LogLine.model_validate(line) for line in items)

    def cancel(self, execution_id: str) -> Execution:
        return Execution.model_validate(self.sdk.cancel(execution_id))

    def resume(self, execution_id: str, input: Any = None) -> Execution:
        """Resume a PAUSED execution: its ``pause()`` returns ``input``."""
        return Execution.model_validate(self.sdk.resume(execution_id, input))


class AsyncRun:
    """``Run`` for ``AsyncClient``: the same, awaited."""

    def __init__(self, client: "AsyncClient", run: Run):
        self.client, self._run, self.id = client, run, run.id

    async def execution(self) -> Execution:
        return await asyncio.to_thread(self._run.execution)

    async def wait(self, timeout: float | None = None) -> Execution:
        return await asyncio.to_thread(self._run.wait, timeout)

    async def result(self, timeout: float | None = None) -> Any:
        return await asyncio.to_thread(self._run.result, timeout)

    def events(self, follow: bool = True) -> AsyncIterator[Event]:
        return self.client.events(self.id, follow=follow)

    def logs(self, follow: bool = True, **filters: Any) -> AsyncIterator[LogLine]:
        return self.client.logs(self.id, follow=follow, **filters)

    async def cancel(self) -> Execution:
        return await asyncio.to_thread(self._run.cancel)


class AsyncClient:
    """``Client`` for asyncio code: every call awaited, on a thread; following yields as items come."""

    def __init__(
        self,
        server_url: str | None = None,
        *,
        namespace: str | None = None,
        api_token: str | None = None,
        api_token_file: str | Path | None = None,
        timeout: float = 30.0,
    ):
        self._client = Client(
            server_url, namespace=namespace, api_token=api_token, api_token_file=api_token_file, timeout=timeout
        )
        self.sdk = self._client.sdk

    async def close(self) -> None:
        await asyncio.to_thread(self._client.close)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def run(self, workflow: Any, input: Any = None, *, version: int | None = None, gang: Any = None) -> AsyncRun:
        return AsyncRun(self, await asyncio.to_thread(self._client.run, workflow, input, version=version, gang=gang))

    async def get(self, execution_id: str) -> AsyncRun:
        return AsyncRun(self, await asyncio.to_thread(self._client.get, execution_id))

    async def execution(self, execution_id: str) -> Execution:
        return await asyncio.to_thread(self._client.execution, execution_id)

    async def cancel(self, execution_id: str) -> Execution:
        return await asyncio.to_thread(self._client.cancel, execution_id)

    async def resume(self, execution_id: str, input: Any = None) -> Execution:
        return await asyncio.to_thread(self._client.resume, execution_id, input)

    def events(self, execution_id: str, follow: bool = False) -> AsyncIterator[Event]:
        return _on_a_thread(lambda own: own.events(execution_id, follow=follow), self._client)

    def logs(self, execution_id: str, follow: bool = False, **filters: Any) -> AsyncIterator[LogLine]:
        return _on_a_thread(lambda own: own.logs(execution_id, follow=follow, **filters), self._client)


async def _on_a_thread(items: Callable[[Client], Iterator[T]], client: Client) -> AsyncIterator[T]:
    """Each item of a blocking iterator, read on a thread with a client of its own (a
    follow holds its connection open), without blocking the event loop."""
    own = Client(sdk=client.sdk.copy())
    iterator = items(own)
    done = object()
    try:
        while (item := await asyncio.to_thread(next, iterator, done)) is not done:
            yield item
    finally:
        await asyncio.to_thread(own.close)
