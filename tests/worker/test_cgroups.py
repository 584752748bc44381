"""Container-aware probing (flux.worker.cgroups): fixture cgroup trees of both versions,
limited and unlimited, and this machine's own cgroup filesystem where it has one."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest
from cgroup_trees import V1_NO_LIMIT, GiB, MiB, v1_tree, v2_tree, write_tree

from flux.worker import cgroups, probe


@pytest.fixture
def proc_cgroup(tmp_path: Path):
    """A /proc/self/cgroup of a process in the root of every hierarchy (a container's view)."""

    def write(text: str = "0::/\n") -> Path:
        path = tmp_path / "proc-self-cgroup"
        path.write_text(text)
        return path

    return write


def test_v2_limits_are_the_quota_the_memory_max_and_the_working_set(tmp_path, proc_cgroup):
    limits = cgroups.read_limits(v2_tree(tmp_path / "cg"), proc_cgroup())
    assert limits == cgroups.CgroupLimits(version=2, cpus=1.5, memory_limit=3 * GiB, memory_used=GiB - 256 * MiB)


def test_v2_max_means_unlimited(tmp_path, proc_cgroup):
    limits = cgroups.read_limits(v2_tree(tmp_path / "cg", cpu_max="max 100000", memory_max="max"), proc_cgroup())
    assert (limits.version, limits.cpus, limits.memory_limit) == (2, None, None)
    assert limits.memory_used == GiB - 256 * MiB


def test_v2_an_ancestors_limit_binds_the_group_below_it(tmp_path, proc_cgroup):
    """A pod's limit sits on the pod's group; the container's own group may say max."""
    root = v2_tree(tmp_path / "cg", cpu_max="max 100000", memory_max="max")
    write_tree(
        root,
        {
            "kubepods/pod1/cpu.max": "200000 100000",
            "kubepods/pod1/memory.max": str(2 * GiB),
            "kubepods/pod1/ctr/cpu.max": "400000 100000",
            "kubepods/pod1/ctr/memory.max": "max",
            "kubepods/pod1/ctr/memory.current": str(GiB),
            "kubepods/pod1/ctr/memory.stat": "inactive_file 0",
        },
    )
    limits = cgroups.read_limits(root, proc_cgroup("0::/kubepods/pod1/ctr\n"))
    assert (limits.cpus, limits.memory_limit, limits.memory_used) == (2.0, 2 * GiB, GiB)


def test_a_group_not_visible_under_the_root_means_the_root_itself(tmp_path, proc_cgroup):
    """Without a cgroup namespace, /proc/self/cgroup names the host's path; the
    container's mount shows its own group as the root."""
    limits = cgroups.read_limits(v2_tree(tmp_path / "cg"), proc_cgroup("0::/system.slice/docker-abc.scope\n"))
    assert (limits.cpus, limits.memory_limit) == (1.5, 3 * GiB)


@pytest.mark.parametrize("cpu_mount", ["cpu,cpuacct", "cpu"])
def test_v1_limits_are_cfs_quota_and_limit_in_bytes(tmp_path, proc_cgroup, cpu_mount):
    text = "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n"
    limits = cgroups.read_limits(v1_tree(tmp_path / "cg", cpu_mount=cpu_mount), proc_cgroup(text))
    assert limits == cgroups.CgroupLimits(version=1, cpus=0.5, memory_limit=GiB, memory_used=412 * MiB)


def test_v1_minus_one_and_the_huge_number_mean_unlimited(tmp_path, proc_cgroup):
    limits = cgroups.read_limits(v1_tree(tmp_path / "cg", quota="-1", limit=V1_NO_LIMIT), proc_cgroup())
    assert (limits.version, limits.cpus, limits.memory_limit) == (1, None, None)


def test_no_cgroup_filesystem_means_no_limits(tmp_path, proc_cgroup):
    (tmp_path / "empty").mkdir()
    assert cgroups.read_limits(tmp_path / "empty", proc_cgroup()) is None
    assert cgroups.read_limits(tmp_path / "missing", proc_cgroup()) is None


def test_unreadable_or_garbled_files_are_no_limit_not_an_error(tmp_path, proc_cgroup):
    root = write_tree(tmp_path / "cg", {"cgroup.controllers": "", "cpu.max": "lots 100000", "memory.max": "much"})
    assert cgroups.read_limits(root, proc_cgroup()) == cgroups.CgroupLimits(version=2)


def test_membership_reads_both_hierarchies():
    text = "12:memory:/a\n4:cpu,cpuacct:/b\n1:name=systemd:/c\n0::/d\n"
    assert cgroups.membership(text) == {"memory": "/a", "cpu": "/b", "cpuacct": "/b", "name=systemd": "/c", "": "/d"}


def test_the_root_setting_is_the_environment_variable(monkeypatch):
    monkeypatch.delenv("FLUX_CGROUP_ROOT", raising=False)
    assert cgroups.default_root() == "/sys/fs/cgroup"
    monkeypatch.setenv("FLUX_CGROUP_ROOT", "/elsewhere")
    assert cgroups.default_root() == "/elsewhere"


def test_probe_advertises_the_smaller_of_host_and_cgroup(tmp_path):
    """This process's own group (from the real /proc/self/cgroup) is not in the fixture
    tree, so the tree's root stands for it, as in a container."""
    host = psutil.virtual_memory()
    root = v2_tree(tmp_path / "cg", cpu_max="50000 100000", memory_max=str(3 * GiB), current=GiB, inactive_file=0)
    sample = probe.sample_resources(str(tmp_path), "none", cgroup_root=str(root))
    assert sample["cpu_total"] == 0.5 and sample["cpu_available"] == 0.5
    assert sample["memory_total"] == min(host.total, 3 * GiB)
    assert 0 < sample["memory_available"] <= min(2 * GiB, sample["memory_total"])
    assert sample["disk_total"] == psutil.disk_usage(str(tmp_path)).total


def test_probe_keeps_the_host_figures_when_the_cgroup_allows_more(tmp_path):
    unlimited = probe.sample_resources(".", "none", cgroup_root=str(v2_tree(tmp_path / "max", "max 100000", "max")))
    roomy = probe.sample_resources(
        ".", "none", cgroup_root=str(v1_tree(tmp_path / "v1", quota="6400000", limit=str(2**50)))
    )
    host_cpus = float(psutil.cpu_count(logical=True))
    for sample in (unlimited, roomy):
        assert sample["cpu_total"] == host_cpus and sample["memory_total"] == psutil.virtual_memory().total


def test_this_machines_cgroup_filesystem(monkeypatch):
    """The real /sys/fs/cgroup: its version detected, and the probe never above the host."""
    root = Path(cgroups.DEFAULT_ROOT)
    if not root.is_dir() or not any(root.iterdir()):
        pytest.skip("no cgroup filesystem at /sys/fs/cgroup on this machine")
    monkeypatch.delenv("FLUX_CGROUP_ROOT", raising=False)
    limits = cgroups.read_limits()
    assert limits is not None
    assert limits.version == (2 if (root / "cgroup.controllers").is_file() else 1)
    assert limits.memory_used is None or limits.memory_used >= 0
    sample = probe.sample_resources(".", "none")
    host_memory, host_cpus = psutil.virtual_memory().total, float(psutil.cpu_count(logical=True))
    assert sample["memory_total"] == min(host_memory, limits.memory_limit or host_memory)
    assert sample["cpu_total"] == min(host_cpus, limits.cpus or host_cpus)
    assert 0 < sample["memory_available"] <= sample["memory_total"]


def test_a_reader_finds_its_groups_once_and_reads_limits_that_change_each_time(tmp_path, proc_cgroup):
    """A heartbeat's reader: a pod resized in place (a new cpu.max, memory.max) is seen at the next read."""
    root = v2_tree(tmp_path / "cg")
    reader = cgroups.CgroupReader.find(root, proc_cgroup())
    assert reader.read().cpus == 1.5
    (root / "cpu.max").write_text("300000 100000\n")
    (root / "memory.max").write_text(f"{4 * GiB}\n")
    assert (reader.read().cpus, reader.read().memory_limit) == (3.0, 4 * GiB)
    assert cgroups.CgroupReader.find(tmp_path / "nothing-here", proc_cgroup()) is None
