"""What every scenario shares: figures and their statistics, machine facts, the cluster."""

from __future__ import annotations

import compileall
import contextlib
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import textwrap
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from flux.local import LocalCluster

REPO = Path(__file__).resolve().parent.parent


# --- figures ----------------------------------------------------------------------------


def p95(values: list[float]) -> float:
    """The 95th percentile (statistics.quantiles, inclusive method: never beyond the max)."""
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=20, method="inclusive")[18]


def p99(values: list[float]) -> float:
    """The 99th percentile, same method as :func:`p95`."""
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[98]


@dataclass
class Figure:
    name: str
    median: float
    p95: float | None
    unit: str
    n: int
    aim: str | None = None
    #: True/False when the aim is a checkable bound on the median/p95; None when there is no aim.
    met: bool | None = None
    note: str | None = None
    samples: list[float] | None = field(default=None, repr=False)
    #: Only figures that ask for it (``Figure.of(..., with_p99=True)``) carry a p99; the others print as before.
    p99: float | None = None

    @classmethod
    def of(
        cls,
        name: str,
        values: Iterable[float],
        unit: str,
        *,
        aim: str | None = None,
        check: Callable[[float, float], bool] | None = None,
        note: str | None = None,
        keep_samples: bool = False,
        with_p99: bool = False,
    ) -> "Figure":
        values = list(values)
        if not values:
            return cls(name, float("nan"), None, unit, 0, aim, None, (note + "; " if note else "") + "no samples")
        median, high = statistics.median(values), p95(values)
        met = check(median, high) if check else None
        return cls(
            name,
            median,
            high,
            unit,
            len(values),
            aim,
            met,
            note,
            values if keep_samples else None,
            p99(values) if with_p99 else None,
        )

    def line(self) -> str:
        high = "-" if self.p95 is None else _num(self.p95)
        verdict = "" if self.met is None else (": met" if self.met else ": MISSED")
        aim = f"  (aim {self.aim}{verdict})" if self.aim else ""
        tail = "" if self.p99 is None else f" p99={_num(self.p99)}"
        return f"{self.name:<48} {_num(self.median):>10} {high:>10}  {self.unit:<12} n={self.n}{tail}{aim}"

    def record(self) -> dict[str, Any]:
        data = asdict(self)
        if data["samples"] is None:
            del data["samples"]
        if data["p99"] is None:
            del data["p99"]
        return data


def print_figures(figures: list[Figure], json_path: Path | None = None, width: int = 44) -> None:
    """The figures as a table on stdout, and as JSON records in ``json_path`` if given."""
    print(f"{'name':<{width}} {'median':>10} {'p95':>10}  unit")
    for figure in figures:
        print(figure.line())
    if json_path:
        json_path.write_text(json.dumps([figure.record() for figure in figures], indent=2))


def _num(value: float) -> str:
    if value != value:  # nan
        return "nan"
    if abs(value) >= 1000:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    if abs(value) >= 0.1:
        return f"{value:.2f}"
    return f"{value:.4f}"


class Skipped(Exception):
    """A scenario that cannot run here; the message says why (printed, recorded)."""


# --- machine facts ----------------------------------------------------------------------


def _meminfo_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def git(*args: str) -> str | None:
    try:
        return subprocess.run(
            ["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10, check=True
        ).stdout.rstrip()
    except (OSError, subprocess.SubprocessError):
        return None


def machine_facts() -> dict[str, Any]:
    return {
        "cores": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "memory_bytes": _meminfo_bytes(),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "hostname": platform.node(),
        "load_average_at_start": os.getloadavg() if hasattr(os, "getloadavg") else None,
    }


def commit_facts() -> dict[str, Any]:
    """HEAD, and which tracked files differ from it (the tree may be edited while we run)."""
    status = git("status", "--porcelain", "--untracked-files=no")
    modified = [line[3:] for line in status.splitlines() if line.strip()] if status else []
    return {
        "commit": git("rev-parse", "--short", "HEAD"),
        "dirty": bool(modified) if status is not None else None,
        "modified_tracked_files": modified,
    }


# --- the cluster ------------------------------------------------------------------------


class BenchCluster(LocalCluster):
    """LocalCluster, optionally with every process under ``bench.sampler`` (``--profile DIR``)."""

    def __init__(
        self,
        home: Path,
        database_url: str | None = None,
        profile_dir: Path | None = None,
        tag: str = "",
        stamps: Path | None = None,
    ):
        super().__init__(home, database_url=database_url)
        self.profile_dir = profile_dir
        self.tag = tag
        #: Every process appends its stamps here (``bench.stamps``: B1's latency budget).
        self.stamps = stamps

    def _popen(self, args: list[str], log_name: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        if self.stamps is not None and args[1:3] == ["-m", "flux.cli"]:
            args = [args[0], "-m", "bench.stamps", str(self.stamps), *args[1:]]
            os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        elif self.profile_dir is not None and args[1:3] == ["-m", "flux.cli"]:
            self.profile_dir.mkdir(parents=True, exist_ok=True)
            out = self.profile_dir / f"{self.tag}{log_name}.txt"
            args = [args[0], "-m", "bench.sampler", str(out), *args[1:]]
            os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        return super()._popen(args, log_name, env)

    def start_server(self, timeout: float = 60.0) -> None:
        """LocalCluster.start_server, but a server that exits fails at once (not after ``timeout``)."""
        import httpx

        args = ["start", "server", "--port", str(self.port), "--eviction-grace-period", str(self.eviction_grace_period)]
        if self.database_url:
            args += ["--database-url", self.database_url]
        self.server = self._popen([sys.executable, "-m", "flux.cli", *args], "server")

        def up() -> bool:
            if self.server.poll() is not None:
                raise RuntimeError(f"server exited with status {self.server.returncode}")
            return httpx.get(f"{self.server_url}/health", timeout=1).status_code == 200

        self._wait_until(up, timeout, "server")

    def stop_worker(self, name: str) -> None:
        """A graceful stop (SIGTERM): the worker hands its work back and leaves."""
        if name in self.workers:
            self.kill_worker(name, signal.SIGTERM)

    def server_log_tail(self, chars: int = 1500) -> str:
        return self.log("server")[-chars:]


def precompile() -> None:
    """Write flux's .pyc files, as installing the package does (pip compiles at
    install). Where PYTHONDONTWRITEBYTECODE is set, as on these machines, a process
    started from this checkout would otherwise compile every module it imports, and
    start-up figures would measure that (~0.2 s of CPU per worker)."""
    compileall.compile_dir(REPO / "flux", quiet=1)


def write_workflow(home: Path, source: str, name: str) -> Path:
    path = home / f"{name}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source))
    return path


def now() -> float:
    return time.perf_counter()


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM runs our finally blocks (stopping every process a benchmark started), like Ctrl-C."""

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) a process and its living descendants have taken (psutil)."""
    import psutil

    total = 0.0
    root = psutil.Process(pid)
    for process in (root, *root.children(recursive=True)):
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total
