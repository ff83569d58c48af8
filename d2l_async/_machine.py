"""What this process may really use: CPUs, memory and load, told truly.

``os.cpu_count()`` counts the host's logical CPUs.  A process gets fewer when

* its **CPU affinity** is narrower (``taskset -c 0``, a Slurm job): ``os.sched_getaffinity(0)``;
* its **cgroup CPU quota** caps it (Docker ``--cpus``, Kubernetes/Binder pods): cgroup v2
  ``cpu.max`` (``"<quota> <period>"`` or ``"max <period>"``), cgroup v1 ``cpu.cfs_quota_us`` /
  ``cpu.cfs_period_us`` (quota ``-1`` = none).  Quota/period CPUs of time per wall second.

So ``usable_cpus = min(affinity, quota)``.  Other programs may already be busy on those CPUs:
``busy_cpus`` is measured from ``/proc/stat`` over a short window (ticks not idle / all ticks, summed
over our CPUs), and ``spare_cpus`` is what is left.  The 1-minute load average is the host's, so it
is reported but used only when ``/proc/stat`` cannot be read.

Memory works the same way: the container's limit (v2 ``memory.max``, v1
``memory.limit_in_bytes``; v1 writes "no limit" as a huge number) minus what the container uses
(``memory.current`` / ``memory.usage_in_bytes`` less the reclaimable ``inactive_file`` page cache, as
``docker stats`` counts it), and never more than the host's ``MemAvailable``.

Where the cgroup files are: ``/proc/self/cgroup`` names this process's cgroup per hierarchy
(``0::/path`` for v2, ``N:cpu,cpuacct:/path`` for v1) and ``/proc/self/mountinfo`` says where each
hierarchy is mounted and which cgroup its mount shows (a container without a cgroup namespace sees
its own cgroup at the mount point).  A limit set on any ancestor binds too, so each limit is the
smallest found walking from our cgroup up to the mount point.

Every reader takes a ``root`` directory, so tests build fake ``/proc`` and ``/sys`` trees.
Standard library only: the GPU names come from the caller (:func:`d2l_async.devices.machine`).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Machine", "read_machine", "cpu_quota", "memory_limit_and_usage", "mem_available",
           "cgroup_dirs", "parse_proc_stat", "busy_between", "format_bytes"]

#: cgroup v1 writes "no limit" as PAGE_COUNTER_MAX pages (9223372036854771712 with 4 KiB pages).
_V1_NO_LIMIT = 1 << 62
_GiB = 1 << 30


@dataclass(frozen=True)
class Machine:
    """A snapshot of what this process may use.

    Attributes:
        usable_cpus: min of ``affinity_cpus`` and ``quota_cpus``.
        affinity_cpus: CPUs this process may be scheduled on.
        quota_cpus: the cgroup CPU quota in CPUs (``None``: no quota).
        host_cpus: logical CPUs of the host (``os.cpu_count()``), for context only.
        load_avg: the host's 1-minute load average.
        mem_available_bytes: memory this process can still get.
        mem_limit_bytes: the container's memory limit (``None``: no limit below the host's RAM).
        gpus: names of the CUDA devices.
        busy_cpus: CPUs' worth of other work measured on our CPUs (``None``: not measured).
    """

    usable_cpus: float
    affinity_cpus: int
    quota_cpus: float | None
    host_cpus: int
    load_avg: float
    mem_available_bytes: int
    mem_limit_bytes: int | None
    gpus: tuple[str, ...] = ()
    busy_cpus: float | None = None

    @property
    def spare_cpus(self) -> float:
        """Usable CPUs not already busy with other work (floored at 0)."""
        if self.busy_cpus is not None:
            busy = self.busy_cpus
        else:  # the host's load, assumed spread evenly over its CPUs
            busy = self.load_avg * self.affinity_cpus / max(self.host_cpus, 1)
        return max(0.0, min(self.usable_cpus, self.affinity_cpus - busy))

    def describe(self, *, gpus: bool = True) -> str:
        """One honest line for notebook headers and figure subtitles (``gpus=False``: without the GPU clause,
        for a line that names the GPUs itself, as :func:`d2l_async.devices.describe_machine` does)."""
        n = _num(self.usable_cpus)
        cpus = f"{n} usable CPU{'' if self.usable_cpus == 1 else 's'}"
        why = []
        if self.affinity_cpus < self.host_cpus:
            why.append(f"pinned to {self.affinity_cpus} of {self.host_cpus}")
        else:
            why.append(f"{self.host_cpus} on the host")
        if self.quota_cpus is not None:
            why.append(f"cgroup quota {_num(self.quota_cpus)}")
        busy = (f"{self.busy_cpus:.1f} busy with other work" if self.busy_cpus is not None
                else f"load average {self.load_avg:.1f}")
        ram = f"{self.mem_available_bytes / _GiB:.1f} GiB RAM available"
        if self.mem_limit_bytes is not None:
            ram += f" (container limit {self.mem_limit_bytes / _GiB:.1f} GiB)"
        if not gpus:
            return f"{cpus} ({', '.join(why)}), {busy}; {ram}"
        gpu = f"GPU: {', '.join(self.gpus)}" if self.gpus else "no GPU"
        return f"{cpus} ({', '.join(why)}), {busy}; {ram}; {gpu}"


def format_bytes(n: float) -> str:
    """``1536`` -> ``"1.5 KiB"``: bytes in binary units, as memory is counted here."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _num(x: float) -> str:
    return f"{x:g}" if x == int(x) else f"{x:.2f}"


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None


