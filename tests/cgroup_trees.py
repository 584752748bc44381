"""Fixture cgroup filesystems (v2 and v1) written under a test's tmp_path, for the
cgroup probe's tests and the real worker that reads one through FLUX_CGROUP_ROOT."""

from __future__ import annotations

from pathlib import Path

GiB, MiB = 1024**3, 1024**2
V1_NO_LIMIT = "9223372036854771712"


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """A fake cgroup filesystem: {relative path: content}."""
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content + "\n")
    return root


def v2_tree(
    root: Path,
    cpu_max: str = "150000 100000",
    memory_max: str = str(3 * GiB),
    current: int = GiB,
    inactive_file: int = 256 * MiB,
) -> Path:
    return write_tree(
        root,
        {
            "cgroup.controllers": "cpuset cpu io memory pids",
            "cpu.max": cpu_max,
            "memory.max": memory_max,
            "memory.current": str(current),
            "memory.stat": f"anon 123\nfile 456\ninactive_file {inactive_file}\nactive_file 7",
        },
    )


def v1_tree(
    root: Path, quota: str = "50000", limit: str = str(GiB), usage: int = 512 * MiB, cpu_mount: str = "cpu,cpuacct"
) -> Path:
    return write_tree(
        root,
        {
            f"{cpu_mount}/cpu.cfs_quota_us": quota,
            f"{cpu_mount}/cpu.cfs_period_us": "100000",
            "memory/memory.limit_in_bytes": limit,
            "memory/memory.usage_in_bytes": str(usage),
            "memory/memory.stat": f"cache 1\ninactive_file {50 * MiB}\ntotal_inactive_file {100 * MiB}",
        },
    )
