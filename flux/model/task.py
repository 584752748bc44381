"""``@task``: a unit of work inside a workflow whose result is recorded in the event log.

A task call is identified by ``name:n`` (the n-th call of that task in the execution),
assigned synchronously when the task is *called*, not when it is awaited. Coroutines
created in a fixed order (as ``parallel`` does) therefore get the same ids on every
replay, which is what lets a resumed execution skip tasks that already completed.
Like Temporal activities, tasks run at least once: a task that finished but whose
completion never reached the server runs again on resume.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from dataclasses import replace
from typing import Any, Callable

from flux.domain.task_options import TaskOptions
from flux.model import fluxcore
from flux.model.runtime import ExecutionTimeoutError, TaskFailedError, current_context, timed_out

__all__ = ["Task", "TaskFailedError", "TaskOptions", "parallel", "task"]


class Task:
    """A decorated function. Inside a workflow, calling it records and replays it."""

    def __init__(self, fn: Callable[..., Any], options: TaskOptions):
        if not callable(fn):
            raise TypeError(f"@task needs a function, got {fn!r}")
        self.fn = fn
        self.options = options
        self.is_async = inspect.iscoroutinefunction(fn)
        functools.update_wrapper(self, fn)

    @property
    def name(self) -> str:
        return self.options.name

    def __call__(self, *args: Any, **kwargs: Any):
        ctx = current_context()
        if ctx is None:  # outside a workflow: behave like the plain function
            return self.invoke(args, kwargs)
        if "{" in self.name:  # flux-core's name template, "resize_{size}": named by this call's arguments
            return Task(self.fn, replace(self.options, name=fluxcore.formatted_name(self, args, kwargs)))(
                *args, **kwargs
            )
        if self.options.requires_approval or self.options.output_storage is not None:
            return fluxcore.gated_call(self, ctx, args, kwargs)
        return ctx.call_task(self, args, kwargs)

    def with_options(self, **changes: Any) -> "Task":
        """This task with some options changed (flux-core's ``my_task.with_options(...)``)."""
        return Task(self.fn, replace(self.options, **changes))

    async def map(self, items: Any) -> list[Any]:
        """flux-core's ``await task.map(items)``: this task on each item, concurrently, in
        item order (``flux.map(task, items, concurrency=n)`` bounds how many run at once)."""
        return await parallel(*[self(item) for item in items])

    async def invoke(self, args: tuple, kwargs: dict) -> Any:
        """Run the function once, honouring the timeout."""
        kwargs = fluxcore.with_metadata(self, kwargs)
        if self.options.output_storage is not None:
            return await fluxcore.stored(self, await self._invoke(args, kwargs))
        return await self._invoke(args, kwargs)

    async def _invoke(self, args: tuple, kwargs: dict) -> Any:
        if self.is_async:
            call = self.fn(*args, **kwargs)
        else:
            call = asyncio.to_thread(self.fn, *args, **kwargs)
        if self.options.timeout is None:
            return await call
        try:
            return await asyncio.wait_for(call, self.options.timeout)
        except TimeoutError as exc:
            raise ExecutionTimeoutError(timed_out(self.name, self.options.timeout)) from exc

    def __repr__(self) -> str:
        return f"<task {self.name}>"


class _TaskDecorator:
    """``@task`` and ``@task.with_options(...)``."""

    def __call__(self, fn: Callable[..., Any]) -> Task:
        return Task(fn, TaskOptions(name=fn.__name__))

    def with_options(
        self,
        name: str | None = None,
        retry_max_attempts: int = 0,
        retry_delay: float = 1.0,
        retry_backoff: float = 2.0,
        timeout: float | None = None,
        fallback: Callable[..., Any] | None = None,
        rollback: Callable[..., Any] | None = None,
        cache: bool = False,
        cache_ttl: float | None = None,
        secret_requests: list[str] | tuple[str, ...] = (),
        requires_approval: bool | Callable[..., Any] = False,
        metadata: bool = False,
        output_storage: Any = None,
    ) -> Callable[[Callable[..., Any]], Task]:
        """Options validated when the decorator runs (errors name the option); see docs/tasks.md.
        ``requires_approval``, ``metadata`` and ``output_storage`` are flux-core's
        (docs/migrating-from-flux-core.md)."""
        fluxcore.differences(rollback=rollback, secret_requests=secret_requests)

        def decorate(fn: Callable[..., Any]) -> Task:
            options = TaskOptions(
                name=name or fn.__name__,
                retry_max_attempts=retry_max_attempts,
                retry_delay=retry_delay,
                retry_backoff=retry_backoff,
                timeout=timeout,
                fallback=fallback,
                rollback=rollback,
                cache=cache,
                cache_ttl=cache_ttl,
                secret_requests=secret_requests,
                requires_approval=requires_approval,
                metadata=metadata,
                output_storage=output_storage,
            )
            if options.secret_requests and "secrets" not in inspect.signature(fn).parameters:
                raise ValueError(
                    f"task {options.name!r}: secret_requests needs a 'secrets' parameter on {fn.__name__}()"
                )
            return Task(fn, options)

        return decorate


task = _TaskDecorator()


async def parallel(*awaitables: Any) -> list[Any]:
    """Run task calls concurrently and return their results in argument order.

    If one fails, the others are cancelled before the error propagates, so nothing
    keeps running (or recording events) behind a workflow that has already ended.
    """
    tasks = [asyncio.ensure_future(awaitable) for awaitable in awaitables]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for pending in tasks:
            pending.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
