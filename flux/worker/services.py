"""What a running attempt may ask its worker (``flux.worker.runners.asking``): a cached task
result, and the secrets its tasks requested. The worker asks the server with its own
session; the server answers only for an execution this worker holds under this attempt
(fenced), so a child never holds a credential.

Every secret value the worker hands an attempt is added to that attempt's ``Redactor``
(its events and log lines are masked before they leave the worker) and to the
worker's own (``WORKER_SECRETS``: the worker's log lines, through ``RedactingFilter``),
and forgotten when the attempt ends.
"""

from __future__ import annotations

import logging
from typing import Any, Awaitable, Callable

import httpx
from pydantic import ValidationError

from flux.domain.secrets import RedactingFilter, Redactor
from flux.protocol.services import CacheLookup, CacheLookupReply, SecretRequest, SecretValues
from flux.worker.runners.base import Job

#: Every secret value some running attempt of this worker holds.
WORKER_SECRETS = Redactor()

Call = Callable[..., Awaitable[Any]]


def redact_worker_logs() -> None:
    """Mask held secret values in whatever this process logs (idempotent)."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter(WORKER_SECRETS))


class AttemptServices:
    """``await services(kind, body)`` for one attempt of one execution."""

    def __init__(self, call: Call, job: Job):
        self.call = call
        self.job = job
        self.redactor = Redactor()
        self._given: list[str] = []

    async def __call__(self, kind: str, body: dict) -> Any:
        """What the attempt asked, answered as JSON (the programming model's side reads it)."""
        try:
            if kind == "cache.lookup":
                asked = CacheLookup(key=body["key"], execution=self.job.id)  # its namespace's entries answer
                reply = await self.call("/cache/lookup", asked, reply=CacheLookupReply)
                return reply.model_dump()
            if kind == "secrets":
                return (await self._secrets(list(body["names"]))).model_dump()
        except httpx.HTTPStatusError as exc:
            raise RuntimeError(_detail(exc.response)) from None
        except ValidationError as exc:  # what the child asked is not a request the server takes
            raise RuntimeError(f"invalid {kind} request: {exc.errors()[0]['msg']}") from None
        raise RuntimeError(f"unknown service {kind!r}")

    async def _secrets(self, names: list[str]) -> SecretValues:
        path = f"/executions/{self.job.id}/secrets"
        reply = await self.call(path, SecretRequest(attempt=self.job.attempt, names=names), reply=SecretValues)
        values = list(reply.values.values())
        self.redactor.add(values)
        WORKER_SECRETS.add(values)
        self._given.extend(values)
        return reply

    def forget(self) -> None:
        """The attempt ended: the worker's own lines no longer need its values masked."""
        WORKER_SECRETS.remove(self._given)
        self._given.clear()

    def redacted(self, sink: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """``sink`` (events, or a batch of log lines) with this attempt's secrets masked."""

        def put(value: Any) -> Any:
            return sink(self.redactor.redact(value))

        return put


def _detail(response: httpx.Response) -> str:
    try:
        return str(response.json().get("detail"))
    except ValueError:
        return f"HTTP {response.status_code}"
