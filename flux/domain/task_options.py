"""A task's validated options, one frozen value: what ``@task.with_options`` and static
registration (``flux.registration``) both build; its checks name the task and the option."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from flux.domain.numbers import is_number
from flux.domain.secrets import check_secret_requests


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
