"""A child asks its worker for a service while its attempt runs (a cached result, the
secrets a task requested), and gets the answer on its stdin.

Child -> worker, on the protocol channel: ``{"type": "ASK", "id": n, "kind": ..., "body": {...}}``.
Worker -> child, a line on its stdin: ``{"type": "ANSWER", "id": n, "value": ...}`` or
``{"type": "ANSWER", "id": n, "error": "..."}`` (raised in the child as ``AskFailed``).
Jobs arrive on the same stdin; a line with ``"type": "ANSWER"`` is never a job.
The worker answers with its session (``flux.worker.services``), so the child holds no
credential and its attempt's fencing applies to what it asks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from flux.model.runtime import Ask

ASK = "ASK"
ANSWER = "ANSWER"

log = logging.getLogger("flux.worker.runners.asking")


class AskFailed(RuntimeError):
    """The worker could not answer (the message says why: a secret not set, ...)."""


class Asker:
    """The child's side: ``await asker(kind, body)`` sends an ASK and waits for its ANSWER."""

    def __init__(self, send: Callable[[dict], None]):
        self.send = send
        self.waiting: dict[int, asyncio.Future] = {}
        self.last = 0

    async def __call__(self, kind: str, body: dict) -> Any:
        self.last += 1
        number = self.last
        future = asyncio.get_running_loop().create_future()
        self.waiting[number] = future
        try:
            self.send({"type": ASK, "id": number, "kind": kind, "body": body})
            return await future
        finally:
            self.waiting.pop(number, None)

    def answered(self, message: dict) -> None:
        future = self.waiting.get(message.get("id"))
        if future is None or future.done():
            return
        if "error" in message:
            future.set_exception(AskFailed(message["error"]))
        else:
            future.set_result(message.get("value"))


async def answer(message: dict, ask: Ask | None, write: Callable[[bytes], Any]) -> None:
    """The runner's side: answer one ASK with the worker's services, on the child's stdin."""
    reply: dict[str, Any] = {"type": ANSWER, "id": message.get("id")}
    try:
        if ask is None:
            raise AskFailed("this runner offers no services to the attempt")
        reply["value"] = await ask(message["kind"], message.get("body") or {})
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - the child raises it in the task that asked
        reply["error"] = str(exc) or type(exc).__name__
    with contextlib.suppress(ConnectionError, RuntimeError):  # the child is gone: nobody waits
        await write(json.dumps(reply).encode() + b"\n")
