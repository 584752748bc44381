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
from dataclasses import dataclass, replace
from typing import Any, Callable

from flux.domain.numbers import is_number
from flux.domain.secrets import check_secret_requests
from flux.model import fluxcore
from flux.model.runtime import ExecutionTimeoutError, TaskFailedError, current_context

__all__ = ["Task", "TaskFailedError", "TaskOptions", "parallel", "task"]


@dataclass(frozen=True)
class TaskOptions:
    name: str
    retry_max_attempts: int = 0
    retry_delay: float = 1.0
    retry_backoff: float = 2.0
    timeout: float | None = None
    #: Called with the task's arguments when its last try failed; its result is the task's.
    fallback: Callable[..., Any] | None = None
    #: Compensation (saga): called with the task's arguments when the workflow fails after
    #: this task completed, in reverse order of completion (``flux.model.saga``).
    rollback: Callable[..., Any] | None = None
    #: Reuse a result across executions for the same task version and arguments (``flux.model.caching``).
    cache: bool = False
    #: Seconds a cached result is reused; None: until ``flux cache clear``.
    cache_ttl: float | None = None
    #: Secret names the task receives as its ``secrets`` keyword argument (a dict).
    secret_requests: tuple[str, ...] = ()
    #: flux-core's approval gate: a ``pause("approval.<name>")`` before each call, or before the
    #: calls whose arguments a predicate says need it (``flux.model.fluxcore``).
    requires_approval: bool | Callable[..., Any] = False
    #: flux-core's ``metadata=True``: the body receives ``metadata`` (its task id and name).
    metadata: bool = False
    #: flux-core's ``output_storage``: keeps the result (``store``/``retrieve``); the log records its reference.
    output_storage: Any = None

    def __post_init__(self) -> None:
        if (
            isinstance(self.retry_max_attempts, bool)
            or not isinstance(self.retry_max_attempts, int)
            or self.retry_max_attempts < 0
        ):
            raise ValueError(
                f"task {self.name!r}: retry_max_attempts must be an int >= 0, got {self.retry_max_attempts!r}"
            )
        if not is_number(self.retry_delay) or self.retry_delay < 0:
            raise ValueError(f"task {self.name!r}: retry_delay must be a number >= 0, got {self.retry_delay!r}")
        if not is_number(self.retry_backoff) or self.retry_backoff < 1:
            raise ValueError(f"task {self.name!r}: retry_backoff must be a number >= 1, got {self.retry_backoff!r}")
        if self.timeout is not None and (not is_number(self.timeout) or self.timeout <= 0):
            raise ValueError(f"task {self.name!r}: timeout must be a number > 0 or None, got {self.timeout!r}")
        for option in ("fallback", "rollback"):
            value = getattr(self, option)
            if value is not None and not callable(value):
                raise ValueError(f"task {self.name!r}: {option} must be a function, got {value!r}")
        if not isinstance(self.cache, bool):
            raise ValueError(f"task {self.name!r}: cache must be True or False, got {self.cache!r}")
        if self.cache_ttl is not None and (not is_number(self.cache_ttl) or self.cache_ttl <= 0):
            raise ValueError(
                f"task {self.name!r}: cache_ttl must be a number of seconds > 0 or None, got {self.cache_ttl!r}"
            )
        if self.cache_ttl is not None and not self.cache:
            raise ValueError(f"task {self.name!r}: cache_ttl needs cache=True")
        if not isinstance(self.metadata, bool):
            raise ValueError(f"task {self.name!r}: metadata must be True or False, got {self.metadata!r}")
        if not (isinstance(self.requires_approval, bool) or callable(self.requires_approval)):
            raise ValueError(
                f"task {self.name!r}: requires_approval must be True, False or a predicate of the call's arguments"
            )
        storage = self.output_storage
        if storage is not None and not (
            callable(getattr(storage, "store", None)) and callable(getattr(storage, "retrieve", None))
        ):
            raise ValueError(f"task {self.name!r}: output_storage needs store() and retrieve(), got {storage!r}")
        object.__setattr__(self, "secret_requests", check_secret_requests(self.secret_requests, f"task {self.name!r}"))


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
            raise ExecutionTimeoutError(f"task {self.name!r} timed out after {self.options.timeout} s") from exc

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