def _read_int(path: Path) -> int | None:
    text = _read(path)
    if text is None:
        return None
    try:
        return int(text.split()[0])
    except (ValueError, IndexError):
        return None


# ---------------------------------------------------------------- where the cgroup files are
def _mounts(root: Path) -> list[tuple[str, str, str, set[str]]]:
    """(fstype, mount root, mount point, super options) of each cgroup mount in mountinfo."""
    text = _read(root / "proc/self/mountinfo") or ""
    out = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
            continue
        out.append((tail[0], fields[3], fields[4], set(tail[2].split(","))))
    return out


def cgroup_dirs(root: str | os.PathLike, controller: str | None) -> list[Path]:
    """Directories of this process's cgroup for ``controller`` (v1), or the v2 group (``None``),
    from the innermost up to the mount point.  Empty when the hierarchy is not mounted.
    """
    root = Path(root)
    paths: dict[str, str] = {}
    for line in (_read(root / "proc/self/cgroup") or "").splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) != 3:
            continue
        _, ctrls, path = parts
        for name in (ctrls.split(",") if ctrls else [""]):
            paths.setdefault(name, path)
    want = controller or ""
    mounts = _mounts(root)
    if mounts:
        candidates = [(mroot, mpoint) for fs, mroot, mpoint, opts in mounts
                      if (fs == "cgroup2" and controller is None)
                      or (fs == "cgroup" and controller is not None and controller in opts)]
    else:  # no mountinfo: the usual places
        base = "/sys/fs/cgroup" if controller is None else f"/sys/fs/cgroup/{controller}"
        candidates = [("/", base)]
    if not candidates:
        return []
    mroot, mpoint = candidates[0]
    top = root / mpoint.lstrip("/")
    own = paths.get(want, "/")
    if own == mroot or own.startswith(mroot.rstrip("/") + "/"):
        rel = own[len(mroot.rstrip("/")):].strip("/")
    else:
        rel = ""  # our cgroup is outside what the mount shows: the mount's own group is ours
    here = top / rel if rel else top
    if not here.is_dir():
        here = top
    dirs = [here]
    while here != top and top in here.parents:
        here = here.parent
        dirs.append(here)
    return dirs


# ---------------------------------------------------------------- CPU
def cpu_quota(root: str | os.PathLike = "/") -> float | None:
    """The tightest cgroup CPU quota on this process, in CPUs (``None``: no quota)."""
    quotas = []
    for d in cgroup_dirs(root, None):
        text = _read(d / "cpu.max")
        if text and text.split()[0] != "max":
            try:
                q, p = (int(v) for v in text.split()[:2])
            except ValueError:
                continue
            if q > 0 and p > 0:
                quotas.append(q / p)
    for ctrl in ("cpu", "cpuacct"):
        for d in cgroup_dirs(root, ctrl):
            q, p = _read_int(d / "cpu.cfs_quota_us"), _read_int(d / "cpu.cfs_period_us")
            if q is not None and p and q > 0:
                quotas.append(q / p)
    return min(quotas) if quotas else None


def parse_proc_stat(text: str) -> dict[int, tuple[int, int]]:
    """``{cpu: (busy ticks, all ticks)}`` from ``/proc/stat`` (idle and iowait count as not busy)."""
    out = {}
    for line in text.splitlines():
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        name, *vals = line.split()
        try:
            ticks = [int(v) for v in vals[:8]]  # user nice system idle iowait irq softirq steal
            cpu = int(name[3:])
        except ValueError:
            continue
        total = sum(ticks)
        idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
        out[cpu] = (total - idle, total)
    return out


