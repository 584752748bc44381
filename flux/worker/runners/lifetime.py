"""A child, and the template that forks children, die with the worker that made them."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

#: ``prctl`` option: the signal this process gets when its parent dies.
PR_SET_PDEATHSIG = 1


def die_with_parent(expected: int | None) -> None:
    """Ask the kernel to SIGKILL this process when the worker that started it dies
    (Linux ``PR_SET_PDEATHSIG``), so a SIGKILLed worker leaves no child running an
    attempt that will be resumed elsewhere. A parent (``expected``) that died before
    the request was made is noticed through the parent pid."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if expected is not None and os.getppid() != expected:
        os._exit(1)
