from __future__ import annotations

import pytest
import torch

from d2l_async.devices import describe_machine, num_gpus, try_all_gpus, try_gpu


def test_try_all_gpus_is_never_empty():
    devices = try_all_gpus()
    assert devices, "the book's v1.0 returned [] here"
    assert len(devices) == max(1, num_gpus())
    if num_gpus() == 0:
        assert devices == [torch.device("cpu")]


def test_try_gpu_falls_back_to_cpu():
    assert try_gpu(num_gpus()) == torch.device("cpu")
    if num_gpus():
        assert try_gpu(0) == torch.device("cuda:0")


@pytest.mark.parametrize("bad", [-1, 1.5, "0", True])
def test_try_gpu_rejects_bad_index(bad):
    with pytest.raises(ValueError):
        try_gpu(bad)


def test_describe_machine_names_the_hardware():
    text = describe_machine()
    assert "\n" not in text
    if num_gpus():
        assert torch.cuda.get_device_name(0) in text
    else:
        assert text.startswith("CPU only")


# ---------------------------------------------------------------- machine(): fake /proc and /sys trees
from pathlib import Path  # noqa: E402

from d2l_async._machine import (Machine, busy_between, cgroup_dirs, cpu_quota,  # noqa: E402
                                mem_available, parse_proc_stat, read_machine)
from d2l_async.devices import machine  # noqa: E402

GiB = 1 << 30
MEMINFO = "MemTotal:       16777216 kB\nMemFree:  1000 kB\nMemAvailable:   8388608 kB\n"  # 16 GiB, 8 GiB


def tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def v2(root: Path, group: str = "/", mount_root: str = "/", **files: str) -> Path:
    base = "sys/fs/cgroup" + ("" if group == "/" else group)
    return tree(root, {
        "proc/self/cgroup": f"0::{group}\n",
        "proc/self/mountinfo": f"30 25 0:26 {mount_root} /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n",
        "proc/meminfo": MEMINFO,
        **{f"{base}/{k.replace('_', '.', 1)}": v for k, v in files.items()},
    })


V1_MOUNTS = ("33 25 0:28 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
             "34 25 0:29 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n")


def test_v2_quota_half_a_cpu(tmp_path):
    v2(tmp_path, cpu_max="50000 100000\n")
    assert cpu_quota(tmp_path) == 0.5


def test_v2_no_quota(tmp_path):
    v2(tmp_path, cpu_max="max 100000\n")
    assert cpu_quota(tmp_path) is None


def test_v2_nested_group_takes_tightest_ancestor(tmp_path):
    # Binder-like: the pod's parent caps at 1 CPU, our own group says 2.
    v2(tmp_path, group="/kubepods/pod1/c1", cpu_max="max 100000\n")
    tree(tmp_path, {"sys/fs/cgroup/kubepods/pod1/c1/cpu.max": "200000 100000\n",
                    "sys/fs/cgroup/kubepods/pod1/cpu.max": "100000 100000\n"})
    dirs = cgroup_dirs(tmp_path, None)
    assert dirs[0] == tmp_path / "sys/fs/cgroup/kubepods/pod1/c1"
    assert dirs[-1] == tmp_path / "sys/fs/cgroup"
    assert cpu_quota(tmp_path) == 1.0


def test_v2_cgroup_namespace_sees_itself_at_the_mount(tmp_path):
    # /proc/self/cgroup names a host path the mount does not show: the mount's own group is ours.
    v2(tmp_path, group="/", cpu_max="150000 100000\n")
    tree(tmp_path, {"proc/self/cgroup": "0::/docker/abc\n"})
    assert cpu_quota(tmp_path) == 1.5