def busy_between(before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]],
                 cpus: set[int]) -> float | None:
    """CPUs' worth of busy time on ``cpus`` between two :func:`parse_proc_stat` samples."""
    busy = 0.0
    seen = False
    for cpu in cpus:
        if cpu in before and cpu in after:
            d_total = after[cpu][1] - before[cpu][1]
            if d_total > 0:
                busy += (after[cpu][0] - before[cpu][0]) / d_total
                seen = True
    return busy if seen else None


# ---------------------------------------------------------------- memory
def memory_limit_and_usage(root: str | os.PathLike = "/") -> tuple[int | None, int | None]:
    """``(limit, usage)`` of this process's memory cgroup in bytes; usage without reclaimable
    page cache.  ``(None, None)`` without a limit."""
    best: tuple[int, int | None] | None = None
    for d in cgroup_dirs(root, None):
        text = (_read(d / "memory.max") or "").strip()
        if text and text != "max" and text.isdigit():
            used = _read_int(d / "memory.current")
            if used is not None:
                used -= _stat(d / "memory.stat", "inactive_file")
            if best is None or int(text) < best[0]:
                best = (int(text), used)
    for d in cgroup_dirs(root, "memory"):
        limit = _read_int(d / "memory.limit_in_bytes")
        if limit is not None and limit < _V1_NO_LIMIT:
            used = _read_int(d / "memory.usage_in_bytes")
            if used is not None:
                used -= _stat(d / "memory.stat", "total_inactive_file")
            if best is None or limit < best[0]:
                best = (limit, used)
    if best is None:
        return None, None
    limit, used = best
    return limit, None if used is None else max(used, 0)


def _stat(path: Path, key: str) -> int:
    for line in (_read(path) or "").splitlines():
        k, _, v = line.partition(" ")
        if k == key and v.strip().isdigit():
            return int(v)
    return 0


def mem_available(root: str | os.PathLike = "/") -> tuple[int, int | None]:
    """``(available bytes, container limit or None)``: the limit counts only when it is below RAM."""
    info = {}
    for line in (_read(Path(root) / "proc/meminfo") or "").splitlines():
        k, _, v = line.partition(":")
        parts = v.split()
        if parts and parts[0].isdigit():
            info[k] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    host = info.get("MemAvailable", info.get("MemFree", 0))
    limit, used = memory_limit_and_usage(root)
    if limit is None or ("MemTotal" in info and limit >= info["MemTotal"]):
        return host, None
    left = max(limit - (used or 0), 0)
    return (min(left, host) if host else left), limit


# ---------------------------------------------------------------- all together
def read_machine(root: str | os.PathLike = "/", *, gpus: tuple[str, ...] = (),
                 affinity: set[int] | None = None, host_cpus: int | None = None,
                 load_avg: float | None = None, sample_s: float = 0.1) -> Machine:
    """A :class:`Machine` read from ``root`` (``"/"``: this machine).

    Args:
        gpus: CUDA device names (the caller knows; this module does not import torch).
        affinity: CPU ids allowed; default ``os.sched_getaffinity(0)``.
        host_cpus, load_avg: default ``os.cpu_count()`` and ``os.getloadavg()[0]``.
        sample_s: window over which ``busy_cpus`` is measured from ``/proc/stat`` (0: not measured).
    """
    if sample_s < 0:
        raise ValueError(f"sample_s must be >= 0 seconds, got {sample_s}")
    if affinity is None:
        affinity = (set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                    else set(range(os.cpu_count() or 1)))
    if host_cpus is None:
        host_cpus = os.cpu_count() or len(affinity) or 1
    if load_avg is None:
        load_avg = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    quota = cpu_quota(root)
    usable = float(len(affinity)) if quota is None else min(float(len(affinity)), quota)
    busy = None
    stat = Path(root) / "proc/stat"
    if sample_s > 0 and (before := _read(stat)) is not None:
        time.sleep(sample_s)
        busy = busy_between(parse_proc_stat(before), parse_proc_stat(_read(stat) or ""), affinity)
    available, limit = mem_available(root)
    return Machine(usable_cpus=usable, affinity_cpus=len(affinity), quota_cpus=quota,
                   host_cpus=host_cpus, load_avg=float(load_avg), mem_available_bytes=available,
                   mem_limit_bytes=limit, gpus=tuple(gpus), busy_cpus=busy)
