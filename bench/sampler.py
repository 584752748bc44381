"""A small sampling profiler for the server and worker processes (py-spy is not installed).

``python -m bench.sampler OUT.txt -m flux.cli start server ...`` runs the module like
``python -m`` would, while a daemon thread samples every thread's stack
(``sys._current_frames``) every few milliseconds. At exit (SIGTERM included: it is
turned into a normal interpreter exit) it writes, per thread and overall, the
functions most often on top of the stack (self time) and on the stack at all
(inclusive time). Unlike ``cProfile`` it sees the database thread pool, not just the
main thread. Samples are taken when the sampler gets the GIL, so pure-Python hot
spots are caught well and time spent waiting (I/O, locks) shows as the waiting frame.

It also probes the process's event loop (found once it runs): every 10 ms a callback
is handed to it from a thread, and the delay until it runs is what a request arriving
then would wait before the loop looked at it. The report gives that delay's
distribution, the stalls past ``STALL`` (when, how long: a periodic culprit shows as
a period), and what every thread was doing during them: the samples taken while a
probe was overdue are counted apart.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import gc
import os
import re
import runpy
import signal
import sys
import threading
import time

INTERVAL = 0.002
#: The loop probe's period, and the delay past which a probe counts as a stall.
PROBE, STALL = 0.01, 0.05
#: Seconds between counts of what the collector's oldest generation holds (each walks it once).
OLD_COUNT = 30.0
#: Leaf frames that mean "this thread is waiting, not working".
IDLE = {"select", "poll", "wait", "_worker", "acquire", "get", "sleep", "readline", "_wait_for_tstate_lock"}
#: Leaf frames that mean the same by where they are: an event loop in C (uvloop) waiting for events.
IDLE_AT = {"asyncio/runners.py:run"}


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
        self._prober = threading.Thread(target=self._probe, name="bench-sampler-probe", daemon=True)
        #: The loop probe: delays (s), stalls as (start since the sampler began, seconds),
        #: when the pending one was sent.
        self.delays: list[float] = []
        self.stalls: list[tuple[float, float]] = []
        self._pending_since: float | None = None
        self.stall_self: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        self.stall_incl: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        self.stall_samples = 0
        #: Each collection of the cyclic garbage collector, by generation: (start since the sampler began, seconds).
        self.collections: dict[int, list[tuple[float, float]]] = collections.defaultdict(list)
        self._collecting: float | None = None
        self._collecting_cpu = 0.0
        #: What the collector's oldest generation held when last counted (by type), and when.
        self.old_types: collections.Counter = collections.Counter()
        self.old_counted_at = 0.0

    def start(self) -> None:
        gc.callbacks.append(self._collected)
        self._thread.start()
        self._prober.start()

    def _collected(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._collecting, self._collecting_cpu = time.perf_counter(), time.thread_time()
        elif self._collecting is not None:
            self.collections[info["generation"]].append(
                (
                    time.monotonic() - self.started,
                    time.perf_counter() - self._collecting,
                    time.thread_time() - self._collecting_cpu,
                )
            )
            self._collecting = None

    def _find_loop(self) -> asyncio.AbstractEventLoop | None:
        """The running loop, from the locals of the main thread's frames (``asyncio.run``'s
        runner holds it; ``gc.get_objects`` misses it once the server has frozen its heap)."""
        frame = sys._current_frames().get(threading.main_thread().ident)
        while frame is not None:
            for value in list(frame.f_locals.values()):
                for candidate in (value, getattr(value, "_loop", None)):
                    if isinstance(candidate, asyncio.AbstractEventLoop) and candidate.is_running():
                        return candidate
            frame = frame.f_back
        return None

    def _probe(self) -> None:
        """Probe whichever loop runs; start-up may run short-lived ones before the server's."""
        while not self._stop.wait(0.5):
            loop = self._find_loop()
            while loop is not None and loop.is_running() and not self._stop.is_set():
                if not self._probe_once(loop):
                    break
                if time.monotonic() - self.old_counted_at > OLD_COUNT:
                    self.old_types = collections.Counter(type(o).__qualname__ for o in gc.get_objects(2))
                    self.old_counted_at = time.monotonic()

    def _probe_once(self, loop: asyncio.AbstractEventLoop) -> bool:
        done, sent = threading.Event(), time.monotonic()

        def ran() -> None:
            delay = time.monotonic() - sent
            self.delays.append(delay)
            if delay > STALL:
                self.stalls.append((sent - self.started, delay))
            done.set()

        self._pending_since = sent
        try:
            loop.call_soon_threadsafe(ran)
        except RuntimeError:  # that loop closed
            return False
        while not done.wait(1.0):
            if not loop.is_running():
                self._pending_since = None
                return False
        self._pending_since = None
        time.sleep(PROBE)
        return True

    def _loop(self) -> None:
        me = {threading.get_ident(), self._prober.ident}
        while not self._stop.is_set():
            pending = self._pending_since
            stalled = pending is not None and time.monotonic() - pending > STALL
            self.stall_samples += stalled
            names = {t.ident: t.name for t in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
                if ident in me:
                    continue
                thread = names.get(ident, str(ident))
                thread = re.sub(r"[-_]\d+$", "", thread)  # pool threads: one row per pool
                self.samples[thread] += 1
                if frame.f_code.co_name in IDLE or _label(frame.f_code).endswith(tuple(IDLE_AT)):
                    continue
                self.busy[thread] += 1
                self.self_counts[thread][_label(frame.f_code)] += 1
                if stalled:
                    self.stall_self[thread][_label(frame.f_code)] += 1
                seen: set[str] = set()
                while frame is not None:
                    label = _label(frame.f_code)
                    if label not in seen:
                        seen.add(label)
                        self.incl_counts[thread][label] += 1
                        if stalled:
                            self.stall_incl[thread][label] += 1
                    frame = frame.f_back
            time.sleep(INTERVAL)

    def write(self) -> None:
        self._stop.set()
        lines = [
            f"sampled {time.monotonic() - self.started:.1f}s every ~{INTERVAL * 1000:.0f} ms; pid {os.getpid()}",
            "per thread: share of samples where it was busy (leaf not a wait), then where the busy",
            "samples were: self = leaf frame, inclusive = anywhere on the stack (percent of busy samples)",
            "",
        ]
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
        lines += self._loop_report()
        for generation, runs in sorted(self.collections.items()):
            spent = sorted(d for _, d, _ in runs)
            lines.append(
                f"== gc generation {generation}: {len(runs)} collections, {1000 * sum(spent):.0f} ms in all "
                f"({1000 * sum(c for _, _, c in runs):.0f} ms CPU), longest {1000 * spent[-1]:.1f} ms"
                + (
                    f"; at (s: ms) {', '.join(f'{t:.1f}: {1000 * d:.0f}' for t, d, _ in runs[-40:])}"
                    if generation == 2
                    else ""
                )
            )
        if self.old_types:
            lines.append(
                f"== gc generation 2 held {sum(self.old_types.values())} objects"
                f" at {self.old_counted_at - self.started:.0f} s "
                f"(frozen ones not counted); by type: "
                + ", ".join(f"{t} {n}" for t, n in self.old_types.most_common(25))
            )
        with open(self.out, "w") as handle:
            handle.write("\n".join(lines) + "\n")

    def _loop_report(self) -> list[str]:
        if not self.delays:
            return ["== event loop: not found (no probe ran)"]
        delays = sorted(self.delays)
        at = lambda q: 1000 * delays[min(len(delays) - 1, int(q * len(delays)))]  # noqa: E731
        lines = [
            f"== event loop: {len(delays)} probes, delay until a callback ran p50 {at(0.5):.1f} ms, "
            f"p99 {at(0.99):.1f} ms, max {1000 * delays[-1]:.1f} ms; {len(self.stalls)} stalls over "
            f"{STALL * 1000:.0f} ms, {sum(d for _, d in self.stalls):.1f} s in all",
            "   longest stalls (start s after the sampler began: duration ms):",
            "   " + ", ".join(f"{t:.1f}: {d * 1000:.0f}" for t, d in sorted(self.stalls, key=lambda s: -s[1])[:30]),
            f"   every stall's start, in order: {' '.join(f'{t:.1f}' for t, _ in self.stalls[:200])}",
            f"   during stalls ({self.stall_samples} sampling passes), busy frames by thread:",
        ]
        for thread, counts in sorted(self.stall_incl.items(), key=lambda kv: -sum(self.stall_self[kv[0]].values())):
            busy = sum(self.stall_self[thread].values())
            lines.append(f"   -- {thread}: busy in {busy} passes; self:")
            lines += [f"      {count:6d}  {label}" for label, count in self.stall_self[thread].most_common(12)]
            lines.append("      inclusive:")
            lines += [f"      {count:6d}  {label}" for label, count in counts.most_common(30)]
        return lines


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
