"""A small sampling profiler for the server and worker processes (py-spy is not installed).

``python -m bench.sampler OUT.txt -m flux.cli start server ...`` runs the module like
``python -m`` would, while a daemon thread samples every thread's stack
(``sys._current_frames``) every few milliseconds. At exit (SIGTERM included: it is
turned into a normal interpreter exit) it writes, per thread and overall, the
functions most often on top of the stack (self time) and on the stack at all
(inclusive time). Unlike ``cProfile`` it sees the database thread pool, not just the
main thread. Samples are taken when the sampler gets the GIL, so pure-Python hot
spots are caught well and time spent waiting (I/O, locks) shows as the waiting frame.
"""

from __future__ import annotations

import atexit
import collections
import os
import re
import runpy
import signal
import sys
import threading
import time

INTERVAL = 0.002
#: Leaf frames that mean "this thread is waiting, not working".
IDLE = {"select", "poll", "wait", "_worker", "acquire", "get", "sleep", "readline", "_wait_for_tstate_lock"}


def _label(code) -> str:
    filename = code.co_filename
    for marker in ("site-packages/", "lib/python3"):
        if marker in filename:
            filename = filename.split(marker, 1)[1]
            break
    else:
        filename = os.path.relpath(filename) if filename.startswith(os.getcwd()) else filename
    return f"{filename}:{code.co_name}"


class Sampler:
    def __init__(self, out: str):
        self.out = out
        self.self_counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        self.incl_counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        self.samples: collections.Counter = collections.Counter()
        self.busy: collections.Counter = collections.Counter()
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="bench-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        me = threading.get_ident()
        while not self._stop.is_set():
            names = {t.ident: t.name for t in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
                if ident == me:
                    continue
                thread = names.get(ident, str(ident))
                thread = re.sub(r"[-_]\d+$", "", thread)  # pool threads: one row per pool
                self.samples[thread] += 1
                if frame.f_code.co_name in IDLE:
                    continue
                self.busy[thread] += 1
                self.self_counts[thread][_label(frame.f_code)] += 1
                seen: set[str] = set()
                while frame is not None:
                    label = _label(frame.f_code)
                    if label not in seen:
                        seen.add(label)
                        self.incl_counts[thread][label] += 1
                    frame = frame.f_back
            time.sleep(INTERVAL)

    def write(self) -> None:
        self._stop.set()
        lines = [f"sampled {time.monotonic() - self.started:.1f}s every ~{INTERVAL * 1000:.0f} ms; pid {os.getpid()}",
                 "per thread: share of samples where it was busy (leaf not a wait), then where the busy",
                 "samples were: self = leaf frame, inclusive = anywhere on the stack (percent of busy samples)", ""]
        by_busy = sorted(self.samples, key=lambda t: -self.busy[t])
        for thread in by_busy:
            total, busy = self.samples[thread], self.busy[thread]
            lines.append(f"== thread {thread}: {total} samples, busy {busy} ({100 * busy / total:.1f}%)")
            if not busy:
                lines.append("")
                continue
            lines.append("   self (top of stack):")
            for label, count in self.self_counts[thread].most_common(15):
                lines.append(f"   {100 * count / busy:5.1f}%  {label}")
            lines.append("   inclusive (anywhere on the stack):")
            for label, count in self.incl_counts[thread].most_common(45):
                lines.append(f"   {100 * count / busy:5.1f}%  {label}")
            lines.append("")
        with open(self.out, "w") as handle:
            handle.write("\n".join(lines) + "\n")


def main() -> None:
    if len(sys.argv) < 4 or sys.argv[2] != "-m":
        sys.exit("usage: python -m bench.sampler OUT.txt -m MODULE [ARGS...]")
    out, module = sys.argv[1], sys.argv[3]
    sampler = Sampler(out)
    atexit.register(sampler.write)
    # uvicorn installs its own SIGTERM handler (graceful stop, then a normal exit);
    # for anything else, make SIGTERM a normal exit so atexit runs.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sys.argv = [module, *sys.argv[4:]]
    sampler.start()
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