def test_v1_quota_and_memory(tmp_path):
    tree(tmp_path, {
        "proc/self/cgroup": "4:memory:/\n3:cpu,cpuacct:/\n0::/\n",
        "proc/self/mountinfo": V1_MOUNTS,
        "proc/meminfo": MEMINFO,
        "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "200000\n",
        "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
        "sys/fs/cgroup/memory/memory.limit_in_bytes": str(2 * GiB),
        "sys/fs/cgroup/memory/memory.usage_in_bytes": str(GiB // 2 + 1000),
        "sys/fs/cgroup/memory/memory.stat": "cache 5\ninactive_file 7\ntotal_inactive_file 1000\n",
    })
    assert cpu_quota(tmp_path) == 2.0
    assert mem_available(tmp_path) == (2 * GiB - GiB // 2, 2 * GiB)


def test_v1_unlimited_quota_and_memory(tmp_path):
    tree(tmp_path, {
        "proc/self/cgroup": "4:memory:/user/x\n3:cpu,cpuacct:/\n",
        "proc/self/mountinfo": V1_MOUNTS,
        "proc/meminfo": MEMINFO,
        "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "-1\n",
        "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
        "sys/fs/cgroup/memory/user/x/memory.limit_in_bytes": "9223372036854771712\n",
        "sys/fs/cgroup/memory/user/x/memory.usage_in_bytes": "1000\n",
    })
    assert cgroup_dirs(tmp_path, "memory")[0] == tmp_path / "sys/fs/cgroup/memory/user/x"
    assert cpu_quota(tmp_path) is None
    assert mem_available(tmp_path) == (8 * GiB, None)


def test_v2_memory_limit_minus_usage_less_page_cache(tmp_path):
    v2(tmp_path, memory_max=str(GiB), memory_current=str(GiB // 2),
       memory_stat=f"anon 5\ninactive_file {GiB // 4}\n")
    assert mem_available(tmp_path) == (GiB - GiB // 4, GiB)


def test_memory_limit_above_ram_is_no_limit_and_never_more_than_host(tmp_path):
    v2(tmp_path, memory_max=str(64 * GiB), memory_current="0")
    assert mem_available(tmp_path) == (8 * GiB, None)
    v2(tmp_path, memory_max=str(12 * GiB), memory_current=str(GiB))
    assert mem_available(tmp_path) == (8 * GiB, 12 * GiB)  # 11 GiB left in the group, 8 on the host


def test_no_cgroup_files_at_all(tmp_path):
    tree(tmp_path, {"proc/meminfo": MEMINFO})
    assert cpu_quota(tmp_path) is None
    assert mem_available(tmp_path) == (8 * GiB, None)


def test_garbage_files_are_ignored(tmp_path):
    v2(tmp_path, cpu_max="lots\n", memory_max="???")
    tree(tmp_path, {"proc/self/mountinfo": "garbage\n" + (tmp_path / "proc/self/mountinfo").read_text()})
    assert cpu_quota(tmp_path) is None
    assert mem_available(tmp_path) == (8 * GiB, None)


STAT0 = "cpu  1 2 3 4\ncpu0 100 0 0 100 0 0 0 0\ncpu1 0 0 0 200 0 0 0 0\nintr 5\n"
STAT1 = "cpu  1 2 3 4\ncpu0 190 0 10 100 0 0 0 0\ncpu1 10 0 0 290 0 0 0 0\nintr 5\n"


def test_busy_cpus_from_proc_stat():
    a, b = parse_proc_stat(STAT0), parse_proc_stat(STAT1)
    assert a == {0: (100, 200), 1: (0, 200)}
    assert busy_between(a, b, {0}) == 1.0
    assert busy_between(a, b, {0, 1}) == pytest.approx(1.1)
    assert busy_between(a, b, {5}) is None


def test_read_machine_pinned_beside_a_busy_process(tmp_path, monkeypatch):
    v2(tmp_path, cpu_max="max 100000\n", memory_max="max")
    tree(tmp_path, {"proc/stat": STAT0})
    m = read_machine(tmp_path, affinity={0}, host_cpus=2, load_avg=2.0, sample_s=0.001)
    assert (m.usable_cpus, m.affinity_cpus, m.quota_cpus, m.host_cpus) == (1.0, 1, None, 2)
    assert m.busy_cpus is None  # no tick passed: not measured, the load average stands in
    assert m.spare_cpus == 0.0  # load 2 over 2 host CPUs: one CPU's worth on ours
    # /proc/stat moves while read_machine watches it: cpu0 fully busy, cpu1 10% busy
    import d2l_async._machine as mod

    monkeypatch.setattr(mod.time, "sleep", lambda s: (tmp_path / "proc/stat").write_text(STAT1))
    m = read_machine(tmp_path, affinity={0}, host_cpus=2, load_avg=0.0, sample_s=0.1)
    assert m.busy_cpus == 1.0 and m.spare_cpus == 0.0
    tree(tmp_path, {"proc/stat": STAT0})
    m = read_machine(tmp_path, affinity={1}, host_cpus=2, load_avg=5.0, sample_s=0.1)
    assert m.busy_cpus == pytest.approx(0.1) and m.spare_cpus == pytest.approx(0.9)
    busy = Machine(1.0, 1, None, 2, 2.0, GiB, None, (), busy_cpus=1.0)
    assert busy.spare_cpus == 0.0
    assert "1 usable CPU (pinned to 1 of 2)" in busy.describe()
    assert "1.0 busy with other work" in busy.describe()


def test_quota_caps_usable_cpus_and_spare(tmp_path):
    v2(tmp_path, cpu_max="100000 100000\n")
    m = read_machine(tmp_path, affinity=set(range(64)), host_cpus=64, load_avg=30.0, sample_s=0)
    assert m.usable_cpus == 1.0 and m.quota_cpus == 1.0 and m.busy_cpus is None
    assert m.spare_cpus == 1.0  # 30 of 64 host CPUs busy leaves our one CPU of quota
    assert "cgroup quota 1" in m.describe() and "load average 30.0" in m.describe()


def test_describe_is_one_line_with_limit_and_gpus():
    m = Machine(0.5, 4, 0.5, 8, 0.2, 3 * GiB, 4 * GiB, ("NVIDIA H200",), busy_cpus=None)
    text = m.describe()
    assert "\n" not in text
    assert text.startswith("0.50 usable CPUs")
    assert "container limit 4.0 GiB" in text and "GPU: NVIDIA H200" in text


@pytest.mark.parametrize("gpus", [("NVIDIA H200",), ("Tesla T4", "Tesla T4"), ()])
def test_the_machine_line_names_each_gpu_once(gpus):
    m = Machine(16.0, 16, None, 16, 0.5, 100 * GiB, None, gpus, busy_cpus=0.2)
    text = describe_machine(m)
    if gpus:
        assert text.startswith(f"{len(gpus)} GPU") and text.count(gpus[0]) == len(gpus), text
    else:
        assert text.startswith("CPU only") and "GPU" not in text, text
    assert "16 usable CPUs" in text and "\n" not in text
    assert "GPU: NVIDIA H200" in Machine(16.0, 16, None, 16, 0.5, 100 * GiB, None, ("NVIDIA H200",)).describe()


def test_read_machine_rejects_negative_window(tmp_path):
    with pytest.raises(ValueError, match="sample_s"):
        read_machine(tmp_path, sample_s=-1)


def test_machine_here_matches_affinity():
    import os

    m = machine(sample_s=0.01)
    assert m.affinity_cpus == len(os.sched_getaffinity(0))
    assert 0 < m.usable_cpus <= m.affinity_cpus
    assert 0 <= m.spare_cpus <= m.usable_cpus
    assert m.mem_available_bytes > 0
    assert len(m.gpus) == num_gpus()
