"""Stopping a worker without failing, losing or double-running work.

The first SIGTERM or SIGINT starts a drain: the worker stops claiming at once and
tells the server (a heartbeat with ``draining``), so nothing more is placed on it;
running executions get ``drain_timeout`` seconds to finish; whatever still runs
then is killed and handed back (ATTEMPT_ENDED ``drained``: the server resumes it
elsewhere from its checkpoints at once, without using up an attempt). Then the
worker deregisters and exits 0. This is what a Kubernetes preStop hook and
``terminationGracePeriodSeconds`` expect.

A second signal stops at once: children are killed and the worker deregisters
(the server then requeues what it held) if the server answers within a second.
A worker that cannot reach the server does not wait for it: it stops at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

import httpx

from flux.worker.heartbeat import Publisher
from flux.worker.running import Executions
from flux.worker.session import Abandoned, ServerSession, SessionLost

log = logging.getLogger("flux.worker")

#: Seconds the hand-back and deregistration may take after the drain deadline.
HAND_BACK_GRACE = 10.0
#: Seconds a worker stopping at once gives the server to hear it deregister.
QUICK_GOODBYE = 1.0


class StopSignals:
    """First signal: drain. Second: stop at once."""

    def __init__(self) -> None:
        self.draining = asyncio.Event()
        self.now = asyncio.Event()

    def install(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self.received, sig)

    def received(self, sig: int = signal.SIGTERM) -> None:
        if self.draining.is_set():
            log.warning("second %s: stopping at once", signal.Signals(sig).name)
            self.now.set()
        else:
            log.info(
                "%s: draining (stop claiming; running executions get their drain timeout)", signal.Signals(sig).name
            )
            self.draining.set()


async def drain(
    name: str,
    drain_timeout: float,
    session: ServerSession,
    executions: Executions,
    publisher: Publisher,
    signals: StopSignals,
) -> None:
    """Everything after the claim loop stopped: finish or hand back, then deregister."""
    quick = signals.now.is_set() or not session.reachable
    if not quick:
        with contextlib.suppress(httpx.HTTPError, Abandoned, SessionLost, TimeoutError):
            await asyncio.wait_for(publisher.beat(draining=True, sample=False), 5.0)
        if executions.running:
            log.info("draining: %d execution(s) running, waiting up to %gs", len(executions), drain_timeout)
        if not await executions.wait_empty(drain_timeout, signals.now) and not signals.now.is_set():
            cause = f"worker {name} drained past its deadline ({drain_timeout:g} s)"
            log.warning("%s: handing back %d execution(s)", cause, len(executions))
            executions.hand_back(cause)
            await executions.wait_empty(HAND_BACK_GRACE, signals.now)
        quick = signals.now.is_set() or not session.reachable
    session.abandon.set()  # no retry waits from here on
    await executions.close()
    if session.token:
        with contextlib.suppress(httpx.HTTPError, SessionLost, Abandoned):
            await session.post(f"/workers/{name}/shutdown", None, timeout=QUICK_GOODBYE if quick else 5.0)
