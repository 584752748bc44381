"""Stamps along one execution's path, for B1's latency budget (``b1_dispatch.budget``).

``python -m bench.stamps OUT -m flux.cli start server ...`` runs the module as
``python -m`` would, after wrapping the few functions one execution passes through,
so that each appends ``<unix time> <label>`` to OUT as it happens (one ``os.write``
a stamp, a few microseconds). Nothing in ``flux`` knows about it. Labels:

- ``http> KIND`` / ``http< KIND``: the server got a request / sent its response head
  (KIND: run, claim, checkpoint, wait, heartbeat, other);
- ``db+ UNIT`` (the unit waits for a thread), ``db[ UNIT`` (it starts on one),
  ``db] UNIT`` (its body returned: the commit follows), ``db= UNIT`` (the awaiting
  coroutine has the committed answer); UNIT is the function the route handed over;
  ``rd+ rd[ rd] rd=`` the same for reads (``Database.read``);
- ``sql STATEMENT``: the first words of each statement the server sends;
- ``kick``: the dispatcher was told to look; ``notify worker`` / ``notify execution``;
- worker: ``call> KIND`` / ``call< KIND`` around its HTTP calls, ``job`` (a claimed
  job handed to ``Executions.start``), ``handover`` (the runner called).
"""

from __future__ import annotations

import functools
import os
import re
import runpy
import signal
import sys
import time
from typing import Any, Callable

_fd = -1
_KINDS = (("/run", "run"), ("/claim", "claim"), ("/checkpoint", "checkpoint"), ("/heartbeat", "heartbeat"))


def stamp(label: str) -> None:
    os.write(_fd, f"{time.time():.6f} {label}\n".encode())


def kind(path: str, method: str = "POST") -> str:
    for suffix, name in _KINDS:
        if path.endswith(suffix):
            return name
    return "wait" if method == "GET" and re.search(r"/executions/[0-9a-f]{8,}$", path) else "other"


def unit_name(fn: Callable) -> str:
    name = getattr(fn, "__qualname__", repr(fn))
    return name.split(".<locals>")[0]


def _wrap_async(owner: Any, attr: str, before: Callable, after: Callable | None = None) -> None:
    original = getattr(owner, attr)

    @functools.wraps(original)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        context = before(*args, **kwargs)
        result = await original(*args, **kwargs)
        if after is not None:
            after(context)
        return result

    setattr(owner, attr, wrapper)


def _server() -> None:
    from fastapi import FastAPI
    from sqlalchemy import event

    from flux.server import dispatch, notify
    from flux.server.database import Database, StatementCounter

    def traced(fn: Callable, name: str) -> Callable:
        def body(session: Any) -> Any:
            stamp(f"{name[0]}[ {name[1]}")
            result = fn(session)
            stamp(f"{name[0]}] {name[1]}")
            return result

        return body

    for attr, prefix in (("run", "db"), ("read", "rd")):

        def make(original: Callable, prefix: str) -> Callable:
            async def wrapper(self: Database, fn: Callable, *args: Any, **kwargs: Any) -> Any:
                name = (prefix, unit_name(fn))
                stamp(f"{prefix}+ {name[1]}")
                result = await original(self, traced(fn, name), *args, **kwargs)
                stamp(f"{prefix}= {name[1]}")
                return result

            return wrapper

        setattr(Database, attr, make(getattr(Database, attr), prefix))
    attach = StatementCounter.attach

    def statements(self: StatementCounter, engine: Any) -> None:
        attach(self, engine)
        event.listen(engine, "before_cursor_execute", lambda *a: stamp("sql " + " ".join(a[2].split())[:60]))

    StatementCounter.attach = statements
    kick = dispatch.Dispatcher.kick
    dispatch.Dispatcher.kick = lambda self: (stamp("kick"), kick(self))[1]
    notify_local = notify.Notifier.notify_local
    notify.Notifier.notify_local = lambda self, key: (stamp(f"notify {key.split(':')[0]}"), notify_local(self, key))[1]
    call = FastAPI.__call__

    async def asgi(self: FastAPI, scope: dict, receive: Callable, send: Callable) -> None:
        if scope.get("type") != "http":
            return await call(self, scope, receive, send)
        name = kind(scope.get("path", ""), scope.get("method", ""))
        stamp(f"http> {name}")

        async def sending(message: dict) -> None:
            if message.get("type") == "http.response.start":
                stamp(f"http< {name}")
            await send(message)

        await call(self, scope, receive, sending)

    FastAPI.__call__ = asgi


def _worker() -> None:
    import httpx

    from flux.worker import running, wire
    from flux.worker.runners.subprocess import SubprocessRunner

    def sent(self: Any, request: httpx.Request, *args: Any, **kwargs: Any) -> str:
        name = kind(request.url.path, request.method)
        stamp(f"call> {name}")
        return name

    _wrap_async(httpx.AsyncClient, "send", sent, lambda name: stamp(f"call< {name}"))

    def sent_on_wire(self: Any, method: str, path: str, *args: Any, **kwargs: Any) -> str:
        name = kind(path, method)  # the worker's own connections (flux.worker.wire), not httpx's
        stamp(f"call> {name}")
        return name

    _wrap_async(wire.Wire, "request", sent_on_wire, lambda name: stamp(f"call< {name}"))
    _wrap_async(SubprocessRunner, "run", lambda *a, **k: stamp("handover"))
    start = running.Executions.start
    running.Executions.start = lambda self, job: (stamp("job"), start(self, job))[1]


def main() -> None:
    global _fd
    if len(sys.argv) < 4 or sys.argv[2] != "-m":
        sys.exit("usage: python -m bench.stamps OUT -m MODULE [ARGS...]")
    out, module = sys.argv[1], sys.argv[3]
    _fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    args = sys.argv[4:]
    if args[:2] == ["start", "server"]:
        _server()
    elif args[:2] == ["start", "worker"]:
        _worker()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
